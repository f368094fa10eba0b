"""Teach mode's pool: the unlabelled reviews (``--teach POOL``) and the queue of the ones to ask next.

The queue is ``suggest.suggest_rows``'s choice (least confident first, each normalized text once, near-duplicates of
each other not picked twice, labelled and skipped texts left out), taken ``QUEUE`` rows at a time. The pool is
scored once per model (``score``: every distinct text), so refilling the queue re-ranks cached probabilities and
costs no model call. With no classifier yet (an encoder alone) the queue is a seeded random sample under the same
duplicate rules, and the page says so.
"""
from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import InputError
from ..io.textcheck import is_blank
from ..classify.predictions import Predictions
from ..label.human import match_key

QUEUE = 50  # rows picked per refill: enough that a refill is rare, few enough that it follows the model
LEASE_S = 120  # a row shown in one tab is not shown in another for this long (unless the first answers it)
SCORE_CHUNK = 2000  # texts per model call while scoring, so the page can show progress


@dataclass
class Pool:
    path: Path
    name: str
    column: str
    texts: list  # one per row ("" for a malformed line)
    ids: list | None = None  # the file's own id per row, when it has an id column (the page shows it)

    @classmethod
    def read(cls, path: str, text_column: str | None = None) -> "Pool":
        """The pool's texts with the readers, encodings and text-column rules of ``label`` and ``suggest``."""
        from ..io.fileio import check_input_file
        from ..suggest.file import read_texts
        from .uploads import upload_separator_fix
        from ..io.tables import CONFIG_HINTS, detect_encoding, read_records, table_format

        src = check_input_file(path)
        if src.suffix.lower() in (".xlsx", ".xls"):
            raise InputError(f"--teach {path}: save the workbook as CSV UTF-8 (the pool is read as a table: .csv, "
                             ".tsv, .jsonl or .parquet)")
        kind = table_format(src)
        enc = "utf-8" if kind == "parquet" else detect_encoding(src, None, hints=CONFIG_HINTS)
        columns, column, texts, _ = read_texts(lambda: read_records(src, kind, enc, None), text_column, str(src),
                                               "--text-column", fmt=kind, fix=upload_separator_fix)
        # a blank text (spaces, or only invisible characters: textcheck.is_blank, as label and finetune decide it) is
        # an empty row: counted as one, never asked
        texts = ["" if t is None or is_blank(str(t)) else str(t) for t in texts]
        if not any(texts):
            raise InputError(f"--teach {path}: no review to ask about (no row has text in {column!r})")
        return cls(src, src.name, column, texts, _ids(lambda: read_records(src, kind, enc, None), columns, column))


ID_COLUMNS = ("id", "번호", "no", "review_id")


def id_column(columns: list[str], text_column: str) -> str | None:
    """The file's own row id column (id, 번호, ...; any case), shown beside its row numbers."""
    lower = {str(c).strip().casefold(): c for c in columns if c != text_column}
    return next((lower[name] for name in ID_COLUMNS if name in lower), None)


def _ids(reopen, columns: list[str], text_column: str) -> list | None:
    name = id_column(columns, text_column)
    if name is None:
        return None
    at = columns.index(name)
    _, records = reopen()
    try:
        return ["" if rec.error or rec.fields[at] is None else str(rec.fields[at]) for rec in records]
    finally:
        getattr(records, "close", lambda: None)()


class Cached:
    """A classifier stand-in answering from the pool's scored probabilities (``suggest_rows`` asks by text)."""

    def __init__(self, labels: list[str], row_of: dict, probs: np.ndarray):
        self.labels, self.row_of, self.probs = labels, row_of, probs

    def predict(self, texts, batch_size: int = 128, **_) -> Predictions:
        probs = self.probs[[self.row_of[t] for t in texts]] if len(texts) else np.zeros((0, len(self.labels)))
        return Predictions([self.labels[i] for i in probs.argmax(1)], probs)


class Uniform(Cached):
    """No classifier yet: equal probabilities, for ``strategy="random"``."""

    def __init__(self, labels: list[str]):
        super().__init__(labels, {}, np.zeros((0, len(labels))))

    def predict(self, texts, batch_size: int = 128, **_) -> Predictions:
        probs = np.full((len(texts), len(self.labels)), 1 / len(self.labels))
        return Predictions([self.labels[0]] * len(texts), probs)


def score(clf, texts: list[str], progress=lambda done, total: None, batch_size: int = 128) -> np.ndarray:
    """Probabilities [rows, labels] of every row (each distinct text predicted once)."""
    distinct = list(dict.fromkeys(t for t in texts if t))
    probs = np.zeros((len(distinct), len(clf.labels)), dtype=np.float32)
    for start in range(0, len(distinct), SCORE_CHUNK):
        probs[start:start + SCORE_CHUNK] = clf.predict(distinct[start:start + SCORE_CHUNK], batch_size=batch_size).probs
        progress(min(start + SCORE_CHUNK, len(distinct)), len(distinct))
    at = {t: i for i, t in enumerate(distinct)}
    out = np.full((len(texts), len(clf.labels)), 1 / len(clf.labels), dtype=np.float32)
    rows = [i for i, t in enumerate(texts) if t]
    out[rows] = probs[[at[texts[i]] for i in rows]]
    return out


class Queue:
    """The rows to ask next, shared by every tab; ``next`` leases a row to one tab so two tabs see different rows."""

    def __init__(self, pool: Pool, labels: list[str], strategy: str, seed: int, threshold: float = 0.7):
        self.pool, self.labels, self.strategy, self.seed, self.threshold = pool, labels, strategy, seed, threshold
        self.row_of = {}
        for i, t in enumerate(pool.texts):
            self.row_of.setdefault(t, i)
        # reviews as the queue tells them apart (match_key: " 좋아요" and "좋아요" are one, asked once): counted by raw
        # text, "remaining" never reached 0 and the page waited on "Fetching the next review" for a review never asked
        self._keys = {t: match_key(t) for t in pool.texts if t}
        self.distinct = set(self._keys.values()) - {""}
        self.probs: np.ndarray | None = None  # the serving model's, per pool row; None: no model (random)
        self.source = "random"  # random | the serving model's name
        self.waiting = False  # a classifier is reading the pool: nothing to ask until it has (not a random row)
        self.rows: list[int] = []
        self.refills = 0
        self.leases: dict[int, tuple[str, float]] = {}
        self.lock = threading.RLock()

    def use_model(self, probs: np.ndarray | None, source: str) -> None:
        with self.lock:
            self.probs, self.source, self.rows = probs, source if probs is not None else "random", []
            self.waiting = False

    def next(self, client: str, done: set, first: int | None = None) -> dict | None:
        """The row ``client`` should answer next (``first``: this row, e.g. the one just undone), or None when every
        distinct text is answered, skipped or shown in another tab."""
        with self.lock:
            if self.waiting:
                return None
            if first is not None:
                self.rows = [first] + [r for r in self.rows if r != first]
                self.leases.pop(first, None)
            for attempt in range(2):
                row = self._free(client, done)
                if row is not None:
                    self.leases[row] = (client, time.monotonic())
                    return self.item(row)
                if attempt == 0:
                    self._refill(done)
            return None

    def release(self, row: int) -> None:
        with self.lock:
            self.leases.pop(row, None)

    def remaining(self, done: set) -> int:
        # keys cached: the page polls this every 2 s, with every answer so far in ``done``
        keys = {self._keys[t] if t in self._keys else self._keys.setdefault(t, match_key(t)) for t in done}
        return len(self.distinct - keys)

    def item(self, row: int) -> dict:
        """What the page shows of pool index ``row``: its 1-based row number (as LABELS.csv and every table count),
        the file's id when it has one, the text and the serving model's guess."""
        text = self.pool.texts[row]
        out = {"row": row + 1, "id": self.pool.ids[row] if self.pool.ids else None, "text": text,
               "source": self.source, "guess": None, "confidence": None, "probs": None}
        if self.probs is not None:
            p = self.probs[row]
            out.update(guess=self.labels[int(p.argmax())], confidence=round(float(p.max()), 4),
                       probs=[round(float(x), 4) for x in p])
        return out

    def _free(self, client: str, done: set) -> int | None:
        now = time.monotonic()
        for row in self.rows:
            if self.pool.texts[row] in done:
                continue
            holder = self.leases.get(row)
            if holder is None or holder[0] == client or now - holder[1] > LEASE_S:
                return row
        return None

    def _refill(self, done: set) -> None:
        from ..suggest.rows import suggest_rows

        leased = {self.pool.texts[r] for r, (_, t) in self.leases.items() if time.monotonic() - t <= LEASE_S}
        if self.probs is None:
            clf, strategy = Uniform(self.labels), "random"
        else:
            clf, strategy = Cached(self.labels, self.row_of, self.probs), self.strategy
        self.refills += 1
        picked = suggest_rows(clf, self.pool.texts, QUEUE, strategy, exclude=done | leased,
                              threshold=self.threshold, seed=self.seed + self.refills)
        self.rows = [r for r in self.rows if r in self.leases] + [int(i) for i in picked.indices]
