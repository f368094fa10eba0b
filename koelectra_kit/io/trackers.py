"""The metrics rows a run writes to metrics.jsonl, sent as scalars to external trackers while it runs: TensorBoard
and Weights & Biases, chosen with ``report_to`` as transformers' ``TrainingArguments.report_to`` spells it (none,
all, tensorboard, wandb, or a list). metrics.jsonl stays the record (curves.png, resume and the tests read it); a
tracker is a second view of the same rows, for watching a long run the usual way.

    names = trackers_to_open(cfg.report_to)        # at setup: an unknown name or a missing package -> ConfigError
    with Trackers(names, out, to_dict(cfg), name="small", start_step=0) as trackers:
        trackers.log(row, "pretrain")              # row's numbers -> pretrain/loss, pretrain/gen_acc ... at row["step"]

Each tracker's package is an optional extra (``pip install "koelectra-kit[tensorboard]"``), imported only by a run
that names it.
"""
from __future__ import annotations

import contextlib
import importlib.util
import os
from pathlib import Path

from ..errors import ConfigError
from ..runtime import log, warn

# report_to name -> the package it imports, which is also the name of the pip extra that installs it (pyproject.toml)
TRACKERS = {"tensorboard": "tensorboard", "wandb": "wandb"}
NONE, ALL = "none", "all"
WANDB_PROJECT = "koelectra-kit"  # when $WANDB_PROJECT is not set (Trainer's default is "huggingface")
WANDB_LOCAL_MODES = ("offline", "disabled", "dryrun")  # $WANDB_MODE values that need no login


def report_to_names(value: str | list[str], key: str = "report_to") -> list[str]:
    """The trackers ``value`` names, checked without importing anything (a config's ``validate``): ``none`` -> [],
    ``all`` stays ``all``; duplicates dropped."""
    names = [value] if isinstance(value, str) else list(value)
    valid = [NONE, ALL, *TRACKERS]
    for name in names:
        if name not in valid:
            raise ConfigError(f"{key}: unknown tracker {name!r}; use one of {', '.join(valid)}, or a list: "
                              f"{key}=[tensorboard,wandb]")
    if NONE in names and len(set(names)) > 1:
        raise ConfigError(f"{key}: 'none' cannot be combined with other trackers, got {names}")
    return [n for n in dict.fromkeys(names) if n != NONE]


def trackers_to_open(value: str | list[str], key: str = "report_to") -> list[str]:
    """The trackers a run opens: ``all`` is every one whose package is installed; a named one that is not installed
    is a ConfigError naming the extra to install, and wandb must be logged in (or ``WANDB_MODE=offline``). Called at
    setup, before any work: these fail in a second, not after the data is prepared."""
    names = report_to_names(value, key)
    if ALL in names:
        names = [n for n in TRACKERS if n in names or _installed(n)]
        if not names:
            warn(f"note: {key}=all, but neither tracker is installed: nothing is reported beside metrics.jsonl "
                 "(pip install \"koelectra-kit[tensorboard]\")")
    for name in names:
        if not _installed(name):
            raise ConfigError(f"{key}={name} needs the {TRACKERS[name]} package: "
                              f"pip install \"koelectra-kit[{name}]\"")
    if "wandb" in names and os.environ.get("WANDB_MODE", "").lower() not in WANDB_LOCAL_MODES:
        try:
            _check_wandb_login(key)
        except ConfigError as e:
            if "wandb" in report_to_names(value, key):  # named: the user asked for it
                raise
            names.remove("wandb")  # only installed (all): reported to the others, with a note
            warn(f"note: {key}=all leaves wandb out: {str(e).split(': ', 1)[-1]}")
    return names


def _installed(name: str) -> bool:
    return importlib.util.find_spec(TRACKERS[name]) is not None


def _check_wandb_login(key: str) -> None:
    """Found credentials, or the usual prompt on a terminal; elsewhere a one-line error (wandb would fail the same way
    at the first step, after the data is prepared)."""
    import wandb

    try:
        wandb.login(verify=False)  # finds the key (or prompts); the server checks it at wandb.init
    except Exception as e:  # wandb raises its own UsageError / AuthenticationError
        raise ConfigError(f"{key}=wandb: {str(e).strip().splitlines()[0].rstrip('.')}; or set WANDB_MODE=offline to "
                          f"keep the run on this machine (`wandb sync` later), or {key}=tensorboard") from None


def scalars(row: dict, prefix: str) -> dict[str, int | float]:
    """``row``'s numbers as ``prefix/field`` (``loss`` -> ``pretrain/loss``); ``step`` is the x axis, not a scalar;
    None, text and true/false fields are left out."""
    return {f"{prefix}/{k}": v for k, v in row.items()
            if k != "step" and isinstance(v, (int, float)) and not isinstance(v, bool)}


class TensorBoard:
    """Event files in FOLDER/runs, where transformers' Trainer writes them too (``output_dir/runs``). A resumed run
    adds to the same folder: ``purge_step`` makes TensorBoard drop the events after the step the run resumed from
    (rows the stopped run logged past its last checkpoint, logged again now), as metrics.jsonl drops those rows."""

    def __init__(self, folder: Path, config: dict, name: str | None, start_step: int):
        from torch.utils.tensorboard import SummaryWriter

        logdir = folder / "runs"
        self.writer = SummaryWriter(str(logdir), purge_step=start_step + 1)
        log(f"tensorboard: event files in {logdir} (watch: tensorboard --logdir {logdir})")

    def log(self, values: dict, step: int) -> None:
        for tag, value in values.items():
            self.writer.add_scalar(tag, value, global_step=step)
        self.writer.flush()  # a row every log_every steps: shown at once, and kept if the run is killed

    def close(self, failed: bool) -> None:
        self.writer.close()


class WandB:
    """One wandb run: project ``$WANDB_PROJECT`` or koelectra-kit, its files in FOLDER/wandb, the resolved config as
    its config. A resumed run is a new wandb run (set ``WANDB_RUN_ID`` and ``WANDB_RESUME=allow`` to continue one)."""

    def __init__(self, folder: Path, config: dict, name: str | None, start_step: int):
        import wandb

        try:
            self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", WANDB_PROJECT), dir=str(folder),
                                  config=config, name=os.environ.get("WANDB_NAME") or name)
        except Exception as e:  # no login, no network in online mode: one line, as every setup error
            raise ConfigError(f"report_to=wandb: wandb could not start a run: {str(e).strip().splitlines()[0]} "
                              "(WANDB_MODE=offline keeps it on this machine)") from None

    def log(self, values: dict, step: int) -> None:
        self.run.log(values, step=step)

    def close(self, failed: bool) -> None:
        self.run.finish(exit_code=1 if failed else 0)


OPENERS = {"tensorboard": TensorBoard, "wandb": WandB}


class Trackers:
    """The open trackers of one run (none named: every call is a no-op and nothing is imported). A context manager:
    closed however the run ends, a failed run's wandb run marked failed. ``folder``: where the files go (a run's
    out/; fine-tuning's staging folder, moved into out/ at the end); ``name``: the run's name in wandb."""

    def __init__(self, names: list[str], folder: str | Path, config: dict, name: str | None = None,
                 start_step: int = 0):
        self.open: list = []
        try:
            for tracker in names:
                self.open.append(OPENERS[tracker](Path(folder), config, name, start_step))
        except BaseException:
            self.close(failed=True)
            raise

    def log(self, row: dict, prefix: str) -> None:
        """One metrics row, at its step, to every open tracker."""
        if self.open:
            values = scalars(row, prefix)
            for tracker in self.open:
                tracker.log(values, int(row["step"]))

    def close(self, failed: bool = False) -> None:
        """Every open tracker closed (each one, even when another's close fails); a second call does nothing."""
        opened, self.open = self.open, []
        with contextlib.ExitStack() as stack:
            for tracker in opened:
                stack.callback(tracker.close, failed)

    def __enter__(self) -> Trackers:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(failed=exc_type is not None)
