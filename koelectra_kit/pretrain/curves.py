"""Learning curves of a pretraining run, redrawn from its ``metrics.jsonl`` (by the run at its end, by
``koelectra-kit pretrain plot RUN``, and by the experiment scripts). The drawing is ``plots``'s, beside the
other stages' figures.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import InputError
from ..io.plots import plot_pretrain_curves


def read_metrics(path: Path) -> list[dict]:
    """The rows of a run's ``metrics.jsonl`` ([] when it does not exist yet)."""
    if not path.exists():
        return []
    rows = []
    for line in path.read_bytes().decode("utf-8", errors="replace").splitlines():
        if line.strip():
            try:
                row = json.loads(line)
            except ValueError:
                continue  # a line cut by a kill: skip it
            if isinstance(row, dict) and "step" in row and "tokens" in row:  # not another stage's (or file's) rows
                rows.append(row)
    return rows


def plot_curves(run_dir: str | Path, dest: str | Path | None = None) -> Path:
    """``run_dir/curves.png`` (or ``dest``) from ``run_dir/metrics.jsonl``: losses, generator accuracy against
    the unigram baseline, discriminator AUC/precision/recall, replaced fraction, lr and lambda, tokens/s;
    x = tokens seen."""
    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        raise InputError(f"{run_dir / 'metrics.jsonl'} has no metrics to plot (is {run_dir} a pretraining run dir?)")
    dest = Path(dest) if dest else run_dir / "curves.png"
    title = f"pretraining {run_dir.name}: step {rows[-1]['step']}, {rows[-1]['tokens'] / 1e6:.2f}M tokens"
    if below_unigram(rows[-1]):
        title += "\nWARNING: generator accuracy ended below the unigram rate (the encoder has learned little)"
    plot_pretrain_curves(rows, dest, title)
    return dest


def below_unigram(row: dict | None) -> bool:
    """The last metrics row says the generator is worse than always predicting the most frequent token."""
    return bool(row and row.get("gen_acc") is not None and row.get("gen_unigram_acc") is not None
                and row["gen_acc"] < row["gen_unigram_acc"])
