"""The teachers: fine-tuned classifier folders (``Classifier``, the one scoring path) and/or the TF-IDF baseline
(``references.fit_tfidf``), each turned into probabilities [n, k] over the run's labels, cached, and combined
into one ensemble whose weights are chosen on dev.

Cache: ``cache_dir/distill-teacher/<key>/shard-NNNNN`` (a `datasets` Arrow dataset of ``SHARD`` texts' probabilities
each, written beside and renamed), key = (teacher's content, labels, every text). A rerun reads them back instead
of running the teacher again, and a killed labelling pass resumes at its first missing shard.
"""
from __future__ import annotations

import hashlib
import itertools
import json
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.fileio import hash_file, staged_dir
from ..runtime import log, warn
from .config import TFIDF

SHARD = 4096  # texts a cache shard holds: a killed pass loses at most this much teacher work
CACHE_FORMAT = 2  # bump when a teacher's probabilities for the same texts change (2: special strings kept whole)


def teacher_labels(spec: str) -> list[str] | None:
    """The label names a classifier teacher predicts (from its config.json), None for the TF-IDF teacher."""
    if spec == TFIDF:
        return None
    from transformers import AutoConfig

    from ..classify.classifier import placeholder_labels
    from ..classify.registry import toolkit_kind
    from ..hub.modelio import check_model_source, loading

    if toolkit_kind(spec):  # a TF-IDF or ensemble folder: its labels are in its classifier.json
        from ..classify.registry import read_manifest

        return [str(x) for x in read_manifest(Path(spec)).get("labels") or []]
    name = check_model_source(spec, "teacher")
    with loading(name, "teacher"):
        config = AutoConfig.from_pretrained(name, trust_remote_code=False)
    id2label = getattr(config, "id2label", None) or {}
    labels = [id2label[i] for i in sorted(id2label)]
    if placeholder_labels(labels):  # its head was never trained: its soft labels would be noise
        raise InputError(f"teacher {spec} has no trained classification head (its labels are {', '.join(labels)}: a "
                         "pretraining discriminator or a bare encoder?); fine-tune it with `koelectra-kit finetune` "
                         "first and pass that folder")
    return labels


def check_labels(spec: str, theirs: list[str], labels: list[str]) -> list[int]:
    """Column of each of our labels in the teacher's output; another label set is a one-line error."""
    if sorted(theirs) != sorted(labels):
        raise InputError(f"teacher {spec} predicts {theirs} but this run's labels are {labels}; pass labels= with "
                         "the teacher's names, or give teachers trained on the same labels")
    return [theirs.index(lab) for lab in labels]


def teacher_fingerprint(spec: str, train_texts: list[str], y_train: np.ndarray, baseline) -> str:
    """Content, not path: a retrained teacher in the same folder is a new cache entry; a copied one is not."""
    h = hashlib.blake2b(digest_size=16)
    if spec == TFIDF:
        h.update(json.dumps(vars(baseline), sort_keys=True).encode() + y_train.tobytes())
        for t in train_texts:
            h.update(t.encode("utf-8", "surrogatepass") + b"\0")
        return "tfidf-" + h.hexdigest()
    folder = Path(spec)
    if not folder.is_dir():  # a hub id: the snapshot it resolves to, so a new revision pushed under it is a new entry
        h.update(spec.encode() + b"\0" + hub_revision(spec).encode())
        return "hub-" + h.hexdigest()
    _folder_digest(folder, h)
    return h.hexdigest()


def hub_revision(repo_id: str) -> str:
    """The commit of the hub cache's snapshot that ``repo_id`` loads from (``teacher_labels`` fetched its config.json,
    so it is cached: online the newest revision, offline the one on disk); "" when none is (the id is then its own key,
    as before)."""
    from huggingface_hub import try_to_load_from_cache

    try:
        found = try_to_load_from_cache(repo_id, "config.json")
    except Exception:  # noqa: BLE001 - a name huggingface_hub refuses: the loaders said so already
        return ""
    return Path(found).parent.name if isinstance(found, str) else ""


def _folder_digest(folder: Path, h) -> None:
    """A model folder's files into ``h``; an ensemble's members too (its own folder holds only their paths)."""
    from ..classify.registry import MANIFEST, read_manifest

    for f in sorted(folder.iterdir()):
        if f.is_file() and (f.suffix in (".json", ".safetensors", ".bin", ".txt")) and f.name != "eval.json":
            h.update(f.name.encode() + b"\0")
            hash_file(f, h)
    if (folder / MANIFEST).is_file() and read_manifest(folder).get("type") == "ensemble":
        for member in read_manifest(folder).get("members", []):
            if isinstance(member, dict) and (folder / str(member.get("path"))).is_dir():
                _folder_digest((folder / member["path"]).resolve(), h)


def texts_digest(texts: list[str]) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(f"{CACHE_FORMAT}|{len(texts)}".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


class TeacherPredictor:
    """One teacher loaded once: ``predict(texts)`` -> probabilities [n, k] in the run's label order."""

    def __init__(self, spec: str, labels: list[str], train, cfg):
        self.spec, self.labels = spec, labels
        if spec == TFIDF:
            from ..classify.tfidf import TfidfClassifier

            self.clf = TfidfClassifier.fit(train.texts, train.y, labels, cfg.baseline)
            self.cols, self.batch_size = list(range(len(labels))), cfg.teacher_batch_size
        else:
            from ..classify.classifier import Classifier

            self.clf = Classifier.load(spec, device=cfg.device, precision=cfg.precision)
            self.cols = check_labels(spec, list(self.clf.labels), labels)
            self.batch_size = cfg.teacher_batch_size

    def predict(self, texts: list[str]) -> np.ndarray:
        return self.clf.predict(texts, batch_size=self.batch_size).probs[:, self.cols].astype(np.float32)


def _read_shard(path: Path) -> np.ndarray | None:
    if not (path / "state.json").exists():
        return None
    from datasets import load_from_disk

    try:
        return np.asarray(load_from_disk(str(path)).data.column("probs").to_pylist(), dtype=np.float32)
    except (OSError, ValueError, KeyError) as e:  # a damaged shard is recomputed, never trusted
        warn(f"ignoring the damaged teacher cache shard {path} ({str(e).splitlines()[0]})")
        return None


def _write_shard(path: Path, probs: np.ndarray) -> None:
    import datasets
    from datasets import Dataset

    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()
    try:
        with staged_dir(path) as tmp:
            Dataset.from_dict({"probs": probs.tolist()}).save_to_disk(str(tmp))
    except OSError as e:  # a full disk must not stop the run: the teacher's work is only recomputed next time
        warn(f"could not write the teacher cache {path}: {e}")
    finally:
        if not quiet:
            datasets.enable_progress_bars()


def teacher_probs(spec: str, texts: list[str], labels: list[str], train, cfg, cache_root: Path) -> np.ndarray:
    """Probabilities [len(texts), k] of one teacher, from the cache where it has them (shard by shard)."""
    from tqdm.auto import tqdm

    fp = teacher_fingerprint(spec, train.texts, train.y, cfg.baseline)
    key = hashlib.blake2b(f"{fp}|{labels}|{texts_digest(texts)}".encode(), digest_size=16).hexdigest()
    root = cache_root / "distill-teacher" / key
    starts = range(0, len(texts), SHARD)
    shards = {s: _read_shard(root / f"shard-{s // SHARD:05d}") for s in starts}
    todo = [s for s, v in shards.items() if v is None]
    if todo:
        predictor = TeacherPredictor(spec, labels, train, cfg)
        done = len(texts) - sum(min(SHARD, len(texts) - s) for s in todo)
        with tqdm(total=len(texts), initial=done, desc=f"teacher {Path(spec).name}", unit="text",
                  disable=not cfg.progress, dynamic_ncols=True) as bar:
            for s in todo:
                shards[s] = predictor.predict(texts[s:s + SHARD])
                _write_shard(root / f"shard-{s // SHARD:05d}", shards[s])
                bar.update(len(shards[s]))
        log(f"teacher {spec}: labelled {len(texts) - done:,} texts ({done:,} from the cache) -> {root}")
    else:
        log(f"teacher {spec}: {len(texts):,} texts' probabilities read from the cache {root}")
    return np.concatenate([shards[s] for s in starts]) if len(texts) else np.zeros((0, len(labels)), np.float32)


def simplex_grid(m: int, step: float) -> list[np.ndarray]:
    """Every weight vector of ``m`` non-negative multiples of ``step`` summing to 1 (66 for 3 teachers at 0.1)."""
    n = max(1, int(round(1 / step)))
    out = []
    for cuts in itertools.combinations(range(n + m - 1), m - 1):  # stars and bars
        parts = np.diff([-1, *cuts, n + m - 1]) - 1
        out.append(parts / n)
    return out


def choose_weights(dev_probs: list[np.ndarray], y_dev: np.ndarray, labels: list[str], step: float) -> np.ndarray:
    """The grid point with the best dev macro-F1 of the averaged probabilities (ties: lower dev log-loss)."""
    from ..classify.metrics import classification_report

    best, best_key = None, None
    for w in simplex_grid(len(dev_probs), step):
        p = sum(wi * pi for wi, pi in zip(w, dev_probs))
        f1 = classification_report(y_dev, p.argmax(1), labels)["macro_f1"]
        nll = float(-np.log(np.clip(p[np.arange(len(y_dev)), y_dev], 1e-12, None)).mean())
        if best_key is None or (f1, -nll) > best_key:
            best, best_key = w, (f1, -nll)
    return np.asarray(best, dtype=np.float64)


def soften(probs: np.ndarray, temperature: float) -> np.ndarray:
    """softmax(log p / T): the teacher's distribution at temperature T. For one classifier this is exactly
    softmax(logits / T) (log p differs from the logits by a per-row constant); for an ensemble, the average's."""
    logp = np.log(np.clip(probs, 1e-12, None)) / temperature
    logp -= logp.max(axis=1, keepdims=True)
    e = np.exp(logp)
    return (e / e.sum(axis=1, keepdims=True)).astype(np.float32)
