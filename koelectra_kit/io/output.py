"""The output folder of ``finetune``, ``evaluate`` and ``baseline``: what may be replaced. (Writing it beside
and renaming it into place is ``fileio``'s job.)"""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError

# Files only our outputs hold: a folder with one of them is ours to replace.
OUTPUT_MARKERS = ("eval.json", "finetune_config.yaml")


def check_out_dir(out: Path, markers: tuple[str, ...] = OUTPUT_MARKERS,
                  kind: str = "a previous koelectra-kit output (no eval.json)", staged: bool = False) -> None:
    """Refuse to replace a directory that isn't a previous output of this kind (e.g. out=. or a model): ``out`` is
    new, empty, or holds one of ``markers``; and one this user can't write (``check_out_writable``)."""
    out = Path(out)
    if staged and out.name in ("", ".."):  # ".", "..", "/", "runs/..": nothing beside it to build in, or to rename
        named = Path(os.path.abspath(out))
        hint = f" (out=../{named.name} for this one)" if named.name and out.name == "" else ""
        raise InputError(f"out={out}: the output is built beside its folder and moved into place, so out= must end in "
                         f"the folder's own name{hint}")
    if out.exists() and not out.is_dir():
        raise InputError(f"out={out} is a file; give a directory path")
    if above := next((p for p in out.parents if p.exists() and not p.is_dir()), None):
        raise InputError(f"out={out}: {above} is a file, not a folder; give a directory path")  # said before training
    if out.is_dir() and any(out.iterdir()) and not any((out / m).exists() for m in markers):
        raise InputError(f"out={out} exists and is not {kind}; choose a new or empty directory")
    check_out_writable(out, staged)


def check_out_writable(out: Path, staged: bool = False) -> None:
    """Before any work: ``out`` is built beside itself and swapped in, the folder it replaces removed (``staged``:
    its parent and all of an earlier ``out`` must be writable), or written into (evaluate, pretrain: ``out``, or its
    parent while it does not exist). A read-only parent failed only at the end, naming the staging folder the user
    never gave ("Permission denied (.out.partial-x1)"), and a write-protected earlier output was swapped out and left
    beside the new one as .out.old-PID."""
    import os

    from .fileio import check_output_parent

    if staged or not out.is_dir():
        try:
            check_output_parent(out)
        except InputError as e:
            raise InputError(f"out={e}") from None
    if not out.is_dir():
        return
    if not staged:
        if not os.access(out, os.W_OK | os.X_OK):
            raise InputError(f"out={out}: the folder is not writable by this user; make it writable (chmod u+w "
                             f"{out}) or choose another out=")
        return
    for top, subfolders, _ in os.walk(out):  # (a subfolder it can't list is never walked: checked from its parent)
        for folder in [top, *(os.path.join(top, d) for d in subfolders)]:
            if not os.access(folder, os.R_OK | os.W_OK | os.X_OK):
                raise InputError(f"out={out}: {folder} is write-protected, so the output in it can't be replaced; "
                                 f"make it writable (chmod -R u+w {out}) or choose another out=")


def replaced_note(out: Path) -> str | None:
    """What a run that publishes into ``out`` replaces, said after it did ("note: replaced the model that was in
    OUT (dev macro-F1 0.6520)"), or None for a new folder. A rerun into the same out= replaces the earlier model, as
    it always has; a note, not a refusal, so scripts and teach mode keep working, but no longer silently."""
    import json

    out = Path(out)
    if not (out / "eval.json").is_file():
        return None
    try:
        f1 = json.loads((out / "eval.json").read_text(encoding="utf-8"))["dev"]["macro_f1"]
        score = f" (dev macro-F1 {float(f1):.4f})"
    except (OSError, ValueError, KeyError, TypeError):
        score = ""
    return f"note: replaced the model that was in {out}{score}"


KINDS = {"encoder": "a fine-tuned encoder", "tfidf": "a TF-IDF classifier", "ensemble": "an ensemble"}


def held_kind(out: Path) -> str | None:
    """The kind of classifier folder ``out`` is: "tfidf" or "ensemble" (its classifier.json), "encoder" (a
    transformers config.json), or None."""
    import json

    if (out / "classifier.json").is_file():
        try:
            return str(json.loads((out / "classifier.json").read_text(encoding="utf-8")).get("type"))
        except (OSError, ValueError, AttributeError):
            return "unreadable classifier"
    return "encoder" if (out / "config.json").is_file() else None


def check_kind(out: Path, kind: str, writes: tuple[str, ...] = ()) -> None:
    """A run that writes ``kind`` (a key of KINDS) may replace an earlier output of that kind in ``out`` (with
    ``replaced_note``), never a classifier of another kind (`ensemble out=` replaced a fine-tuned encoder folder
    whole, without a word), never classifiers inside ``out`` that it does not write again (``writes``: a
    fine-tune's tfidf/ and ensemble/; `distill out=` a fine-tune's folder deleted them, the ensemble the one its
    labelling used), and never a member of an ensemble beside ``out`` (a fine-tune's OUT/tfidf, which OUT/ensemble
    averages with weights chosen for the model it held)."""
    import json

    out = Path(out)
    held = held_kind(out) if out.is_dir() else None
    if held and held != kind:
        raise InputError(f"out={out} holds {KINDS.get(held, held)}, and this run writes {KINDS[kind]}: replacing it "
                         "would lose that model; choose another out=")
    inside = sorted(c.name for c in out.iterdir() if c.is_dir() and c.name not in writes and held_kind(c)) \
        if held else []
    if inside:
        raise InputError(f"out={out} holds the classifiers {', '.join(f'{c}/' for c in inside)}, which this run does "
                         "not write again: replacing the folder would lose them; choose another out=")
    target = out.resolve()
    if not target.parent.is_dir():
        return
    for folder in target.parent.iterdir():
        try:
            manifest = json.loads((folder / "classifier.json").read_text(encoding="utf-8"))
            members = [m["path"] for m in manifest["members"]] if manifest.get("type") == "ensemble" else []
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            continue
        if folder != target and any((folder / str(m)).resolve() == target for m in members):
            raise InputError(f"out={out} is a member of the ensemble in {folder}: replacing it would change what "
                             "that ensemble labels with, under weights chosen for this one; choose another out=")


# A model folder's own files: a transformers model's, and a TF-IDF or ensemble classifier's (classify/registry.py)
MODEL_FILES = ("config.json", "classifier.json")


def check_report_dir(out: Path, model_files: tuple[str, ...] = MODEL_FILES, staged: bool = False) -> None:
    """``check_out_dir`` for the commands that write a report into ``out`` (evaluate, baseline) rather than a model:
    a model folder (one holding ``model_files``) is refused too, since its own eval.json and data_report.json would
    be replaced. Baseline passes only config.json: its out= is a TF-IDF classifier folder, replaced on a rerun
    (``staged``: swapped in whole; evaluate writes into ``out``)."""
    check_out_dir(out, staged=staged)
    for name in model_files:
        if (Path(out) / name).is_file():
            raise InputError(f"out={out} is a model folder ({name}): its eval.json and data_report.json (from "
                             "training) would be replaced; choose another directory")


def check_not_input(out: Path, inputs: dict[str, str | None], writes: tuple[str, ...] = ()) -> None:
    """``out`` is replaced whole at the end of a run: it must not be, or hold, one of the run's own models or data
    files (``inputs``: config key -> value), which would be lost. ``writes``: a run that writes these files into
    ``out`` instead (evaluate, baseline) must not read one of them."""
    target = Path(out).resolve()
    for key, value in inputs.items():
        if not value or not Path(value).exists():
            continue
        path = Path(value).resolve()
        if path == target:
            raise InputError(f"out={out} is the {key}= folder the run reads: it would be replaced by the result; "
                             "choose another out=")
        if (path.parent == target and path.name in writes) if writes else target in path.parents:
            raise InputError(f"out={out} holds {key}={value}, which the run reads: it would be replaced by the "
                             "result; choose another out= (or move that file out of it)")
