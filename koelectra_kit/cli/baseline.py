"""``koelectra-kit baseline``: TF-IDF character n-grams + logistic regression on the same data."""
from __future__ import annotations

import argparse

from . import _yaml_value, add_config_args

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
    from ..errors import ConfigError
    from ..finetune import FinetuneConfig

    if args.out is not None and not args.out.strip():  # out= unset is print-only: --out "$DIR" unset said nothing
        raise ConfigError(f"--out {args.out!r} is empty (an unset shell variable?): give a folder, or leave --out out "
                          "to print the scores only")
    # quoted as config_from_args quotes flags: pasted raw, YAML read --out 'runs/b #2' as runs/b (a comment) and
    # --out 0x10 as the number 16, and the run wrote into that folder
    flags = [f"{k}={_yaml_value(v)}" for k, v in (("train", args.train), ("dev", args.dev), ("out", args.out))
             if v is not None]
    cfg = load_config(FinetuneConfig, args.config, flags + list(args.overrides))
    run_baseline(cfg)
    return 0
