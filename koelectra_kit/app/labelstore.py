"""LABELS.csv: the analyst's answers, an append-only log that is also the file the analyst owns.

One line per event, appended (and fsynced) the moment the page sends it, so a closed tab, a browser crash or a
killed server loses nothing that was answered:

    text,label,action,row,source,answer_id,undoes,time
    배송 빨라요,positive,answer,4182,teach,3f0c...,,2025-01-02T10:11:12
    별로,,skip,77,teach,9a1b...,,2025-01-02T10:11:15
    ,,undo,,teach,c4d2...,9a1b...,2025-01-02T10:11:16

``action``: answer | skip | undo (an undo retracts the event whose ``answer_id`` it names: nothing is ever
rewritten). ``row``: the file's row, 1-based (the first row under the header is 1, as the page's tables and
``label``'s output count), for ``teach`` answers (the pool) and ``correction:FILE`` fixes alike.
``answer_id``: made by the page, so a request sent twice (a retry, two tabs, a reload replaying its pending
answers) is kept once. The effective labels are the latest answer per text that no undo retracts.

The analyst may edit the file by hand while the app runs (fix a label, delete a line, add rows with only ``text``
and ``label``): it is re-read whenever its modification time or size is not what the last read or append left,
and checked. A label may be typed as ``finetune`` reads one (긍정/부정/중립, pos/neg, any case). A file the app
can't use (a label outside the model's set, not UTF-8, no text/label column) is never written to: answers are refused
with one line saying what to fix, until the file is fixed.
"""
from __future__ import annotations

import csv
import io
import os
import threading
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError

COLUMNS = ["text", "label", "action", "row", "source", "answer_id", "undoes", "time"]
ACTIONS = ("answer", "skip", "undo")


class LabelFileProblem(InputError):
    """LABELS.csv as it is on disk can't be used (HTTP 409: the analyst fixes the file, then answers again)."""


@dataclass(frozen=True)
class Event:
    text: str
    label: str
    action: str
    row: str = ""
    source: str = ""
    answer_id: str = ""
    undoes: str = ""
    time: str = ""

    def line(self) -> list[str]:
        return [getattr(self, c) for c in COLUMNS]


@dataclass
class Effective:
    """What the log means now: the latest unretracted answer (or skip) per text."""

    labels: dict  # text -> label
    skipped: set  # texts whose latest event is a skip
    events: list  # the unretracted answer/skip events, in file order (undo's candidates)


def parse(data: bytes, name: str, labels: list[str]) -> list[Event]:
    """The events of a LABELS.csv's bytes; ``LabelFileProblem`` (one line) for anything the app can't use."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LabelFileProblem(f"{name} is not UTF-8 (saved as cp949 by Excel?): save it as 'CSV UTF-8'") from None
    rows = list(csv.reader(io.StringIO(text, newline="")))
    if not rows:
        return []
    header = [h.strip() for h in rows[0]]
    missing = [c for c in ("text", "label") if c not in header]
    if missing:
        raise LabelFileProblem(f"{name} has no {' and no '.join(missing)} column (its header: {','.join(header)}); "
                               f"the app's columns are {','.join(COLUMNS)}")
    at = {c: header.index(c) for c in COLUMNS if c in header}
    # a label typed by hand the way `finetune` reads a training file: 긍정 or Positive for positive (the aliases apply
    # where the model has one label of that meaning); the event keeps the model's own name
    from ..finetune.data import label_resolver

    resolve = label_resolver(labels)
    events, bad = [], []
    for n, fields in enumerate(rows[1:], start=2):
        if not any(f.strip() for f in fields):
            continue
        get = {c: (fields[i].strip() if c != "text" else fields[i]) if i < len(fields) else ""
               for c, i in at.items()}
        label, action = get.get("label", ""), get.get("action", "") or ("answer" if get.get("label") else "skip")
        if action not in ACTIONS:
            bad.append(f"line {n}: action {action!r} (answer, skip or undo)")
        elif action == "answer" and resolve(label) is None:
            bad.append(f"line {n}: label {label!r}")
        elif action == "answer":
            label = resolve(label)
        events.append(Event(**{**{c: get.get(c, "") for c in COLUMNS}, "action": action, "label": label}))
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise LabelFileProblem(f"{name}: {'; '.join(bad[:3])}{more}: not one of the labels "
                               f"{', '.join(labels)}; fix the file (the app has not changed it, and takes answers "
                               "again once it reads well)")
    return events


def effective(events: list[Event]) -> Effective:
    retracted = {e.undoes for e in events if e.action == "undo" and e.undoes}
    live = [e for e in events if e.action in ("answer", "skip") and (not e.answer_id or e.answer_id not in retracted)]
    latest = {}
    for e in live:
        latest[e.text] = e
    return Effective(labels={t: e.label for t, e in latest.items() if e.action == "answer"},
                     skipped={t for t, e in latest.items() if e.action == "skip"}, events=live)


class LabelLog:
    """The log behind one LABELS.csv. Every method takes the lock: two tabs answering at once append one line each,
    in turn, and a repeated ``answer_id`` is answered from what was kept."""

    def __init__(self, path: str | Path, labels: list[str]):
        self.path, self.labels = Path(path), list(labels)
        self.lock = threading.RLock()
        self.events: list[Event] = []
        self.problem: str | None = None  # why the file as it is can't be used (None: it can)
        self._seen: tuple | None = None  # (mtime_ns, size) the last read or append left
        self._state = effective([])
        self.version = 0  # bumped whenever the effective labels may have changed (a file job's download re-reads)
        self.refresh()

    # -- reading
    def refresh(self) -> None:
        """Re-read the file when it changed since the app last read or wrote it (a hand edit)."""
        with self.lock:
            try:
                st = self.path.stat()
            except FileNotFoundError:
                if self._seen is not None:
                    self.version += 1
                self.events, self.problem, self._seen, self._state = [], None, None, effective([])
                return
            key = (st.st_mtime_ns, st.st_size)
            if key == self._seen:
                return
            try:
                self.events, self.problem = parse(self.path.read_bytes(), self.path.name, self.labels), None
            except LabelFileProblem as e:
                self.problem = str(e)  # the last good events stay shown; nothing is written until it is fixed
            except OSError as e:
                self.problem = f"{self.path.name} can't be read ({e.strerror or e})"
            self._seen = key
            self._state = effective(self.events)
            self.version += 1

    def state(self) -> Effective:
        with self.lock:
            self.refresh()
            return self._state

    def counts(self) -> dict:
        got = Counter(self.state().labels.values())
        return {lab: got.get(lab, 0) for lab in self.labels}

    def find(self, answer_id: str) -> Event | None:
        with self.lock:
            return next((e for e in self.events if e.answer_id == answer_id), None) if answer_id else None

    # -- writing
    def append(self, event: Event) -> tuple[Event, bool]:
        """Append ``event`` (stamped with the time); (the kept event, whether it is new). An ``answer_id`` already
        in the log is not appended again."""
        with self.lock:
            self.refresh()
            if self.problem:
                raise LabelFileProblem(self.problem)
            kept = self.find(event.answer_id)
            if kept is not None:
                return kept, False
            if event.action == "answer" and event.label not in self.labels:
                raise InputError(f"label {event.label!r} is not one of {', '.join(self.labels)}")
            event = Event(**{**event.__dict__, "time": time.strftime("%Y-%m-%dT%H:%M:%S")})
            self._write(event)
            self.events.append(event)
            self._state = effective(self.events)
            self.version += 1
            return event, True

    def undo_target(self, target: str | None, source_prefix: str = "teach") -> Event | None:
        """The event an undo retracts: ``target`` when it is live, else the latest live event from ``source``."""
        live = self.state().events
        if target:
            return next((e for e in live if e.answer_id == target), None)
        return next((e for e in reversed(live) if e.source.startswith(source_prefix) and e.answer_id), None)

    def _write(self, event: Event) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        buf = io.StringIO()
        writer = csv.writer(buf, lineterminator="\n")
        if new:
            writer.writerow(COLUMNS)
        writer.writerow(event.line())
        data = buf.getvalue()
        if not new and not self._ends_with_newline():
            data = "\n" + data  # a hand edit saved without a final newline: never glue onto its last line
        self.path.parent.mkdir(parents=True, exist_ok=True)
        # utf-8-sig on creation: Excel then opens the Korean intact; appends add no second BOM
        with open(self.path, "a", encoding="utf-8-sig" if new else "utf-8", newline="") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        st = self.path.stat()
        self._seen = (st.st_mtime_ns, st.st_size)

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) in (b"\n", b"\r")
