"""Small helpers shared by every stage: atomic file writes, seeding, device and precision choice."""
from __future__ import annotations

import contextlib
import json
import os
import random
import tempfile
from pathlib import Path
from typing import Iterator


@contextlib.contextmanager
def atomic_path(final: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``final``; move it into place only if the block succeeds.

    The temp file lives in the same directory so ``os.replace`` is an atomic rename: a reader sees
    either the old file or the complete new one, never half of it (a kill or a full disk mid-write
    leaves ``final`` untouched and the temp file removed).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # make the bytes durable before the rename publishes them
            os.fsync(f.fileno())
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json_atomic(path: str | Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


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
    dev = torch.device(name)
    if dev.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError("device=cuda was asked for but torch sees no CUDA GPU (is the CUDA build of torch installed?)")
    return dev


def cpu_has_bf16() -> bool:
    """True when the CPU has native bf16 matmul (AVX512-BF16 / AMX); there bf16 autocast is ~4x fp32."""
    try:
        import torch

        return bool(torch.backends.mkldnn.is_available() and torch.ops.mkldnn._is_mkldnn_bf16_supported())
    except Exception:  # noqa: BLE001 - older torch without the probe: be conservative
        return False


def autocast_dtype(device, precision: str = "auto"):
    """Pick the autocast dtype: ``auto`` -> bf16 where the hardware runs it fast, fp16 on older GPUs,
    else None (fp32). ``fp32``/``bf16``/``fp16`` force a choice. Master weights always stay fp32."""
    import torch

    if precision == "fp32":
        return None
    if precision == "bf16":
        return torch.bfloat16
    if precision == "fp16":
        return torch.float16
    if device.type == "cuda":
        return torch.bfloat16 if torch.cuda.is_bf16_supported() else torch.float16
    return torch.bfloat16 if cpu_has_bf16() else None


def autocast(device, dtype):
    import torch

    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)
