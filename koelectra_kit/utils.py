"""Old home of the shared helpers, kept so existing imports work: atomic writes live in ``fileio``,
seed/device/precision in ``runtime``."""
from .fileio import atomic_path, write_json_atomic, write_text_atomic  # noqa: F401
from .runtime import autocast, autocast_dtype, cpu_has_bf16, resolve_device, set_seed  # noqa: F401
