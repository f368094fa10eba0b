"""A training run's checkpoints on disk, for every stage that resumes (pretraining, fine-tuning, distillation):
``DIR/checkpoints/step-00001000/{model.safetensors, optimizer.pt, state.pt, meta.json}``, published by renaming a
finished temp dir, then ``DIR/checkpoints/latest.json`` (atomic) points at it. A crash, a kill or a full disk at any
moment leaves the previous checkpoint and pointer intact. Tensors: safetensors; optimizer, RNG and loop state:
torch.save of plain tensors and numbers, read back with ``weights_only=True`` (no pickled code). What a stage keeps
in ``state.pt`` and ``meta.json``, and when it may resume, is the stage's own (``pretrain.checkpoint``,
``finetune.checkpoint``)."""
from __future__ import annotations

import errno
import json
import random
import shutil
from pathlib import Path

import numpy as np

from ..errors import InputError, KitError
from .fileio import atomic_path, staged_dir, write_json_atomic

CKPT_FORMAT = 1


def rng_state(mask_rng=None) -> dict:
    """Every random stream this process draws from (python, numpy, torch CPU/CUDA, and a stage's own generator:
    pretraining's masking one), as plain tensors and numbers (loadable with ``weights_only=True``)."""
    import torch

    version, mt, gauss = random.getstate()
    np_state = np.random.get_state()
    state = {"python": [version, list(mt), gauss], "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
             "numpy_rest": [np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])],
             "torch": torch.get_rng_state()}
    if mask_rng is not None:
        state["mask"] = mask_rng.get_state()
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict, mask_rng=None) -> None:
    """Restore what ``rng_state`` saved."""
    import torch

    version, mt, gauss = state["python"]
    random.setstate((version, tuple(mt), gauss))
    name, pos, has_gauss, cached = state["numpy_rest"]
    np.random.set_state((name, state["numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    if mask_rng is not None:
        mask_rng.set_state(state["mask"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def save_checkpoint(out: Path, model, optimizer, scaler, state: dict, meta: dict, keep: int) -> Path:
    """Write a complete checkpoint dir, then point ``latest.json`` at it; prune older ones beyond ``keep``.
    ``state``: the stage's loop state (CPU tensors and numbers, with ``step``). An OSError (disk full,
    permissions) removes the partial dir and raises a KitError: the previous checkpoint and pointer are untouched."""
    import torch
    from safetensors import SafetensorError
    from safetensors.torch import save_model

    root = out / "checkpoints"
    name = f"step-{state['step']:08d}"
    # a staging folder a killed process left (SIGKILL mid-save: a model's size each): only this process writes here
    for stale in root.glob(".step-*.partial-*"):
        shutil.rmtree(stale, ignore_errors=True)
    try:
        with staged_dir(root / name) as tmp:
            with atomic_path(tmp / "model.safetensors") as p:
                save_model(model, str(p))  # shared tensors (embeddings, tied LM head) stored once
            with atomic_path(tmp / "optimizer.pt") as p:
                torch.save({"optimizer": optimizer.state_dict(),
                            "scaler": scaler.state_dict() if scaler is not None else None}, p)
            with atomic_path(tmp / "state.pt") as p:
                torch.save(state, p)
            files = {f.name: f.stat().st_size for f in tmp.iterdir()}
            write_json_atomic(tmp / "meta.json", {**meta, "step": state["step"], "files": files,
                                                  "format": CKPT_FORMAT})
        write_json_atomic(root / "latest.json", {"checkpoint": name, "step": state["step"]})
    except (OSError, RuntimeError, SafetensorError) as e:  # a full disk is each writer's own error: torch.save's
        # RuntimeError ("unexpected pos"), safetensors' error, or an OSError
        prev = latest_checkpoint(out)
        kept = f"the previous checkpoint {prev} is intact" if prev else "no earlier checkpoint exists"
        denied = isinstance(e, OSError) and e.errno in (errno.EACCES, errno.EPERM, errno.EROFS)
        fix = f"make {root} writable" if denied else "free disk space"
        raise KitError(f"could not write the step-{state['step']} checkpoint in {root} ({_reason(e)}); {kept}; "
                       f"{fix}, then rerun with resume=true") from None
    olds = sorted(p for p in root.glob("step-*") if p.is_dir() and p.name != name)
    for old in olds[:max(0, len(olds) - max(keep, 1) + 1)]:
        shutil.rmtree(old, ignore_errors=True)
    return root / name


def _reason(e: BaseException) -> str:
    text = getattr(e, "strerror", None) or str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


def latest_checkpoint(out: Path) -> Path | None:
    """The checkpoint ``out/checkpoints/latest.json`` points at, or None when there is none."""
    pointer = out / "checkpoints" / "latest.json"
    if not pointer.exists():
        return None
    try:
        name = json.loads(pointer.read_text())["checkpoint"]
    except (ValueError, KeyError, TypeError) as e:  # TypeError: valid JSON but not {"checkpoint": ...}
        raise InputError(f"{pointer} is damaged ({e}); pass resume=<a checkpoint dir> in {pointer.parent}") from None
    if not isinstance(name, str) or not name:
        raise InputError(f"{pointer} is damaged (checkpoint {name!r} is not a folder name); pass resume=<a "
                         f"checkpoint dir> in {pointer.parent}")
    path = out / "checkpoints" / name
    return path if path.is_dir() else None


def checkpoint_dirs(out: Path) -> list[Path]:
    """The published ``step-*`` checkpoint folders in ``out/checkpoints``, oldest first, whatever latest.json says
    (a kill between publishing the first one and writing the pointer, or a pointed-at folder deleted since)."""
    root = out / "checkpoints"
    return sorted(p for p in root.glob("step-*") if p.is_dir()) if root.is_dir() else []
