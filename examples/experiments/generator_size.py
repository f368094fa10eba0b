"""Experiment 3: generator size 1/4 vs 1/2 vs 1/1 of the discriminator (issue 7) -> docs/results/generator_size-<minutes>min.md

    python examples/experiments/generator_size.py --minutes 30 --parallel 2 --pretrain-parallel 1   # ~2.5 hours

The cpu-30min discriminator (2 layers x 128, positional-prior init) with generators of hidden 32 / 64 / 128 (FFN and
heads scaled alike, depth kept: the paper's generators are narrower, not shallower), the same wall-clock budget
each; 1/2 is the preset itself. Each discriminator is fine-tuned on nsmc3/train and scored on nsmc3/dev, beside the
same discriminator from random initialization. A weaker generator makes replacements easier to spot (higher
discriminator AUC) and leaves more of the budget to the discriminator; a stronger one makes harder negatives.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, check_data, finetune_all, ft_row, parser, pretrain_all, tail_mean, write_table  # noqa: E402
from koelectra_kit.pretrain import plot_curves  # noqa: E402  (common puts the repo on sys.path)

SIZES = {"1/4": 0.25, "1/2": 0.5, "1/1": 1.0}


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"generator-{args.minutes:g}min"
    tag = f"generator_size-{args.minutes:g}min"
    docs = ROOT / "docs" / "results"
    rows, notes = [], []
    dirs = {label: runs / f"gen{size:g}" for label, size in SIZES.items()}
    pres = pretrain_all([(dirs[label], "cpu-30min", [f"generator.size={size}"]) for label, size in SIZES.items()],
                        args.minutes, args.fresh, args.pretrain_parallel or args.parallel)
    specs, names = [], []
    for (label, d), pre in zip(dirs.items(), pres):
        notes.append(f"| {label} | {pre['steps']:,} | {pre['tokens'] / 1e6:.1f}M | {pre['tokens_per_s']:,.0f} | "
                     f"{tail_mean(d, 'gen_acc'):.3f} | {tail_mean(d, 'disc_auc'):.3f} | "
                     f"{tail_mean(d, 'replaced_frac'):.3f} | `{pre['command']}` |")
        for seed in args.seeds:
            specs.append((runs / f"ft-{d.name}-s{seed}", d / "discriminator", seed, "pretrained"))
            names.append((f"generator {label}, {args.minutes:g} min", pre, seed))
    for seed in args.seeds:  # every arm's discriminator has this architecture
        specs.append((runs / f"ft-random-s{seed}", dirs["1/2"] / "discriminator", seed, "random"))
        names.append(("same discriminator, random init", None, seed))
    for (name, pre, seed), ft in zip(names, finetune_all(specs, args.ft, args.fresh, args.parallel)):
        rows.append(ft_row(name, pre, ft, seed))
    extra = ["## Pretraining runs", "", "Generator masked-token accuracy, discriminator AUC on replaced tokens and "
             "the fraction of tokens replaced: mean of the last 5 logged rows (one micro-batch each).", "",
             "| generator | steps | tokens | tokens/s | gen acc | disc AUC | replaced | command |",
             "|---|---|---|---|---|---|---|---|", *notes, ""]
    for label, d in dirs.items():  # learning curves beside the table, regenerated from each run's metrics
        png = f"{tag}-{d.name}.png"
        plot_curves(d, docs / png)
        extra.append(f"![generator {label} learning curves]({png})")
    write_table(docs / f"{tag}.md", "Experiment 3: generator size",
                f"cpu-30min discriminator (2 x 128), {args.minutes:g} minutes of pretraining each on 2 CPU cores, "
                "fine-tuned with configs/finetune/sentiment.yaml" + (f" plus `{' '.join(args.ft)}`" if args.ft else "")
                + " on nsmc3/train; nsmc3/dev scores.", rows, extra)


if __name__ == "__main__":
    main()
