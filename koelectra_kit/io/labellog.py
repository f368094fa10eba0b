"""LABELS.csv, the analyst's labels as an append-only log: its columns, how a file of it is read, and what it
means now (the latest unretracted answer per text). The app appends to it (``app/labelstore.LabelLog``);
``label human_labels=`` reads it, so the analyst's answers reach files labelled on the command line too.

    text,label,action,row,source,answer_id,undoes,time
    배송 빨라요,positive,answer,4182,teach,3f0c...,,2025-01-02T10:11:12
    별로,,skip,77,teach,9a1b...,,2025-01-02T10:11:15
    ,,undo,,teach,c4d2...,9a1b...,2025-01-02T10:11:16

``action``: answer | skip | undo (an undo retracts the event whose ``answer_id`` it names: nothing is ever
rewritten). ``row``: the file's row, 1-based (the first row under the header is 1, as the page's tables and
``label``'s output count). A file with only ``text`` and ``label`` columns reads as answers (an empty label: a
skip). A label may be typed as ``finetune`` reads one (긍정/부정/중립, pos/neg, any case). A last line cut off
mid-write (``torn_tail``) is never read as an answer or a skip: the app sets it aside; ``label human_labels=``,
``finetune train=`` and ``suggest labelled=`` read without it (``without_torn_tail``) and leave the file as it is.
Each of them checks every answer's label against the model's (``events_of``), with the same one-line message. A line
in a message is where its record starts in the file, as an editor numbers lines (``records.csv_records``): a review
with a line end in it, or a blank line, does not shift the lines after it.
"""
from __future__ import annotations

import codecs
import contextlib
import csv
import io
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .records import csv_records

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


APP_FIX = "fix the file (the app has not changed it, and takes answers again once it reads well)"


def is_label_log(columns) -> bool:
    """Whether a table's columns are the app's LABELS.csv (text, label and action): a log to read with its
    meaning (``effective``), not row by row, where an undone or superseded answer would still count."""
    names = {str(c).strip() for c in columns}
    return {"text", "label", "action"} <= names


def table_labels(df, name: str, labels: list[str], fix: str = "fix the file", label_map: dict | None = None,
                 records: list[tuple[int, list[str]]] | None = None) -> Effective:
    """The effective labels of a LABELS.csv read as a table of strings (``df``; any format it was saved in; a row
    shorter than the header, typed by hand, has its missing cells empty); ``fix``: what a label outside ``labels`` is
    told to do; ``label_map``: file value -> label, as a training file's. ``records``: the CSV file's own records
    that ``df`` was read from (``log_records``), read instead of its rows so that a message names the line an editor
    (or Excel's row) shows; without them (Parquet, a dataset) the k-th row under the header is line k + 1."""
    if records is None:
        records = list(enumerate([[str(c) for c in df.columns], *df.fillna("").astype(str).values.tolist()], 1))
    return effective(events_of(records, name, labels, fix, label_map))


def log_records(path, df, encoding: str | None = None, fmt: str | None = None) -> list[tuple[int | str, list[str]]] | None:
    """The records of ``path``, read as ``df`` (in ``encoding``; None: detected as ``read_table`` detects it), each
    with where it is as the analyst's tool shows it, where ``df`` is the app's log (``is_label_log``); else None
    (Parquet: no lines to name). pandas' rows know no lines: a quoted review with line ends in it, or a blank line it
    drops, would shift every line after it. A CSV is read by the csv module as ``parse`` reads the app's bytes, and
    the records it gives are pandas' rows plus the blank lines ``events_of`` passes over (a row too wide for the
    header was ``read_table``'s error before this). A JSONL row is on its own line, blank lines passed over as its
    reader passes them (a row count was one short, and more after a blank line); an Excel workbook's (``fmt`` None
    and an .xlsx name: ``df`` is its first sheet's CSV copy) is "row N" as Excel numbers its rows."""
    from .tables import CONFIG_HINTS, detect_encoding, read_records, table_format
    from .workbook import WORKBOOK_SUFFIXES, sheet_records

    if not is_label_log(df.columns):
        return None
    if fmt is None and Path(path).suffix.lower() in WORKBOOK_SUFFIXES:
        return [(f"row {n}", fields) for n, fields in sheet_records(Path(path), str(path))]
    kind = table_format(path, fmt)
    if kind not in ("csv", "jsonl"):
        return None
    try:
        enc = encoding or detect_encoding(path, hints=CONFIG_HINTS)
        if kind == "jsonl":
            columns, rows = read_records(path, "jsonl", enc, None)
            lines = [rec.line for rec in rows]  # the rows ``df`` was made of (``tables.values_frame``), in order
            return [(None, [str(c) for c in columns]), *zip(lines, df.fillna("").astype(str).values.tolist())]
        with open(path, encoding=enc, newline="") as f:
            found = list(csv_records(f))
    except (OSError, UnicodeDecodeError) as e:  # it read well a moment ago, as ``df``
        raise InputError(f"{path} changed while it was read ({e}); run it again") from None
    while found and not any(v.strip() for v in found[0][1]):
        found.pop(0)  # blank lines above the header, which pandas reads past too
    if found:
        found[0] = (found[0][0], [found[0][1][0].removeprefix("\ufeff"), *found[0][1][1:]])  # a BOM read as text
    return found


def parse(data: bytes, name: str, labels: list[str], fix: str = APP_FIX,
          label_map: dict | None = None) -> list[Event]:
    """The events of a LABELS.csv's bytes; ``LabelFileProblem`` (one line) for anything the app can't use, a torn
    last line (``torn_tail``) included: read as it is, it would be a refused label or, cut inside a quote, a skip
    nobody made. The app sets one aside before it parses (``app/labelstore.LabelLog``)."""
    torn = torn_tail(data, labels, label_map)
    try:
        text = data[:torn.at if torn else len(data)].decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LabelFileProblem(f"{name} is not UTF-8 (saved as cp949 by Excel?): save it as 'CSV UTF-8'") from None
    events = events_of(list(csv_records(io.StringIO(text, newline=""))), name, labels, fix, label_map)
    if torn is not None:  # after the lines above it: a bad one there is the analyst's to fix first
        raise LabelFileProblem(f"{torn.describe(name)}: delete that line (the page sends again an answer it did not "
                               "hear back about)")
    return events


@dataclass(frozen=True)
class TornTail:
    """The last line of a LABELS.csv cut off mid-write (a power loss or a kill during an append). The app never
    confirmed that answer to the page, which sends it again, so leaving the line out loses nothing."""

    at: int  # where it starts in the file's bytes: the bytes before it end with a line end
    data: bytes  # its bytes, to the end of the file
    line: int  # the line it starts on, as ``events_of``'s messages number lines (``records.csv_records``)
    fields: int  # fields it has
    columns: int  # fields the header has
    why: str  # what can't be read as is: "label 'posi'", "an open quote", "a character cut in two"

    def describe(self, name: str) -> str:
        return (f"{name}: line {self.line} was cut off mid-write (no line end, {self.fields} of {self.columns} "
                f"fields, {self.why})")


def torn_tail(data: bytes, labels: list[str], label_map: dict | None = None) -> TornTail | None:
    """The file's torn last line, or None. Only the last record, only when the bytes end without a line end, and only
    when it has fewer fields than the header and can't be read as is (a label or action ``events_of`` refuses, a
    quote left open, a character cut in two): a short last row that reads well (``좋아요,positive`` typed without a
    final newline) is an answer, as ever, and a bad line anywhere else is the analyst's to fix."""
    if not data or data.endswith((b"\n", b"\r")):
        return None
    bom = len(codecs.BOM_UTF8) if data.startswith(codecs.BOM_UTF8) else 0
    why = None
    try:
        text = data[bom:].decode("utf-8")
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data" or e.end != len(data) - bom:
            return None  # not UTF-8 (parse says so), not a write cut short
        text, why = data[bom:bom + e.start].decode("utf-8"), "a character cut in two"
    lines = io.StringIO(text, newline="").readlines()
    records = list(csv_records(lines))
    if len(records) < 2:
        return None  # the header alone is never a torn answer
    header, (line, fields) = records[0][1], records[-1]
    first = line - 1  # its first line's index in ``lines``
    if len(fields) >= len(header):
        return None
    try:
        rows = _Rows(header, "", labels, label_map)
    except LabelFileProblem:
        return None  # no text or label column: parse says so
    if why is None and _open_quote("".join(lines[first:])):
        why = "an open quote"
    if why is None and any(f.strip() for f in fields):
        why = rows.event(fields)[1]
    made = rows.at.get("answer_id")
    if why is None and made is not None and made < len(fields) and fields[made].strip():
        # the app writes every field of its lines (the time last): one of its lines cut short, read as it is, would
        # be an undo that retracts nothing (its ``undoes`` cut), whose resend is then dropped as a repeat
        why = "a line the app wrote, cut short"
    if why is None:
        return None
    at = bom + len("".join(lines[:first]).encode("utf-8"))
    return TornTail(at, data[at:], line, len(fields), len(header), why)


@contextlib.contextmanager
def without_torn_tail(path, name: str, labels: list[str], label_map: dict | None = None, fmt: str | None = None,
                      logs_only: bool = False):
    """The file a command that only reads a LABELS.csv reads it from: ``path`` itself, or, where its last line was torn
    mid-write (``torn_tail``), a temporary copy without that line, said in one warning. The file is left as it is:
    the app sets the line aside when it next reads it (``app/labelstore``), and a command that wrote to it would race
    the app's appends. An ``InputError`` raised while the copy is read names ``path``, not the copy. ``logs_only``:
    only a CSV whose header is the app's log (``is_label_log``); any other file reads as ever (a training CSV's last
    row with a label outside the set stays that file's error, or ``drop_unknown_labels``'s to drop)."""
    import tempfile
    import warnings

    data = _unterminated_csv(Path(path), fmt, logs_only)
    torn = torn_tail(data, labels, label_map) if data else None
    if torn is None:
        yield path
        return
    warnings.warn(f"{torn.describe(name)}: read without it (the file is left as it is)")
    with tempfile.TemporaryDirectory(prefix="koelectra-labels-") as tmp:
        copy = Path(tmp) / Path(path).name  # the same name: its extension says its format
        copy.write_bytes(data[:torn.at])
        try:
            yield copy
        except InputError as e:
            raise type(e)(str(e).replace(str(copy), str(path))) from None


def _unterminated_csv(src: Path, fmt: str | None, logs_only: bool) -> bytes | None:
    """The bytes of a CSV file that ends without a line end (``logs_only``: and whose header is the app's log), else
    None. A file that ends with one, or is no CSV file, is never read whole here: a large training file costs a seek
    (anything wrong with ``src`` is its reader's to say, in its words)."""
    from .tables import table_format

    try:
        if not src.is_file() or table_format(src, fmt) != "csv":
            return None
        with open(src, "rb") as f:
            if f.seek(0, io.SEEK_END) == 0:
                return None
            f.seek(-1, io.SEEK_END)
            if f.read(1) in (b"\n", b"\r"):
                return None
            f.seek(0)
            if logs_only and not is_label_log(next(csv.reader([f.readline().decode("utf-8-sig", "replace")]), [])):
                return None
            f.seek(0)
            return f.read()
    except InputError:
        return None


def _open_quote(record: str) -> bool:
    """Whether a record's text ends inside a quoted field: the csv module then reads a line end put after it as part
    of that field (and ends the record, with the same fields, after a closed one), so it reads on to the end of the
    file: a torn ``"배송이 빨`` would be a text with no label, a skip nobody made."""
    def first(s: str) -> list[str]:
        return next(csv.reader(io.StringIO(s, newline="")), [])

    return first(record + "\n") != first(record)


def events_of(records: list[tuple[int | str, list[str]]], name: str, labels: list[str], fix: str = APP_FIX,
              label_map: dict | None = None) -> list[Event]:
    """The events of a LABELS.csv's records, (line, fields) with the header first (a str in place of the line is said
    as it is: an Excel workbook's "row N", ``log_records``), read as ``parse`` reads its bytes:
    the one check of every reader of the log (the app, ``label human_labels=``, ``finetune train=``, ``suggest
    labelled=``), so a file one of them refuses, each refuses in the same line, naming the line where each bad
    record starts."""
    if not records:
        return []
    rows_of = _Rows(records[0][1], name, labels, label_map)
    events, bad = [], []
    for line, fields in records[1:]:
        if not any(f.strip() for f in fields):
            continue
        event, wrong = rows_of.event(fields)
        if wrong:
            bad.append(f"{line if isinstance(line, str) else f'line {line}'}: {wrong}")  # "row N": an Excel row
        events.append(event)
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        # the label set only where a label is wrong: after a mistyped action alone it would send the analyst looking
        # at the wrong cell
        which = f": not one of the labels {', '.join(labels)}" if any(": label " in b for b in bad) else ""
        raise LabelFileProblem(f"{name}: {'; '.join(bad[:3])}{more}{which}; {fix}")
    return events


class _Rows:
    """How the rows under one header read (``events_of``; ``torn_tail`` asks the same of a last line)."""

    def __init__(self, header: list[str], name: str, labels: list[str], label_map: dict | None):
        header = [h.strip() for h in header]
        missing = [c for c in ("text", "label") if c not in header]
        if missing:
            raise LabelFileProblem(f"{name} has no {' and no '.join(missing)} column (its header: {','.join(header)}); "
                                   f"the app's columns are {','.join(COLUMNS)}")
        self.at = {c: header.index(c) for c in COLUMNS if c in header}
        # a label typed by hand the way `finetune` reads a training file: 긍정 or Positive for positive (the aliases
        # apply where the model has one label of that meaning); the event keeps the model's own name
        from .labelled import label_resolver

        self.resolve = label_resolver(labels, label_map)

    def event(self, fields: list[str]) -> tuple[Event, str | None]:
        """The row's event, and what is wrong with it ("label 'posi'") or None."""
        get = {c: (fields[i].strip() if c != "text" else fields[i]) if i < len(fields) else ""
               for c, i in self.at.items()}
        label, action = get.get("label", ""), get.get("action", "") or ("answer" if get.get("label") else "skip")
        wrong = None
        if action not in ACTIONS:
            wrong = f"action {action!r} (answer, skip or undo)"
        elif action == "answer" and self.resolve(label) is None:
            wrong = f"label {label!r}"
        elif action == "answer":
            label = self.resolve(label)
        return Event(**{**{c: get.get(c, "") for c in COLUMNS}, "action": action, "label": label}), wrong


def effective(events: list[Event]) -> Effective:
    retracted = {e.undoes for e in events if e.action == "undo" and e.undoes}
    live = [e for e in events if e.action in ("answer", "skip") and (not e.answer_id or e.answer_id not in retracted)]
    latest = {}
    for e in live:
        latest[e.text] = e
    return Effective(labels={t: e.label for t, e in latest.items() if e.action == "answer"},
                     skipped={t for t, e in latest.items() if e.action == "skip"}, events=live)


