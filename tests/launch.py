"""Two CPU processes under torchrun, as a user's shell starts them: this checkout first on the path, one OpenMP thread
each (two cores), and no torchrun variables inherited from a run that launched pytest."""
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
    full = {**os.environ, "OMP_NUM_THREADS": "1", **(env or {}),
            "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    for key in ("WORLD_SIZE", "RANK", "LOCAL_RANK", "LOCAL_WORLD_SIZE"):
        full.pop(key, None)
    return subprocess.run(cmd, env=full, capture_output=True, text=True, timeout=300, cwd=cwd)
