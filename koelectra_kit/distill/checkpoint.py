"""Where a distillation run is (``Progress``), checkpointed in ``OUT.work`` as fine-tuning checkpoints
(``finetune.checkpoint``), so a killed run continues from its last checkpoint with the same weights, optimizer
moments, data position, best-so-far model and RNG streams."""
from __future__ import annotations

from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ..finetune import checkpoint
# the folder's rules are fine-tuning's; the distill recipe reaches them through this module
from ..finetune.checkpoint import (check_work_dir, clear_work, hold_work, publish_work_files,  # noqa: F401
                                   release_work, rows_until, work_dir)
from ..io.checkpoints import rng_state, set_rng_state


@dataclass
class Progress:
    """The loop's position and what the final folder needs besides the current weights."""

    step: int = 0  # optimizer steps done
    epoch: int = 0  # epoch being trained
    batch: int = 0  # batches of that epoch done (its order is a function of seed and epoch)
    train_time: float = 0.0
    eval_time: float = 0.0
    examples: int = 0
    best_f1: float = -1.0
    best_step: int = 0
    best_state: dict | None = None  # CPU copy of the best dev macro-F1 weights
    best_logits: np.ndarray | None = None  # their dev logits [n_dev, k]

    def to_state(self) -> dict:
        import torch

        state = {f.name: getattr(self, f.name) for f in fields(self)}
        if self.best_logits is not None:
            state["best_logits"] = torch.from_numpy(self.best_logits)
        state["rng"] = rng_state()
        return state

    @classmethod
    def from_state(cls, state: dict) -> "Progress":
        set_rng_state(state["rng"])
        p = cls(**{f.name: state[f.name] for f in fields(cls)})
        if p.best_logits is not None:
            p.best_logits = p.best_logits.numpy()
        return p


WORDS = {"soft": "teachers' soft labels (another teacher, or one retrained)", "dev": "dev texts",
         "texts": "training or transfer texts"}  # what a refused resume may name (``run_parts``' digests)


def save(work: Path, model, optimizer, progress: Progress, run_key: str, parts: dict | None = None) -> None:
    checkpoint.save(work, model, optimizer, progress.to_state(), run_key, parts)


def load(work: Path, model, optimizer, run_key: str, parts: dict | None = None) -> Progress | None:
    """The checkpointed progress, with ``model`` and ``optimizer`` restored; None when there is no checkpoint.
    A checkpoint of other settings (or other teacher probabilities or texts) is refused in one line naming them."""
    return checkpoint.load(work, model, optimizer, run_key, parts, WORDS, "distill", Progress.from_state)
