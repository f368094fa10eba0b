"""Classification reports shared by ``finetune``, ``evaluate`` and ``baseline``: one dict format
(saved as ``eval.json``) and one printed table, so a transformer run and the TF-IDF baseline can be put
side by side field by field. (The confusion-matrix picture is ``plots.plot_confusion``.)

    report = classification_report(y_true, y_pred, labels)   # ints -> dict
    print(format_report(report, title="dev"))
"""
from __future__ import annotations

import numpy as np

from ..io.printed import display_width, pad


def classification_report(y_true, y_pred, labels: list[str], scores=None) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix.

    ``y_true``/``y_pred`` are class indices into ``labels``. A class absent from both gets
    P = R = F1 = 0 and still counts in the macro average (sklearn's ``zero_division=0``), so a model
    that never predicts a class is not flattered. ``majority_accuracy`` is what always answering the
    most frequent true class would score: the bar any model has to clear.

    When the labels are exactly a positive, a negative and a neutral one (English or 긍정/부정/중립; no other
    class), ``binary`` adds the protocol of the published NSMC figures (``binary_sentiment``); ``scores`` ([n, k]
    logits or probabilities, columns in ``labels`` order) lets it restrict each prediction to those two classes.
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


# Names that mean the three sentiments (any case): a label set made of them, one positive and one negative (and at
# most one neutral), is a sentiment set.
def sentiment_names() -> dict[str, set[str]]:
    """Each sentiment's spellings: the names reading a labelled file maps onto it (neg/neu/pos, 부정적, 보통, ...), so
    a model trained with labels=[neg,neu,pos] gets its binary figure too (it got none)."""
    from ..io.labelled import LABEL_ALIASES

    positive, negative, neutral = LABEL_ALIASES
    return {"positive": positive, "negative": negative, "neutral": neutral}


def sentiment_roles(labels: list[str]) -> dict[str, int] | None:
    """``{"positive": i, "negative": j}`` (and ``"neutral": k``) when every label is one of the three sentiments,
    one positive, one negative and at most one neutral; None for any other set. Every label must have a role: on
    [very negative, negative, neutral, positive, very positive] the "binary" figure dropped the two extreme classes
    unsaid, and a topic set with a "mixed" class beside positive/negative/neutral is no sentiment scale either."""
    names = sentiment_names()
    roles: dict[str, int] = {}
    for i, lab in enumerate(labels):
        kind = next((k for k, spellings in names.items() if str(lab).strip().casefold() in spellings), None)
        if kind is None or kind in roles:
            return None
        roles[kind] = i
    return roles if "positive" in roles and "negative" in roles else None


def sentiment_columns(labels: list[str]) -> tuple[int, int] | None:
    """(positive column, negative column) when ``labels`` is exactly one positive, one negative and one neutral
    label; None otherwise: the binary figure means nothing for other label sets, and on a two-label set it is the
    accuracy itself."""
    roles = sentiment_roles(labels)
    if roles is None or "neutral" not in roles:
        return None
    return roles["positive"], roles["negative"]


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


def format_report(report: dict, title: str = "") -> str:
    """The report as a plain-text table (aligned for Korean label names too)."""
    labels = report["labels"]
    w = max([display_width(lab) for lab in labels] + [8])
    lines = []
    head = f"{title}: " if title else ""
    lines.append(f"{head}{report['n']} rows   accuracy {report['accuracy']:.4f}   "
                 f"macro-F1 {report['macro_f1']:.4f}   (majority class {report['majority_accuracy']:.4f})")
    if report.get("binary"):
        b = report["binary"]
        how = "argmax of the two" if b["from"] == "scores" else "a neutral answer counts as wrong"
        lines.append(f"  binary accuracy {b['accuracy']:.4f} on the {b['n']} {b['positive']}/{b['negative']} rows "
                     f"(neutral rows dropped, {how}: the published NSMC protocol)")
    lines.append(f"  {pad('label', w)}  precision  recall      f1  support")
    for lab in labels:
        c = report["per_class"][lab]
        lines.append(f"  {pad(lab, w)}  {c['precision']:9.4f}  {c['recall']:6.4f}  {c['f1']:6.4f}  "
                     f"{c['support']:7d}")
    lines += confusion_lines(labels, report["confusion_matrix"], w)
    return "\n".join(lines)


# Widest text confusion matrix with the label names over its columns; a wider one numbers them. Twelve labels of 25
# characters made a 330-column matrix no terminal shows; five "very negative" (92 columns) keep their names.
MATRIX_COLUMNS = 100


def confusion_lines(labels: list[str], matrix: list[list[int]], w: int) -> list[str]:
    """The matrix under a header line; ``w``: the row names' column width. Where names over the columns would pass
    ``MATRIX_COLUMNS``, each row name starts with its number (``#0 very negative``) and the columns carry the
    number alone: the rows are the key. Numbered from 0, as eval.json's ``labels`` and confusion.png's ticks where
    no font draws the names."""
    cw = max([display_width(lab) for lab in labels] + [len(str(v)) for row in matrix for v in row])
    heads, rows, how = list(labels), list(labels), ""
    if 4 + w + len(labels) * (cw + 2) - 2 > MATRIX_COLUMNS:
        heads = [f"#{i}" for i in range(len(labels))]
        rows = [f"#{i} {lab}" for i, lab in enumerate(labels)]
        w = max(display_width(r) for r in rows)
        cw = max([len(h) for h in heads] + [len(str(v)) for row in matrix for v in row])
        how = ", numbered as the rows"
    lines = [f"  confusion matrix (rows = true label, columns = predicted{how})",
             "  " + pad("", w) + "  " + "  ".join(pad(h, cw, right=True) for h in heads)]
    for name, row in zip(rows, matrix):
        lines.append("  " + pad(name, w) + "  " + "  ".join(pad(str(v), cw, right=True) for v in row))
    return lines


def format_side_by_side(reports: dict[str, dict]) -> str:
    """One line per run: ``{"ELECTRA": report, "TF-IDF": report}`` -> accuracy / macro-F1 table."""
    w = max(display_width(k) for k in reports) if reports else 5
    binary = any(r.get("binary") for r in reports.values())
    lines = [f"{pad('model', w)}  accuracy  macro-F1       n" + ("  binary acc" if binary else "")]
    for name, r in reports.items():
        extra = f"  {r['binary']['accuracy']:10.4f}" if r.get("binary") else ""
        lines.append(f"{pad(name, w)}  {r['accuracy']:8.4f}  {r['macro_f1']:8.4f}  {r['n']:6d}{extra}".rstrip())
    return "\n".join(lines)
