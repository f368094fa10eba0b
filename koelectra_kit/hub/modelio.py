"""Where a model comes from, checked before transformers is asked: a local folder, or a hub id. A mistyped
local path must fail at once, naming the path, not be tried on the hub (tens of seconds of retries, then an
error about a repository); a damaged weights file is a one-line error, not a traceback from the loader."""
from __future__ import annotations

import contextlib
import os
import pickle
import re
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from ..io.hubreach import check_reachable, named

# What a Hugging Face hub id looks like: "name" or "owner/name", letters, digits, "-", "_", "."
_HUB_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$")


def check_model_source(name_or_dir: str | Path, what: str = "model") -> str:
    """``name_or_dir`` as a string, after checking: an existing folder must hold config.json; a path that
    cannot be a hub id (absolute, ./ ../ ~, a backslash, more than one "/", or an "owner/" that is a local
    folder) must exist; a hub id must be reachable or in the local hub cache (``network.check_reachable``)."""
    name = str(name_or_dir)
    path = Path(os.path.expanduser(name))
    if path.exists():
        if not path.is_dir():
            raise InputError(f"{named(what, name)} is a file; give a model folder (config.json + weights) or a hub id")
        check_readable_model(path, named(what, name))
        if not (path / "config.json").exists():
            if (path / "classifier.json").is_file():  # (classify.registry's MANIFEST: hub/ does not import classify/)
                raise InputError(f"{named(what, name)} is a TF-IDF or ensemble classifier folder (classifier.json), not a "
                                 "model folder (config.json + weights): it has no encoder to train or load here")
            inside = next((path / sub for sub in ("discriminator", "model") if (path / sub / "config.json").is_file()),
                          None)  # a pretraining run's folder (pretrain init= takes it whole), an app round's
            raise InputError(f"{named(what, name)} is not a model folder (no config.json)"
                             + (f"; the model in it is {inside}" if inside else ""))
        return str(path)
    looks_local = (not _HUB_ID.match(name) or name.startswith((".", "~")) or
                   ("/" in name and Path(name.split("/")[0]).is_dir()))
    if looks_local:
        raise InputError(f"{named(what, name)}: no such folder (a local path; hub ids look like owner/name)")
    check_reachable(name, what)
    return name


def check_readable_model(path: Path, label: str) -> None:
    """A model folder this user can read, or one line naming what to fix: an unreadable model.safetensors read as
    "damaged or truncated (No such file or directory)", an unreadable folder as a bare "Permission denied" on a file
    inside it the user never named."""
    from ..io.fileio import unreadable_in

    try:
        blocked = unreadable_in(path)
    except PermissionError:  # a folder above it can't be entered
        blocked = path
    if blocked is not None:
        what = "the folder" if blocked == path else blocked.name
        raise InputError(f"{label}: {what} can't be read by this user (permission denied); make the model folder "
                         f"readable (chmod -R a+rX {path}) or copy it somewhere you can read")


def refused_pickle(named_model: str) -> str:
    """The line for a pickled .bin that torch.load(weights_only=True) refused (a global it does not allow). Torch's own
    text goes on to say how to load it anyway (weights_only=False), which would run the pickle's code: not repeated."""
    return (f"{named_model}: safe loading (weights_only) refuses its pytorch_model.bin: damaged, or it holds more than "
            "tensors (which could run code when loaded); use a model saved as model.safetensors")


@contextlib.contextmanager
def loading(name: str, what: str = "model") -> Iterator[None]:
    """Translate the loaders' failures (missing files, damaged safetensors, a config transformers doesn't
    know) into one ``InputError`` line."""
    try:
        from safetensors import SafetensorError
    except ImportError:  # pragma: no cover - safetensors is a dependency
        SafetensorError = OSError  # noqa: N806
    try:
        yield
    except SafetensorError as e:
        raise InputError(f"{named(what, name)}: model.safetensors is damaged or truncated ({str(e).splitlines()[0]}); "
                         "copy or export the model again") from None
    except pickle.UnpicklingError:
        raise InputError(refused_pickle(named(what, name))) from None
    except (OSError, ValueError, KeyError, RuntimeError) as e:
        text = str(e).strip()
        first = text.splitlines()[0] if text else type(e).__name__
        missing = "no file named" in first or "does not appear to have a file named" in first
        if missing and ("model.safetensors" in first or "pytorch_model.bin" in first):
            # transformers' words for a folder (or hub repository) without weights: they name model.safetensors,
            # which made the check below call a file that is not there "damaged or truncated"
            fix = ("copy the whole model folder again" if Path(os.path.expanduser(name)).is_dir() else
                   "is it a model repository (config.json + weights)?")
            raise InputError(f"{named(what, name)}: no model.safetensors (or pytorch_model.bin) in {name}: the "
                             f"weights file is missing; {fix}") from None
        if "safetensors" in text.lower() or "header" in first.lower():
            raise InputError(f"{named(what, name)}: model.safetensors is damaged or truncated ({first})") from None
        raise InputError(f"{named(what, name)}: can't load it ({first})") from None
