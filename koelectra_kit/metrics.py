"""Classification reports shared by ``finetune``, ``evaluate`` and ``baseline``: one dict format
(saved as ``eval.json``), one printed table and one confusion-matrix PNG, so a transformer run and the
TF-IDF baseline can be put side by side field by field.

    report = classification_report(y_true, y_pred, labels)   # ints -> dict
    print(format_report(report, title="dev"))
    plot_confusion(report, "out/confusion.png")
"""
from __future__ import annotations

import unicodedata
import warnings
from pathlib import Path

import numpy as np

from .utils import atomic_path


def classification_report(y_true, y_pred, labels: list[str]) -> dict:
    """Accuracy, macro-F1, per-class precision/recall/F1/support and the confusion matrix.

    ``y_true``/``y_pred`` are class indices into ``labels``. A class absent from both gets
    P = R = F1 = 0 and still counts in the macro average (sklearn's ``zero_division=0``), so a model
    that never predicts a class is not flattered. ``majority_accuracy`` is what always answering the
    most frequent true class would score: the bar any model has to clear.
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
    }


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
    lines = [f"{_pad('model', w)}  accuracy  macro-F1       n"]
    for name, r in reports.items():
        lines.append(f"{_pad(name, w)}  {r['accuracy']:8.4f}  {r['macro_f1']:8.4f}  {r['n']:6d}")
    return "\n".join(lines)


def _tick_labels(labels: list[str]) -> list[str]:
    """Label names if the plotting font has their glyphs, else ``#i`` (names are in eval.json).

    Matplotlib's bundled DejaVu has no Hangul: Korean labels would render as empty boxes on a
    machine without a Korean font, so say ``#0, #1`` instead of drawing boxes."""
    from matplotlib import font_manager
    from matplotlib.ft2font import FT2Font

    try:
        font = FT2Font(font_manager.findfont(font_manager.FontProperties()))
        if all(font.get_char_index(ord(ch)) for lab in labels for ch in lab):
            return list(labels)
    except Exception:  # noqa: BLE001 - a font problem must not fail a training run
        pass
    return [f"#{i}" for i in range(len(labels))]


def _use_korean_font() -> None:
    """Prefer an installed Korean font so Hangul labels render (none is bundled with matplotlib)."""
    import matplotlib
    from matplotlib import font_manager

    have = {f.name for f in font_manager.fontManager.ttflist}
    for name in ("NanumGothic", "Malgun Gothic", "AppleGothic", "Noto Sans CJK KR", "Noto Sans KR",
                 "UnDotum", "Baekmuk Gulim"):
        if name in have:
            matplotlib.rcParams["font.family"] = [name, "DejaVu Sans"]
            return


def _save_png(fig, path: str | Path) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=120, bbox_inches="tight")
    plt.close(fig)


def plot_confusion(report: dict, path: str | Path, title: str = "") -> None:
    """Confusion matrix as a PNG: counts in each cell, colour = share of the true class (row)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    _use_korean_font()
    cm = np.asarray(report["confusion_matrix"], dtype=float)
    share = cm / np.maximum(cm.sum(axis=1, keepdims=True), 1)
    ticks = _tick_labels(report["labels"])
    k = len(ticks)
    fig, ax = plt.subplots(figsize=(1.2 * k + 2.5, 1.1 * k + 1.8))
    ax.imshow(share, cmap="Blues", vmin=0, vmax=1)
    for i in range(k):
        for j in range(k):
            ax.text(j, i, f"{int(cm[i, j])}\n{share[i, j]:.0%}", ha="center", va="center",
                    color="white" if share[i, j] > 0.5 else "black", fontsize=9)
    ax.set_xticks(range(k), ticks, rotation=30 if k > 4 else 0)
    ax.set_yticks(range(k), ticks)
    ax.set_xlabel("predicted")
    ax.set_ylabel("true")
    ax.set_title(title or f"accuracy {report['accuracy']:.3f}  macro-F1 {report['macro_f1']:.3f}  "
                          f"(n={report['n']})", fontsize=9)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing-glyph warnings if a label slipped through
        _save_png(fig, path)


def plot_curves(rows: list[dict], path: str | Path, best_step: int | None = None) -> None:
    """Learning curves from metrics.jsonl rows: train loss (and dev loss) and dev accuracy/macro-F1."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    train = [r for r in rows if r.get("kind") == "train"]
    dev = [r for r in rows if r.get("kind") == "eval"]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(10, 3.6))
    if train:
        steps = np.array([r["step"] for r in train])
        loss = np.array([r["loss"] for r in train])
        ax1.plot(steps, loss, lw=0.8, alpha=0.5, label="train loss")
        if len(loss) >= 20:  # a moving average shows the trend through batch noise
            k = max(len(loss) // 20, 3)
            ax1.plot(steps[k - 1:], np.convolve(loss, np.ones(k) / k, mode="valid"), lw=1.5,
                     label=f"train loss (avg of {k})")
    if dev:
        ax1.plot([r["step"] for r in dev], [r["loss"] for r in dev], "o-", ms=3, label="dev loss")
        ax2.plot([r["step"] for r in dev], [r["accuracy"] for r in dev], "o-", ms=3, label="dev accuracy")
        ax2.plot([r["step"] for r in dev], [r["macro_f1"] for r in dev], "o-", ms=3, label="dev macro-F1")
    if best_step is not None:
        ax2.axvline(best_step, color="gray", ls="--", lw=1, label=f"best (step {best_step})")
    ax1.set_xlabel("step")
    ax1.set_ylabel("cross-entropy")
    ax1.legend(fontsize=8)
    ax2.set_xlabel("step")
    ax2.set_ylim(0, 1)
    ax2.legend(fontsize=8, loc="lower right")
    fig.tight_layout()
    _save_png(fig, path)
