"""``koelectra-kit distill``: a teacher labels unlabelled text with soft probabilities; a student learns them."""
from __future__ import annotations

import argparse

from . import add_config_args

EPILOG = """\
examples:
  koelectra-kit distill teachers=[runs/sentiment] transfer=reviews.txt exclude=[dev.tsv] \\
      student=runs/small/discriminator train=train.tsv dev=dev.tsv out=runs/student
  koelectra-kit distill teachers=[runs/a,runs/b,tfidf] transfer=[comments.txt,shop.csv] \\
      transfer_text_column=review student=runs/small/discriminator train=train.tsv out=runs/student
  koelectra-kit distill ... student=runs/sentiment student_shape={num_hidden_layers: 2}   # a smaller student

Keys (koelectra_kit/distill/config.py): teachers (classifier folders / hub ids, and/or tfidf),
teacher_weights (default: chosen on dev over a grid, weight_step), transfer, transfer_text_column, exclude,
exclude_dev, max_transfer, student, init (pretrained|random), student_shape, train, dev, out, labels and
fine-tuning's data keys (text_column, label_column, rating_column, rating_map, label_map, ...),
temperature, alpha, max_length, epochs, max_minutes, batch_size, lr, layer_decay, warmup_ratio, eval_every,
seed, precision, device, save_every, save_every_minutes, resume, keep_work.
Loss: T^2 KL(teacher_T || student_T) on every row + alpha CE on the labelled rows. Teacher probabilities
are cached under the cache folder; a killed run continues from OUT.work/ when rerun with the same settings.
Writes OUT/ as fine-tune does (model, tokenizer, eval.json, data_report.json, metrics.jsonl)."""


DESCRIPTION = ("Teachers label unlabelled in-domain text with probabilities; a student classifier learns them (plus "
               "the labelled rows) and is written as an ordinary fine-tuned model folder.")


def register(subparsers) -> None:
    p = subparsers.add_parser("distill", description=DESCRIPTION, epilog=EPILOG,
                              help="distil fine-tuned classifiers (and/or TF-IDF) into a student through soft labels",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, None)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config import load_config
    from ..distill import DistillConfig, distill

    distill(load_config(DistillConfig, args.config, args.overrides))
    return 0
