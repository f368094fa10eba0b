"""Does pretraining pay off on a 2-core CPU? -> docs/results/recipe_cpu30.md

    python examples/experiments/recipe_cpu30.py                    # 30-minute pretraining, 2 seeds each
    python examples/experiments/recipe_cpu30.py --long-minutes 90  # also the same preset run 90 minutes
    python examples/experiments/recipe_cpu30.py --preset cpu-30min-subword  # another preset: recipe_<preset>.md

1. pretrain configs/pretrain/cpu-30min.yaml on the shared pretraining corpora (common.CORPUS) for --minutes;
2. fine-tune its discriminator on nsmc3/train with the toolkit's default settings (configs/finetune/
   sentiment.yaml), and the same architecture from random initialization the same way, --seeds each;
3. the TF-IDF baseline on the same files; 4. optionally the longer pretraining run, fine-tuned the same way.
"""
from __future__ import annotations

import shutil
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Arm, Control, baseline_row, check_data, first_reach, parser, run_arms,  # noqa: E402
                    tail_mean, write_table)


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--long-minutes", type=float, default=0, help="also pretrain this long (0: skip)")
    ap.add_argument("--long-seeds", type=int, nargs="+", default=None, help="fine-tuning seeds of the long run "
                    "(default: --seeds)")
    ap.add_argument("--preset", default="cpu-30min", help="the pretraining preset (configs/pretrain/<preset>.yaml); "
                    "another than cpu-30min gets its own runs and results file")
    args = ap.parse_args()
    check_data()
    default = args.preset == "cpu-30min"
    runs = Path(args.runs) / ("recipe" if default else f"recipe-{args.preset}")
    result_name = "recipe_cpu30" if default else f"recipe_{args.preset}"

    def curves(minutes: float) -> str:  # (the default preset keeps its earlier file names)
        return f"recipe_cpu{minutes:g}min_curves.png" if default else f"{result_name}_{minutes:g}min_curves.png"
    docs = ROOT / "docs" / "results"
    docs.mkdir(parents=True, exist_ok=True)

    budgets = [args.minutes] + ([args.long_minutes] if args.long_minutes else [])
    arms = [Arm(f"{args.preset} preset, pretrained {m:g} min", runs / f"cpu-{m:g}min", runs / f"ft-cpu{m:g}",
                preset=args.preset, minutes=m, seeds=args.long_seeds if m != args.minutes else None)
            for m in budgets]
    control = Control("same architecture, random init", arms[0].out / "discriminator", runs / "ft-random")
    pres, rows = run_arms(args, arms, control, pretrain_parallel=1)  # one budget after the other, both cores
    rows.append(baseline_row(runs / "tfidf", args.fresh))

    pre_lines, reach_lines = [], []
    for arm, pre in zip(arms, pres):
        gen, auc, final = tail_mean(arm.out, "gen_acc"), tail_mean(arm.out, "disc_auc"), pre["final"]
        pre_lines.append(f"| {arm.minutes:g} min | {pre['steps']:,} | {pre['tokens'] / 1e6:.1f}M | "
                         f"{pre['tokens_per_s']:,.0f} | {final['gen_acc']:.3f} ({gen:.3f}) | "
                         f"{final['disc_auc']:.3f} ({auc:.3f}) | {final['gen_unigram_acc']:.3f} | `{pre['command']}` |")
        reach_lines.append(f"| {arm.minutes:g} min | {first_reach(arm.out, 'gen_acc', 0.20)} | "
                           f"{first_reach(arm.out, 'disc_auc', 0.80)} |")
        png = arm.out / "curves.png"
        if png.exists():
            shutil.copy(png, docs / curves(arm.minutes))
    pre_table = ["## Pretraining runs", "",
                 "Generator masked-token accuracy counts only corrupted ([MASK]) slots; discriminator AUC is on "
                 "replaced tokens. Final logged row, and in brackets the mean of the last 5 rows (each row is "
                 "one micro-batch). Unigram = always predicting the most frequent target.", "",
                 "| budget | steps | tokens | tokens/s | gen acc | disc AUC | unigram acc | command |",
                 "|---|---|---|---|---|---|---|---|", *pre_lines, "",
                 "Issue 6's targets: when each was first logged (step, minutes of pretraining).", "",
                 "| budget | gen acc >= 0.20 | disc AUC >= 0.80 |", "|---|---|---|", *reach_lines, ""]
    pre_table += [f"![learning curves]({curves(m)})" for m in budgets]
    write_table(docs / f"{result_name}.md", "Pretraining that pays off on a 2-core CPU"
                + ("" if default else f" ({args.preset})"),
                "Fine-tuned on nsmc3/train.tsv (150,000 rows), scored on dev.tsv (10,000 rows of "
                "movies not in train). Fine-tuning uses configs/finetune/sentiment.yaml unchanged"
                + (f" plus `{' '.join(args.ft)}`" if args.ft else "") + ".", rows, pre_table)


if __name__ == "__main__":
    main()
