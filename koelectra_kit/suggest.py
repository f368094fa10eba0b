"""Which reviews to label next (``koelectra-kit suggest``): the rows of an unlabelled pool the current classifier is
least sure about, each once, none already labelled, with the model's guess beside it.

    koelectra-kit suggest model=runs/sentiment pool=reviews.csv out=next.csv n=100 labelled=labels.csv
    picked = suggest_rows(Classifier.load("runs/sentiment"), texts, n=100)   # picked.indices, picked.scores

**Margin by default.** Uncertainty sampling asks for the rows nearest the decision boundary. ``margin`` (the top-1
minus the top-2 probability; smallest first) measures exactly that: how close the model is to answering otherwise.
``entropy`` (largest first) spreads its attention over every class, so in a 3-class problem a row split between
the two likely classes scores lower than one with some mass on an implausible third; it ranks a 0.45/0.45/0.10
row below a 0.40/0.30/0.30 one, although only the first is a coin toss between two answers. Margin is the usual
choice for multi-class uncertainty sampling (Settles' survey calls it "margin sampling"; Schröder et al. 2022 found
it, as "breaking ties", the most reliable uncertainty strategy for fine-tuned transformers), and with two classes
the two orders are the same. ``random`` is the baseline a simulation compares against (seeded, reproducible).

**Never the same text twice.** Rows whose texts are equal after the tokenizer-independent normalization
(``normalize.normalize``: NFC, ㅋㅋㅋㅋ -> ㅋㅋ, whitespace collapsed) are one candidate, its first row in the pool
(the output says how many rows share it: ``copies``); a row whose normalized text appears in a ``labelled`` file is
skipped. Near-duplicates: walking the order, a row is passed over when its character 3-grams (spaces removed, since
Korean spacing varies from writer to writer) have a Jaccard similarity of at least ``dedupe_threshold`` with a row
already picked; a prefix filter compares it only with picked rows that can reach the threshold, so N in the
thousands costs little. Near-duplicates of labelled texts are not looked for: only exact (normalized) matches.

The output (``out``, written whole or not at all): ``rank`` (1 = label first), ``row`` (0-based position among the
pool's rows, malformed lines counted as rows as ``label`` writes them: the key to join it back), the pool's
columns, then the model's ``label``, ``confidence``, ``prob_<label>``, ``margin``, ``entropy`` and ``copies``
(prefixed ``suggest_`` when the pool has a column of one of those names).
"""
from __future__ import annotations

import contextlib
import io
import math
import tempfile
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Iterable, Literal

import numpy as np

from .errors import ConfigError, InputError
from .normalize import normalize

STRATEGIES = ("margin", "entropy", "random")
SHINGLE = 3  # characters per shingle in the near-duplicate test


# -- the scores ---------------------------------------------------------------------------------------------------


def margins(probs: np.ndarray) -> np.ndarray:
    """Top-1 minus top-2 probability per row [n]; small = unsure between two labels."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape[1] < 2:
        return np.ones(len(probs))
    top2 = np.partition(probs, -2, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def entropies(probs: np.ndarray) -> np.ndarray:
    """Entropy of each row's distribution in nats [n]; large = unsure."""
    probs = np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1.0)
    return -(probs * np.log(probs)).sum(axis=1)


# -- duplicates ---------------------------------------------------------------------------------------------------


def text_key(text) -> str:
    """What makes two rows the same text: the tokenizer-independent normalization ("" for a missing text)."""
    if text is None or (isinstance(text, float) and math.isnan(text)):
        return ""
    return normalize(str(text))


def shingles(key: str) -> frozenset:
    """Character 3-grams of a normalized text, spaces removed; a text shorter than 3 characters is its own."""
    s = key.replace(" ", "")
    return frozenset(s[i:i + SHINGLE] for i in range(len(s) - SHINGLE + 1)) or frozenset([s])


def jaccard(a: frozenset, b: frozenset) -> float:
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if a or b else 1.0


class NearDuplicates:
    """The shingle sets of the rows picked so far; ``near(s)``: whether one has Jaccard >= ``threshold`` with ``s``.

    Prefix filter (as in set-similarity joins): if J(a, b) >= t then |a & b| >= t * max(|a|, |b|), and two sets
    sharing that many members share one among the first |x| - ceil(t |x|) + 1 members of each, in any fixed order
    (sorted here). So each picked set is indexed by its prefix only, and a new set is compared exactly with the
    picked sets its own prefix meets: the same answer as comparing with all of them (tested), in a fraction of
    the time."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.sets: list[frozenset] = []
        self.index: dict[str, list[int]] = defaultdict(list)

    def _prefix(self, s: frozenset) -> list[str]:
        # the epsilon keeps 0.7 * 10 from rounding up to 8 (a shorter prefix would miss pairs)
        return sorted(s)[:len(s) - math.ceil(self.threshold * len(s) - 1e-9) + 1]

    def near(self, s: frozenset) -> bool:
        seen = set()
        for g in self._prefix(s):
            for j in self.index.get(g, ()):
                if j not in seen:
                    seen.add(j)
                    if jaccard(s, self.sets[j]) >= self.threshold - 1e-12:
                        return True
        return False

    def add(self, s: frozenset) -> None:
        self.sets.append(s)
        for g in self._prefix(s):
            self.index[g].append(len(self.sets) - 1)


# -- choosing the rows --------------------------------------------------------------------------------------------


@dataclass
class Suggestions:
    """The rows to label next, in the order to label them."""

    indices: np.ndarray  # positions in the texts given [m], m <= n
    scores: np.ndarray  # the strategy's score per row [m]: the margin (margin, random) or the entropy (entropy)
    probs: np.ndarray  # the model's probabilities [m, k], columns in ``labels`` order
    labels: list[str]
    strategy: str
    copies: np.ndarray  # rows among the texts with the same normalized text (1 = no repeat) [m]
    skipped: dict = field(default_factory=dict)  # empty, labelled, duplicate, near_duplicate: rows passed over

    @property
    def guesses(self) -> list[str]:
        return [self.labels[i] for i in self.probs.argmax(axis=1)] if len(self.probs) else []


def check_options(n: int, strategy: str, threshold: float) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n={n!r}: ask for at least 1 row")
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy={strategy!r}: use one of {', '.join(STRATEGIES)}")
    if not 0 < threshold <= 1:
        raise ConfigError(f"dedupe_threshold={threshold}: a Jaccard similarity in (0, 1] (1: only rows with the "
                          "same 3-grams count as near-duplicates)")


def suggest_rows(clf, texts: list, n: int, strategy: str = "margin", *, exclude: Iterable = (),
                 threshold: float = 0.7, seed: int = 0, batch_size: int = 128) -> Suggestions:
    """The ``n`` rows of ``texts`` to label next, least confident first (``strategy``: margin | entropy | random).
    ``exclude``: texts already labelled (compared after normalization); ``threshold``: the 3-gram Jaccard at which
    a row is a near-duplicate of one already picked. ``clf``: anything with ``labels`` and ``predict`` (a
    ``Classifier.load`` result). Empty texts (None, "") are never picked; only the candidates are predicted, and
    for ``random`` only the rows picked."""
    check_options(n, strategy, threshold)
    texts = list(texts)
    keys = [text_key(t) for t in texts]
    excluded = {text_key(t) for t in exclude}
    skipped = Counter(empty=0, labelled=0, duplicate=0, near_duplicate=0)
    first: dict[str, int] = {}  # normalized text -> its candidate row
    copies: Counter = Counter()
    for i, key in enumerate(keys):
        if not key:
            skipped["empty"] += 1
        elif key in excluded:
            skipped["labelled"] += 1
        elif key in first:
            skipped["duplicate"] += 1
            copies[first[key]] += 1
        else:
            first[key] = i
            copies[i] = 1
    candidates = np.fromiter(first.values(), dtype=np.int64, count=len(first))

    def predict(rows: np.ndarray) -> np.ndarray:
        if not len(rows):
            return np.zeros((0, len(clf.labels)))
        return np.asarray(clf.predict([texts[i] for i in rows], batch_size=batch_size).probs, dtype=np.float64)

    if strategy == "random":
        order = candidates[np.random.default_rng(seed).permutation(len(candidates))]
        chosen = _walk(order, keys, n, threshold, skipped)
        indices, probs = order[chosen], predict(order[chosen])
        scores = margins(probs)
    else:
        all_probs = predict(candidates)
        score = margins(all_probs) if strategy == "margin" else -entropies(all_probs)
        rank = np.argsort(score, kind="stable")  # least confident first; ties in pool order
        chosen = _walk(candidates[rank], keys, n, threshold, skipped)
        indices, probs = candidates[rank][chosen], all_probs[rank][chosen]
        scores = margins(probs) if strategy == "margin" else entropies(probs)
    return Suggestions(indices=indices, scores=scores, probs=probs, labels=list(clf.labels), strategy=strategy,
                       copies=np.array([copies[i] for i in indices], dtype=np.int64), skipped=dict(skipped))


def _walk(order: np.ndarray, keys: list[str], n: int, threshold: float, skipped: Counter) -> np.ndarray:
    """Positions in ``order`` of the first ``n`` rows that are no near-duplicate of a row taken before them."""
    taken, near = [], NearDuplicates(threshold)
    for pos, i in enumerate(order):
        s = shingles(keys[i])
        if near.near(s):
            skipped["near_duplicate"] += 1
            continue
        near.add(s)
        taken.append(pos)
        if len(taken) == n:
            break
    return np.array(taken, dtype=np.int64)


# -- koelectra-kit suggest ----------------------------------------------------------------------------------------


@dataclass
class SuggestConfig:
    """``koelectra-kit suggest``: a classifier, a pool of unlabelled rows, the file of rows to label next."""

    STAGE: ClassVar[str] = "suggest"

    model: str = ""  # classifier folder: fine-tuned (finetune), TF-IDF (baseline out=) or ensemble, or a hub id
    pool: str = ""  # unlabelled table (.csv .tsv .jsonl .parquet .xlsx) or dataset (hf:..., a folder), as label reads
    out: str = ""  # the suggestions: .csv (UTF-8 with a BOM, for Excel), .tsv or .jsonl; written whole or not at all
    n: int = 100  # rows to suggest (fewer when the pool runs out of distinct, unlabelled texts)
    strategy: Literal["margin", "entropy", "random"] = "margin"  # margin: smallest top-1 minus top-2 first (why: above)
    text_column: str | None = None  # the pool's text column; None = first present of review, text, document, ...
    # tables of rows already labelled (one or a list): a pool row whose normalized text is in one is skipped
    labelled: list[str] = field(default_factory=list)
    labelled_text_column: str | None = None  # their text column; None = the pool's if present, else detected
    # character 3-gram Jaccard from which a row is a near-duplicate of one already picked (1: the same 3-grams only)
    dedupe_threshold: float = 0.7
    seed: int = 0  # strategy=random's order
    format: str | None = None  # the pool's format: csv|tsv|jsonl|parquet; None = from the extension
    encoding: str | None = None  # the pool's encoding; None = detect (utf-8, utf-8 with BOM, cp949/EUC-KR, UTF-16)
    batch_size: int = 128  # texts per model call
    device: str = "auto"  # auto | cpu | cuda | cuda:1
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    # false: an existing out is refused (you may have typed labels into it); true: replaced whole
    overwrite: bool = False
    allow_generic_labels: bool = False  # accept a model whose labels are LABEL_0, LABEL_1 (no trained head), as label

    def validate(self) -> None:
        from .label.config import FORMATS, MAX_BATCH, WRITABLE

        for key in ("model", "pool", "out"):
            if not getattr(self, key):
                raise ConfigError(f"{key} is required: {key}=...")
        check_options(self.n, self.strategy, self.dedupe_threshold)
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise ConfigError(f"batch_size={self.batch_size}: between 1 and {MAX_BATCH} texts per model call")
        if self.format is not None and self.format not in FORMATS:
            raise ConfigError(f"format={self.format!r}: use one of {', '.join(FORMATS)}")
        if not self.out.lower().endswith(WRITABLE):
            raise ConfigError(f"out={self.out}: write {', '.join(WRITABLE)} (a .csv opens in Excel)")
        if self.encoding is not None:
            import codecs

            try:
                codecs.lookup(self.encoding)
            except LookupError:
                raise ConfigError(f"encoding={self.encoding!r} is not an encoding (try utf-8, cp949)") from None


@dataclass
class SuggestSummary:
    out: str
    strategy: str
    rows: int  # the pool's rows
    picked: int
    asked: int
    skipped: dict
    malformed: int
    guesses: dict  # the model's label -> rows among the picked

    def lines(self) -> list[str]:
        why = {"margin": "least confident first: smallest top-1 minus top-2 probability",
               "entropy": "least confident first: largest entropy", "random": "in a seeded random order"}
        s = self.skipped
        counts = {"already labelled": s.get("labelled", 0), "repeated text": s.get("duplicate", 0),
                  "near-duplicate of a picked row": s.get("near_duplicate", 0),
                  "empty": s.get("empty", 0) - self.malformed, "malformed line": self.malformed}
        passed = ", ".join(f"{k} {v:,}" for k, v in counts.items() if v) or "none"
        out = [f"wrote {self.picked:,} rows to label next to {self.out} ({why[self.strategy]})",
               f"pool: {self.rows:,} rows; passed over: {passed}",
               "the model's guesses: " + (", ".join(f"{k} {v:,}" for k, v in self.guesses.items()) or "none")]
        if self.picked < self.asked:
            out.append(f"note: {self.asked:,} asked, only {self.picked:,} distinct unlabelled texts left in the pool")
        return out


def run_suggest(cfg: SuggestConfig, classifier=None) -> SuggestSummary:
    """Read the pool (and the labelled files), load the model (or use ``classifier``), pick, write ``cfg.out``.
    Every input is checked before the model loads; nothing is written unless all of it succeeds."""
    from .label import check_trained_head

    cfg.validate()
    out = _check_out(cfg)
    with _opened(cfg.pool, cfg.format, cfg.encoding) as reopen:
        columns, column, texts, malformed = read_texts(reopen, cfg.text_column, cfg.pool, "text_column")
        if not texts:
            raise InputError(f"{cfg.pool} has a header row but no rows under it: nothing to suggest")
        exclude = []
        for path in cfg.labelled:
            with _opened(path, None, None) as again:
                exclude += read_texts(again, cfg.labelled_text_column, path, "labelled_text_column",
                                      prefer=column)[2]
        if classifier is None:
            from .classifier import Classifier

            classifier = Classifier.load(cfg.model, device=cfg.device, precision=cfg.precision)
        check_trained_head(classifier, cfg.allow_generic_labels)
        picked = suggest_rows(classifier, texts, cfg.n, cfg.strategy, exclude=exclude,
                              threshold=cfg.dedupe_threshold, seed=cfg.seed, batch_size=cfg.batch_size)
        rows = _picked_rows(reopen, picked.indices)
    _write(out, _frame(picked, columns, rows))
    return SuggestSummary(out=str(out), strategy=cfg.strategy, rows=len(texts), picked=len(picked.indices),
                          asked=cfg.n, skipped=picked.skipped, malformed=malformed,
                          guesses=dict(Counter(picked.guesses).most_common()))


def _check_out(cfg: SuggestConfig) -> Path:
    from .fileio import check_output_parent

    out = Path(cfg.out)
    if out.is_dir():
        raise InputError(f"out={out} is a folder; give a file path (next.csv)")
    for name, value in [("pool", cfg.pool), *(("labelled", p) for p in cfg.labelled)]:
        if out.exists() and Path(value).exists() and out.resolve() == Path(value).resolve():
            raise InputError(f"out={out} is also the {name} file: it would be overwritten; name another file")
    if out.exists() and not cfg.overwrite:
        raise InputError(f"{out} exists; pass overwrite=true to replace it (labels typed into it would be lost)")
    return check_output_parent(out)


# -- reading tables: label's formats, encodings and column rules ---------------------------------------------------


@contextlib.contextmanager
def _opened(path: str, fmt: str | None, encoding: str | None):
    """A table to read more than once (the texts, then the picked rows): yields ``reopen() -> (columns, records)``
    with label's readers (``tables.read_records``, an .xlsx converted once to a temporary CSV, a dataset through
    ``hfdata``) and its one-line errors."""
    from .fileio import check_input_file
    from .hfdata import is_dataset_source, open_rows
    from .tables import CONFIG_HINTS, detect_encoding, read_records, table_format
    from .workbook import WORKBOOK_SUFFIXES, xlsx_to_csv

    if is_dataset_source(path):
        def rows():
            opened = open_rows(path)
            return opened.columns, opened.records
        yield rows
        return
    src = check_input_file(path)
    if fmt is None and src.suffix.lower() in WORKBOOK_SUFFIXES:
        with tempfile.TemporaryDirectory(prefix="koelectra-suggest-") as tmp:
            sheet = Path(tmp) / "sheet.csv"
            xlsx_to_csv(src, sheet, str(src))
            yield lambda: read_records(sheet, "csv", "utf-8", None)
        return
    kind = table_format(src, fmt)
    enc = "utf-8" if kind == "parquet" else detect_encoding(src, encoding, hints=CONFIG_HINTS)
    yield lambda: read_records(src, kind, enc, None)


def text_column_of(columns: list[str], given: str | None, path: str, key: str = "text_column") -> str:
    """``given`` (which must be present), else the first of the toolkit's text-column names present."""
    from .tables import TEXT_COLUMNS, pick_column

    column = pick_column(columns, given, path=path)
    if column is None:
        raise InputError(f"{path}: no text column (none of {', '.join(TEXT_COLUMNS[:5])}, ... is present); columns "
                         f"present: {', '.join(columns) or 'none'}; name the column of reviews with {key}=...")
    if columns.count(column) > 1:
        raise InputError(f"{path}: {columns.count(column)} columns are named {column!r}; rename them so the text "
                         "column is unambiguous")
    return column


def read_texts(reopen, given: str | None, path: str, key: str = "text_column", prefer: str | None = None) -> tuple:
    """(columns, text column, texts, malformed lines): one text per row, None for a malformed line. The column:
    ``given``, else ``prefer`` where present (a labelled file's column named as the pool's), else detected."""
    from .tables import check_not_numbers

    columns, records = reopen()
    columns = [str(c) for c in columns]
    try:
        column = text_column_of(columns, given or (prefer if prefer in columns else None), path, key)
        at = columns.index(column)
        texts, malformed = [], 0
        for rec in records:
            if rec.error:
                malformed += 1
                texts.append(None)
            else:
                texts.append(rec.fields[at])
    except UnicodeDecodeError as e:  # the file changed under us: detect_encoding read all of it
        raise InputError(f"{path}: bytes invalid in its encoding ({e.reason}); pass encoding=...") from None
    finally:
        getattr(records, "close", lambda: None)()
    check_not_numbers(texts, column, columns, path)
    return columns, column, texts, malformed


def _picked_rows(reopen, indices: np.ndarray) -> dict[int, list]:
    """The picked rows' fields, by position (a second pass: only the texts were kept from the first)."""
    wanted, rows = set(int(i) for i in indices), {}
    if not wanted:
        return rows
    _, records = reopen()
    try:
        for i, rec in enumerate(records):
            if i in wanted:
                rows[i] = rec.fields
                if len(rows) == len(wanted):
                    break
    finally:
        getattr(records, "close", lambda: None)()
    if len(rows) != len(wanted):
        raise InputError("the pool changed while suggest read it: run it again")
    return rows


def _frame(picked: Suggestions, columns: list[str], rows: dict[int, list]):
    import pandas as pd

    added = ["rank", "row", "label", "confidence", *[f"prob_{lab}" for lab in picked.labels], "margin", "entropy",
             "copies"]
    name = {a: ("suggest_" + a if any(a == c for c in columns) else a) for a in added}
    if any(name[a] != a for a in added):
        name = {a: "suggest_" + a for a in added}  # all or none prefixed: the columns read as one set
    data = pd.DataFrame([rows[int(i)] for i in picked.indices], columns=columns, dtype=object)
    probs = np.round(picked.probs, 4)
    data.insert(0, name["row"], picked.indices.astype(np.int64))
    data.insert(0, name["rank"], np.arange(1, len(picked.indices) + 1))
    data[name["label"]] = picked.guesses
    data[name["confidence"]] = probs.max(axis=1) if len(probs) else []
    for j, lab in enumerate(picked.labels):
        data[name[f"prob_{lab}"]] = probs[:, j]
    data[name["margin"]] = np.round(margins(picked.probs), 4)
    data[name["entropy"]] = np.round(entropies(picked.probs), 4)
    data[name["copies"]] = picked.copies
    return data


def _write(out: Path, df) -> None:
    from .fileio import write_bytes_atomic
    from .label import write_chunk
    from .tables import table_format

    fmt = table_format(out)
    buf = io.StringIO()
    write_chunk(buf, df, fmt, header=True)
    write_bytes_atomic(out, buf.getvalue().encode("utf-8-sig" if fmt == "csv" else "utf-8"))
