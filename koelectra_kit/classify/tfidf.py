"""TF-IDF character n-grams + logistic regression as a classifier folder that every command loads.

    clf = TfidfClassifier.fit(texts, y, labels)          # a BaselineConfig tunes it (fit_tfidf)
    clf.save("runs/tfidf")                                # classifier.json + tfidf.safetensors
    TfidfClassifier.load("runs/tfidf").predict(["배송 빠르고 좋아요"]).labels

Why a folder of our own and not a pickle: a pickled scikit-learn model runs code when it is loaded, so no
user should be asked to load one (and it breaks across scikit-learn versions). The fitted state is small and
plain: the n-gram vocabulary (JSON, in column order), idf and the logistic regression's coefficients
(safetensors). Loading rebuilds scikit-learn's own ``TfidfVectorizer`` from them, so the features are exactly
the fitted vectorizer's (tested), and the probabilities are the logistic regression's (softmax of
``x @ coef.T + b``; for two classes scikit-learn fits one row and uses the sigmoid).

The folder (``classifier.json`` ``"type": "tfidf"``) is what ``Classifier.load`` returns this class for, so
``label``, ``evaluate``, the app, ``distill`` (as a teacher) and ensembles take it like a fine-tuned model.
No torch here.
"""
from __future__ import annotations

import hashlib
import json
import unicodedata
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.textcheck import is_blank
from .predictions import Predictions, predict_args
from .registry import FORMAT, MANIFEST, read_manifest

WEIGHTS = "tfidf.safetensors"


class TfidfClassifier:
    """A fitted TF-IDF + logistic regression model with the ``Classifier`` interface: ``labels``, ``predict``,
    ``source``; ``tok`` is None (it reads raw text, no tokenizer)."""

    kind = "tfidf"
    backend, quantized, tok = "numpy", False, None
    max_length = 512  # not a token budget: only sizes label's cut of over-long texts (chars = 32 x this)

    def __init__(self, vectorizer, coef: np.ndarray, intercept: np.ndarray, classes: np.ndarray, labels: list[str],
                 settings: dict, source: str = ""):
        self.vectorizer, self.coef, self.intercept = vectorizer, coef, intercept
        self.classes = classes  # label index of each coefficient row (a class absent from training has none)
        self.labels, self.settings, self.source = list(labels), dict(settings), source

    # -- fit -------------------------------------------------------------------------------------------------

    @classmethod
    def fit(cls, texts: list[str], y: np.ndarray, labels: list[str], cfg=None,
            class_weight: str | None = None) -> "TfidfClassifier":
        """Fit on ``texts`` with label indices ``y`` (``cfg``: a BaselineConfig; None for its defaults)."""
        from .references import BaselineConfig, fit_tfidf

        b = cfg or BaselineConfig()
        vec, model, name = fit_tfidf(texts, np.asarray(y), b, class_weight=class_weight)
        settings = {"name": name, "analyzer": b.analyzer, "ngram_min": b.ngram_min, "ngram_max": b.ngram_max,
                    "min_df": b.min_df, "max_features": b.max_features, "C": b.C, "class_weight": class_weight,
                    "lowercase": vec.lowercase, "sublinear_tf": vec.sublinear_tf, "norm": vec.norm}
        return cls(vec, model.coef_.astype(np.float32), model.intercept_.astype(np.float32),
                   np.asarray(model.classes_, dtype=np.int64), labels, settings)

    # -- predict ---------------------------------------------------------------------------------------------

    def decision(self, texts: list[str]) -> np.ndarray:
        """Probabilities [n, len(labels)] (float32); a class the training rows lacked gets 0."""
        x = self.vectorizer.transform(texts)
        z = np.asarray(x @ self.coef.T, dtype=np.float64) + self.intercept
        if self.coef.shape[0] == 1:  # scikit-learn's binary model: one row, P(classes[1]) = sigmoid(z)
            p1 = 1.0 / (1.0 + np.exp(-z[:, 0]))
            p = np.stack([1.0 - p1, p1], axis=1)
        else:
            z -= z.max(axis=1, keepdims=True)
            p = np.exp(z)
            p /= p.sum(axis=1, keepdims=True)
        out = np.zeros((len(texts), len(self.labels)), dtype=np.float32)
        out[:, self.classes] = p
        return out

    def predict(self, texts, batch_size: int = 128, normalized: bool = False, **_) -> Predictions:
        """Labels and probabilities for ``texts`` (None/NaN count as empty), in order. ``batch_size`` and
        ``normalized`` are accepted for the ``Classifier`` interface; the model reads the text as ``references.tfidf_text``
        makes it (NFC, lowercased)."""
        # (batch_size is the encoder's: a TF-IDF scores all at once.) A text of only invisible characters is empty,
        # as training and label read it: its zero-width n-grams scored it apart from "".
        texts = ["" if is_blank(t) else t for t in predict_args(texts, batch_size)]
        probs = self.decision(texts) if texts else np.zeros((0, len(self.labels)), dtype=np.float32)
        labels = [self.labels[i] for i in probs.argmax(axis=1)] if len(texts) else []
        return Predictions(labels, probs, [False] * len(texts), list(self.labels))

    def digest(self) -> str:
        """What ``label --resume`` compares: the fitted state, so a refitted model is a different model."""
        h = hashlib.sha256(json.dumps([self.labels, self.settings], sort_keys=True, default=str).encode())
        for a in (self.coef, self.intercept, self.vectorizer.idf_, self.classes):
            h.update(np.ascontiguousarray(a).tobytes())
        h.update(json.dumps(sorted(self.vectorizer.vocabulary_.items())).encode())
        return h.hexdigest()[:24]

    # -- folder ----------------------------------------------------------------------------------------------

    def save(self, folder: str | Path) -> None:
        """``classifier.json`` (type, labels, settings, the vocabulary in column order) and ``tfidf.safetensors``
        (idf, coef, intercept, classes) into ``folder`` (each written beside and renamed into place)."""
        from safetensors.numpy import save as st_save

        from ..io.fileio import write_bytes_atomic, write_json_atomic

        folder = Path(folder)
        folder.mkdir(parents=True, exist_ok=True)
        vocab = sorted(self.vectorizer.vocabulary_.items(), key=lambda kv: kv[1])
        arrays = {"idf": self.vectorizer.idf_.astype(np.float32), "coef": self.coef, "intercept": self.intercept,
                  "classes": self.classes}
        # C order: scikit-learn's coef_ is Fortran-ordered, and safetensors writes the buffer as it lies. The label
        # names ride in the weights' own metadata: ``classes`` holds indices only, so a hand-reordered ``labels``
        # list in classifier.json would otherwise name every row wrong without a sound (load compares the two)
        write_bytes_atomic(folder / WEIGHTS, st_save({k: np.ascontiguousarray(v) for k, v in arrays.items()},
                                                     metadata={"labels": json.dumps(self.labels, ensure_ascii=False)}))
        write_json_atomic(folder / MANIFEST, {"type": self.kind, "format": FORMAT, "labels": self.labels,
                                              "settings": self.settings, "vocabulary": [t for t, _ in vocab]})

    @classmethod
    def load(cls, folder: str | Path, **_) -> "TfidfClassifier":
        """The folder ``save`` wrote; a missing, truncated or edited file is one ``InputError`` line. ``Classifier.load``'s
        options (device, precision, ...) are accepted and mean nothing here: no torch."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        from .references import tfidf_text

        folder = Path(folder)
        manifest = read_manifest(folder, "tfidf")
        s, labels, vocab = manifest.get("settings"), manifest.get("labels"), manifest.get("vocabulary")
        if not (isinstance(s, dict) and isinstance(labels, list) and len(labels) >= 2 and isinstance(vocab, list)
                and all(isinstance(t, str) for t in vocab) and len(set(vocab)) == len(vocab)):
            raise InputError(f"{folder}/{MANIFEST}: not a TF-IDF classifier manifest (labels, settings and a "
                             "vocabulary of distinct strings are required); write it again with `koelectra-kit "
                             "baseline ... out=`")
        arrays, trained = _read_weights(folder)
        check_trained_labels(folder, [str(x) for x in labels], trained)
        idf, coef, intercept, classes = (arrays[k] for k in ("idf", "coef", "intercept", "classes"))
        v, k = len(vocab), len(labels)
        rows = 1 if len(classes) == 2 else len(classes)  # scikit-learn fits one row for two classes
        if (idf.shape != (v,) or coef.shape != (rows, v) or intercept.shape != (rows,) or classes.ndim != 1
                or not 2 <= len(classes) <= k or len(set(classes.tolist())) != len(classes)
                or classes.min() < 0 or classes.max() >= k or not np.isfinite(coef).all()
                or not np.isfinite(idf).all()):
            raise InputError(f"{folder}/{WEIGHTS}: its arrays do not fit {MANIFEST} ({v} n-grams, {k} labels): the "
                             "folder was edited or mixed from two runs; write it again")
        try:
            # NFC also for a folder fitted before it was read so: its n-grams are NFC text's (the training rows')
            lower = bool(s.get("lowercase", True))
            vec = TfidfVectorizer(analyzer=s["analyzer"], ngram_range=(int(s["ngram_min"]), int(s["ngram_max"])),
                                  preprocessor=tfidf_text if lower else _nfc, sublinear_tf=bool(s["sublinear_tf"]),
                                  norm=s.get("norm", "l2"), dtype=np.float32,
                                  vocabulary={t: i for i, t in enumerate(vocab)})
            vec._validate_vocabulary()  # sets vocabulary_ as fit would (scikit-learn's own step for vocabulary=)
            vec.idf_ = idf.astype(np.float64)
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{folder}/{MANIFEST}: bad settings ({e}); write it again") from None
        clf = cls(vec, coef.astype(np.float32), intercept.astype(np.float32), classes.astype(np.int64),
                  [str(x) for x in labels], s, str(folder))
        return clf

    def __repr__(self) -> str:
        return f"TfidfClassifier({self.source!r}, labels={self.labels}, {len(self.vectorizer.vocabulary_)} n-grams)"


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def check_trained_labels(folder: Path, labels: list[str], trained: list[str] | None) -> None:
    """``labels`` (classifier.json's) must be the names, in order, the weights were fitted with. A folder written
    before the weights carried their labels (``trained`` None) loads as before: nothing to compare with."""
    if trained is not None and trained != labels:
        raise InputError(f"{folder}/{MANIFEST}: labels {labels} are not the labels {WEIGHTS} was trained with "
                         f"{trained} (names and order must match); put the list back or write the folder again")


def _read_weights(folder: Path) -> tuple[dict[str, np.ndarray], list[str] | None]:
    """The arrays, and the label names the weights were fitted with (None in a folder older than that record)."""
    from safetensors import SafetensorError, safe_open
    from safetensors.numpy import load_file

    path = folder / WEIGHTS
    if not path.is_file():
        raise InputError(f"{folder}: {WEIGHTS} is missing; write the folder again with `koelectra-kit baseline`")
    try:
        arrays = load_file(str(path))
        with safe_open(str(path), framework="np") as f:
            meta = f.metadata() or {}
        trained = json.loads(meta["labels"]) if "labels" in meta else None
    except (SafetensorError, OSError, ValueError) as e:
        raise InputError(f"{path}: damaged or truncated ({str(e).splitlines()[0]}); write the folder again") from None
    missing = [k for k in ("idf", "coef", "intercept", "classes") if k not in arrays]
    if missing:
        raise InputError(f"{path}: no {', '.join(missing)} array; write the folder again")
    if trained is not None and not (isinstance(trained, list) and all(isinstance(x, str) for x in trained)):
        raise InputError(f"{path}: its labels record is not a list of names; write the folder again")
    return arrays, trained
