"""``--nproc N``: a command's N ranks on this machine, started by torch's own launcher as ``torchrun --standalone
--nproc-per-node=N -m koelectra_kit COMMAND ...`` starts them, with the toolkit's error contract kept.

Under plain torchrun every rank prints the same ``error:`` line, then torchrun adds a traceback of its own (its
``ChildFailedError`` report) and exits 1. Here the command checks what it can before any rank starts (a bad option:
one line, exit 2, nothing started), rank 0 writes to the terminal and the other ranks to log files, and a failed job
ends in one line: rank 0's own ``error:`` line, or the failing rank's copied from its log (exit 2), or which rank
ended how and where its output was kept (exit 1). Ctrl-C ends every rank, as under torchrun, and exits 130.
"""
from __future__ import annotations

import argparse
import os
import shutil
import signal
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path

from ..errors import ConfigError

ALL_STREAMS = 3  # torch's Std.ALL: a rank's stdout and stderr to its log file


def nproc_arg(text: str) -> str | int:
    """argparse's type for ``--nproc``: ``auto`` or a whole number of at least 1."""
    if text.strip().lower() == "auto":
        return "auto"
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a number of processes (2, 4, ...) or auto") from None
    if n < 1:
        raise argparse.ArgumentTypeError(f"{n}: at least 1 process")
    return n


def resolve_nproc(value: str | int, device_name: str) -> int:
    """How many ranks ``--nproc`` asks for on ``device_name`` (a config's ``device``), or one line saying why not:
    ``auto`` is one per visible GPU; on a GPU each rank takes one of its own (more ranks than GPUs would share one and
    fail in NCCL), so a pinned ``cuda:K`` or too few GPUs is refused; CPU ranks get a core each at least."""
    import torch

    from ..runtime import resolve_device, world_size

    if world_size() > 1:
        raise ConfigError(f"--nproc starts its own ranks, and this process is already one of {world_size()} "
                          "(torchrun's WORLD_SIZE): drop --nproc, or run without torchrun")
    device = resolve_device(device_name)
    gpus = torch.cuda.device_count() if device.type == "cuda" else 0
    if value == "auto":
        if not gpus:
            raise ConfigError("--nproc auto starts one rank per GPU, and this run is on the CPU (device="
                              f"{device_name}); give a number of CPU ranks (--nproc 2) or leave --nproc out")
        value = gpus
    n = int(value)
    if n == 1 or device.type != "cuda":
        cores = os.cpu_count() or 1
        if n > cores:
            raise ConfigError(f"--nproc {n}: this machine has {cores} cores and each CPU rank needs one at least; "
                              f"give at most {cores} (on a CPU one process already uses every core)")
        return n
    if device.index is not None:
        raise ConfigError(f"device={device_name} puts all {n} ranks on one GPU; use device=cuda (rank R takes GPU R; "
                          "CUDA_VISIBLE_DEVICES chooses which GPUs)")
    if n > gpus:
        raise ConfigError(f"--nproc {n}: this machine shows {gpus} GPU(s) (CUDA_VISIBLE_DEVICES) and each rank takes "
                          f"one; give at most {gpus}, or --nproc auto")
    return n


def launch(argv: list[str], nproc: int, config=None) -> int:
    """``koelectra-kit ARGV`` as ``nproc`` ranks of one job on this machine; the exit status the job earned.
    ``config``: a resolved config (a dataclass) the ranks read as ``--config`` (the one the command checked)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    logs = Path(tempfile.mkdtemp(prefix="koelectra-ranks-"))
    keep = False
    if config is not None:
        from ..config import dump_yaml

        (logs / "config.yaml").write_text(dump_yaml(config), encoding="utf-8")
        argv = [*argv, "--config", str(logs / "config.yaml")]
    redirects = ",".join(f"{k}:{ALL_STREAMS}" for k in range(1, nproc))
    args = get_args_parser().parse_args(
        ["--standalone", f"--nproc-per-node={nproc}", "--max-restarts=0", f"--log-dir={logs}",
         *([f"--redirects={redirects}"] if redirects else []), "--module", "koelectra_kit", *argv])
    try:
        with _threads_per_rank(nproc), _quiet_launcher():
            run(args)
        return 0
    except ChildFailedError as e:
        code, keep = _one_line_for(e, nproc, logs)
        return code
    except SignalException as e:
        if e.sigval != signal.SIGINT:  # Ctrl-C reached the ranks too, and rank 0 said so; SIGTERM stops them quietly
            print(f"interrupted ({e.sigval.name}): every rank was stopped; outputs already written are complete "
                  "(pretrain: rerun with resume=true to continue from the last checkpoint)", file=sys.stderr)
        return 130
    finally:
        if not keep:
            shutil.rmtree(logs, ignore_errors=True)


def _one_line_for(e, nproc: int, logs: Path) -> tuple[int, bool]:
    """(exit status, keep the logs) for a failed job, the one line said. Rank 0's ``error:`` line is on the terminal
    already; another rank's comes from its log; a rank that ended without one is named with its log, kept."""
    failures = e.failures  # global rank -> ProcessFailure (exitcode, or minus the signal's number)
    if failures.get(0) is not None and failures[0].exitcode in (2, 130):
        return failures[0].exitcode, False  # rank 0 said why (an error: line, or interrupted)
    rank, failure = e.get_first_failure()
    log = next(iter(sorted(logs.glob(f"*/attempt_*/{failure.local_rank}/stderr.log"))), None)
    said = _error_line(log) if rank != 0 and log is not None else None
    if said is not None and failure.exitcode == 2:
        print(said, file=sys.stderr)
        return 2, False
    if failure.exitcode < 0:
        how = f"was killed by {failure.signal_name()}" + (" (out of memory?)" if failure.exitcode == -9 else "")
    else:
        how = f"ended with exit code {failure.exitcode}"
    where = "its output is above" if rank == 0 else (f"its output: {log}" if log is not None else "it left no output")
    print(f"error: rank {rank} of {nproc} {how}; the other ranks were stopped; {where}", file=sys.stderr)
    return 1, rank != 0 and log is not None


def _error_line(log: Path) -> str | None:
    """The last ``error:`` line a rank wrote to its log, or None."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").splitlines()
    except OSError:
        return None
    return next((line for line in reversed(lines) if line.startswith("error: ")), None)


@contextmanager
def _threads_per_rank(nproc: int):
    """OMP_NUM_THREADS for the ranks: the cores shared out (torchrun sets 1 and warns), unless the user set it."""
    given = os.environ.get("OMP_NUM_THREADS")
    if given is None:
        os.environ["OMP_NUM_THREADS"] = str(max(1, (os.cpu_count() or 1) // nproc))
    try:
        yield
    finally:
        if given is None:
            os.environ.pop("OMP_NUM_THREADS", None)


@contextmanager
def _quiet_launcher():
    """torch's launcher logs each failed rank, the signal it forwards and its rendezvous at WARNING/ERROR, each
    module's logger with a level of its own: the one line the launch ends with says what matters."""
    import logging

    names = [n for n in list(logging.root.manager.loggerDict) if n.startswith("torch.distributed")]
    loggers = [logging.getLogger(n) for n in names]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.CRITICAL)
    try:
        yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)
