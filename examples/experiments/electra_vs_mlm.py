"""Experiment 1: ELECTRA vs MLM at equal compute -> docs/results/electra_vs_mlm-<minutes>min.md

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
from common import (ROOT, Arm, Control, baseline_row, check_data, curve_images, ft_setting, parser,  # noqa: E402
                    run_arms, tail_mean, write_table)

OBJECTIVES = ("electra", "mlm")


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"electra_vs_mlm-{args.minutes:g}min"
    tag = f"electra_vs_mlm-{args.minutes:g}min"
    arms = [Arm(f"{o.upper()} {args.minutes:g} min", runs / o, runs / f"ft-{o}", [f"objective={o}"])
            for o in OBJECTIVES]
    control = Control("random init (no pretraining)", runs / "electra" / "discriminator", runs / "ft-random")
    pres, rows = run_arms(args, arms, control)
    rows.append(baseline_row(Path(args.runs) / "tfidf", args.fresh))
    notes = [f"| {o} | {pre['steps']:,} | {pre['tokens'] / 1e6:.1f}M | {pre['tokens_per_s']:,.0f} | "
             f"{tail_mean(runs / o, 'gen_acc'):.3f} | `{pre['command']}` |" for o, pre in zip(OBJECTIVES, pres)]
    extra = ["## Pretraining runs", "", "Masked-token accuracy of the model that predicts masked tokens (ELECTRA: "
             "its generator; MLM: the encoder itself), mean of the last 5 logged rows.", "",
             "| objective | steps | tokens | tokens/s | masked-token acc | command |", "|---|---|---|---|---|---|",
             *notes, "", *curve_images({o: runs / o for o in OBJECTIVES}, ROOT / "docs" / "results", tag)]
    write_table(ROOT / "docs" / "results" / f"{tag}.md", "Experiment 1: ELECTRA vs MLM at equal compute",
                f"Each encoder pretrained {args.minutes:g} minutes of wall-clock on 2 CPU cores, then fine-tuned "
                f"with {ft_setting(args)} on nsmc3/train, scored on nsmc3/dev (10,000 reviews of unseen movies).",
                rows, extra)


if __name__ == "__main__":
    main()
