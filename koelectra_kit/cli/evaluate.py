"""``koelectra-kit evaluate``: score a fine-tuned model dir on a labelled table."""
from __future__ import annotations

import argparse

EPILOG = """\
examples:
  koelectra-kit evaluate --model runs/sentiment --data test.csv
  koelectra-kit evaluate --model runs/sentiment --data test.tsv --text-column document \\
      --rating-column rating --rating-map nsmc10 --out runs/sentiment-test

Prints accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix. With
--out: eval.json, confusion.png and predictions.csv (every row with gold, predicted, probabilities)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "evaluate", help="accuracy, macro-F1, per-class scores and confusion matrix of a model on a file",
        description="Evaluate a fine-tuned classifier directory on a labelled table with the toolkit's "
                    "predictor. The label set is the model's own; file labels are mapped onto it.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="fine-tuned model directory (output of finetune)")
    p.add_argument("--data", required=True, help="labelled table: .csv .tsv .jsonl .parquet")
    p.add_argument("--out", help="directory for eval.json, confusion.png, predictions.csv (default: print only)")
    p.add_argument("--text-column", help="text column (default: review, text, document, ... whichever exists)")
    p.add_argument("--label-column", help="label column (default: label, sentiment, ... whichever exists)")
    p.add_argument("--rating-column", help="numeric rating column to map with --rating-map instead of labels")
    p.add_argument("--rating-map", help="stars5 | nsmc10 | bands like '1-2:negative,3:neutral,4-5:positive'")
    p.add_argument("--label-map", action="append", default=[], metavar="VALUE=LABEL",
                   help="map a file label value onto a model label (repeatable), e.g. --label-map 0=negative")
    p.add_argument("--drop-unknown-labels", action="store_true",
                   help="drop (and report) rows whose label maps to none of the model's labels instead of failing")
    p.add_argument("--format", choices=["csv", "tsv", "jsonl", "parquet"], help="table format (default: from extension)")
    p.add_argument("--encoding", help="text encoding (default: detect utf-8 / utf-8-sig / cp949)")
    p.add_argument("--batch-size", type=int, default=64, help="prediction batch size (default 64)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda (default auto)")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"],
                   help="inference precision (default auto: bf16 where the hardware is fast at it)")
    p.add_argument("--no-plots", action="store_true", help="don't draw confusion.png")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import ConfigError
    from ..finetune import evaluate

    label_map = {}
    for item in args.label_map:
        if "=" not in item:
            raise ConfigError(f"--label-map {item!r}: expected VALUE=LABEL, e.g. 0=negative")
        k, v = item.split("=", 1)
        label_map[k.strip()] = v.strip()
    evaluate(args.model, args.data, out=args.out, text_column=args.text_column, label_column=args.label_column,
             rating_column=args.rating_column, rating_map=args.rating_map, label_map=label_map,
             drop_unknown_labels=args.drop_unknown_labels, fmt=args.format, encoding=args.encoding,
             batch_size=args.batch_size, device=args.device, precision=args.precision, plots=not args.no_plots)
    return 0
