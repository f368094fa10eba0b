"""Where a distillation run is, and its checkpoints in ``OUT.work/checkpoints`` (written with pretraining's
``save_checkpoint``: a complete folder renamed into place, then ``latest.json``), so a killed run continues from
its last checkpoint with the same weights, optimizer moments, data position, best-so-far model and RNG streams."""
from __future__ import annotations

import json
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError
from ..pretrain.checkpoint import latest_checkpoint, rng_state, save_checkpoint, set_rng_state


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
        state["rng"] = rng_state(torch.Generator())
        return state

    @classmethod
    def from_state(cls, state: dict) -> "Progress":
        import torch

        set_rng_state(state["rng"], torch.Generator())
        p = cls(**{f.name: state[f.name] for f in fields(cls)})
        if p.best_logits is not None:
            p.best_logits = p.best_logits.numpy()
        return p


WORK_FILES = ("checkpoints", "metrics.jsonl")  # what a run writes into OUT.work


def work_dir(out: str | Path) -> Path:
    """Checkpoints and the metrics log of a run writing ``out`` (beside it; removed when the run is done)."""
    out = Path(out)
    return out.with_name(out.name + ".work")


def check_work_dir(work: Path) -> None:
    """OUT.work is discarded when a run starts over: refuse a file or a folder with anything else in it (a model, a
    user's data) rather than delete it."""
    if work.exists() and not (work.is_dir() and all(f.name in WORK_FILES or f.name.startswith(".")
                                                    for f in work.iterdir())):
        raise InputError(f"{work} exists and is not a distill run's work folder (only {', '.join(WORK_FILES)}); "
                         "it would be deleted: move it away or choose another out=")


def save(work: Path, model, optimizer, progress: Progress, run_key: str, parts: dict | None = None) -> None:
    save_checkpoint(work, model, optimizer, None, progress.to_state(), {"run_key": run_key, "run_parts": parts},
                    keep=1)


def differs(saved: dict | None, now: dict | None) -> str:
    """What a refused resume changed, in words: the settings that differ (``lr 0.001 -> 0.002``), else the
    teachers' soft labels, the dev texts or the training texts (``run_parts``: absent from older checkpoints)."""
    if not saved or not now:
        return "settings, teachers or texts"
    before, after = saved.get("settings") or {}, now.get("settings") or {}
    keys = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if keys:
        return "settings: " + ", ".join(f"{k} {before.get(k)!r} -> {after.get(k)!r}" for k in keys[:4])
    words = {"soft": "teachers' soft labels (another teacher, or one retrained)", "dev": "dev texts",
             "texts": "training or transfer texts"}
    return ", ".join(w for k, w in words.items() if saved.get(k) != now.get(k)) or "settings, teachers or texts"


def load(work: Path, model, optimizer, run_key: str, parts: dict | None = None) -> Progress | None:
    """The checkpointed progress, with ``model`` and ``optimizer`` restored; None when there is no checkpoint.
    A checkpoint of other settings (or other teacher probabilities or texts) is refused in one line naming them."""
    import torch
    from safetensors.torch import load_model

    ckpt = latest_checkpoint(work)
    if ckpt is None:
        return None
    try:
        meta = json.loads((ckpt / "meta.json").read_text())
        if meta.get("run_key") != run_key:
            raise ConfigError(f"{work} holds a distill run with other {differs(meta.get('run_parts'), parts)}; "
                              "pass resume=false to start over (it is discarded)")
        load_model(model, str(ckpt / "model.safetensors"))
        opt = torch.load(ckpt / "optimizer.pt", map_location="cpu", weights_only=True)
        state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=True)
    except (OSError, ValueError, RuntimeError, KeyError) as e:
        raise InputError(f"checkpoint {ckpt} is damaged ({str(e).splitlines()[0] if str(e) else type(e).__name__}); "
                         "pass resume=false to start over") from None
    optimizer.load_state_dict(opt["optimizer"])
    return Progress.from_state(state)
