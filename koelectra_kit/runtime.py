"""Where a run executes and how it reports: seed, device, precision, transformers' own chatter, and the
one logger every stage writes its progress lines to (stderr; rank 0 only under torchrun). Results a
command exists to print (reports, tables) go to stdout; everything else goes through ``log``."""
from __future__ import annotations

import contextlib
import itertools
import logging
import os
import random
import re
import sys
import time

LOGGER_NAME = "koelectra_kit"


def get_logger() -> logging.Logger:
    """The package logger: progress lines on stderr also when the toolkit is used as a library (an application
    that wants them elsewhere calls ``setup_logging`` or replaces the handler of ``koelectra_kit``)."""
    logger = logging.getLogger(LOGGER_NAME)
    if not logger.handlers:
        setup_logging()
    return logger


def world_size() -> int:
    """How many processes torchrun started for this job (``WORLD_SIZE``); 1 outside torchrun."""
    try:
        return max(1, int(os.environ.get("WORLD_SIZE", "1")))
    except ValueError:
        return 1


# The commands that run as several processes under torchrun: pretrain (DDP), label (a shard a rank, joined).
TORCHRUN_COMMANDS = ("pretrain", "label")
_WAITS = itertools.count(1)  # this process's waits for its job's ranks, numbered (every rank waits in the same order)


def wait_for_ranks(world: int, timeout_s: float, what: str, share=None) -> list | None:
    """A barrier for the ``world`` ranks of this process's job (its process group is up): each counts its arrival
    on the job's rendezvous store and polls it from Python, so Ctrl-C reaches a rank waiting here, and nothing is
    left in flight when it goes (a gloo barrier still pending holds the process at exit, until torch's agent kills
    it). ``what``: what to raise to when the others have not come after ``timeout_s`` seconds.

    ``share``: this rank's value (JSON), left on the store before it counts itself in; then every rank's, in rank
    order, is returned. The store, not a gloo collective (``gather_object``): gloo's worker thread drops its last
    reference to a finished collective's tensors after the caller has gone on, and a rank that then exits at once
    (label's ranks but rank 0) has that thread wait for the GIL in an interpreter that is shutting down, which
    ends the process in SIGABRT ("terminate called without an active exception"; 2 runs in 113 of two CPU ranks
    under load). None without ``share``."""
    import json

    import torch.distributed as dist

    from .errors import KitError

    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT", "0")  # (torch's agent keeps its store over restarts)
    key, store = f"koelectra_kit/arrived/{attempt}/{next(_WAITS)}", dist.distributed_c10d._get_default_store()
    if share is not None:
        store.set(f"{key}/{dist.get_rank()}", json.dumps(share))
    store.add(key, 1)
    deadline = time.monotonic() + timeout_s
    while store.add(key, 0) < world:
        if time.monotonic() > deadline:
            waited = (f"{timeout_s / 86400:,.0f} days" if timeout_s >= 86400 else
                      f"{timeout_s / 60:,.0f} minutes" if timeout_s >= 60 else f"{timeout_s:.1f} s")
            raise KitError(f"the other ranks did not come in {waited}: {what}")
        time.sleep(0.02)
    if share is None:
        return None
    return [json.loads(store.get(f"{key}/{rank}")) for rank in range(world)]


def setup_logging(verbose: bool = False, rank: int | None = None) -> None:
    """Plain message lines on stderr; ranks other than 0 (``RANK``) print warnings only, so a torchrun job
    logs once."""
    rank = int(os.environ.get("RANK", "0")) if rank is None else rank
    logger = logging.getLogger(LOGGER_NAME)
    for h in list(logger.handlers):
        logger.removeHandler(h)
    handler = _StderrHandler()
    handler.setFormatter(logging.Formatter("%(message)s"))
    logger.addHandler(handler)
    logger.propagate = False
    logger.setLevel(logging.WARNING if rank != 0 else (logging.DEBUG if verbose else logging.INFO))


class _StderrHandler(logging.StreamHandler):
    """Writes to whatever ``sys.stderr`` is at the time of the message (a redirect or a test's capture made
    after the logger was set up still sees the lines)."""

    def emit(self, record: logging.LogRecord) -> None:
        self.stream = sys.stderr
        super().emit(record)


@contextlib.contextmanager
def warnings_said():
    """The list of warning lines said while the block runs (printed as usual too): what a cache built in the block
    keeps, to say again to the runs that use it instead of reading its inputs."""
    said: list[str] = []

    class _Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            said.append(record.getMessage())

    logger, keep = get_logger(), _Keep(logging.WARNING)
    logger.addHandler(keep)
    try:
        yield said
    finally:
        logger.removeHandler(keep)


def log(msg: str) -> None:
    """A progress line (stderr, rank 0)."""
    get_logger().info(msg)


def warn(msg: str) -> None:
    get_logger().warning(msg)


def set_seed(seed: int) -> None:
    import numpy as np
    import torch

    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def resolve_device(name: str = "auto"):
    """``auto`` -> cuda if available else cpu; an explicit device that is absent is a clear error."""
    import torch

    from .errors import ConfigError

    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        dev = torch.device(name)
    except RuntimeError:
        raise ConfigError(f"device={name!r} is not a device; use auto, cpu, cuda or cuda:N") from None
    if dev.type not in ("cpu", "cuda"):  # mps, xpu, meta...: nothing here is built or tested for them (each crashed)
        raise ConfigError(f"device={name!r}: use auto, cpu, cuda or cuda:N")
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(f"device={name} was asked for but torch sees no CUDA GPU (is the CUDA build of torch "
                          "installed?); use device=cpu or auto")
    if dev.type == "cuda" and dev.index is not None and dev.index >= torch.cuda.device_count():
        raise ConfigError(f"device={name}: torch sees {torch.cuda.device_count()} CUDA GPU(s), numbered from 0")
    return dev


def synchronize(device) -> None:
    """Wait for the work queued on ``device`` (CUDA runs asynchronously; a CPU has nothing queued). Timings that
    must include the GPU's work call this before reading the clock."""
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def pad_multiple(device, requested: int | None = None) -> int:
    """What padded lengths are rounded up to: ``requested``, else 16 on a GPU (tensor cores, and a few distinct
    shapes for torch.compile and CUDA graphs: 8 widths up to max_length 128) and 1 on a CPU (padding beyond a
    batch's longest text is only wasted work there)."""
    if requested:
        return requested
    return 16 if device.type == "cuda" else 1


def cpu_has_bf16() -> bool:
    """True when the CPU has native bf16 matmul (AVX512-BF16 / AMX); there bf16 autocast is ~4x fp32."""
    try:
        import torch

        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001 - older torch without the probe: be conservative
        return False


PRECISIONS = ("auto", "fp32", "bf16", "fp16")


def check_precision_name(precision) -> None:
    """``precision`` is one of ``PRECISIONS``: the Python API took any other ("FP32", "float32", "fp8") for auto,
    bf16 on a CPU that has it, where the command line refuses them."""
    from .errors import ConfigError

    if precision not in PRECISIONS:
        raise ConfigError(f"precision={precision!r}: one of {', '.join(PRECISIONS)}")


def autocast_dtype(device, precision: str = "auto"):
    """Pick the autocast dtype: ``auto`` -> bf16 where the hardware runs it fast, fp16 on older GPUs,
    else None (fp32). ``fp32``/``bf16``/``fp16`` force a choice. Master weights always stay fp32."""
    import torch

    check_precision_name(precision)
    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        return torch.float16
    if device.type == "cuda":
        # bf16 in hardware (Ampere and later), read from the device's properties: the default check also counts
        # emulated bf16 (slow; V100, T4 "support" it) and finds that by making a tensor on the GPU, which in the
        # process that starts --nproc's ranks would hold a CUDA context on GPU 0 for the whole run
        return torch.bfloat16 if torch.cuda.is_bf16_supported(including_emulation=False) else torch.float16
    return torch.bfloat16 if cpu_has_bf16() else None


def precision_name(dtype) -> str:
    """What an ``autocast_dtype`` computes in, as a run's record says it: bfloat16, float16 or fp32 (None)."""
    return str(dtype).replace("torch.", "") if dtype else "fp32"


def autocast(device, dtype, cache: bool = True):
    """Mixed precision on ``device`` in ``dtype`` (None: off). ``cache=False``: no cache of cast weights, as a CUDA
    graph's recording needs (a cast cached while recording would be the graph's memory)."""
    import torch

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype, cache_enabled=cache)


def optimizer_step(optimizer, scaler=None) -> None:
    """One optimizer step, through the fp16 loss scaler when there is one (bf16 and fp32 need none), then
    gradients cleared (set to None: no memory write for the zeros)."""
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)


@contextlib.contextmanager
def quiet_transformers():
    """Silence transformers' load report and progress bars inside the block (we report what matters
    ourselves); the previous settings come back after it."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


@contextlib.contextmanager
def memory_refusal(what: str, fix: str):
    """An allocation the machine cannot give inside the block (torch's CPU "can't allocate memory", CUDA's out of
    memory) as one ``ConfigError`` naming ``what`` and the ``fix``, not torch's traceback: a mistyped size
    (generator.size=1e9) asked for terabytes."""
    from .errors import ConfigError

    try:
        yield
    except RuntimeError as e:  # torch.OutOfMemoryError (CUDA) is one; the CPU allocator raises a plain one
        first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
        if "can't allocate memory" not in first and "out of memory" not in first.lower():
            raise
        asked = re.search(r"allocate (\d+) bytes", first)
        detail = f"{int(asked.group(1)) / 2**30:,.1f} GiB asked for at once" if asked else first[:160]
        raise ConfigError(f"{what} does not fit in memory ({detail}); {fix}") from None


def device_memory(device) -> int | None:
    """Bytes of memory ``device`` has (a GPU's own, else the machine's RAM); None when it can't be read."""
    try:
        if device.type == "cuda":
            import torch

            return torch.cuda.get_device_properties(device).total_memory
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except Exception:  # noqa: BLE001 - callers only pre-check with it
        return None


def refuse_unless_it_fits(build, device, what: str, fix: str, bytes_per_parameter: int = 16) -> None:
    """``build()`` run on torch's meta device (no memory) to count the model's parameters; one ``ConfigError``
    when training them (fp32 weights, gradients and AdamW's two moments: 16 bytes each, activations aside) needs
    more than ``device`` has. ``memory_refusal`` catches what fails at once; a table torch allocates lazily
    (model.max_position_embeddings=1e8) instead filled the machine until the OS killed the run, without a word.
    Any failure to build or measure here is left to the real build, which says what is wrong."""
    import torch

    from .errors import ConfigError

    try:
        with torch.device("meta"):
            n = sum(p.numel() for p in build().parameters())
    except Exception:  # noqa: BLE001 - only a pre-check
        return
    total = device_memory(device)
    if total is not None and n * bytes_per_parameter > total:
        raise ConfigError(f"{what} has {n:,} parameters: training them needs ~{n * bytes_per_parameter / 2**30:,.0f} "
                          f"GiB, more than this {device.type}'s {total / 2**30:,.0f} GiB; {fix}")


def refuse_unless_batch_fits(per_row: int, rows: int, device, what: str, fix: str) -> None:
    """One ``ConfigError`` when ``rows`` rows of at least ``per_row`` bytes of activations each need more than
    ``device`` has (a batch size that can't fit, said before the run makes anything). A model too big for even one
    row is ``refuse_unless_it_fits``'s to name."""
    from .errors import ConfigError

    total = device_memory(device)
    if total is not None and rows * per_row > total >= per_row:
        raise ConfigError(f"{what} needs more than {rows * per_row / 2**30:,.0f} GiB for its activations, more than "
                          f"this {device.type}'s {total / 2**30:,.0f} GiB; {fix}")


class StopRequest:
    """Ctrl-C or SIGTERM (a scheduler's, a lease's end) as a request to stop at a step boundary, so the loop can save
    and export what it has instead of dying between two optimizer updates; a second signal stops at once
    (KeyboardInterrupt). Installed only in the main thread, for ``signals`` (DDP ranks: SIGINT alone, since torch's
    agent ends the ranks of a failed job with SIGTERM, which must stay immediate). ``after``: when the loop stops (DDP
    ranks agree on a step first: ``pretrain.distributed.SharedStop``). ``same_within_s``: a second signal this soon
    after the first is the same request passed on twice (a cluster scheduler signals every process of a job and
    torchrun's agent signals its ranks again), not a second Ctrl-C."""

    def __init__(self, enabled: bool = True, what: str = "the run", after: str = "this step",
                 signals: tuple[str, ...] = ("SIGINT", "SIGTERM"), same_within_s: float = 0.0):
        import threading

        self.enabled = enabled and threading.current_thread() is threading.main_thread()
        self.requested, self.what, self.after, self.saved = False, what, after, {}
        self.signal: str | None = None  # the first request's signal's name (SIGINT, SIGTERM)
        self.signals, self.same_within_s, self.at = signals, same_within_s, 0.0

    def _handle(self, signum, frame) -> None:
        import signal

        now = time.monotonic()
        if self.requested:
            if now - self.at < self.same_within_s:
                return
            raise KeyboardInterrupt
        self.requested, self.at, self.signal = True, now, signal.Signals(signum).name
        warn(f"{self.signal}: {self.what} stops after {self.after} and writes what it has "
             "(Ctrl-C again to stop at once)")

    def __enter__(self) -> StopRequest:
        import signal

        if self.enabled:
            for sig in (getattr(signal, name) for name in self.signals):
                if signal.getsignal(sig) is not signal.SIG_IGN:  # ignored (nohup, a background job): stays so
                    self.saved[sig] = signal.signal(sig, self._handle)
        return self

    def __exit__(self, *exc) -> None:
        import signal

        for sig, handler in self.saved.items():
            signal.signal(sig, handler)
        self.saved = {}


def nonfinite_weights(model) -> list[str]:
    """The names of ``model``'s floating-point weights holding a NaN or an infinity: what a diverged loss leaves,
    checked before anything saves them (finetune's model, pretraining's checkpoints and export)."""
    import torch

    return [name for name, t in model.state_dict().items() if t.is_floating_point() and not torch.isfinite(t).all()]
