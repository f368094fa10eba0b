"""The output folder of ``finetune``, ``evaluate`` and ``baseline``: what may be replaced. (Writing it beside
and renaming it into place is ``fileio``'s job.)"""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError

# Files only our outputs hold: a folder with one of them is ours to replace.
OUTPUT_MARKERS = ("eval.json", "finetune_config.yaml")


def check_out_dir(out: Path) -> None:
    """Refuse to replace a directory that isn't a previous output of ours (e.g. out=. or a model)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise InputError(f"out={out} is a file; give a directory path")
    if out.is_dir() and any(out.iterdir()) and not any((out / m).exists() for m in OUTPUT_MARKERS):
        raise InputError(f"out={out} exists and is not a previous koelectra-kit output (no eval.json); "
                         "choose a new or empty directory")
