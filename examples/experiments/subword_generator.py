"""Can a wider generator take an 8k subword vocabulary off the unigram plateau? -> docs/results/subword-generator-<minutes>min.md

    python examples/experiments/subword_generator.py --minutes 30 --parallel 2 --pretrain-parallel 1 --ft max_train_rows=50000

Follow-up to experiment 2 (tokenizers_compare.py, tokenizers_random_init.py): with Kiwi pre-split + WordPiece 8k the
cpu-30min preset's quarter-width generator stays on the unigram plateau for the whole 30 minutes (masked-token
accuracy 0.04) and the encoder fine-tunes below the same architecture from random init. Here the same tokenizer
(tokenizers_compare.py's tok0, trained if missing) gets a generator half the discriminator's width; the arms are
fine-tuned the same 50k-row way, beside the random-init rows of the control (reused when present).

    python examples/experiments/subword_generator.py --minutes 30 --parallel 2 --seeds 1 --ft-name 150k --ft max_train_rows=150000

fine-tunes the same encoder, and the same architecture from random init, on all 150,000 train rows.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (ROOT, Arm, Control, check_data, curve_images, first_reach, ft_setting, md_table,  # noqa: E402
                    parser, run_arms, tail_mean, write_table)
from tokenizers_compare import train_tokenizers  # noqa: E402

SIZES = {"1/2": 0.5}


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--ft-name", default="", help="a name for a fine-tuning setting other than the default one "
                    "(e.g. 150k with --ft max_train_rows=150000): its own run folders and results file")
    args = ap.parse_args()
    check_data()
    name, tok_dir, _ = train_tokenizers(Path(args.runs) / f"tokenizers-{args.minutes:g}min")[0]
    runs = Path(args.runs) / f"subword-generator-{args.minutes:g}min"
    tag = f"subword-generator-{args.minutes:g}min"
    ft = f"-{args.ft_name}" if args.ft_name else ""
    docs = ROOT / "docs" / "results"
    dirs = {label: runs / f"gen{size:g}" for label, size in SIZES.items()}
    arms = [Arm(f"{name}, generator {label}, {args.minutes:g} min", dirs[label],
                runs / f"ft{ft}-{dirs[label].name}", [f"tokenizer={tok_dir}", f"generator.size={size}"])
            for label, size in SIZES.items()]
    # same architecture and tokenizer, random weights: the control's runs when tokenizers_random_init.py made them
    control_runs = Path(args.runs) / "tokenizers-random-init"
    if (control_runs / "arch0" / "discriminator").exists() and not ft:
        control = Control(f"{name}, random init", control_runs / "arch0" / "discriminator", control_runs / "ft0")
    else:
        control = Control(f"{name}, random init", arms[0].out / "discriminator", runs / f"ft{ft}-random")
    pres, rows = run_arms(args, arms, control)
    columns = ["generator", "steps", "tokens", "gen acc", "unigram acc", "disc AUC", "gen acc >= 0.10", "command"]
    runs_table = md_table(columns, [[label, f"{pre['steps']:,}", f"{pre['tokens'] / 1e6:.1f}M",
                                     f"{tail_mean(d, 'gen_acc'):.3f}", f"{tail_mean(d, 'gen_unigram_acc'):.3f}",
                                     f"{tail_mean(d, 'disc_auc'):.3f}", first_reach(d, "gen_acc", 0.10),
                                     f"`{pre['command']}`"] for (label, d), pre in zip(dirs.items(), pres)])
    extra = ["## Pretraining runs", "", "Mean of the last 5 logged rows; unigram: always predicting the most frequent "
             "target; the last column is when the generator first logged 10% masked-token accuracy.", "",
             *runs_table, "", *curve_images({f"generator {label}": d for label, d in dirs.items()}, docs, tag)]
    write_table(docs / f"{tag}{ft}.md", "Subword vocabulary, wider generator",
                f"cpu-30min discriminator (2 x 128) with {name}, {args.minutes:g} minutes of pretraining on 2 CPU "
                f"cores, fine-tuned with {ft_setting(args)}; nsmc3/dev scores. The quarter-width generator's row is "
                f"in tokenizers-{args.minutes:g}min.md (its first row).", rows, extra)


if __name__ == "__main__":
    main()
