"""The bars every classifier report stands beside: always predicting the most frequent class, and TF-IDF
character n-grams + logistic regression. A model that does not clear them is not yet useful, and a user
comparing numbers should see that without running a second command.

    refs = reference_scores(train_texts, y_train, dev_texts, y_dev, labels)
    print(format_references(report, refs))     # a table and, when the model is not above a bar, a warning

No torch here: ``baseline`` and ``evaluate`` use it too.
"""
from __future__ import annotations

import contextlib
import unicodedata
from dataclasses import dataclass
from typing import Literal

import numpy as np

from ..errors import InputError
from ..io.printed import display_width, pad
from .metrics import classification_report


@dataclass
class BaselineConfig:
    """TF-IDF character n-grams + logistic regression (``koelectra-kit baseline``, ``finetune``'s ``baseline.*``;
    here, with the fit it tunes, so that the TF-IDF classifier needs nothing from the fine-tuning stage)."""

    analyzer: Literal["char", "char_wb"] = "char_wb"  # char_wb: n-grams don't cross spaces
    ngram_min: int = 1
    ngram_max: int = 3
    min_df: int = 2  # drop n-grams seen in fewer training texts (noise, typos): smaller, faster
    max_features: int | None = None  # cap the vocabulary (None = all that pass min_df)
    C: float = 1.0  # inverse L2 strength (nsmc3: C=1 beats 2 and 4 by 0.1-0.5 points of macro-F1)
    max_iter: int = 1000
    # lbfgs stops once every gradient entry is under this. scikit-learn's 1e-4 stopped nsmc3's 150,000 rows at a
    # point that moved with the BLAS thread count: dev macro-F1 0.6535 on 1 thread, 0.6517 on 2. At 1e-6 0.6524 on
    # both (1.7x the iterations; the baseline command 1.4x the time): the reference is the data's, not the machine's.
    tol: float = 1e-6


def majority_reference(y_train: np.ndarray, y_eval: np.ndarray, labels: list[str]) -> dict:
    """Predict the training set's most frequent class for every row."""
    top = int(np.bincount(y_train, minlength=len(labels)).argmax())
    report = classification_report(y_eval, np.full(len(y_eval), top), labels)
    return {"name": f"always '{labels[top]}'", "accuracy": report["accuracy"], "macro_f1": report["macro_f1"]}


def tfidf_text(text: str) -> str:
    """What TF-IDF reads of a text: NFC (a Mac writes Hangul decomposed, a syllable as 2-3 jamo, and no n-gram of
    those was fitted: "정말 재밌어요 강추" scored positive, its NFD form negative), lowercased as scikit-learn's own
    preprocessor does. Nothing else: the n-grams stay the raw text's."""
    return unicodedata.normalize("NFC", text).lower()


@contextlib.contextmanager
def _quiet_convergence():
    """scikit-learn's ConvergenceWarning ignored while the fit runs: its warning is a paragraph on stderr, said in one
    line after the fit instead. One filter added, then that one taken out again: a filter left in place silenced
    the user's own scikit-learn models for the rest of the process, and catch_warnings, which puts back the whole
    list it saved, would undo filters set meanwhile by the run the fit runs beside (companions.fit_in_background)."""
    import warnings

    from sklearn.exceptions import ConvergenceWarning

    before = list(warnings.filters)
    warnings.filterwarnings("ignore", category=ConvergenceWarning)
    mine = warnings.filters[0]
    try:
        yield
    finally:
        if mine not in before:  # (the user's own identical filter stays)
            try:
                warnings.filters.remove(mine)  # ("ignore" leaves no mark in the warning registries to clear)
            except ValueError:  # the filters were reset meanwhile (catch_warnings' exit): nothing of ours is left
                pass


def fit_tfidf(texts: list[str], y: np.ndarray, cfg=None, class_weight: str | None = None):
    """TF-IDF character n-grams + logistic regression fitted on ``texts`` (``cfg``: a BaselineConfig or None for
    its defaults); returns (vectorizer, model, name). The one place the baseline is defined."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    b = cfg or BaselineConfig()
    # sublinear tf: a review that repeats "ㅋㅋㅋㅋ" ten times is not ten times as funny
    vec = TfidfVectorizer(analyzer=b.analyzer, ngram_range=(b.ngram_min, b.ngram_max), min_df=b.min_df,
                          max_features=b.max_features, sublinear_tf=True, dtype=np.float32, preprocessor=tfidf_text)
    try:
        x = vec.fit_transform(texts)
    except ValueError as e:  # min_df above the number of texts, or no n-gram left after it
        raise InputError(f"TF-IDF on {len(texts)} training texts: {str(e).splitlines()[0]} (baseline.min_df="
                         f"{b.min_df}; lower it)") from None
    model = LogisticRegression(C=b.C, max_iter=b.max_iter, tol=b.tol, class_weight=class_weight)
    with _quiet_convergence():
        model.fit(x, y)
    if int(np.max(model.n_iter_)) >= b.max_iter:
        from ..runtime import warn

        warn(f"warning: the TF-IDF logistic regression stopped at baseline.max_iter={b.max_iter} before converging "
             f"(tol {b.tol:g}); raise baseline.max_iter for the model it would reach")
    name = f"TF-IDF {b.analyzer} {b.ngram_min}-{b.ngram_max}-grams + logistic regression (C={b.C:g})"
    return vec, model, name


def tfidf_predict(vec, model, texts: list[str]) -> np.ndarray:
    return model.classes_[model.predict_proba(vec.transform(texts)).argmax(1)]


def tfidf_reference(train_texts, y_train, eval_texts, y_eval, labels: list[str], cfg=None, fitted=None) -> dict:
    """The TF-IDF row; ``fitted``: ``fit_tfidf(train_texts, y_train, cfg)``'s result when the caller has it."""
    vec, model, _ = fitted or fit_tfidf(train_texts, y_train, cfg)
    probs = model.predict_proba(vec.transform(eval_texts))
    scores = np.zeros((len(eval_texts), len(labels)), dtype=np.float32)
    scores[:, model.classes_] = probs  # a class absent from training has no column: score 0
    report = classification_report(y_eval, scores.argmax(1), labels, scores=scores)
    out = {"name": "TF-IDF + logistic regression", "accuracy": report["accuracy"], "macro_f1": report["macro_f1"]}
    if "binary" in report:
        out["binary_accuracy"] = report["binary"]["accuracy"]
    return out


def cv_tfidf_reference(texts, y, labels: list[str], folds: int = 5, seed: int = 0) -> dict | None:
    """TF-IDF scored by k-fold cross-validation on the evaluated file itself (when no training file is at hand):
    what a linear model learns from this very data. None when a class has fewer rows than folds."""
    from sklearn.model_selection import StratifiedKFold

    counts = np.bincount(y, minlength=len(labels))
    present = counts[counts > 0]
    if len(present) < 2 or present.min() < folds:
        return None
    texts = list(texts)
    pred = np.zeros(len(y), dtype=np.int64)
    for train_idx, test_idx in StratifiedKFold(folds, shuffle=True, random_state=seed).split(texts, y):
        vec, model, _ = fit_tfidf([texts[i] for i in train_idx], y[train_idx])
        pred[test_idx] = tfidf_predict(vec, model, [texts[i] for i in test_idx])
    report = classification_report(y, pred, labels)
    return {"name": f"TF-IDF + logistic regression ({folds}-fold CV on this file)",
            "accuracy": report["accuracy"], "macro_f1": report["macro_f1"]}


def reference_scores(train_texts, y_train, eval_texts, y_eval, labels: list[str], cfg=None, fitted=None) -> dict:
    return {"majority": majority_reference(np.asarray(y_train), np.asarray(y_eval), labels),
            "tfidf": tfidf_reference(train_texts, np.asarray(y_train), eval_texts, np.asarray(y_eval), labels, cfg,
                                     fitted)}


# What helps a model that is no better than always answering one class, by the classifier's ``kind``: epochs and an
# encoder mean nothing to a TF-IDF fit, which has no epochs and no encoder.
ADVICE = {"tfidf": "more labelled rows; or fine-tune a pretrained encoder on them, `koelectra-kit finetune`",
          None: "more data, more epochs, or a pretrained encoder"}


def reference_warnings(report: dict, refs: dict, kind: str | None = None) -> list[str]:
    """One line per bar the model does not clear (accuracy against the majority class, macro-F1 against TF-IDF).
    ``kind``: the classifier's (``"tfidf"`` for a TF-IDF model; None for a fine-tuned one), for the advice."""
    out = []
    maj = refs.get("majority")
    if maj and report["accuracy"] <= maj["accuracy"]:
        out.append(f"warning: accuracy {report['accuracy']:.4f} is not above {maj['name']} ({maj['accuracy']:.4f}): "
                   f"the model has learned nothing usable yet ({ADVICE.get(kind, ADVICE[None])})")
    tf = refs.get("tfidf")
    if tf and report["macro_f1"] <= tf["macro_f1"]:
        out.append(f"warning: macro-F1 {report['macro_f1']:.4f} is not above {tf['name']} ({tf['macro_f1']:.4f}): "
                   "`koelectra-kit baseline` gives that without a GPU or pretraining")
    return out


def format_references(report: dict, refs: dict, kind: str | None = None) -> str:
    """The model's row beside the references' rows, then ``reference_warnings`` (``kind``: as there)."""
    # as wide as the longest name: "TF-IDF + logistic regression (fitted on the model's training file)" was cut
    # (by display width: "always '기쁨'" is 10 characters in 12 columns)
    width = max([58, *(display_width(ref["name"]) + 1 for ref in refs.values() if ref)])
    lines = ["beside the references:", f"  {pad('', width)}{'accuracy':>9}{'macro-F1':>10}",
             f"  {pad('this model', width)}{report['accuracy']:>9.4f}{report['macro_f1']:>10.4f}"]
    for ref in refs.values():
        if ref:
            lines.append(f"  {pad(ref['name'], width)}{ref['accuracy']:>9.4f}{ref['macro_f1']:>10.4f}")
    return "\n".join(lines + reference_warnings(report, refs, kind))
