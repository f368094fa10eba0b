"""Experiment 2's control: each tokenizer with the encoder from random initialization
-> docs/results/tokenizers-random-init.md

    python examples/experiments/tokenizers_random_init.py --parallel 2 --ft max_train_rows=50000

tokenizers_compare.py fine-tunes encoders pretrained for 30 minutes with each tokenizer. Part of the gap between
two of its rows could come from the tokenizer alone, pretraining or not: here the same architecture (the
cpu-30min discriminator, 2 x 128) with each tokenizer is fine-tuned from random weights, the same way, so
"pretrained minus random init" can be read per tokenizer. The architecture comes from a one-step pretraining run
(`max_steps=1`; `init=random` keeps only its config and tokenizer). The three 8k tokenizers are the ones
tokenizers_compare.py trains (same commands, same directories: either script reuses the other's); the character
vocabulary is what the cpu-30min preset trains for itself.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import ROOT, Arm, check_data, ft_setting, parser, run_arms, write_table  # noqa: E402
from tokenizers_compare import PRESET, train_tokenizers  # noqa: E402


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / "tokenizers-random-init"
    tokenizers = [(name, [f"tokenizer={tok_dir}"])
                  for name, tok_dir, _ in train_tokenizers(Path(args.runs) / f"tokenizers-{args.minutes:g}min")]
    tokenizers.append((PRESET[0], []))  # the character vocabulary the preset trains for itself
    arms = [Arm(f"{name}, random init", runs / f"arch{i}", runs / f"ft{i}", [*tok, "max_steps=1"])
            for i, (name, tok) in enumerate(tokenizers)]
    # the one-step runs only make a config + tokenizer: one at a time (the character arm trains its tokenizer)
    _, rows = run_arms(args, arms, init="random", pretrain_parallel=1)
    write_table(ROOT / "docs" / "results" / "tokenizers-random-init.md", "Experiment 2, control: tokenizers without "
                "pretraining", "The cpu-30min discriminator's architecture (2 x 128) with each tokenizer, random "
                f"weights, fine-tuned with {ft_setting(args)}; nsmc3/dev scores. Compare with the pretrained rows of "
                f"tokenizers-{args.minutes:g}min.md (same fine-tuning). \"pretrained by\" below names the one-step run "
                "that made each architecture's config and tokenizer; its weights are not used (`init=random`).", rows)


if __name__ == "__main__":
    main()
