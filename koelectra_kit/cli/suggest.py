"""``koelectra-kit suggest``: the rows of an unlabelled pool to label next, least confident first."""
from __future__ import annotations

import argparse

from . import add_config_args

EPILOG = """\
examples:
  koelectra-kit suggest model=runs/sentiment pool=reviews.csv out=next.csv n=100
  koelectra-kit suggest model=runs/tfidf pool=reviews.csv out=next.csv labelled=labels.csv strategy=entropy
  koelectra-kit suggest model=runs/ensemble pool=reviews.xlsx out=sample.csv strategy=random seed=1

Keys (SuggestConfig, koelectra_kit/suggest/file.py): model (any folder label takes), pool, out (.csv .tsv .jsonl),
n (100), strategy (margin | entropy | random; margin: smallest top-1 minus top-2 probability first),
text_column, labelled (a table or a list of tables of rows already labelled: their texts are skipped),
labelled_text_column, dedupe_threshold (0.7: character 3-gram Jaccard from which a row is a near-duplicate of
one already picked), seed, format, encoding, batch_size, device, precision, overwrite, allow_generic_labels.
out holds rank, row (the row's position in the pool), the pool's columns, the model's label, confidence,
prob_<label>, margin, entropy and copies (rows of the pool with the same text)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "suggest", help="the pool rows to label next: least confident first, no duplicates, none already labelled",
        description="Rank an unlabelled table by the classifier's uncertainty and write the N rows to label next, "
                    "with the model's guess and probabilities beside each.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, None)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config import load_config
    from ..suggest.file import SuggestConfig, run_suggest

    summary = run_suggest(load_config(SuggestConfig, args.config, list(args.overrides)))
    print("\n".join(summary.lines()))
    return 0
