"""Several classifiers as one: their probabilities averaged with weights chosen on a labelled dev set.

    koelectra-kit ensemble "members=[runs/sentiment,runs/tfidf]" dev=dev.tsv out=runs/ensemble
    Classifier.load("runs/ensemble").predict(["배송 빠르고 좋아요"])     # what label, evaluate, the app use

spaCy's default text classifier stacks a linear bag-of-words model beside a neural one for the same reason this
exists: on a few thousand labels a fine-tuned encoder and TF-IDF make different mistakes, and their average beats
either (docs/RESULTS.md §5). The weights are a grid over the simplex (step 0.1 by default), the point with the best
dev macro-F1 (ties: the lower dev log-loss). A grid, not a fitted stacker: one number per member is all a dev set
of a few hundred rows can pin down; a stacker (a k x k matrix per member) fits that dev set's noise. The average
is of probabilities, not logits, so a TF-IDF model and an encoder with different calibration mix on one scale.

The folder: ``classifier.json`` (``"type": "ensemble"``, labels, members with their weights) and the members
themselves, each a folder ``Classifier.load`` reads (a fine-tuned model, a TF-IDF folder). Member paths are
relative to the ensemble's folder: ``koelectra-kit ensemble`` copies its members into ``members/`` so the folder
moves as one; ``finetune ensemble=tfidf`` writes ``OUT/ensemble`` whose members are ``..`` (the encoder) and
``../tfidf``.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import math
import os
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from ..config import check_batch_cap, check_not_blank
from ..errors import InputError
from .predictions import Predictions, predict_args
from .registry import FORMAT, MANIFEST, read_manifest


def aligned(probs: np.ndarray, member_labels: list[str], labels: list[str]) -> np.ndarray:
    """``probs``' columns reordered from ``member_labels`` to ``labels`` (the same set, any order)."""
    return probs[:, [member_labels.index(lab) for lab in labels]]


def check_same_labels(members: list, names: list[str]) -> list[str]:
    """The first member's labels; every member must have the same set (in any order)."""
    labels = list(members[0].labels)
    for m, name in zip(members[1:], names[1:]):
        if sorted(m.labels) != sorted(labels):
            raise InputError(f"ensemble members disagree on labels: {names[0]} has {labels}, {name} has "
                             f"{list(m.labels)}; members must be trained on the same label set")
    return labels


MAX_WEIGHTINGS = 10_000  # grid points scored on dev (distill's cap too): 0.01 with 3 members is 5,151


def check_grid_size(members: int, step: float, key: str) -> None:
    """A grid of at most MAX_WEIGHTINGS points: grid_step=1e-12 built a list of 10^12 weightings (MemoryError)."""
    from ..errors import ConfigError

    points = math.comb(round(1 / step) + members - 1, members - 1)
    if points > MAX_WEIGHTINGS:
        raise ConfigError(f"{key}={step:g} with {members} members is {points:,} weightings to score on dev (at most "
                          f"{MAX_WEIGHTINGS:,}): give a larger {key} (0.1 is the default)")


def simplex_grid(m: int, step: float) -> np.ndarray:
    """Every weight vector of ``m`` members in multiples of ``step`` that sums to 1 ([n, m])."""
    n = int(round(1 / step))
    rows = [c + (n - sum(c),) for c in itertools.product(range(n + 1), repeat=m - 1) if sum(c) <= n]
    return np.array(rows, dtype=np.float64) / n


def choose_weights(probs: list[np.ndarray], y: np.ndarray, labels: list[str], step: float = 0.1) -> tuple:
    """(weights [m], table of every grid point's dev scores, best report): the grid point with the best dev
    macro-F1, ties broken by the lower log-loss, then by the more even weights."""
    from .metrics import classification_report, macro_f1

    stack = np.stack(probs)  # [m, n, k]
    best, table = None, []
    for w in simplex_grid(len(probs), step):
        p = np.tensordot(w, stack, axes=1)
        f1 = macro_f1(y, p.argmax(1), len(labels))
        loss = float(-np.log(np.clip(p[np.arange(len(y)), y], 1e-12, None)).mean())
        key = (round(f1, 10), -round(loss, 10), -float(np.abs(w - 1 / len(w)).sum()))
        table.append({"weights": [round(float(x), 4) for x in w], "macro_f1": f1, "log_loss": loss})
        if best is None or key > best[0]:
            best = (key, w, p)
    report = classification_report(y, best[2].argmax(1), labels, scores=best[2])
    return best[1], table, report


class EnsembleClassifier:
    """Members' probabilities averaged with fixed weights; the ``Classifier`` interface (``labels``,
    ``predict``, ``source``, ``max_length``). ``tok`` is None: members tokenize (or not) on their own, so
    label's deduplication keys on the text as given."""

    kind = "ensemble"
    backend, quantized, tok = "ensemble", False, None

    def __init__(self, members: list, weights, labels: list[str], source: str = "", paths: list[str] | None = None):
        self.members, self.weights, self.labels = members, np.asarray(weights, dtype=np.float64), list(labels)
        self.source, self.paths = source, paths or [getattr(m, "source", "") for m in members]
        self.max_length = max(int(getattr(m, "max_length", 512)) for m in members)

    def predict(self, texts, batch_size: int = 128, normalized: bool = False, **_) -> Predictions:
        texts = predict_args(texts, batch_size)
        probs = np.zeros((len(texts), len(self.labels)), dtype=np.float64)
        truncated = np.zeros(len(texts), dtype=bool)
        for m, w in zip(self.members, self.weights):
            if w == 0:
                continue  # a member the dev set gave no weight costs no time
            pred = m.predict(texts, batch_size=batch_size)
            probs += w * aligned(np.asarray(pred.probs, dtype=np.float64), list(m.labels), self.labels)
            if pred.truncated:
                truncated |= np.asarray(pred.truncated, dtype=bool)
        probs = probs.astype(np.float32)
        labels = [self.labels[i] for i in probs.argmax(axis=1)] if len(texts) else []
        return Predictions(labels, probs, truncated.tolist(), list(self.labels))

    def digest(self) -> str:
        """Members' own digests and the weights: what ``label --resume`` compares."""
        from .classifier import model_digest

        h = hashlib.sha256(json.dumps([self.labels, self.weights.round(6).tolist()]).encode())
        for m in self.members:
            h.update(model_digest(m).encode())
        return h.hexdigest()[:24]

    @classmethod
    def load(cls, folder: str | Path, **options) -> "EnsembleClassifier":
        """The folder ``write_ensemble`` made; ``options`` go to each member's ``Classifier.load`` (device,
        precision, threads, ...)."""
        from .classifier import Classifier

        folder = Path(folder)
        manifest = read_manifest(folder, "ensemble")
        entries, labels = manifest.get("members"), manifest.get("labels")
        if (not isinstance(entries, list) or len(entries) < 2 or not isinstance(labels, list)
                or not all(isinstance(e, dict) and isinstance(e.get("path"), str) for e in entries)):
            raise InputError(f"{folder}/{MANIFEST}: an ensemble needs labels and at least 2 members, each with a "
                             "path; write it again with `koelectra-kit ensemble`")
        try:
            weights = np.array([float(e["weight"]) for e in entries])
        except (KeyError, TypeError, ValueError):
            raise InputError(f"{folder}/{MANIFEST}: every member needs a numeric weight") from None
        if not np.isfinite(weights).all() or (weights < 0).any() or abs(weights.sum() - 1) > 1e-3:
            raise InputError(f"{folder}/{MANIFEST}: weights {weights.tolist()} must be >= 0 and sum to 1")
        members, names = [], []
        for e in entries:
            path = (folder / e["path"]).resolve()
            if not path.is_dir():
                raise InputError(f"{folder}/{MANIFEST}: member {e['path']} is missing ({path}); an ensemble written by "
                                 "`finetune ensemble=tfidf` lives inside its encoder's folder: move them together")
            if (path / MANIFEST).is_file() and read_manifest(path).get("type") == "ensemble":
                raise InputError(f"{folder}: member {e['path']} is itself an ensemble; list its members instead")
            members.append(Classifier.load(path, **options))
            names.append(e["path"])
        member_labels = check_same_labels(members, names)
        # Both writers declare the first member's labels in its order, so a list that differs from it, in names
        # or order, was edited by hand (or the member was replaced); the other members are aligned by name
        if [str(x) for x in labels] != member_labels:
            raise InputError(f"{folder}/{MANIFEST}: labels {labels} are not its first member's {member_labels} "
                             f"({names[0]}; names and order must match); put the list back or write it again")
        return cls(members, weights, [str(x) for x in labels], str(folder), names)

    def __repr__(self) -> str:
        parts = ", ".join(f"{p} x{w:g}" for p, w in zip(self.paths, self.weights))
        return f"EnsembleClassifier({self.source!r}, labels={self.labels}, members=[{parts}])"


def write_ensemble(folder: Path, member_paths: list[str], weights, labels: list[str], extra: dict | None = None) -> None:
    """``classifier.json`` into ``folder``: members as paths relative to it, with their weights."""
    from ..io.fileio import write_json_atomic

    members = [{"path": p, "weight": round(float(w), 6)} for p, w in zip(member_paths, weights)]
    write_json_atomic(Path(folder) / MANIFEST, {"type": "ensemble", "format": FORMAT, "labels": list(labels),
                                                "members": members, **(extra or {})})


def copy_member(src: Path, dst: Path) -> None:
    """A member folder copied whole (weights, tokenizer, its own reports), symlinks followed."""
    shutil.copytree(src, dst, symlinks=False, ignore=shutil.ignore_patterns(".*"))


def check_dev_held_out(sources: list, texts: list[str], dev: str, fitted_texts) -> None:
    """Weights chosen on rows a member was fitted on favour the member that memorised them (dev= a members'
    training file: all weight on TF-IDF, its dev macro-F1 0.86 where held-out rows gave 0.35, exit 0). The rows
    each member was fitted on (``fitted_texts``: a folder -> (its training file, those texts) or None; the
    fine-tuning stage's ``finetune.data.fitted_texts``, handed down by the command, a layer above this one): a dev
    set all of whose texts are among them is refused, as finetune refuses dev= its train=; one with some is a
    warning counting them."""
    dev_keys = [t.strip() for t in texts]
    for src in sources:
        fitted = fitted_texts(member_folder(src))
        if fitted is None:
            continue
        train, seen = fitted
        overlap = sum(t in seen for t in dev_keys)
        if overlap == len(dev_keys):
            raise InputError(f"dev={dev}: every dev text is among the rows member {src} was fitted on (from "
                             f"{train}), so the weights would favour the member that memorised them and the dev "
                             "scores would be training scores; give held-out rows as dev=")
        if overlap:
            from ..runtime import warn

            warn(f"warning: {overlap:,} of the {len(dev_keys):,} dev rows are among the rows member {src} was fitted "
                 f"on (from {train}): the weights and dev scores lean towards the members fitted on them")


def member_folder(src: str) -> Path:
    """The folder a member given as ``src`` is copied from: a local folder, or for a hub id the snapshot in the
    local hub cache that ``Classifier.load`` has just read it from (copied as the path given, a hub id ended the
    run, after every member was scored, with "No such file or directory (owner/name)")."""
    path = Path(os.path.expanduser(str(src)))
    if path.is_dir():
        return path
    from huggingface_hub import snapshot_download

    return Path(snapshot_download(str(src), local_files_only=True))


def ensemble_card(labels: list[str], names: list[str], weights, report: dict, member_reports: dict) -> str:
    """README.md of an ensemble folder: what it is, its members, its dev scores, how to use it."""
    rows = "\n".join(f"| {n} | {w:g} | {member_reports[n]['macro_f1']:.4f} | {member_reports[n]['accuracy']:.4f} |"
                     for n, w in zip(names, weights))
    return f"""# koelectra-kit ensemble classifier

Probabilities of {len(names)} classifiers averaged with weights chosen on a labelled dev set (a grid; the best
dev macro-F1). Labels: {', '.join(labels)}. A koelectra-kit folder (`classifier.json`), not a transformers model:

```bash
koelectra-kit label --model THIS_FOLDER --input reviews.csv --output labelled.csv
```

| member | weight | dev macro-F1 | dev accuracy |
|---|---:|---:|---:|
{rows}
| **ensemble** | | **{report['macro_f1']:.4f}** | **{report['accuracy']:.4f}** |

The weights were chosen on the same dev set these scores come from, so the ensemble's row is optimistic by the
selection; score it on another labelled file with `koelectra-kit evaluate`.
"""


# -- koelectra-kit ensemble ------------------------------------------------------------------------------------


@dataclass
class EnsembleConfig:
    """``koelectra-kit ensemble``: members (classifier folders or hub ids), the labelled dev set that weighs them,
    the output folder; the dev table's columns are read as ``evaluate`` reads them (the members' label set)."""

    STAGE: ClassVar[str] = "ensemble"

    members: list[str] = field(default_factory=list)  # 2+ classifier folders: fine-tuned, TF-IDF (baseline out=)
    dev: str = ""  # labelled table the weights are chosen on: .csv .tsv .jsonl .parquet
    out: str = ""  # the ensemble folder (members copied into members/; replaced whole at the end)
    # weights are multiples of this that sum to 1 (0.1: 11 points for 2 members, 66 for 3); it divides 1 into whole
    # steps, at most 0.5, and gives at most 10,000 points
    grid_step: float = 0.1
    text_column: str | None = None  # None = first present of review, text, document, sentence, ...
    label_column: str | None = None  # None = 'label' (or another usual name) unless a rating is used
    rating_column: str | None = None  # a numeric rating column instead of labels (needs rating_map)
    rating_map: str | None = None  # stars5 | nsmc10 | bands "1-2:negative,3:neutral,4-5:positive"
    label_map: dict[str, str] = field(default_factory=dict)  # file value -> label, e.g. {0: negative}
    drop_unknown_labels: bool = False  # false: a label outside the members' set is an error; true: drop + report
    format: str | None = None  # csv|tsv|jsonl|parquet; None = from the file extension
    encoding: str | None = None  # None = detect (utf-8, utf-8 with BOM, cp949/EUC-KR)
    batch_size: int = 64  # texts per model call: 1 to 4096
    device: str = "auto"  # auto | cpu | cuda | cuda:1
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"

    def validate(self) -> None:
        from ..errors import ConfigError
        from ..io.labelled import parse_rating_map

        for key in ("dev", "out"):
            if not getattr(self, key):
                raise ConfigError(f"{key}= is required")
        if len(self.members) < 2:
            raise ConfigError(f"members: an ensemble needs at least 2 classifier folders, got {self.members}; "
                              "e.g. \"members=[runs/sentiment,runs/tfidf]\"")
        if len({str(Path(m).resolve()) for m in self.members}) != len(self.members):
            raise ConfigError(f"members: a folder is listed twice in {self.members}")
        if len(self.members) > 6:
            raise ConfigError(f"members: at most 6 ({len(self.members)} given): the weight grid grows as steps^members")
        if not (0 < self.grid_step <= 0.5) or abs(round(1 / self.grid_step) * self.grid_step - 1) > 1e-9:
            raise ConfigError(f"grid_step: must divide 1 into whole steps, at most 0.5 (0.05, 0.1, 0.25, ...), "
                              f"got {self.grid_step:g}")
        check_grid_size(len(self.members), self.grid_step, "grid_step")
        if self.rating_map is not None:
            parse_rating_map(self.rating_map)
        if self.batch_size < 1:
            raise ConfigError(f"batch_size: must be at least 1, got {self.batch_size}")
        check_batch_cap(self.batch_size, "batch_size")
        check_not_blank(self, ("text_column", "label_column", "rating_column", "format", "encoding"))


def score_members(members: list, names: list[str], texts: list[str], y: np.ndarray, labels: list[str],
                  batch_size: int) -> tuple[list[np.ndarray], dict]:
    """Each member's dev probabilities (columns in ``labels`` order) and its dev report, by name."""
    from .metrics import classification_report

    probs, reports = [], {}
    for m, name in zip(members, names):
        p = aligned(np.asarray(m.predict(texts, batch_size=batch_size).probs, dtype=np.float64), list(m.labels),
                    labels)
        probs.append(p)
        reports[name] = classification_report(y, p.argmax(1), labels, scores=p)
    return probs, reports


def run_ensemble(cfg, fitted_texts=None) -> dict:
    """``koelectra-kit ensemble``: load the members, score them on ``cfg.dev``, choose the weights, write
    ``cfg.out`` (the members copied into ``members/``, classifier.json, eval.json, README.md); returns eval.json.
    ``fitted_texts``: what tells the rows a member was fitted on (``check_dev_held_out``; None: not checked)."""
    from .classifier import Classifier
    from ..io.fileio import staged_dir, write_json_atomic, write_text_atomic
    from ..io.labelled import format_file_report, read_labelled, require_every_class
    from ..io.output import check_kind, check_not_input, check_out_dir, replaced_note
    from .metrics import format_side_by_side
    from ..runtime import log

    out = Path(cfg.out)
    check_out_dir(out, staged=True)
    check_kind(out, "ensemble")
    check_not_input(out, {"dev": cfg.dev, **{f"members[{i}]": m for i, m in enumerate(cfg.members)}})
    members = [Classifier.load(m, device=cfg.device, precision=cfg.precision) for m in cfg.members]
    names = [f"{i}-{Path(str(m).rstrip('/')).name or 'member'}" for i, m in enumerate(cfg.members)]
    for m, src in zip(members, cfg.members):
        if getattr(m, "kind", "") == "ensemble":
            raise InputError(f"members: {src} is itself an ensemble; list its members instead")
    labels = check_same_labels(members, [str(m) for m in cfg.members])
    rows = read_labelled(cfg.dev, labels, text_column=cfg.text_column, label_column=cfg.label_column,
                         rating_column=cfg.rating_column, rating_map=cfg.rating_map, label_map=cfg.label_map,
                         drop_unknown_labels=cfg.drop_unknown_labels, fmt=cfg.format, encoding=cfg.encoding)
    print(format_file_report(rows.report))
    # as fine-tuning's dev: weights chosen on a dev set without a class (or of one row) were written, exit 0, blind
    # to that class (its F1 0 at every grid point)
    require_every_class(rows, labels, str(cfg.dev), "the members' labels are fixed: give a dev set with rows of each")
    if fitted_texts is not None:
        check_dev_held_out(cfg.members, rows.texts, str(cfg.dev), fitted_texts)
    probs, reports = score_members(members, names, rows.texts, rows.y, labels, cfg.batch_size)
    weights, grid, report = choose_weights(probs, rows.y, labels, cfg.grid_step)
    result = {"model": "ensemble", "members": {n: {"source": str(s), "weight": round(float(w), 6)}
                                               for n, s, w in zip(names, cfg.members, weights)},
              "dev": report, "member_dev": reports, "weight_search": {"method": "grid", "step": cfg.grid_step,
                                                                      "criterion": "dev macro-F1", "points": grid},
              "data": str(cfg.dev)}
    print(format_side_by_side({**{n: reports[n] for n in names}, "ensemble": report}))
    log("weights chosen on dev: " + ", ".join(f"{n} {w:g}" for n, w in zip(names, weights)))
    replaced = replaced_note(out)
    with staged_dir(out) as staging:
        for name, src in zip(names, cfg.members):
            copy_member(member_folder(src), staging / "members" / name)
        write_ensemble(staging, [f"members/{n}" for n in names], weights, labels)
        write_json_atomic(staging / "eval.json", result)
        write_text_atomic(staging / "README.md", ensemble_card(labels, names, weights, report, reports))
    if replaced:
        log(replaced)
    log(f"wrote {out}/ (classifier.json, members/, eval.json, README.md); label with `koelectra-kit label --model "
        f"{out} ...`")
    return result
