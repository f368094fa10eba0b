"""Pretraining's checkpoints: everything needed to resume a run bit-exactly (model, optimizer, loss scaler, every
RNG stream of every rank, the data position and the loop's counters), written with ``io.checkpoints`` (atomic:
out/checkpoints/step-00001000/, then latest.json), and read back with one-line errors for every way a checkpoint
can be damaged or not match the run. Also the run folder's policy that rests on them: what a run folder is
(``check_run_dir``) and when a fresh start may clear one (``start_over``).
"""
from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..config import to_dict
from ..errors import ConfigError, InputError
from ..io.checkpoints import (CKPT_FORMAT, checkpoint_dirs, latest_checkpoint, rng_state,  # noqa: F401 - re-exported
                              save_checkpoint, set_rng_state)
from ..io.output import check_out_dir
from ..runtime import warn
from .config import PretrainConfig


@dataclass
class LoopState:
    """Where the training loop is, besides the model, optimizer and RNG streams: what ``state.pt`` holds."""

    step: int = 0  # optimizer steps done
    data_pos: int = 0  # rows consumed so far, all ranks together (a position in ``RowOrder``'s stream)
    tokens: int = 0  # real (non-pad) tokens trained on, all ranks together
    elapsed: float = 0.0  # training seconds so far (data preparation not counted): the time budget's clock
    warm_end: float | None = None  # budget progress at which warm-up ended (None: still warming up)
    plateau_warned: bool = False  # the "learning?" warning is given once per run
    unigram: Any = None  # [V] long, target-token counts: the "always predict the most frequent" baseline
    window: dict = field(default_factory=dict)  # metric sums since the last metrics row (device tensors:
    # adding them up costs no host sync; ``report.metrics_row`` reads them every ``log_every`` steps)

    @classmethod
    def fresh(cls, vocab_size: int, device) -> LoopState:
        import torch

        return cls(unigram=torch.zeros(vocab_size, dtype=torch.long).to(device))

    def add_step(self, sums: dict, n_micro: int, targets, batch_tokens: int, batch_size: int, valid=None) -> None:
        """Count one optimizer step: ``electra.train_step``'s summed stats into the window, its targets (those
        ``valid`` marks) into the unigram counts, the batch into the data position and token count. Device work
        only: nothing here waits for the device."""
        import torch

        self.step += 1
        self.data_pos += batch_size
        self.tokens += batch_tokens
        w, device = self.window, self.unigram.device
        for k, v in sums.items():
            w[k] = w[k] + v.detach() if k in w else v.detach().clone()  # never a view of a CUDA-graph output
        w["n_micro"] = w.get("n_micro", torch.zeros((), device=device)) + n_micro
        w["n_steps"] = w.get("n_steps", torch.zeros((), device=device)) + 1
        # scatter_add, not bincount: CUDA's bincount reads the largest id back to the host first
        weights = torch.ones_like(targets) if valid is None else valid.long()
        self.unigram.scatter_add_(0, targets.flatten(), weights.flatten())

    def counts(self) -> dict:
        """This rank's own counts (CPU): the unigram counts and the window's sums are per rank (a metrics row
        sums them over ranks), so a checkpoint needs every rank's, not rank 0's alone."""
        return {"unigram": self.unigram.cpu(), "window": {k: v.detach().cpu() for k, v in self.window.items()}}

    def to_checkpoint(self, gathered: list) -> dict:
        """The ``state.pt`` dict (CPU tensors and numbers); ``gathered``: every rank's (``rng_state``, ``counts``).
        ``unigram`` and ``window`` hold the sums over ranks (what a resume on another number of ranks continues);
        ``rank_counts`` each rank's own (what one on as many ranks restores exactly)."""
        rng, counts = [g[0] for g in gathered], [g[1] for g in gathered]
        out = {"step": self.step, "data_pos": self.data_pos, "tokens": self.tokens, "elapsed": self.elapsed,
               "warm_end": self.warm_end, "plateau_warned": self.plateau_warned, "rng": rng,
               "unigram": sum(c["unigram"] for c in counts),
               "window": {k: sum(c["window"][k] for c in counts) for k in counts[0]["window"]}}
        return {**out, "rank_counts": counts} if len(counts) > 1 else out

    @classmethod
    def from_checkpoint(cls, saved: dict, device, rank: int = 0, world: int = 1) -> tuple[LoopState, list]:
        """(the loop state of ``rank`` of ``world`` on ``device``, every rank's saved RNG state) from a ``state.pt``
        dict. On as many ranks as saved it, each rank gets its own counts back; otherwise rank 0 gets the sums and
        the others zeros, so a metrics row still sums to the saved counts (every rank loading rank 0's counted them
        once per rank and dropped the other ranks')."""
        per_rank = saved.get("rank_counts")
        if per_rank is not None and len(per_rank) == world:
            unigram, window = per_rank[rank]["unigram"], per_rank[rank]["window"]
        else:
            unigram, window = saved["unigram"], saved["window"]
            if rank != 0:  # the same keys on every rank: a metrics row stacks them for one all_reduce
                unigram = unigram.new_zeros(unigram.shape)
                window = {k: v.new_zeros(v.shape) for k, v in window.items()}
        state = cls(step=saved["step"], data_pos=saved["data_pos"], tokens=saved["tokens"],
                    elapsed=saved["elapsed"], warm_end=saved["warm_end"], plateau_warned=saved["plateau_warned"],
                    unigram=unigram.to(device), window={k: v.to(device) for k, v in window.items()})
        return state, saved["rng"]


# What every state.pt holds (``LoopState.to_checkpoint``): read_checkpoint refuses one without them.
STATE_KEYS = {"step", "data_pos", "tokens", "elapsed", "warm_end", "plateau_warned", "unigram", "rng", "window"}


def _changed(old, new, key: str) -> str:
    """``key`` old -> new, a section by the sub-keys that differ (not the whole dict in one line)."""
    if isinstance(old, dict) and isinstance(new, dict):
        keys = list(new) + [k for k in old if k not in new]
        return ", ".join(_changed(old.get(k), new.get(k), f"{key}.{k}") for k in keys if old.get(k) != new.get(k))
    return f"{key} {old!r} -> {new!r}"


RUN_MARKERS = ("config.yaml", "checkpoints")  # what every pretraining run dir holds from its first moment


def check_run_dir(out: Path) -> None:
    """``out`` is new, empty, or a previous pretraining run: never another folder (out=., a model, a fine-tuned
    classifier), whose metrics.jsonl, README.md and config files a run would overwrite."""
    check_out_dir(out, RUN_MARKERS, "a pretraining run (no config.yaml or checkpoints/)")


# What a run writes, replaces or (overwrite=true) deletes in its out dir; anything else there is left alone.
RUN_WRITES = ("config.yaml", "metrics.jsonl", "summary.json", "curves.png", "checkpoints", "tokenizer",
              "tokenizer-request.json", "discriminator", "generator")


def check_corpus_outside_run(out: Path, corpus: list[str]) -> None:
    """No corpus file lies where the run writes in ``out``: overwrite=true deleted a corpus=out/metrics.jsonl before
    reading it (the old run's checkpoints with it), and the export replaced out/discriminator/ with its corpus inside,
    exit 0."""
    target = Path(out).resolve()
    for i, value in enumerate(corpus):
        try:
            if not str(value).strip() or not Path(value).exists():
                continue  # a hub dataset id, or a missing file: check_corpus says so
            path = Path(value).resolve()
        except OSError:  # a folder above it this user may not enter: check_corpus says so
            continue
        if target in path.parents and path.relative_to(target).parts[0] in RUN_WRITES:
            key = "corpus" if len(corpus) == 1 else f"corpus[{i}]"
            raise InputError(f"{key}={value} lies in out={out}'s {path.relative_to(target).parts[0]}, which the run "
                             "writes over (or deletes): the corpus would be lost; move it out of the run folder, or "
                             "choose another out=")


def start_over(out: Path, overwrite: bool, keep_tokenizer: bool) -> None:
    """Before a fresh run into ``out``: refused while it holds a run's checkpoints (any ``step-*`` folder, whatever
    latest.json says: with the pointer gone a fresh start appended to the old run's metrics and pruned its
    checkpoints) or a finished run's exports (``discriminator/``, ``summary.json``: checkpoints deleted to save
    space, the fresh run overwrote the encoder), unless ``overwrite``, which clears them, the metrics and (not
    ``keep_tokenizer``: a run from before the tokenizer's request was recorded) the tokenizer, whose settings are
    unknown."""
    if not check_start_over(out, overwrite):
        # a run killed before its first checkpoint: no weights stand behind its rows, and the fresh run appended
        # its own to them (steps 1, 2, 3, 1, 2, ...)
        (out / "metrics.jsonl").unlink(missing_ok=True)
        return
    shutil.rmtree(out / "checkpoints", ignore_errors=True)
    (out / "metrics.jsonl").unlink(missing_ok=True)
    if not keep_tokenizer:
        shutil.rmtree(out / "tokenizer", ignore_errors=True)


def check_start_over(out: Path, overwrite: bool) -> bool:
    """``start_over``'s refusal alone, nothing touched: whether ``out`` holds a run's weights (checkpoints or
    exports) that a fresh start would replace, refused unless ``overwrite``."""
    exported = [name for name in ("discriminator", "summary.json") if (out / name).exists()]
    if not checkpoint_dirs(out) and not exported:
        return False
    if not overwrite:
        if not checkpoint_dirs(out):
            raise ConfigError(f"{out} holds a finished run ({', '.join(exported)}) without its checkpoints: "
                              "overwrite=true to replace it, or another out=")
        raise ConfigError(f"{out} already holds a run's checkpoints: pass resume=true to continue it, "
                          "overwrite=true to start over, or another out=")
    return True


def resolve_resume(cfg: PretrainConfig, out: Path) -> Path | None:
    """The checkpoint dir to resume from (``resume``: true = out's latest, or a checkpoint/run dir), or None."""
    if cfg.resume is False or cfg.resume in ("", "false", "False"):
        return None
    if cfg.resume is True or cfg.resume in ("true", "True"):
        ckpt = latest_checkpoint(out)
        if ckpt is None:
            found = checkpoint_dirs(out)
            if found:  # the pointer is missing or names a folder that is gone: say which folder is there
                raise InputError(f"resume=true but {out / 'checkpoints' / 'latest.json'} is missing or points to no "
                                 f"folder; pass resume={found[-1]} (the newest there) to continue from it")
            raise InputError(f"resume=true but {out} has no checkpoint to resume from; drop resume to start fresh")
        return ckpt
    p = Path(cfg.resume)
    if (p / "meta.json").exists():
        return p
    if (p / "checkpoints" / "latest.json").exists():
        return latest_checkpoint(p)
    raise InputError(f"resume={p}: not a checkpoint dir (no meta.json) nor a run dir with checkpoints/latest.json")


def check_resume_request(ckpt: Path, cfg: PretrainConfig, out: Path) -> None:
    """What can be refused from the checkpoint's meta.json alone, before the run touches out/ or builds data: a
    budget the checkpoint is already past, and the source of its weights or tokenizer left out. (A damaged
    meta.json is left to ``read_checkpoint``'s message.)"""
    try:
        meta = json.loads((ckpt / "meta.json").read_text())
        step, saved = meta["step"], meta.get("config")
    except (OSError, ValueError, KeyError, TypeError):
        return
    saved = saved if isinstance(saved, dict) else {}
    # Without the init=, prepared= or tokenizer= it was trained with, the run trained a tokenizer of its own into
    # out/tokenizer (minutes on a real corpus), then was refused as "another tokenizer" or "the model shape can't
    # change" (init= sets the shape): the thing left out was never named.
    sources = ("init", "prepared", "tokenizer")
    if saved.get("init") and not cfg.init:
        raise ConfigError(f"checkpoint {ckpt} continues init={saved['init']} (its shape and tokenizer): pass "
                          f"init={saved['init']} again to resume it")
    if cfg.init and "init" in saved and not saved["init"]:
        raise ConfigError(f"checkpoint {ckpt} was not trained from init=: drop init={cfg.init} to resume it, or "
                          "start over with overwrite=true")
    given = [k for k in sources if saved.get(k)]
    if given and not any(getattr(cfg, k) for k in sources) and not (out / "tokenizer" / "tokenizer.json").exists():
        raise ConfigError(f"checkpoint {ckpt} was trained with {given[0]}={saved[given[0]]}: pass it again to resume "
                          "it (without it this run would train a tokenizer of its own)")
    if cfg.max_steps > 0 and isinstance(step, int) and step > cfg.max_steps:
        # the loop would stop at once and export the checkpoint's step-{step} weights as the max_steps run: "done"
        raise ConfigError(f"max_steps={cfg.max_steps} is below step {step}, where checkpoint {ckpt} already is: its "
                          f"weights are past that budget; pass max_steps={step} or more to continue it, resume=<an "
                          "earlier checkpoint dir>, or overwrite=true to start over")


# Keys a resume may change without a word: the budget, where and how often it writes, how it reports. Any other
# change (lr, batch_size, mask_prob, seed, ...) takes effect from the checkpoint's step on, and is said once.
RUN_KEYS = {"corpus", "prepared", "out", "tokenizer", "cache_dir", "num_workers", "max_steps", "max_minutes", "device",
            "threads", "log_every", "save_every", "save_every_minutes", "keep_checkpoints", "resume", "overwrite",
            "progress", "plots", "report_to", "ddp_timeout_minutes", "push_to_hub", "hub_private", "card_license",
            "card_datasets", "compile", "compile_mode", "compile_scope", "data_on_device", "fast_cpu_kernels",
            "plateau_check_tokens", "plateau_gen_margin", "plateau_auc", "text_column"}
# Keys a resume can't apply: the tokenizer and the weights are the checkpoint's. A change is said to have no effect.
KEPT_ON_RESUME = {"vocab_size", "tokenizer_model", "presplit", "init", "init_generator"}


def read_checkpoint(ckpt: Path, model, optimizer, scaler, vocab_size: int, tok_fp: str, cfg: PretrainConfig,
                    data_fp: str | None = None, main: bool = True) -> dict:
    """Load everything back into the given objects; returns the saved loop state dict (``LoopState.
    from_checkpoint`` reads it). Every failure is one line naming the checkpoint and what to do. ``data_fp``:
    the packed rows' ``data.data_fingerprint``, which must be the checkpoint's (its data position means rows)."""
    import torch
    from safetensors.torch import load_model

    def damaged(what) -> InputError:
        return InputError(f"checkpoint {ckpt} is damaged ({what}); resume from an earlier one "
                          f"(resume=<dir under {ckpt.parent}>) or start over with overwrite=true")

    try:
        meta = json.loads((ckpt / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise damaged(f"meta.json: {e}") from None
    if not isinstance(meta, dict) or not isinstance(meta.get("files", {}), dict):
        raise damaged("meta.json is not a checkpoint's record")
    for name, size in meta.get("files", {}).items():
        f = ckpt / name
        if not f.exists() or f.stat().st_size != size:
            have = f.stat().st_size if f.exists() else "missing"
            raise damaged(f"{name} is {have} bytes, expected {size}: truncated")
    if meta.get("vocab_size") != vocab_size or meta.get("tokenizer_fingerprint") != tok_fp:
        raise InputError(f"checkpoint {ckpt} was trained with another tokenizer (vocab {meta.get('vocab_size')}, "
                         f"fingerprint {meta.get('tokenizer_fingerprint')}) than this run's (vocab {vocab_size}, "
                         f"fingerprint {tok_fp}); pass the run's own tokenizer= or start over")
    saved, now = meta.get("config", {}), to_dict(cfg)
    shape = ("objective", "model", "generator", "seq_len")
    for key in shape:  # before the data: another seq_len packs other rows, and the shape is what changed
        if key in saved and saved[key] != now[key]:
            if saved.get("init") and saved.get("init") != now.get("init"):  # init= sets the shape: name it, not sizes
                raise ConfigError(f"checkpoint {ckpt} continues init={saved['init']}; this run gives "
                                  f"init={now.get('init')}, a model of another shape: pass init={saved['init']} "
                                  "again to resume it")
            raise ConfigError(f"checkpoint {ckpt} was trained with {_changed(saved[key], now[key], key)}; a resume "
                              "keeps the checkpoint's model (shape, dropout, objective) and sequence length: give "
                              "its values again, or start over with overwrite=true")
    if data_fp and meta.get("data_fingerprint", data_fp) != data_fp:  # absent: a checkpoint from before it was kept
        raise InputError(f"checkpoint {ckpt} was trained on other data than this run's (the corpus or prepared "
                         "folder changed since): its data position would land on other rows; resume with the data "
                         "it was trained on, or start over with overwrite=true")
    differ = [k for k in now if k in saved and saved[k] != now[k] and k not in RUN_KEYS and k not in shape]
    changed = [_changed(saved[k], now[k], k) for k in differ if k not in KEPT_ON_RESUME]
    kept = [_changed(saved[k], now[k], k) for k in differ if k in KEPT_ON_RESUME]
    if main and changed:
        warn(f"note: resumed with {', '.join(changed)}: in effect from step {meta.get('step', '?')} on")
    if main and kept:
        warn(f"note: {', '.join(kept)} has no effect on a resume: the tokenizer and weights are the checkpoint's")
    budget = [_changed(saved[k], now[k], k) for k in ("max_steps", "max_minutes") if k in saved and saved[k] != now[k]]
    if main and budget and cfg.schedule != "constant":  # a longer budget put the lr back up without a word
        warn(f"note: resumed with {', '.join(budget)}: the learning-rate schedule is a function of the budget, so "
             f"from step {meta.get('step', '?')} on the lr is where the new budget has it (a jump from the old "
             "schedule's, not its continuation)")
    try:
        missing, unexpected = load_model(model, str(ckpt / "model.safetensors"), strict=False)
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for a bad header/size
        raise damaged(f"model.safetensors: {str(e).splitlines()[0]}") from None
    if unexpected or missing:
        raise damaged(f"model.safetensors does not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    try:
        opt = torch.load(ckpt / "optimizer.pt", map_location="cpu", weights_only=True)
        state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - truncated zip, unpickling error
        raise damaged(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    # Files of the right size that load but hold something else (another run's optimizer.pt copied in, a state.pt
    # without its RNG streams) raised torch's ValueError or a KeyError from deep in the resume, not this line.
    if not isinstance(opt, dict) or "optimizer" not in opt:
        raise damaged("optimizer.pt holds no optimizer state")
    if not isinstance(state, dict) or not STATE_KEYS <= state.keys():
        raise damaged("state.pt holds no loop state (step, data position, RNG streams)")
    try:
        optimizer.load_state_dict(opt["optimizer"])
        if scaler is not None and opt.get("scaler"):
            scaler.load_state_dict(opt["scaler"])
    except (ValueError, KeyError, TypeError, RuntimeError) as e:
        raise damaged(f"optimizer.pt does not match the model: {str(e).splitlines()[0] if str(e) else e!r}") from None
    return state
