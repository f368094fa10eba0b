"""Fine-tune an ELECTRA (or BERT, or any ``AutoModelForSequenceClassification``) encoder for review
sentiment, or any single-label text classification.

    koelectra-kit finetune --config configs/finetune/sentiment.yaml \\
        model=runs/pretrain/discriminator train=reviews.csv dev=dev.csv out=runs/sentiment

One module a concern, in the order a run uses them:
  config.py    ``FinetuneConfig`` (YAML + ``key=value`` overrides)
  data.py      the train and dev rows: tables read by ``io.labelled`` (columns, label or rating mapping,
               dropped rows reported), stratified dev split / subsample (no torch: ``baseline`` uses it too)
  tokens.py    texts encoded once with the model's own tokenizer, and the token cache
  batching.py  length-grouped batches (padding per batch: ``classifier.collate``)
  model.py     the model with a classification head for our labels, layer-wise lr decay groups
  recipe.py    the run: setup, one explicit training loop with dev evaluation, early stopping and
               best-checkpoint selection on macro-F1, the best checkpoint published atomically as a
               Hugging Face model folder with eval.json, data_report.json, confusion.png and curves.png
  baseline.py  ``koelectra-kit baseline``: TF-IDF + logistic regression on the same split, a classifier folder
(Which output folders may be replaced: ``io.output``.)
"""
from ..classify.classifier import collate, predict_logits
from .batching import length_grouped_batches, shuffled_batches
from .config import (
    DEFAULT_LABELS,
    LABEL_COLUMNS,
    RATING_COLUMNS,
    RATING_PRESETS,
    BaselineConfig,
    FinetuneConfig,
    parse_rating_map,
)
from .data import (
    Labelled,
    Splits,
    format_data_report,
    format_file_report,
    label_resolver,
    load_splits,
    read_labelled,
    stratified_split,
    stratified_subsample,
)
from .model import align_head, build_optimizer, default_lr, load_model, param_groups
from ..io.output import OUTPUT_MARKERS, check_out_dir
from .recipe import FinetuneRecipe, finetune
from .step import train_step
from .tokens import encode_texts

__all__ = [
    "FinetuneConfig", "BaselineConfig", "RATING_PRESETS", "DEFAULT_LABELS", "LABEL_COLUMNS", "RATING_COLUMNS",
    "finetune", "FinetuneRecipe", "train_step", "read_labelled", "Labelled", "Splits", "load_splits",
    "label_resolver", "parse_rating_map", "stratified_split", "stratified_subsample", "format_data_report",
    "format_file_report", "length_grouped_batches", "shuffled_batches", "collate", "encode_texts", "load_model",
    "align_head", "param_groups", "build_optimizer", "default_lr", "predict_logits", "check_out_dir", "OUTPUT_MARKERS",
]
