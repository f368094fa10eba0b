"""``--nproc N``: a command's N ranks on this machine, started by torch's own launcher as ``torchrun --standalone
--nproc-per-node=N -m koelectra_kit COMMAND ...`` starts them, with the toolkit's error contract kept.

Under plain torchrun every rank prints the same ``error:`` line, then torchrun adds a traceback of its own (its
``ChildFailedError`` report) and exits 1. Here the command checks what it can before any rank starts (a bad option:
one line, exit 2, nothing started), rank 0 writes to the terminal and the other ranks to log files, and a failed job
ends in one line: rank 0's own ``error:`` line, or the line of the rank that failed first (exit 2), or which rank
ended how and where the logs were kept (exit 1). Ctrl-C or SIGTERM reaches every rank, as under torchrun (pretrain's
ranks then end a step together, checkpoint and export), and exits 130; the second one stops them at once.
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
ERRORS_ENV = "KOELECTRA_RANK_ERRORS"  # the folder where each rank started here leaves its error: line
LAUNCHER_ENV = "KOELECTRA_LAUNCHER_PID"  # the process that started the ranks (they end if it goes)
SIGNALS_ENV = "TORCHELASTIC_SIGNALS_TO_HANDLE"
AGENT_SIGNALS = ("SIGHUP", "SIGQUIT")  # the signals torch's agent handles (and passes on); SIGINT/SIGTERM: _Stops
STOP_GRACE_S = 300  # a stopped rank's time to end its step, checkpoint and export before torch's agent kills it


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


def resolve_nproc(value: str | int, device_name: str, gpu_each: bool = True) -> int:
    """How many ranks ``--nproc`` asks for on ``device_name`` (a config's ``device``), or one line saying why not:
    ``auto`` is one per visible GPU; CPU ranks get a core each at least. ``gpu_each``: each rank needs a GPU of its
    own (pretrain's DDP: two NCCL ranks on one GPU fail), so a pinned ``cuda:K`` or fewer GPUs than ranks is refused;
    label's ranks share GPUs in turn (rank R takes GPU R mod the count) and only meet on the host."""
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
    cores = os.cpu_count() or 1
    if n > cores:
        raise ConfigError(f"--nproc {n}: this machine has {cores} cores and each rank needs one at least; give at most "
                          f"{cores}" + ("" if gpus else " (on a CPU one process already uses every core)"))
    if n == 1 or not gpus or not gpu_each:
        return n
    if device.index is not None:
        raise ConfigError(f"device={device_name} puts all {n} ranks on one GPU; use device=cuda (rank R takes GPU R; "
                          "CUDA_VISIBLE_DEVICES chooses which GPUs)")
    if n > gpus:
        raise ConfigError(f"--nproc {n}: this machine shows {gpus} GPU(s) (CUDA_VISIBLE_DEVICES) and each rank takes "
                          f"one; give at most {gpus}, or --nproc auto")
    return n


def launch(argv: list[str], nproc: int, config=None, resume: str = "rerun the same command to continue",
           grace_s: int | None = None) -> int:
    """``koelectra-kit ARGV`` as ``nproc`` ranks of one job on this machine; the exit status the job earned.
    ``config``: a resolved config (a dataclass) the ranks read as ``--config`` (the one the command checked).
    ``resume``: how to go on after the job was stopped (said when a signal ended it). ``grace_s``: how long the
    ranks get after Ctrl-C before torch's agent kills them (pretrain's end a step, checkpoint and export; torch's
    default, 30 s, otherwise)."""
    from torch.distributed.elastic.multiprocessing.api import SignalException
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError
    from torch.distributed.run import get_args_parser, run

    logs = Path(tempfile.mkdtemp(prefix="koelectra-ranks-"))
    keep, stops = False, _Stops()
    with _own_signals(stops):
        try:
            if config is not None:
                from ..config import dump_yaml

                (logs / "config.yaml").write_text(dump_yaml(config), encoding="utf-8")
                argv = [*argv, "--config", str(logs / "config.yaml")]
            redirects = ",".join(f"{k}:{ALL_STREAMS}" for k in range(1, nproc))
            parser = get_args_parser()
            args = parser.parse_args(
                ["--standalone", f"--nproc-per-node={nproc}", "--max-restarts=0", f"--log-dir={logs}",
                 *([f"--redirects={redirects}"] if redirects else []), *_signal_options(parser, grace_s),
                 "--module", "koelectra_kit", *argv])
            try:
                with _rank_env(nproc, logs), _quiet_launcher():
                    run(args)
            finally:
                stops.closing = True  # a signal while this says how the job ended is counted, not raised
            return 0
        except ChildFailedError as e:
            code, keep = _one_line_for(e, nproc, logs)
            return code
        except SignalException as e:
            got = stops.got or [e.sigval.name]
            if len(got) > 1:
                print(f"interrupted again ({got[1]}): every rank was stopped at once; outputs already written are "
                      f"complete; {resume}", file=sys.stderr)
            elif not (logs / "rank-0.interrupted").exists():  # else rank 0 said what it did and how to go on
                print(f"interrupted ({got[0]}): every rank was stopped; outputs already written are complete; "
                      f"{resume}", file=sys.stderr)
            return 130
        finally:
            if not keep:
                shutil.rmtree(logs, ignore_errors=True)


def as_launched_rank() -> None:
    """In a rank ``launch`` started, before its command runs (elsewhere: nothing). Ctrl-C gets its default meaning:
    the launcher passes a stop on as SIGINT, and a launcher started in the background (SIGINT ignored there, and
    still ignored by it) hands its ranks SIGINT ignored too. And the rank ends if its launcher goes (a signal caught
    torch's agent while it started the ranks, before it could stop them, or the launcher was killed outright): a
    rank without it would train on alone, holding its GPU."""
    if not os.environ.get(ERRORS_ENV):
        return
    import threading
    import time

    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)  # torch's agent ends a failed job's ranks with it: at once
    parent = os.getppid()
    try:
        launcher = int(os.environ.get(LAUNCHER_ENV, ""))
    except ValueError:
        launcher = parent

    def gone() -> bool:  # the parent changed, or the launcher is no more (also when it went before this rank began)
        if os.getppid() != parent:
            return True
        try:
            os.kill(launcher, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # a process of another user's: there, so not gone
        return False

    def watch():
        while not gone():
            time.sleep(1.0)
        os.kill(os.getpid(), signal.SIGTERM)

    threading.Thread(target=watch, name="koelectra-launcher-watch", daemon=True).start()


def note_error(line: str) -> None:
    """In a rank ``launch`` started: keep the ``error:`` line this rank prints where the launching process finds it
    (``KOELECTRA_RANK_ERRORS``), so that the job ends in one line whichever rank failed first. Elsewhere: nothing."""
    _note("error", line)


def note_interrupted() -> None:
    """In a rank ``launch`` started: this rank was stopped by a signal and said so (what it kept, how to go on), so
    the launcher adds no line of its own. Elsewhere: nothing."""
    _note("interrupted", "")


def _note(kind: str, text: str) -> None:
    folder = os.environ.get(ERRORS_ENV)
    if folder:
        try:
            (Path(folder) / f"rank-{int(os.environ.get('RANK', '0'))}.{kind}").write_text(text, encoding="utf-8")
        except (OSError, ValueError):
            pass  # the launcher then says it in its own words


def _signal_options(parser, grace_s: int | None) -> list[str]:
    """torchrun's options for signals, where this torch has them (older ones keep their own rules: SIGTERM passed on
    as SIGTERM, 30 s before SIGKILL). The signals its agent handles: SIGHUP and SIGQUIT unless ignored (``nohup``),
    since Ctrl-C and SIGTERM are ``_Stops``'. ``--shutdown-timeout``: ``grace_s``, how long the ranks get between
    the signal the agent passes on and its SIGKILL, unless the user set ``TORCH_ELASTIC_SHUTDOWN_TIMEOUT``."""
    known = parser._option_string_actions
    options = []
    if "--signals-to-handle" in known:
        handled = [n for n in AGENT_SIGNALS if hasattr(signal, n) and signal.getsignal(getattr(signal, n)) is not
                   signal.SIG_IGN]
        options.append(f"--signals-to-handle={','.join(handled)}")  # (none: torch logs a warning, muted here)
    if grace_s is not None and "--shutdown-timeout" in known and "TORCH_ELASTIC_SHUTDOWN_TIMEOUT" not in os.environ:
        options.append(f"--shutdown-timeout={grace_s}")
    return options


def _one_line_for(e, nproc: int, logs: Path) -> tuple[int, bool]:
    """(exit status, keep the logs) for a failed job, the one line said. The ranks that printed an ``error:`` line
    left it in ``logs`` (``note_error``): rank 0's is on the terminal already, another rank's is copied (the one that
    failed first), since when one rank fails the others are stopped or fail in turn (a collective whose peer is gone)
    and rank 0's own exit can be either. A job where no rank said why is named by its first failure, its log kept."""
    failures = e.failures  # global rank -> ProcessFailure (exitcode, or minus the signal's number)
    said = {}
    for path in logs.glob("rank-*.error"):
        try:
            said[int(path.stem.split("-")[1])] = path.read_text(encoding="utf-8").strip()
        except (OSError, ValueError):
            continue
    if 0 in said:
        return 2, False  # rank 0 said why, on the terminal
    if (logs / "rank-0.interrupted").exists():
        return 130, False  # rank 0 was interrupted and said so (note_interrupted)
    if said:
        first = min(said, key=lambda r: failures[r].timestamp if r in failures else float("inf"))
        print(said[first], file=sys.stderr)
        return 2, False
    rank, failure = e.get_first_failure()
    log = next(iter(sorted(logs.glob(f"*/attempt_*/{failure.local_rank}/stderr.log"))), None)
    if failure.exitcode < 0:
        how = f"was killed by {failure.signal_name()}" + (" (out of memory?)" if failure.exitcode == -9 else "")
    else:
        how = f"ended with exit code {failure.exitcode}"
    where = "its output is above" if rank == 0 else (f"its output: {log}" if log is not None else "it left no output")
    print(f"error: rank {rank} of {nproc} {how}; the other ranks were stopped; {where}", file=sys.stderr)
    return 1, log is not None  # every rank's log stays for a failure nobody explained


@contextmanager
def _rank_env(nproc: int, logs: Path):
    """The ranks' environment: OMP_NUM_THREADS the cores shared out (torchrun sets 1 and warns) unless the user set
    it, and where a rank leaves its ``error:`` line (``note_error``); put back afterwards."""
    saved = {k: os.environ.get(k) for k in ("OMP_NUM_THREADS", ERRORS_ENV, LAUNCHER_ENV, SIGNALS_ENV)}
    os.environ.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // nproc)))
    os.environ[ERRORS_ENV] = str(logs)
    os.environ[LAUNCHER_ENV] = str(os.getpid())
    try:
        yield
    finally:
        for key, value in saved.items():  # (torch's launcher sets SIGNALS_ENV for its own use, and leaves it)
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


class _Stops:
    """This process's handler for Ctrl-C and SIGTERM while the ranks run: torch's agent passes a SIGINT on to them
    (``SignalException``), and the names of the signals received are kept (a second one stopped the ranks at once).
    Once the job has ended (``closing``), a signal is only counted: the launcher says how the job ended and exits 130.

    torch's agent also ends the surviving ranks of a failed job with SIGTERM, so pretrain's DDP ranks take only
    SIGINT as a request to end a step together and save: SIGTERM must end a rank at once (one blocked on a dead peer
    could not act on it before the agent's SIGKILL). A scheduler's SIGTERM sent here therefore reaches the ranks as
    SIGINT; after the first, the agent ends them with SIGTERM."""

    def __init__(self):
        self.got: list[str] = []
        self.closing = False

    def __call__(self, signum, frame):
        from torch.distributed.elastic.multiprocessing.api import SignalException

        self.got.append(signal.Signals(signum).name)
        if not self.closing:
            raise SignalException(f"process {os.getpid()} got {self.got[-1]}", sigval=signal.SIGINT)


@contextmanager
def _own_signals(stops: _Stops):
    """``stops`` handles Ctrl-C and SIGTERM (unless ignored: nohup, a background job), torch's agent the others it
    is given (``AGENT_SIGNALS``); the caller's handlers come back after (torch's launcher leaves its own installed,
    and in-process callers would get torch's SignalException instead of KeyboardInterrupt)."""
    names = ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT")
    saved = {sig: signal.getsignal(sig) for sig in (getattr(signal, n) for n in names if hasattr(signal, n))}
    try:
        for sig in (signal.SIGINT, signal.SIGTERM):
            if saved[sig] is not signal.SIG_IGN:
                signal.signal(sig, stops)
        yield
    finally:
        for sig, handler in saved.items():
            if handler is not None:
                signal.signal(sig, handler)


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
