"""``koelectra-kit finetune``: fine-tune an encoder for sentiment (or any text classification)."""
from __future__ import annotations

import argparse
import sys

from . import add_config_args

EPILOG = """\
examples:
  koelectra-kit finetune --config configs/finetune/sentiment.yaml \\
      model=runs/pretrain/discriminator train=reviews.csv dev=dev.csv out=runs/sentiment
  koelectra-kit finetune model=monologg/koelectra-small-v3-discriminator train=reviews.csv \\
      rating_column=stars rating_map=stars5 out=runs/stars        # ratings -> 3 classes
  koelectra-kit finetune model=DIR train=data.tsv labels=[부정,긍정] out=runs/binary

Keys (all in configs/finetune/sentiment.yaml, which equals the built-in defaults): model, train,
dev, out, text_column, label_column, rating_column, rating_map (stars5 | nsmc10 | "1-2:negative,..."),
labels, label_map, drop_unknown_labels, encoding, max_length, epochs, batch_size, lr, layer_decay,
warmup_ratio, weight_decay, max_grad_norm (formerly grad_clip), class_weights (none|balanced), eval_every,
patience, seed, precision (auto|fp32|bf16), device, max_train_rows, dev_fraction, init (pretrained|random),
save_every, save_every_minutes, resume.
--config NAME also finds a shipped preset by name (--config sentiment, --config tiny).
Writes OUT/ as a Hugging Face model dir (best dev macro-F1 checkpoint) + eval.json, data_report.json,
metrics.jsonl, confusion.png, curves.png. Ctrl-C stops early and still writes the best checkpoint; a killed or
stopped run continues from OUT.work when the same command runs again (resume=false starts over)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "finetune", help="fine-tune a pretrained encoder on labelled reviews",
        description="Fine-tune an ELECTRA/BERT model dir (or hub id) for review sentiment or any "
                    "single-label text classification; keeps the checkpoint with the best dev macro-F1.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, None)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config import load_config
    from ..finetune import FinetuneConfig, finetune

    from ..errors import Interrupted

    cfg = load_config(FinetuneConfig, args.config, args.overrides)
    try:
        result = finetune(cfg)
    except Interrupted as e:  # Ctrl-C, after the run wrote what it had: said below, as a SIGTERM's stop is
        result = e.result
    if result["train"]["stopped"] == "interrupted":
        # the best checkpoint so far is written, but the run did not finish: a script must be able to tell
        print(f"interrupted: the best checkpoint so far is in {cfg.out}; rerun to train to the end")
        return 130
    if result.get("interrupted") == "tfidf":
        print(f"interrupted: the fine-tuned model is in {cfg.out}, without the TF-IDF companions (tfidf/, ensemble/, "
              "the reference rows); rerun to get them", file=sys.stderr)
        return 130
    return 0
