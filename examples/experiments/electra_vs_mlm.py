"""Experiment 1: ELECTRA vs MLM at equal compute (issue 7) -> docs/results/electra_vs_mlm-<minutes>min.md

    python examples/experiments/electra_vs_mlm.py --minutes 30
    python examples/experiments/electra_vs_mlm.py --minutes 10 --parallel 2 --ft max_train_rows=30000   # ~35 minutes in all

The same encoder (configs/pretrain/cpu-30min.yaml: 2 layers x 128, positional-prior init, Kiwi + 8k WordPiece)
pretrained for the same wall-clock budget with objective=electra and objective=mlm (BERT-style: the encoder
itself predicts the 15% masked tokens, 80/10/10 corruption), each fine-tuned on nsmc3/train and scored on
nsmc3/dev; beside them the same encoder from random initialization and the TF-IDF baseline.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, baseline, check_data, finetune_all, ft_row, parser, pretrain_all, tail_mean, write_table  # noqa: E402
from koelectra_kit.pretrain import plot_curves  # noqa: E402  (common puts the repo on sys.path)


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"electra_vs_mlm-{args.minutes:g}min"
    rows, notes = [], []
    objectives = ("electra", "mlm")
    pres = pretrain_all([(runs / o, "cpu-30min", [f"objective={o}"]) for o in objectives], args.minutes, args.fresh,
                        args.pretrain_parallel or args.parallel)
    specs, names = [], []
    for objective, pre in zip(objectives, pres):
        notes.append(f"| {objective} | {pre['steps']:,} | {pre['tokens'] / 1e6:.1f}M | {pre['tokens_per_s']:,.0f} | "
                     f"{tail_mean(runs / objective, 'gen_acc'):.3f} | `{pre['command']}` |")
        for seed in args.seeds:
            specs.append((runs / f"ft-{objective}-s{seed}", runs / objective / "discriminator", seed, "pretrained"))
            names.append((f"{objective.upper()} {args.minutes:g} min", pre, seed))
    for seed in args.seeds:
        specs.append((runs / f"ft-random-s{seed}", runs / "electra" / "discriminator", seed, "random"))
        names.append(("random init (no pretraining)", None, seed))
    for (name, pre, seed), ft in zip(names, finetune_all(specs, args.ft, args.fresh, args.parallel)):
        rows.append(ft_row(name, pre, ft, seed))
    base = baseline(Path(args.runs) / "tfidf", args.fresh)
    rows.append({"encoder": "TF-IDF char 1-3-grams + logistic regression", "seed": "-",
                 "accuracy": base["dev"]["accuracy"], "macro_f1": base["dev"]["macro_f1"],
                 "compute": f"fit {base['train']['train_time_s']:.0f}s on {base['train']['rows']:,} rows",
                 "command": base["command"]})
    extra = ["## Pretraining runs", "", "Masked-token accuracy of the model that predicts masked tokens (ELECTRA: "
             "its generator; MLM: the encoder itself), mean of the last 5 logged rows.", "",
             "| objective | steps | tokens | tokens/s | masked-token acc | command |", "|---|---|---|---|---|---|",
             *notes]
    tag = f"electra_vs_mlm-{args.minutes:g}min"
    for objective in objectives:  # learning curves beside the table, regenerated from each run's metrics
        plot_curves(runs / objective, ROOT / "docs" / "results" / f"{tag}-{objective}.png")
    extra += ["", *(f"![{o} learning curves]({tag}-{o}.png)" for o in objectives)]
    write_table(ROOT / "docs" / "results" / f"{tag}.md", "Experiment 1: ELECTRA vs MLM at equal compute",
                f"Each encoder pretrained {args.minutes:g} minutes of wall-clock on 2 CPU cores, then fine-tuned "
                "with configs/finetune/sentiment.yaml" + (f" plus `{' '.join(args.ft)}`" if args.ft else "") +
                " on nsmc3/train, scored on nsmc3/dev (10,000 reviews of unseen movies).", rows, extra)


if __name__ == "__main__":
    main()
