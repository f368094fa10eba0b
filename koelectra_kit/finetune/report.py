"""What a fine-tuning run reports as it goes: ``metrics.jsonl`` (and the same rows to the run's trackers), and the
window of training steps a train row sums up, read back from the device once a row."""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from ..io.trackers import Trackers


class MetricsLog:
    """metrics.jsonl, one row a line as it happens (line-buffered: a crash keeps what was logged), and the same rows
    to the run's trackers (report_to: train/loss, eval/macro_f1, ...); the rows are kept for curves.png."""

    def __init__(self, path: Path, trackers: Trackers | None = None, rows: list[dict] | None = None):
        """``rows``: what ``path`` already holds (a resumed run's log up to its checkpoint), appended to."""
        self.rows: list[dict] = list(rows or [])
        self.trackers = trackers or Trackers([], path.parent, {})
        self.file = open(path, "a" if rows else "w", encoding="utf-8", buffering=1)

    def write(self, row: dict) -> None:
        self.rows.append(row)
        self.file.write(json.dumps(row) + "\n")
        self.trackers.log(row, row["kind"])

    def close(self, failed: bool = False) -> None:
        self.file.close()
        self.trackers.close(failed)


@dataclass
class Window:
    """Training steps since the last train row of metrics.jsonl. The steps' losses stay where they were computed
    (0-d tensors, on the GPU there) until ``mean_loss`` reads them all back at once: one host sync a window."""

    losses: list = field(default_factory=list)
    examples: int = 0
    seconds: float = 0.0

    @property
    def steps(self) -> int:
        return len(self.losses)

    def add(self, loss, examples: int) -> None:
        self.losses.append(loss)
        self.examples += examples

    def mean_loss(self) -> float | list[float]:
        """The mean of the window's losses (each read as fp32, summed in Python floats in step order: the same
        number as summing ``loss.item()`` step by step); for steps that add a vector of losses (distillation's loss,
        kl, ce), the mean of each entry."""
        import torch

        rows = torch.stack(self.losses).tolist()
        if rows and isinstance(rows[0], list):
            return [sum(col) / len(rows) for col in zip(*rows)]
        return sum(rows) / len(rows)
