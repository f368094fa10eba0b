"""Where a fine-tuning run is (``RunState``), and its checkpoints in ``OUT.work`` beside the output folder while it
trains (written with ``io.checkpoints``: a complete folder renamed into place, then ``latest.json``), so that a
killed run, rerun with the same command, continues from its last checkpoint with the same weights, optimizer
moments, learning-rate schedule, data position, best-so-far model and RNG streams: it ends with the weights the
uninterrupted run would have. A checkpoint of another run (other settings, rows, tokenizer or starting weights) is
refused in one line naming what changed. Distillation keeps its checkpoints the same way (``distill.checkpoint``).

    OUT.work/checkpoints/step-00000500/   model, optimizer + schedule, RunState, meta.json (the run's key)
    OUT.work/metrics.jsonl                the log so far (a resumed run keeps the rows up to its checkpoint)
    OUT.work/runs, OUT.work/wandb         report_to's files
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Callable, TypeVar

import numpy as np

from ..errors import ConfigError, InputError
from ..io.checkpoints import checkpoint_dirs, latest_checkpoint, rng_state, save_checkpoint, set_rng_state
from ..io.fileio import try_hold, write_text_atomic
from ..runtime import warn
from .report import Window

T = TypeVar("T")
OWN_FORM = ("best", "window", "stopped")  # RunState fields state.pt keeps in a form of their own (or not at all)
WORK_FILES = ("checkpoints", "metrics.jsonl", "runs", "wandb")  # what a run writes into OUT.work


@dataclass
class Best:
    """The best dev evaluation so far; its weights are a CPU copy, written once at the end."""

    macro_f1: float = -1.0
    step: int = 0
    state: dict | None = None
    logits: np.ndarray | None = None


@dataclass
class RunState:
    """Where the run is: what the loop, the evaluations, the checkpoints and eval.json share."""

    step: int = 0
    epoch: int = 0  # the epoch being trained
    batch: int = 0  # batches of that epoch done (its order is a function of seed and epoch)
    since_best: int = 0  # evaluations without a better dev macro-F1 (patience)
    stopped: str = "completed"  # completed | early_stopping | interrupted
    train_time: float = 0.0
    eval_time: float = 0.0
    examples_seen: int = 0
    best: Best = field(default_factory=Best)
    window: Window = field(default_factory=Window)  # the steps since the last train row (its losses on the device)

    def to_state(self, schedule) -> dict:
        """state.pt's dict: plain numbers and CPU tensors (read back with ``weights_only=True``), the lr schedule's
        position and every RNG stream (dropout draws from torch's)."""
        import torch

        state = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in OWN_FORM}
        b, w = self.best, self.window
        state["best"] = {"macro_f1": b.macro_f1, "step": b.step, "state": b.state,
                         "logits": None if b.logits is None else torch.from_numpy(b.logits)}
        state["window"] = {"losses": torch.stack(w.losses).float().cpu() if w.losses else torch.zeros(0),
                           "examples": w.examples, "seconds": w.seconds}  # so the next train row is the whole run's
        state["schedule"] = schedule.state_dict()
        state["rng"] = rng_state()
        return state

    @classmethod
    def from_state(cls, state: dict, schedule) -> "RunState":
        set_rng_state(state["rng"])
        schedule.load_state_dict(state["schedule"])
        b, w = state["best"], state["window"]
        best = Best(b["macro_f1"], b["step"], b["state"], None if b["logits"] is None else b["logits"].numpy())
        window = Window(list(w["losses"].unbind()), w["examples"], w["seconds"])
        return cls(**{f.name: state[f.name] for f in fields(cls) if f.name not in OWN_FORM}, best=best,
                   window=window)


# What a refused resume may name besides the settings (``run_parts``' digests)
WORDS = {"train": "training rows (texts or labels)", "dev": "dev rows (texts or labels)",
         "tokenizer": "tokenizer (another model=)",
         "weights": "starting weights (the model= folder holds other weights: retrained or exported again?)"}


def rows_digest(texts: list[str], y) -> str:
    """A digest of labelled rows: their texts and class indices, in order."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{len(texts)}|".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    h.update(np.asarray(y, dtype=np.int64).tobytes())
    return h.hexdigest()


def weights_digest(model) -> str:
    """A digest of ``model``'s weights as they are (a run's start: model= as loaded, its new head seeded): a model=
    folder retrained or exported again under the same path was resumed with the checkpoint of the old weights."""
    import torch

    h = hashlib.blake2b(digest_size=16)
    for name, value in model.state_dict().items():
        if torch.is_tensor(value):
            h.update(name.encode() + str(value.dtype).encode())
            h.update(value.detach().cpu().contiguous().view(torch.uint8).numpy().tobytes())
    return h.hexdigest()


def run_key(parts: dict) -> str:
    """What a checkpoint must match to be resumed: the digest of the run's parts (settings, rows, tokenizer)."""
    return hashlib.blake2b(json.dumps(parts, sort_keys=True, default=str).encode(), digest_size=16).hexdigest()


def rows_until(path: Path, step: int) -> list[dict]:
    """The metrics rows of ``path`` up to ``step`` (a resumed run's: what a killed run logged past its checkpoint
    goes, and so does a line the kill cut short), written back in place; the rows are returned."""
    kept = []
    for line in (path.read_text(encoding="utf-8").splitlines() if path.exists() else []):
        try:
            row = json.loads(line)
        except ValueError:
            continue
        if isinstance(row, dict) and isinstance(row.get("step"), int) and row["step"] <= step:
            kept.append(row)
    write_text_atomic(path, "".join(json.dumps(row) + "\n" for row in kept))
    return kept


def work_dir(out: str | Path) -> Path:
    """Checkpoints and the metrics log of a run writing ``out`` (beside it; removed when the run is done). Named from
    the absolute path: ``out=.`` or ``out=runs/..`` has no name of its own."""
    out = Path(os.path.abspath(out))
    return out.with_name(out.name + ".work") if out.name else out / ".work"


def check_work_dir(work: Path, what: str) -> None:
    """OUT.work is discarded when a run starts over: refuse a file or a folder with anything else in it (a model, a
    user's data) rather than delete it. ``what``: the stage, as in "not a distill run's work folder"."""
    if work.exists() and not (work.is_dir() and all(f.name in WORK_FILES or f.name.startswith(".")
                                                    for f in work.iterdir())):
        raise InputError(f"{work} exists and is not a {what} run's work folder (only {', '.join(WORK_FILES)}); "
                         "it would be deleted: move it away or choose another out=")


def hold_work(work: Path, out: Path) -> int | None:
    """OUT.work made (where it was not) and held (the kernel's ``flock``, gone with the process) for this run: a
    second run for the same out= would clear or overwrite the first one's checkpoints, so it stops with one line.
    Returns the descriptor to close when the run ends (None: no locks here, Windows or some network mounts)."""
    for _ in range(8):
        try:
            work.mkdir(parents=True, exist_ok=True)
            fd = os.open(work, os.O_RDONLY)
        except FileNotFoundError:  # removed by a run finishing between the two calls: again
            continue
        except OSError as e:
            raise InputError(f"cannot create {work} (the run's checkpoints): {e.strerror or e}") from None
        held = try_hold(fd)
        if held is None:
            os.close(fd)
            return None
        if not held:
            os.close(fd)
            raise InputError(f"{out} is being trained by another run (it holds {work}); wait for it to finish, or "
                             "give another out=")
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(work))
        except FileNotFoundError:
            same = False
        if same:
            return fd
        os.close(fd)  # the folder held was removed (its run finished) and another made: hold that one
    raise InputError(f"{out}: another run keeps replacing {work}; give another out=")


def release_work(work: Path, fd: int | None, done: bool) -> None:
    """The run's end: OUT.work removed when the run is ``done`` or holds no checkpoint to continue from (it failed
    before its first, on bad input say: ``hold_work`` made the folder), then let go."""
    if done or not checkpoint_dirs(work):
        shutil.rmtree(work, ignore_errors=True)
    if fd is not None:
        os.close(fd)  # (after the removal: no other run takes the folder half-removed)


def clear_work(work: Path) -> None:
    """A fresh start: what OUT.work holds (``check_work_dir``: only a run's own files) removed, the folder kept (or
    made: a recipe driven step by step, without ``hold_work``)."""
    work.mkdir(parents=True, exist_ok=True)
    for f in work.iterdir():
        if f.is_dir() and not f.is_symlink():
            shutil.rmtree(f)
        else:
            f.unlink()


def publish_work_files(work: Path, staging: Path) -> None:
    """What the run kept in OUT.work that the output folder keeps too: metrics.jsonl and report_to's files
    (TensorBoard's runs/, wandb/), copied into the folder being built."""
    shutil.copy(work / "metrics.jsonl", staging / "metrics.jsonl")
    for tracked in ("runs", "wandb"):
        if (work / tracked).is_dir():
            shutil.copytree(work / tracked, staging / tracked)


def save(work: Path, model, optimizer, state: dict, run_key: str, parts: dict | None = None, scaler=None) -> None:
    """One checkpoint (the previous one pruned once this one is in place)."""
    save_checkpoint(work, model, optimizer, scaler, state, {"run_key": run_key, "run_parts": parts}, keep=1)


def differs(saved: dict | None, now: dict | None, words: dict[str, str]) -> str:
    """What a refused resume changed, in words: the settings that differ (``lr 0.001 -> 0.002``), else the parts
    ``words`` names (``{"dev": "dev rows"}``) whose digests differ (``run_parts``: absent from older checkpoints)."""
    vague = "settings, " + ", ".join(words.values())
    if not saved or not now:
        return vague
    before, after = saved.get("settings") or {}, now.get("settings") or {}
    keys = [k for k in sorted(set(before) | set(after)) if before.get(k) != after.get(k)]
    if keys:
        return "settings: " + ", ".join(f"{k} {before.get(k)!r} -> {after.get(k)!r}" for k in keys[:4])
    return ", ".join(w for k, w in words.items() if saved.get(k) != now.get(k)) or vague


def load(work: Path, model, optimizer, run_key: str, parts: dict | None, words: dict[str, str], what: str,
         restore: Callable[[dict], T], scaler=None) -> T | None:
    """``restore(state)`` of the checkpointed loop state (``state.pt``'s dict: ``RunState.from_state``), with
    ``model``, ``optimizer`` and ``scaler`` restored; None when there is no checkpoint. A checkpoint of another run
    is refused in one line naming what differs (``differs``); a damaged one in one line saying how to start over."""
    import torch
    from safetensors.torch import load_model

    ckpt = find_checkpoint(work)
    if ckpt is None:
        return None
    damaged = f"checkpoint {ckpt} is damaged ({{}}); pass resume=false to start over"
    try:
        meta = json.loads((ckpt / "meta.json").read_text())
        saved_key, saved_parts = meta.get("run_key"), meta.get("run_parts")
    except (OSError, ValueError, AttributeError) as e:  # (AttributeError: JSON that is no object)
        raise InputError(damaged.format(_first_line(e))) from None
    if saved_key != run_key:
        raise ConfigError(f"{work} holds a {what} run with other {differs(saved_parts, parts, words)}; pass "
                          "resume=false to start over (it is discarded)")
    try:
        load_model(model, str(ckpt / "model.safetensors"))
        opt = torch.load(ckpt / "optimizer.pt", map_location="cpu", weights_only=True)
        state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=True)
        _load_optimizer(optimizer, opt["optimizer"])
        if scaler is not None and opt.get("scaler"):
            scaler.load_state_dict(opt["scaler"])
        return restore(state)
    except Exception as e:  # noqa: BLE001 - safetensors, torch.load and the state's own readers raise many types
        raise InputError(damaged.format(_first_line(e))) from None


def find_checkpoint(work: Path) -> Path | None:
    """The checkpoint to resume: latest.json's, or, where that is missing, damaged or names a folder that is gone,
    the newest ``step-*`` folder (each is renamed into place whole before latest.json names it): a run whose
    pointer was lost started over without a word and pruned the checkpoint it had."""
    try:
        ckpt = latest_checkpoint(work)
    except InputError:  # (its advice, resume=<a checkpoint dir>, is pretraining's)
        ckpt = None
    found = checkpoint_dirs(work)
    if ckpt is None and found:
        ckpt = found[-1]
        warn(f"note: {work / 'checkpoints' / 'latest.json'} is missing or damaged: resuming from the newest "
             f"checkpoint, {ckpt.name}")
    return ckpt


def _first_line(e: BaseException) -> str:
    return str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__


def _load_optimizer(optimizer, saved: dict) -> None:
    """The saved moments and learning rates into ``optimizer``, keeping how this run's optimizer steps (fused on a
    GPU, the default kernel on a CPU; CUDA graphs make the lr a device tensor and the update capturable, which the
    graph sets again once recorded): a run checkpointed on a GPU resumes on a CPU, and the other way round."""
    import torch

    fresh = [{k: v for k, v in g.items() if k != "params"} for g in optimizer.param_groups]
    optimizer.load_state_dict(saved)
    for group, kept in zip(optimizer.param_groups, fresh):
        lr = float(group["lr"])
        group.update(kept)
        group["lr"] = lr
        on_device = bool(kept.get("fused") or kept.get("capturable"))
        for p in group["params"]:
            s = optimizer.state.get(p, {})
            if torch.is_tensor(s.get("step")):  # fused and capturable steps count on the device, others on the host
                s["step"] = s["step"].to(p.device if on_device else "cpu", torch.float32)
