"""Experiment 2's control: each tokenizer with the encoder from random initialization (issue 7)
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
from common import ROOT, check_data, finetune_all, ft_row, parser, pretrain_all, write_table  # noqa: E402
from tokenizers_compare import PRESET, train_tokenizers  # noqa: E402


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs)
    arms = [(name, runs / "tokenizers-random-init" / f"arch{i}", [f"tokenizer={tok_dir}", "max_steps=1"])
            for i, (name, tok_dir, _) in enumerate(train_tokenizers(runs / f"tokenizers-{args.minutes:g}min"))]
    arms.append((PRESET[0], runs / "tokenizers-random-init" / f"arch{len(arms)}", ["max_steps=1"]))
    # the one-step runs only make a config + tokenizer: one at a time (the character arm trains its tokenizer)
    pres = pretrain_all([(d, "cpu-30min", o) for _, d, o in arms], args.minutes, args.fresh, 1)
    specs, names = [], []
    for i, ((name, d, _), pre) in enumerate(zip(arms, pres)):
        for seed in args.seeds:
            specs.append((runs / "tokenizers-random-init" / f"ft{i}-s{seed}", d / "discriminator", seed, "random"))
            names.append((name, pre))
    rows = []
    for (name, pre), spec, ft in zip(names, specs, finetune_all(specs, args.ft, args.fresh, args.parallel)):
        row = ft_row(f"{name}, random init", None, ft, spec[2])
        row["pretrain_command"] = pre["command"]  # the one-step run: config and tokenizer only
        rows.append(row)
    write_table(ROOT / "docs" / "results" / "tokenizers-random-init.md", "Experiment 2, control: tokenizers without "
                "pretraining", "The cpu-30min discriminator's architecture (2 x 128) with each tokenizer, random "
                "weights, fine-tuned with configs/finetune/sentiment.yaml" + (f" plus `{' '.join(args.ft)}`"
                if args.ft else "") + "; nsmc3/dev scores. Compare with the pretrained rows of "
                f"tokenizers-{args.minutes:g}min.md (same fine-tuning). \"pretrained by\" below names the one-step run "
                "that made each architecture's config and tokenizer; its weights are not used (`init=random`).", rows)


if __name__ == "__main__":
    main()
