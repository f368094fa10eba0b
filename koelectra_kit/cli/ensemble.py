"""``koelectra-kit ensemble``: several classifier folders as one, weighted on a labelled dev set."""
from __future__ import annotations

import argparse

from . import add_config_args

EPILOG = """\
examples:
  koelectra-kit baseline --train reviews.csv --dev dev.csv --out runs/tfidf
  koelectra-kit ensemble "members=[runs/sentiment,runs/tfidf]" dev=dev.csv out=runs/ensemble
  koelectra-kit label --model runs/ensemble --input new.csv --output labelled.csv

Keys (EnsembleConfig, koelectra_kit/classify/ensemble.py): members, dev, out, grid_step (0.1), the dev table's
text_column / label_column / rating_column / rating_map / label_map / format / encoding (as evaluate reads
them), batch_size, device, precision. Members are copied into OUT/members/, so the folder moves as one.
`koelectra-kit finetune ... ensemble=tfidf` builds the encoder + TF-IDF ensemble in the same run."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "ensemble", help="average classifiers' probabilities with weights chosen on a dev set",
        description="Combine classifier folders (fine-tuned encoders, TF-IDF folders from `baseline out=`) into "
                    "one ensemble folder that label, evaluate, the app and distill accept.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, None)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config import load_config
    from ..classify.ensemble import EnsembleConfig, run_ensemble
    from ..finetune.data import fitted_texts

    run_ensemble(load_config(EnsembleConfig, args.config, list(args.overrides)), fitted_texts=fitted_texts)
    return 0
