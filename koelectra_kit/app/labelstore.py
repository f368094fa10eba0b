"""LABELS.csv: the analyst's answers, an append-only log that is also the file the analyst owns.

One line per event, appended (and fsynced) the moment the page sends it, so a closed tab, a browser crash or a
killed server loses nothing that was answered. Its columns and what they mean are in ``io/labellog.py`` (``label
human_labels=`` reads the same file); ``row`` is the file's row, 1-based, for ``teach`` answers (the pool) and
``correction:FILE`` fixes alike, and ``answer_id`` is made by the page, so a request sent twice (a retry, two tabs,
a reload replaying its pending answers) is kept once.

The analyst may edit the file by hand while the app runs (fix a label, delete a line, add rows with only ``text``
and ``label``): it is re-read whenever its modification time or size is not what the last read or append left,
and checked. A label may be typed as ``finetune`` reads one (긍정/부정/중립, pos/neg, any case). A file the app
can't use (a label outside the model's set, not UTF-8, a header without the app's columns) is never written to:
answers and downloads are refused with one line saying what to fix, until the file is fixed. The one exception is a
last line torn mid-write (a power loss or a kill during an append, ``io.labellog.torn_tail``), found when the app
starts: the page never heard back about that answer and sends it again, so the line is moved to LABELS.csv.torn
beside the file, the file is cut back to its last complete line, and the app says so once on its console and goes
on. While the app runs its own appends are whole, so a bad unfinished last line then is one typed by hand: refused
like any other bad line, and left where it is.
"""
from __future__ import annotations

import csv
import io
import logging
import os
import threading
import time
from collections import Counter
from pathlib import Path

from ..errors import InputError
from ..io.csvlines import csv_line
from ..io.labellog import ACTIONS, COLUMNS, Effective, Event, LabelFileProblem, TornTail, effective, parse, torn_tail

__all__ = ["ACTIONS", "COLUMNS", "Effective", "Event", "LabelFileProblem", "LabelLog", "csv_line", "effective",
           "parse"]

logger = logging.getLogger("koelectra_kit.app")


class LabelLog:
    """The log behind one LABELS.csv. Every method takes the lock: two tabs answering at once append one line each,
    in turn, and a repeated ``answer_id`` is answered from what was kept."""

    def __init__(self, path: str | Path, labels: list[str]):
        self.path, self.labels = Path(path), list(labels)
        self.lock = threading.RLock()
        self.events: list[Event] = []
        self.problem: str | None = None  # why the file as it is can't be used (None: it can)
        self._seen: tuple | None = None  # (mtime_ns, size) the last read or append left
        self._header: list[str] | None = None  # the file's own columns, in its order (None: no file yet)
        self._started = False  # after the first read: the app's own appends are whole, so a torn tail is a hand edit
        self._state = effective([])
        self.version = 0  # bumped whenever the effective labels may have changed (a file job's download re-reads)
        self.refresh()

    # -- reading
    def refresh(self) -> None:
        """Re-read the file when it changed since the app last read or wrote it (a hand edit); a last line torn
        mid-write is set aside first (``_set_aside``), the rest of the file read well."""
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
                data = self.path.read_bytes()
                torn = torn_tail(data, self.labels)
                # the lines above a torn one are read first: a file with a bad line elsewhere is never written to
                events = parse(data[:torn.at] if torn else data, self.path.name, self.labels)
                self._header = self._own_columns(data)
                if torn is not None and self._started:
                    # not a write of the app's cut short (those are whole while it runs): a line typed by hand
                    raise LabelFileProblem(f"{self.path.name}: line {torn.line} can't be read ({torn.why}): fix or "
                                           "delete that line")
                if torn is not None and not self._set_aside(data, torn):
                    # saved again while it was read: nothing written, nothing appended until the next call reads it
                    self.problem = f"{self.path.name} changed while it was read; answer again"
                    return
                self.events, self.problem = events, None
            except LabelFileProblem as e:
                self.problem = str(e)  # the last good events stay shown; nothing is written until it is fixed
            except OSError as e:
                self.problem = f"{self.path.name} can't be read ({e.strerror or e})"
            self._seen, self._started = key, True
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

    def _own_columns(self, data: bytes) -> list[str] | None:
        """The header's column names, checked: the app appends every one of ``COLUMNS`` (in the file's order), and
        under a header without them its lines would be read back wrong (an undo as a skip, a retried answer twice)
        and the file become one no reader takes."""
        first = data.split(b"\n", 1)[0]  # the header line only: parse() has read the rest
        header = next(csv.reader(io.StringIO(first.decode("utf-8-sig", errors="replace").rstrip("\r"))), None)
        if not header or not any(h.strip() for h in header):
            return None
        header = [h.strip() for h in header]
        missing = [c for c in COLUMNS if c not in header]
        twice = sorted({h for h in header if h and header.count(h) > 1})
        if missing or twice:
            why = f"no {', '.join(missing)} column" if missing else f"{', '.join(twice)} twice"
            raise LabelFileProblem(f"{self.path.name}'s header is {','.join(header)} ({why}): the app appends "
                                   f"{','.join(COLUMNS)}; give --labels a new file, or make its header those columns")
        return header

    def _write(self, event: Event) -> None:
        new = not self.path.exists() or self.path.stat().st_size == 0
        values = dict(zip(COLUMNS, event.line()))
        data = (csv_line(COLUMNS) if new else "") + csv_line(
            [values.get(c, "") for c in (COLUMNS if new or not self._header else self._header)])
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

    def _set_aside(self, data: bytes, torn: TornTail) -> bool:
        """Move a torn last line (``io.labellog.torn_tail``) of ``data``, the file's bytes, to NAME.torn beside the
        file (appended to, and fsynced before the file loses them) and cut the file back to its last complete line;
        False, touching nothing, when the file is no longer ``data`` (a save in between)."""
        side = self.path.with_name(self.path.name + ".torn")
        try:
            with open(self.path, "r+b") as f:
                if f.read() != data:
                    return False
                with open(side, "ab") as out:
                    out.write(torn.data + b"\n")  # one line per tail set aside: a later one is never glued on
                    out.flush()
                    os.fsync(out.fileno())
                f.truncate(torn.at)
                f.flush()
                os.fsync(f.fileno())
        except OSError as e:  # read-only, disk full: the analyst deletes the line (set aside twice at worst, not lost)
            why = e.strerror or e
            raise LabelFileProblem(f"{torn.describe(self.path.name)}: can't be moved to {side.name} ({why}); delete "
                                   "that line (the page sends that answer again)") from None
        logger.warning(f"{torn.describe(self.path.name)}: moved to {side.name}; the page sends that answer again")
        return True

    def _ends_with_newline(self) -> bool:
        with open(self.path, "rb") as f:
            f.seek(-1, os.SEEK_END)
            return f.read(1) in (b"\n", b"\r")
