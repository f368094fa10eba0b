"""Commands in processes of their own, as a user's shell starts them (two CPU ranks under torchrun, or a command that
starts its own with --nproc): this checkout first on the path, and no torchrun variables inherited from a run that
launched pytest."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def torchrun(*args, cwd=ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m torch.distributed.run --standalone --nproc_per_node=2 ARGS`` (the worker script or ``-m module``
    and its arguments), output captured as text."""
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", *map(str, args)]
    return _run(cmd, cwd, {"OMP_NUM_THREADS": "1", **(env or {})})


def koelectra(*args, cwd=ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -m koelectra_kit ARGS`` in a process of its own (``--nproc`` starts its ranks from there), output
    captured as text."""
    return _run([sys.executable, "-m", "koelectra_kit", *map(str, args)], cwd, env or {})


def run_python(code: str, cwd=ROOT, env: dict | None = None) -> subprocess.CompletedProcess:
    """``python -c CODE`` in a process of its own, output captured as text."""
    return _run([sys.executable, "-c", code], cwd, env or {})


def start_koelectra(*args, cwd=ROOT, env: dict | None = None, sigint=None) -> subprocess.Popen:
    """``koelectra`` left running, to be signalled, with SIGINT's disposition ``sigint`` (default: Ctrl-C's default
    meaning, whatever this pytest inherited: one started as a background job passes SIGINT on ignored, and the
    command keeps an ignored signal ignored; ``signal.SIG_IGN``: started as a background job is)."""
    import signal

    cmd = [sys.executable, "-m", "koelectra_kit", *map(str, args)]
    disposition = signal.SIG_DFL if sigint is None else sigint
    return subprocess.Popen(cmd, env=_env(env or {}), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=cwd, preexec_fn=lambda: signal.signal(signal.SIGINT, disposition))


def _run(cmd: list[str], cwd, env: dict) -> subprocess.CompletedProcess:
    return subprocess.run(cmd, env=_env(env), capture_output=True, text=True, timeout=300, cwd=cwd)


def _env(env: dict) -> dict:
    full = {**os.environ, **env,
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        full.pop(key, None)
    return full
