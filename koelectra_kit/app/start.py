"""Where teach mode's retrains start (``start_point``), and what that start holds (``start_digest``).

**What a retrain starts from**: the ``--encoder`` given; else, for an encoder folder (a pretraining discriminator),
itself; for a fine-tuned classifier folder, its own weights (they already know the task, which is worth more than the
bare encoder's with a few hundred labels; ``finetune`` keeps its head when the labels agree); for an ensemble, its
encoder member. A TF-IDF folder has no encoder: ``--encoder`` is required. Every round starts from that same point and
trains on all the labels so far, never from the previous round, so a round is tied to its start by path and content.
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, InputError


@dataclass
class StartModel:
    classifier: object | None  # a loaded Classifier, or None (an encoder alone: no classifier until round 1)
    encoder: str  # what every retrain starts from
    labels: list[str]
    fine_tuned: bool = True  # whether ``encoder`` is a classifier already (its head knows the task): recipe_for
    kind: str | None = None  # tfidf | ensemble | None (a transformers folder): where its training data is recorded


def _has_task_head(path: Path) -> bool:
    """Whether the model folder ``path`` is a fine-tuned sequence classifier (real label names), not a bare encoder."""
    from ..classify.classifier import head_labels, toolkit_kind

    return toolkit_kind(path) is None and bool(head_labels(path))


def start_point(model: str, encoder: str | None, classes: list[str] | None, device: str, precision: str) -> StartModel:
    """Load ``--model`` as a classifier when it is one; decide what retrains start from (see the module doc)."""
    from ..classify.classifier import Classifier, toolkit_kind
    from ..finetune.config import DEFAULT_LABELS
    from ..hub.modelio import check_model_source

    kind = toolkit_kind(model)
    if kind is None:
        path = Path(check_model_source(model, "--model"))
        if not _has_task_head(path):
            if not (path / "tokenizer.json").exists() and not (path / "koelectra_tokenizer.json").exists():
                raise InputError(f"--model {model}: an encoder folder needs its tokenizer (tokenizer.json) to be "
                                 "fine-tuned")
            start = Path(encoder) if encoder else path
            return StartModel(None, str(start), list(classes or DEFAULT_LABELS),
                              fine_tuned=_has_task_head(start))
    clf = Classifier.load(model, device=device, precision=precision)
    if classes and list(classes) != list(clf.labels):
        raise ConfigError(f"--classes {','.join(classes)}: {model} answers {', '.join(clf.labels)}; leave --classes "
                          "out (it is for an encoder without a classifier)")
    if encoder:
        return StartModel(clf, str(encoder), list(clf.labels), fine_tuned=_has_task_head(Path(encoder)), kind=kind)
    if kind == "tfidf":
        raise ConfigError(f"--model {model} is a TF-IDF folder: retrains fine-tune an encoder; add --encoder DIR (a "
                          "pretrained or fine-tuned encoder folder)")
    if kind == "ensemble":
        members = [p for p in getattr(clf, "paths", []) if toolkit_kind(Path(model) / p) is None]
        if not members:
            raise ConfigError(f"--model {model}: this ensemble has no encoder member; add --encoder DIR")
        return StartModel(clf, str((Path(model) / members[0]).resolve()), list(clf.labels))
    return StartModel(clf, str(Path(model).resolve()), list(clf.labels))


def model_identity(model: str) -> str:
    """A --model as rounds.jsonl records it: an existing folder as its resolved path, a hub id as it is."""
    return str(Path(model).resolve()) if model and Path(model).exists() else model


def start_digest(start: StartModel) -> str:
    """What the rounds start from, by content: the start classifier's ``model_digest`` (the weights or the TF-IDF
    model as loaded), or an encoder folder's files. A `--model` folder refitted in place (`baseline out=` the same
    folder on more rows) kept its path, so its earlier rounds were served in its place and judged against it: 0.4648
    dev macro-F1 served over the refitted start's 0.4867. "" for a hub encoder (its id is its identity)."""
    from ..classify.classifier import model_digest
    from ..label.resume import content_fingerprint

    if start.classifier is not None:
        return model_digest(start.classifier)
    folder = Path(start.encoder)
    if not folder.is_dir():
        return ""
    files = "|".join(f"{f.name}:{content_fingerprint(f)}" for f in sorted(folder.iterdir()) if f.is_file())
    return hashlib.sha256(files.encode()).hexdigest()[:24]
