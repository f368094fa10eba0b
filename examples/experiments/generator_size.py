"""Experiment 3: generator size 1/4 vs 1/2 vs 1/1 of the discriminator -> docs/results/generator_size-<minutes>min.md

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
from common import (ROOT, Arm, Control, check_data, curve_images, ft_setting, md_table, parser, run_arms,  # noqa: E402
                    tail_mean, write_table)

SIZES = {"1/4": 0.25, "1/2": 0.5, "1/1": 1.0}


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"generator-{args.minutes:g}min"
    tag = f"generator_size-{args.minutes:g}min"
    docs = ROOT / "docs" / "results"
    dirs = {label: runs / f"gen{size:g}" for label, size in SIZES.items()}
    arms = [Arm(f"generator {label}, {args.minutes:g} min", dirs[label], runs / f"ft-{dirs[label].name}",
                [f"generator.size={size}"]) for label, size in SIZES.items()]
    # every arm's discriminator has this architecture
    control = Control("same discriminator, random init", dirs["1/2"] / "discriminator", runs / "ft-random")
    pres, rows = run_arms(args, arms, control)
    runs_table = md_table(["generator", "steps", "tokens", "tokens/s", "gen acc", "disc AUC", "replaced", "command"],
                          [[label, f"{pre['steps']:,}", f"{pre['tokens'] / 1e6:.1f}M", f"{pre['tokens_per_s']:,.0f}",
                            f"{tail_mean(d, 'gen_acc'):.3f}", f"{tail_mean(d, 'disc_auc'):.3f}",
                            f"{tail_mean(d, 'replaced_frac'):.3f}", f"`{pre['command']}`"]
                           for (label, d), pre in zip(dirs.items(), pres)])
    extra = ["## Pretraining runs", "", "Generator masked-token accuracy, discriminator AUC on replaced tokens and "
             "the fraction of tokens replaced: mean of the last 5 logged rows (one micro-batch each).", "",
             *runs_table, "", *curve_images({f"generator {label}": d for label, d in dirs.items()}, docs, tag)]
    write_table(docs / f"{tag}.md", "Experiment 3: generator size",
                f"cpu-30min discriminator (2 x 128), {args.minutes:g} minutes of pretraining each on 2 CPU cores, "
                f"fine-tuned with {ft_setting(args)} on nsmc3/train; nsmc3/dev scores.", rows, extra)


if __name__ == "__main__":
    main()
