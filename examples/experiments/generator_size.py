"""Experiment 3: generator size 1/4 vs 1/2 vs 1/1 of the discriminator (issue 7) -> docs/results/generator_size.md

    python examples/experiments/generator_size.py --minutes 10 --ft max_train_rows=30000

The cpu-30min encoder (hidden 128) with generators of hidden 32 / 64 / 128, same wall-clock budget. The
positional prior needs position dims below every hidden size, so all three use init_pos_dims=16 here.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, check_data, finetune_all, ft_row, parser, pretrain_all, tail_mean, write_table  # noqa: E402

SIZES = {"1/4": 0.25, "1/2": 0.5, "1/1": 1.0}


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"generator-{args.minutes:g}min"
    rows, notes = [], []
    dirs = {label: runs / f"gen{size:g}" for label, size in SIZES.items()}
    pres = pretrain_all([(dirs[label], "cpu-30min", [f"generator.size={size}", "model.init_pos_dims=16"])
                         for label, size in SIZES.items()], args.minutes, args.fresh, args.parallel)
    specs, names = [], []
    for (label, d), pre in zip(dirs.items(), pres):
        notes.append(f"| {label} | {pre['steps']:,} | {pre['tokens'] / 1e6:.1f}M | {tail_mean(d, 'gen_acc'):.3f} | "
                     f"{tail_mean(d, 'disc_auc'):.3f} | {tail_mean(d, 'replaced_frac'):.3f} |")
        for seed in args.seeds:
            specs.append((runs / f"ft-{d.name}-s{seed}", d / "discriminator", seed, "pretrained"))
            names.append((f"generator {label}", pre, seed))
    for (name, pre, seed), ft in zip(names, finetune_all(specs, args.ft, args.fresh, args.parallel)):
        rows.append(ft_row(name, pre, ft, seed))
    extra = ["## Pretraining runs", "", "| generator | steps | tokens | gen acc | disc AUC | replaced fraction |",
             "|---|---|---|---|---|---|", *notes]
    write_table(ROOT / "docs" / "results" / "generator_size.md", "Experiment 3: generator size",
                f"cpu-30min discriminator (2 x 128), {args.minutes:g} minutes of pretraining each, fine-tuned with "
                "configs/finetune/sentiment.yaml" + (f" plus `{' '.join(args.ft)}`" if args.ft else "") +
                "; nsmc3/dev scores.", rows, extra)


if __name__ == "__main__":
    main()
