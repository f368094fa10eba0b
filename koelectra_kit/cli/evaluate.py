"""``koelectra-kit evaluate``: score a fine-tuned model dir on a labelled table."""
from __future__ import annotations

import argparse

from . import add_config_args, config_from_args

EPILOG = """\
examples:
  koelectra-kit evaluate --model runs/sentiment --data test.csv
  koelectra-kit evaluate --model runs/sentiment --data test.tsv --text-column document \\
      --rating-column rating --rating-map nsmc10 --out runs/sentiment-test
  koelectra-kit evaluate --config eval.yaml data=other.csv batch_size=128

Every flag is also a key of EvaluateConfig (koelectra_kit/classify/evaluate.py), settable in a --config YAML or as
key=value; a flag given wins. Prints accuracy, macro-F1, per-class precision/recall/F1/support and the
confusion matrix. With --out: eval.json, confusion.png and predictions.csv (every row with gold,
predicted, probabilities)."""

# flag -> (config key, argparse options); every one defaults to None: "not given, the config decides"
FLAGS = {
    "--model": ("model", {"help": "fine-tuned model directory (output of finetune)"}),
    "--data": ("data", {"help": "labelled table: .csv .tsv .jsonl .parquet"}),
    "--out": ("out", {"help": "directory for eval.json, confusion.png, predictions.csv (default: print only)"}),
    "--text-column": ("text_column", {"help": "text column (default: review, text, document, ... whichever exists)"}),
    "--label-column": ("label_column", {"help": "label column (default: label, sentiment, ... whichever exists)"}),
    "--rating-column": ("rating_column", {"help": "numeric rating column to map with --rating-map instead of labels"}),
    "--rating-map": ("rating_map", {"help": "stars5 | nsmc10 | bands like '1-2:negative,3:neutral,4-5:positive'"}),
    "--format": ("format", {"choices": ["csv", "tsv", "jsonl", "parquet"],
                            "help": "table format (default: from extension)"}),
    "--encoding": ("encoding", {"help": "text encoding (default: detect utf-8 / utf-8-sig / cp949)"}),
    "--batch-size": ("batch_size", {"type": int, "help": "texts per model call, 1 to 4096 (default 64)"}),
    "--device": ("device", {"help": "auto | cpu | cuda (default auto)"}),
    "--precision": ("precision", {"choices": ["auto", "fp32", "bf16", "fp16"],
                                  "help": "inference precision (default auto: bf16 where the hardware is fast at it)"}),
}


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "evaluate", help="accuracy, macro-F1, per-class scores and confusion matrix of a model on a file",
        description="Evaluate a fine-tuned classifier directory on a labelled table with the toolkit's "
                    "predictor. The label set is the model's own; file labels are mapped onto it.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, (key, opts) in FLAGS.items():
        p.add_argument(flag, dest=key, default=None, **opts)
    p.add_argument("--label-map", action="append", default=[], metavar="VALUE=LABEL",
                   help="map a file label value onto a model label (repeatable; neither side empty), e.g. "
                        "--label-map 0=negative (default: the label_map the model was trained with, if any)")
    p.add_argument("--drop-unknown-labels", dest="drop_unknown_labels", action="store_true", default=None,
                   help="drop (and report) rows whose label maps to none of the model's labels instead of failing")
    p.add_argument("--no-plots", dest="plots", action="store_false", default=None, help="don't draw confusion.png")
    add_config_args(p, None)
    p.set_defaults(func=run)


def _label_map(items: list[str]) -> dict[str, str]:
    from ..errors import ConfigError

    label_map = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"--label-map {item!r}: expected VALUE=LABEL, e.g. 0=negative")
        k, v = item.split("=", 1)
        if not k.strip() or not v.strip():
            # "=negative" mapped every row with an empty label cell to negative, exit 0 ("$VALUE=negative" unset)
            raise ConfigError(f"--label-map {item!r}: the {'file value before' if not k.strip() else 'label after'} "
                              "'=' is empty; expected VALUE=LABEL, e.g. 0=negative")
        k, v = k.strip(), v.strip()
        if label_map.get(k, v) != v:  # the last one silently won: a typo in one of them went unseen
            raise ConfigError(f"--label-map: {k!r} is given twice, as {label_map[k]!r} and as {v!r}; map each file "
                              "value once")
        label_map[k] = v
    return label_map


def run(args) -> int:
    from ..classify.evaluate import EvaluateConfig, run_evaluate

    keys = [key for key, _ in FLAGS.values()] + ["drop_unknown_labels", "plots"]
    cfg = config_from_args(EvaluateConfig, args, {k: getattr(args, k) for k in keys})
    if args.label_map:  # VALUE=LABEL pairs join the config's label_map; a pair given here wins
        cfg.label_map = {**cfg.label_map, **_label_map(args.label_map)}
    from ..finetune.data import fitted_texts

    run_evaluate(cfg, fitted_texts=fitted_texts)
    return 0
