"""Every picture the toolkit draws, in one place: the confusion matrix and learning curves of fine-tuning,
pretraining's curves, the label distribution of a labelling run. Each writes a PNG beside its final path and
renames it into place, and draws Hangul with an installed Korean font where there is one.

matplotlib is imported inside each function (with the Agg backend: no display is needed), so importing this
module costs nothing.
"""
from __future__ import annotations

import functools
import math
import warnings
from pathlib import Path

import numpy as np

from .fileio import atomic_path

KOREAN_FONTS = ("NanumGothic", "Malgun Gothic", "AppleGothic", "Apple SD Gothic Neo", "Noto Sans CJK KR",
                "Noto Sans KR", "UnDotum", "Baekmuk Gulim")
# Where Korean fonts are installed, for a machine without fc-list to ask (macOS, Windows, a slim container)
KOREAN_FONT_FILES = ("/usr/share/fonts/truetype/nanum/NanumGothic*.ttf", "/usr/share/fonts/opentype/noto/*CJK*",
                     "/usr/share/fonts/noto-cjk/*CJK*", "/usr/share/fonts/truetype/unfonts-core/UnDotum*.ttf",
                     "/Library/Fonts/AppleGothic.ttf", "/System/Library/Fonts/Supplemental/AppleGothic.ttf",
                     "/System/Library/Fonts/AppleSDGothicNeo.ttc", "C:/Windows/Fonts/malgun.ttf")


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def use_korean_font() -> str | None:
    """Prefer an installed Korean font so Hangul labels render (none is bundled with matplotlib); returns its family,
    or None when there is none.

    matplotlib lists the fonts it found when it built its font cache, and never looks again: fonts-nanum installed
    after that (the usual order in a container) was not used, and confusion.png showed #0..#11. So when the cache
    has no Korean font, the system's are looked up (``_korean_font_files``) and added for this process."""
    import matplotlib
    from matplotlib import font_manager

    name = _korean_family()
    if name is None:
        added = []
        for path in _korean_font_files():
            try:
                before = len(font_manager.fontManager.ttflist)
                font_manager.fontManager.addfont(path)
                added += [f.name for f in font_manager.fontManager.ttflist[before:]]
            except Exception:  # noqa: BLE001 - an unreadable font file is skipped; a plot never fails over a font
                continue
        name = _korean_family() or next(iter(added), None)  # fc-list's :lang=ko fonts all draw Hangul
    if name:
        matplotlib.rcParams["font.family"] = [name, "DejaVu Sans"]
    return name


def _korean_family() -> str | None:
    from matplotlib import font_manager

    have = {f.name for f in font_manager.fontManager.ttflist}
    return next((name for name in KOREAN_FONTS if name in have), None)


@functools.cache
def _korean_font_files() -> tuple[str, ...]:
    """Font files that draw Korean: fontconfig's answer (``fc-list :lang=ko``) where it is installed, and the
    files of ``KOREAN_FONT_FILES`` that exist. Looked up once a process."""
    import glob
    import shutil
    import subprocess

    found = []
    if shutil.which("fc-list"):
        try:
            got = subprocess.run(["fc-list", ":lang=ko", "--format", "%{file}\\n"], capture_output=True, text=True,
                                 timeout=20)
            found = [line.strip() for line in got.stdout.splitlines()]
        except (OSError, subprocess.SubprocessError):
            found = []
    for pattern in KOREAN_FONT_FILES:
        found += sorted(glob.glob(pattern))
    # matplotlib reads TrueType and OpenType (.ttc collections too); fontconfig also lists bitmap fonts
    return tuple(dict.fromkeys(f for f in found if f.lower().endswith((".ttf", ".otf", ".ttc"))))


def save_png(fig, path: str | Path, dpi: int = 120, tight: bool = True) -> Path:
    """Write ``fig`` to ``path`` atomically and close it. ``tight``: crop to the drawn area."""
    import matplotlib.pyplot as plt

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=dpi, **({"bbox_inches": "tight"} if tight else {}))
    plt.close(fig)
    return Path(path)


def _tick_labels(labels: list[str]) -> list[str]:
    """Label names if the plotting font has their glyphs, else ``#i`` (``plot_confusion`` then adds a key).

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


def _numbered_note(labels: list[str], path) -> str:
    """The log line when confusion.png numbers its labels: the key (the terminal draws the names the figure
    cannot) and how to get the names drawn."""
    from matplotlib import get_cachedir

    from .printed import quoted

    key = ", ".join(f"#{i} = {quoted(lab)}" for i, lab in enumerate(labels))
    return (f"note: {Path(path).name} numbers its labels ({key}): no installed font draws them. For the names, "
            "install a Korean font (Debian/Ubuntu: apt install fonts-nanum); one installed where it was not found "
            f"needs matplotlib's font cache rebuilt (delete {get_cachedir()}/fontlist-*.json)")


def plot_confusion(report: dict, path: str | Path, title: str = "") -> None:
    """Confusion matrix of a ``metrics.classification_report`` as a PNG: counts in each cell, colour = share
    of the true class (row). Labels no installed font draws are numbered, with a key under the matrix and a note
    in the log."""
    plt = _pyplot()
    use_korean_font()
    cm = np.asarray(report["confusion_matrix"], dtype=float)
    share = cm / np.maximum(cm.sum(axis=1, keepdims=True), 1)
    labels = list(report["labels"])
    ticks = _tick_labels(labels)
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
    if ticks != labels:
        # the key: the names themselves have no glyphs here, so it points at where they are written
        fig.text(0.01, 0.005, f"#0-#{k - 1}: the labels in eval.json's order (#i = labels[i]); no installed font "
                 "draws their names", fontsize=7, ha="left", va="bottom")
        from ..runtime import log

        log(_numbered_note(labels, path))
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # missing-glyph warnings if a label slipped through
        save_png(fig, path)


def plot_finetune_curves(rows: list[dict], path: str | Path, best_step: int | None = None) -> None:
    """Fine-tuning's learning curves from metrics.jsonl rows: train loss (and dev loss) and dev
    accuracy/macro-F1, with the best checkpoint's step marked."""
    plt = _pyplot()
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
    save_png(fig, path)


# Pretraining's panels: (title, [(metrics.jsonl key, legend label), ...]).
PRETRAIN_PANELS = [
    ("losses", [("gen_loss", "generator MLM"), ("disc_loss", "discriminator BCE")]),
    ("generator masked-token accuracy", [("gen_acc", "generator"), ("gen_unigram_acc", "unigram baseline")]),
    ("discriminator on replaced tokens", [("disc_auc", "AUC"), ("disc_precision", "precision"),
                                          ("disc_recall", "recall"), ("disc_acc", "accuracy")]),
    ("replaced fraction of real tokens", [("replaced_frac", "replaced")]),
    ("schedule", [("lr", "lr")]),
    ("throughput", [("tokens_per_s", "tokens/s")]),
]


def plot_pretrain_curves(rows: list[dict], dest: str | Path, title: str) -> Path:
    """Pretraining's curves from its metrics.jsonl rows (at least one): losses, generator accuracy against the
    unigram baseline, discriminator AUC/precision/recall, replaced fraction, lr and lambda, tokens/s;
    x = tokens seen. ``title`` heads the figure."""
    plt = _pyplot()
    x = [r["tokens"] / 1e6 for r in rows]

    def series(key):
        return [r.get(key) if r.get(key) is not None else float("nan") for r in rows]

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    for ax, (panel, keys) in zip(axes.flat, PRETRAIN_PANELS):
        for key, label in keys:
            ys = series(key)
            if not all(math.isnan(y) for y in ys):
                ax.plot(x, ys, label=label, linestyle="--" if "baseline" in label else "-")
        if panel == "schedule" and any(r.get("disc_weight") is not None for r in rows):
            ax2 = ax.twinx()
            ax2.plot(x, series("disc_weight"), color="tab:orange", label="lambda")
            ax2.set_ylabel("lambda")
        ax.set_title(panel)
        ax.set_xlabel("tokens seen (M)")
        ax.grid(alpha=0.3)
        if len(keys) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        elif not ax.lines:  # objective=mlm: no discriminator to draw
            ax.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(title)
    fig.tight_layout()
    return save_png(fig, dest, dpi=90, tight=False)


def plot_distribution(per_label: dict, rows: int, path: str | Path) -> Path:
    """Bar chart of a labelling run's rows per label (``per_label``: label -> count; ``rows``: all rows)."""
    plt = _pyplot()
    use_korean_font()
    labels = list(per_label)
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(labels, [per_label[lab] for lab in labels], color="#4C72B0")
    ax.set_ylabel("rows")
    ax.set_title(f"{rows:,} rows labelled")
    fig.tight_layout()
    return save_png(fig, path, tight=False)
