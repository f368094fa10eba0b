"""The encoder + TF-IDF ensemble as a labeller, beside the encoder alone and TF-IDF alone: rows/s of
`koelectra-kit label` on the same file and their nsmc3 dev scores from the labelled output (issue 30: the
ensemble labels at >= 0.8x the encoder's rate).

    python benchmarks/bench_ensemble.py --model runs/l30/le/n1000-default-s1

``--model`` is a `finetune` output with ``ensemble=tfidf`` (the default): the encoder is the folder itself, TF-IDF
its ``tfidf/``, the ensemble its ``ensemble/``. All three label the same --rows reviews of nsmc3 dev in turns (one
warm-up each, which also loads Kiwi and the model files into the page cache); the median of the turns is reported,
the ratio against the encoder measured in the same run.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

from bench_distill import race
from common import NSMC_DEV, Parser, check_classifiers, input_errors, positive_int, require  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a finetune output folder with tfidf/ and ensemble/ in it")
    ap.add_argument("--rows", type=positive_int, default=10000,
                    help="reviews of nsmc3 dev to label (at most its 10,000)")
    ap.add_argument("--rounds", type=positive_int, default=3, help="timed turns of each")
    args = ap.parse_args(argv)
    root = Path(args.model)
    models = {"encoder": root, "tfidf": root / "tfidf", "ensemble": root / "ensemble"}
    for path in models.values():
        if not path.is_dir():
            ap.error(f"{path}: missing; --model must be a finetune output written with ensemble=tfidf")
    with input_errors(ap):
        require(NSMC_DEV)  # (the texts labelled: the real data)
    check_classifiers(ap, [("--model", path) for path in models.values()])
    race(models, args.rows, args.rounds, "encoder")


if __name__ == "__main__":
    sys.exit(main())
