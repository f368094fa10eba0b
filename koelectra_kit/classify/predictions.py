"""What every classifier takes and returns (a fine-tuned encoder, its ONNX backend, TF-IDF, an ensemble): the one
check of its arguments, and labels and probabilities in input order."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

import numpy as np

from ..errors import ConfigError, InputError
from ..io.records import texts_of


@dataclass
class Predictions:
    labels: list[str]  # the predicted label of each text [n]
    probs: np.ndarray  # [n, k] probabilities, columns in ``classes`` order
    truncated: list[bool] = field(default_factory=list)
    # the classifier's labels, the order of ``probs``' columns (k). Not ``labels``, which were the per-text
    # predictions long before this; a Predictions built without it (positionally, by older code) has [].
    classes: list[str] = field(default_factory=list)

    @property
    def confidence(self) -> np.ndarray:
        return self.probs.max(axis=1) if len(self.probs) else np.zeros(0, dtype=np.float32)


def check_batch_size(batch_size) -> None:
    """A given batch size is a whole number of at least 1: -1 made no batches and every text got the first label
    with uniform probabilities."""
    if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1):
        raise InputError(f"batch_size={batch_size!r}: a whole number of texts, at least 1")


def predict_args(texts, batch_size) -> list[str]:
    """Every kind's ``predict`` starts here, so that all refuse the same inputs (``texts_of``: one column of texts,
    not a str, a DataFrame, a Dataset, a 2-D array; a batch size of at least 1) and read the rest alike. A TF-IDF
    scores all at once, yet refuses batch_size=0 as the others do: the same call must not work on one kind only."""
    check_batch_size(batch_size)
    return texts_of(texts)


def check_classifier(clf, key: str, hint: str = "") -> None:
    """``clf`` is a loaded classifier (anything with ``labels`` and ``predict``): a folder or hub id given where one
    belongs failed deep inside with an AttributeError ('str' object has no attribute 'predict'). ``hint``: where
    the caller takes a folder instead."""
    if callable(getattr(clf, "predict", None)) and hasattr(clf, "labels"):
        return
    if isinstance(clf, (str, os.PathLike)):
        raise ConfigError(f"{key}={str(clf)!r} is a folder or hub id, not a loaded Classifier: pass "
                          f"Classifier.load({str(clf)!r}){hint}")
    raise ConfigError(f"{key}: a loaded Classifier (Classifier.load(folder or hub id)), not a {type(clf).__name__}"
                      f"{hint}")
