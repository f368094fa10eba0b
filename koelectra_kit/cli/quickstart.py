"""``koelectra-kit quickstart``: the main job end to end on the bundled sample (or your own files).

tokenizer -> ELECTRA pretraining -> sentiment fine-tuning -> batch labelling, each step the same CLI command a
user would type (printed before it runs), so the quickstart doubles as the tutorial. With the ``tiny`` presets
it takes a minute or two on 2 CPU cores; swap in your own corpus and CSVs by changing paths only:

    koelectra-kit quickstart --corpus my_comments.txt --labelled my_reviews.csv \\
        --unlabelled to_label.csv --text-column review --out runs/mine
"""
from __future__ import annotations

import argparse
import shlex
import time
from pathlib import Path

SAMPLE = Path(__file__).resolve().parents[2] / "corpora" / "sample"
CONFIGS = Path(__file__).resolve().parents[2] / "configs"


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "quickstart", help="run the whole pipeline (tokenizer, pretrain, finetune, label) on the sample",
        description="The main job end to end: train a tokenizer on a comment corpus, pretrain an ELECTRA "
                    "discriminator, fine-tune a positive/negative/neutral classifier on labelled reviews, "
                    "and label a CSV of unlabelled reviews. Defaults: the bundled sample and tiny presets.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("--corpus", default=str(SAMPLE / "comments.txt"), help="pretraining text (one text a line)")
    p.add_argument("--labelled", default=str(SAMPLE / "reviews_labelled.csv"),
                   help="labelled reviews for fine-tuning (text + label columns)")
    p.add_argument("--unlabelled", default=str(SAMPLE / "reviews_unlabelled.csv"), help="CSV to label")
    p.add_argument("--text-column", default="review", help="text column of the CSV to label")
    p.add_argument("--out", default="runs/quickstart", help="directory for every output")
    p.add_argument("--preset", default="tiny", help="configs/{tokenizer,pretrain,finetune}/<preset>.yaml")
    p.add_argument("--show", type=int, default=5, help="labelled rows to print at the end")
    p.set_defaults(func=run)


def _config(stage: str, preset: str) -> str:
    path = CONFIGS / stage / f"{preset}.yaml"
    if not path.exists():
        from ..errors import ConfigError

        raise ConfigError(f"no preset {preset!r} for {stage}: {path} does not exist")
    return str(path)


def run(args) -> int:
    from . import main

    out = Path(args.out)
    tok_dir, pre_dir, clf_dir = out / "tokenizer", out / "pretrain", out / "sentiment"
    labelled_csv = out / "labelled.csv"
    steps = [
        ("1/4 tokenizer: normalize + Kiwi morpheme pre-split + WordPiece",
         ["tokenizer", "train", "--config", _config("tokenizer", args.preset), f"input={args.corpus}",
          f"out={tok_dir}"]),
        ("2/4 pretrain: ELECTRA generator + discriminator (replaced token detection)",
         ["pretrain", "--config", _config("pretrain", args.preset), f"corpus={args.corpus}",
          f"tokenizer={tok_dir}", f"out={pre_dir}", "overwrite=true"]),
        ("3/4 finetune: positive / negative / neutral classifier from the discriminator",
         ["finetune", "--config", _config("finetune", args.preset), f"model={pre_dir / 'discriminator'}",
          f"train={args.labelled}", f"out={clf_dir}"]),
        ("4/4 label: every row of the CSV, with label, confidence and per-class probabilities",
         ["label", "--model", str(clf_dir), "--input", args.unlabelled, "--text-column", args.text_column,
          "--output", str(labelled_csv)]),
    ]
    t_all = time.perf_counter()
    for title, argv in steps:
        print(f"\n=== {title}\n$ koelectra-kit {shlex.join(argv)}", flush=True)
        t0 = time.perf_counter()
        rc = main(argv)
        if rc:
            print(f"quickstart stopped: step '{title.split(':')[0]}' failed (exit {rc})")
            return rc
        print(f"--- done in {time.perf_counter() - t0:.1f}s", flush=True)

    import pandas as pd

    from ..tables import read_table

    table = read_table(labelled_csv)
    show = [c for c in (args.text_column, "label", "confidence", "status") if c in table.columns]
    with pd.option_context("display.max_colwidth", 40, "display.width", 120):
        print(f"\nfirst {args.show} labelled rows of {labelled_csv}:")
        print(table[show].head(args.show).to_string(index=False))
    print(f"\nfinished in {time.perf_counter() - t_all:.0f}s. Outputs:\n"
          f"  tokenizer            {tok_dir}/\n"
          f"  pretraining run      {pre_dir}/ (metrics.jsonl, curves.png)\n"
          f"  discriminator (HF)   {pre_dir / 'discriminator'}/\n"
          f"  sentiment classifier {clf_dir}/ (eval.json, confusion.png)\n"
          f"  labelled CSV         {labelled_csv}")
    return 0
