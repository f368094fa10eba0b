"""``koelectra-kit baseline``: TF-IDF character n-grams + logistic regression on the same data."""
from __future__ import annotations

import argparse

from . import add_config_args

EPILOG = """\
examples:
  koelectra-kit baseline --train reviews.csv --dev dev.csv --out runs/tfidf
  koelectra-kit baseline --config configs/finetune/sentiment.yaml train=train.tsv dev=dev.tsv \\
      baseline.ngram_max=4 out=runs/tfidf

Reads the fine-tuning config (same columns, labels, rating_map, dev split, max_train_rows,
class_weights), so its eval.json sits beside the transformer's field for field. Knobs under
baseline.*: analyzer (char|char_wb), ngram_min, ngram_max, min_df, max_features, C, max_iter, tol."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "baseline", help="TF-IDF char n-gram + logistic regression baseline on the same files",
        description="Train and score the TF-IDF character n-gram + logistic regression baseline on the "
                    "fine-tuning data, with the same label mapping, split and report format.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--train", help="labelled training table (same as train=)")
    p.add_argument("--dev", help="labelled dev table (same as dev=); default: stratified split of train")
    p.add_argument("--out", help="directory for eval.json, data_report.json, confusion.png (same as out=)")
    add_config_args(p, None)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..finetune.baseline import run_baseline
    from ..config import load_config
    from ..finetune import FinetuneConfig

    flags = [f"{k}={v}" for k, v in (("train", args.train), ("dev", args.dev), ("out", args.out)) if v]
    cfg = load_config(FinetuneConfig, args.config, flags + list(args.overrides))
    run_baseline(cfg)
    return 0
