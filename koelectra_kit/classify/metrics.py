"""Classification reports shared by ``finetune``, ``evaluate`` and ``baseline``: one dict format
(saved as ``eval.json``) and one printed table, so a transformer run and the TF-IDF baseline can be put
side by side field by field. (The confusion-matrix picture is ``plots.plot_confusion``.)

    report = classification_report(y_true, y_pred, labels)   # ints -> dict
    print(format_report(report, title="dev"))
"""
from __future__ import annotations

import unicodedata

import numpy as np


def classification_report(y_true, y_pred, labels: list[str], scores=None) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix.

    ``y_true``/``y_pred`` are class indices into ``labels``. A class absent from both gets
    P = R = F1 = 0 and still counts in the macro average (sklearn's ``zero_division=0``), so a model
    that never predicts a class is not flattered. ``majority_accuracy`` is what always answering the
    most frequent true class would score: the bar any model has to clear.

    With a positive, a negative and a neutral label (English or 긍정/부정/중립), ``binary`` adds the protocol
    of the published NSMC figures (``binary_sentiment``); ``scores`` ([n, k] logits or probabilities, columns
    in ``labels`` order) lets it restrict each prediction to those two classes.
    """
    from sklearn.metrics import confusion_matrix, precision_recall_fscore_support

    y_true = np.asarray(y_true, dtype=np.int64)
    y_pred = np.asarray(y_pred, dtype=np.int64)
    idx = list(range(len(labels)))
    p, r, f, s = precision_recall_fscore_support(y_true, y_pred, labels=idx, zero_division=0)
    cm = confusion_matrix(y_true, y_pred, labels=idx)
    n = int(len(y_true))
    counts = np.bincount(y_true, minlength=len(labels))
    return {
        "n": n,
        "accuracy": float((y_true == y_pred).mean()) if n else 0.0,
        "macro_f1": float(f.mean()),
        "weighted_f1": float((f * s).sum() / max(s.sum(), 1)),
        "majority_accuracy": float(counts.max() / n) if n else 0.0,
        "labels": list(labels),
        "per_class": {lab: {"precision": float(p[i]), "recall": float(r[i]), "f1": float(f[i]),
                            "support": int(s[i])} for i, lab in enumerate(labels)},
        # rows = true class, columns = predicted class, both in ``labels`` order
        "confusion_matrix": cm.tolist(),
        **binary_sentiment(y_true, y_pred, labels, scores),
    }


def cross_entropy(logits: np.ndarray, y: np.ndarray) -> float:
    """Mean cross-entropy of fp32 logits [n, k] against class indices [n] (the dev loss)."""
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


def macro_f1(y_true, y_pred, k: int) -> float:
    """Macro-F1 over ``k`` classes (an absent class scores 0, as in ``classification_report``), in numpy: fast
    enough to score hundreds of ensemble weightings of one dev set."""
    cm = np.bincount(np.asarray(y_true) * k + np.asarray(y_pred), minlength=k * k).reshape(k, k).astype(np.float64)
    tp = np.diag(cm)
    denom = cm.sum(0) + cm.sum(1)  # 2TP + FP + FN
    return float(np.where(denom > 0, 2 * tp / np.maximum(denom, 1), 0.0).mean())


# Names that mean the three sentiments (any case); the binary figure needs exactly one label of each.
def sentiment_names() -> dict[str, set[str]]:
    """Each sentiment's spellings: the names reading a labelled file maps onto it (neg/neu/pos, 부정적, 보통, ...), so
    a model trained with labels=[neg,neu,pos] gets its binary figure too (it got none)."""
    from ..io.labelled import LABEL_ALIASES

    positive, negative, neutral = LABEL_ALIASES
    return {"positive": positive, "negative": negative, "neutral": neutral}


def sentiment_columns(labels: list[str]) -> tuple[int, int] | None:
    """(positive column, negative column) when ``labels`` holds one positive, one negative and one neutral
    label; None otherwise (the binary figure means nothing for other label sets)."""
    found = {}
    for kind, names in sentiment_names().items():
        idx = [i for i, lab in enumerate(labels) if str(lab).strip().casefold() in names]
        if len(idx) != 1:
            return None
        found[kind] = idx[0]
    return found["positive"], found["negative"]


def binary_sentiment(y_true, y_pred, labels: list[str], scores=None) -> dict:
    """``{"binary": {...}}`` or ``{}``: accuracy on the positive and negative rows only (neutral rows dropped),
    the protocol of the published NSMC figures (NSMC itself has no neutral class), so a 3-class model can be
    put beside them. With ``scores`` each prediction is restricted to the two classes (argmax over their two
    columns: a 3-class model is never charged for a "neutral" answer the binary task cannot give); without,
    a neutral prediction on such a row counts as wrong (a lower bound, marked ``"from": "labels"``)."""
    cols = sentiment_columns(labels)
    if cols is None:
        return {}
    pos, neg = cols
    y_true, y_pred = np.asarray(y_true, dtype=np.int64), np.asarray(y_pred, dtype=np.int64)
    keep = (y_true == pos) | (y_true == neg)
    n = int(keep.sum())
    if scores is not None:
        s = np.asarray(scores, dtype=np.float64)[keep]
        pred = np.where(s[:, pos] >= s[:, neg], pos, neg)
        source = "scores"
    else:
        pred = y_pred[keep]
        source = "labels"
    acc = float((pred == y_true[keep]).mean()) if n else 0.0
    return {"binary": {"accuracy": acc, "n": n, "positive": labels[pos], "negative": labels[neg], "from": source}}


def _width(text: str) -> int:
    """Terminal columns of ``text``: Hangul and other East Asian wide characters take two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _pad(text: str, width: int, right: bool = False) -> str:
    fill = " " * max(width - _width(text), 0)
    return fill + text if right else text + fill


def format_report(report: dict, title: str = "") -> str:
    """The report as a plain-text table (aligned for Korean label names too)."""
    labels = report["labels"]
    w = max([_width(lab) for lab in labels] + [8])
    lines = []
    head = f"{title}: " if title else ""
    lines.append(f"{head}{report['n']} rows   accuracy {report['accuracy']:.4f}   "
                 f"macro-F1 {report['macro_f1']:.4f}   (majority class {report['majority_accuracy']:.4f})")
    if report.get("binary"):
        b = report["binary"]
        how = "argmax of the two" if b["from"] == "scores" else "a neutral answer counts as wrong"
        lines.append(f"  binary accuracy {b['accuracy']:.4f} on the {b['n']} {b['positive']}/{b['negative']} rows "
                     f"(neutral rows dropped, {how}: the published NSMC protocol)")
    lines.append(f"  {_pad('label', w)}  precision  recall      f1  support")
    for lab in labels:
        c = report["per_class"][lab]
        lines.append(f"  {_pad(lab, w)}  {c['precision']:9.4f}  {c['recall']:6.4f}  {c['f1']:6.4f}  "
                     f"{c['support']:7d}")
    lines.append("  confusion matrix (rows = true label, columns = predicted)")
    cw = max([_width(lab) for lab in labels] + [len(str(v)) for row in report["confusion_matrix"] for v in row])
    lines.append("  " + _pad("", w) + "  " + "  ".join(_pad(lab, cw, right=True) for lab in labels))
    for lab, row in zip(labels, report["confusion_matrix"]):
        lines.append("  " + _pad(lab, w) + "  " + "  ".join(_pad(str(v), cw, right=True) for v in row))
    return "\n".join(lines)


def format_side_by_side(reports: dict[str, dict]) -> str:
    """One line per run: ``{"ELECTRA": report, "TF-IDF": report}`` -> accuracy / macro-F1 table."""
    w = max(_width(k) for k in reports) if reports else 5
    binary = any(r.get("binary") for r in reports.values())
    lines = [f"{_pad('model', w)}  accuracy  macro-F1       n" + ("  binary acc" if binary else "")]
    for name, r in reports.items():
        extra = f"  {r['binary']['accuracy']:10.4f}" if r.get("binary") else ""
        lines.append(f"{_pad(name, w)}  {r['accuracy']:8.4f}  {r['macro_f1']:8.4f}  {r['n']:6d}{extra}".rstrip())
    return "\n".join(lines)
