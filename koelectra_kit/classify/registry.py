"""The toolkit's own classifier folders: ``classifier.json`` names the kind, and ``KINDS`` says where that kind's
loader lives. ``Classifier.load`` looks a folder's kind up here and imports its module only then, so the loader
and the kinds need not import each other (an ensemble loads its members through ``Classifier.load``).

    toolkit_kind("runs/tfidf")                     # "tfidf"; None for a transformers folder or a hub id
    load_kind("tfidf", "runs/tfidf")               # TfidfClassifier.load("runs/tfidf")

A new kind is one line here, and a class with ``load(folder, **options)`` and the ``Classifier`` interface.
"""
from __future__ import annotations

import importlib
import json
import os
from pathlib import Path

from ..errors import InputError

FORMAT = 1
MANIFEST = "classifier.json"  # the toolkit's own classifier folders (tfidf, ensemble) carry this file
# kind -> (module under this package, class): imported when a folder of that kind is loaded
KINDS = {"tfidf": ("tfidf", "TfidfClassifier"), "ensemble": ("ensemble", "EnsembleClassifier")}


def read_manifest(folder: Path, kind: str | None = None) -> dict:
    """``folder/classifier.json`` as a dict, checked to be ``kind`` (any of ours when None)."""
    path = Path(folder) / MANIFEST
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise InputError(f"{folder}: no {MANIFEST} (not a TF-IDF or ensemble classifier folder)") from None
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path}: damaged or truncated ({str(e).splitlines()[0]}); write the folder again") from None
    if not isinstance(manifest, dict) or manifest.get("type") not in KINDS:
        raise InputError(f"{path}: not a koelectra-kit classifier manifest (\"type\" must be {' or '.join(KINDS)})")
    if kind and manifest["type"] != kind:
        raise InputError(f"{path}: {_a(manifest['type'])} folder, not {_a(kind)} one")
    if manifest.get("format") != FORMAT:
        raise InputError(f"{path}: format {manifest.get('format')!r}; this version reads format {FORMAT} (upgrade "
                         "koelectra-kit, or write the folder again)")
    return manifest


def toolkit_kind(name_or_dir) -> str | None:
    """"tfidf" or "ensemble" for a folder with the toolkit's ``classifier.json``; None for anything else (a
    transformers model folder or a hub id)."""
    path = Path(os.path.expanduser(str(name_or_dir)))
    if path.is_dir():  # an unreadable folder: one line naming it (was "Permission denied (DIR/classifier.json)")
        from ..hub.modelio import check_readable_model

        check_readable_model(path, str(name_or_dir))
    if path.is_dir() and (path / MANIFEST).is_file():
        return read_manifest(path)["type"]
    return None


def load_kind(kind: str, folder, **options):
    """The ``kind`` folder at ``folder`` loaded by its class; ``options`` are ``Classifier.load``'s (device,
    precision, threads, max_length), for the kinds that load models of their own."""
    module, name = KINDS[kind]
    cls = getattr(importlib.import_module(f"{__package__}.{module}"), name)
    return cls.load(os.path.expanduser(str(folder)), **options)  # ~/tfidf, as toolkit_kind found it


def _a(word: str) -> str:
    """``word`` with its article: "an ensemble", "a tfidf"."""
    return f"{'an' if word[:1].lower() in 'aeiou' else 'a'} {word}"
