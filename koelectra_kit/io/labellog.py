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
skip). A label may be typed as ``finetune`` reads one (긍정/부정/중립, pos/neg, any case).
"""
from __future__ import annotations

import csv
import io
from dataclasses import dataclass

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


APP_FIX = "fix the file (the app has not changed it, and takes answers again once it reads well)"


def is_label_log(columns) -> bool:
    """Whether a table's columns are the app's LABELS.csv (text, label and action): a log to read with its
    meaning (``effective``), not row by row, where an undone or superseded answer would still count."""
    names = {str(c).strip() for c in columns}
    return {"text", "label", "action"} <= names


def table_labels(df, name: str, labels: list[str], fix: str = "fix the file",
                 label_map: dict | None = None) -> Effective:
    """The effective labels of a LABELS.csv read as a table of strings (``df``; any format it was saved in);
    ``fix``: what a label outside ``labels`` is told to do; ``label_map``: file value -> label, as a training file's."""
    header = [str(c) for c in df.columns]
    return effective(events_of([header, *df.fillna("").astype(str).values.tolist()], name, labels, fix, label_map))


def parse(data: bytes, name: str, labels: list[str], fix: str = APP_FIX,
          label_map: dict | None = None) -> list[Event]:
    """The events of a LABELS.csv's bytes; ``LabelFileProblem`` (one line) for anything the app can't use."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError:
        raise LabelFileProblem(f"{name} is not UTF-8 (saved as cp949 by Excel?): save it as 'CSV UTF-8'") from None
    return events_of(list(csv.reader(io.StringIO(text, newline=""))), name, labels, fix, label_map)


def events_of(rows: list[list[str]], name: str, labels: list[str] | None, fix: str = APP_FIX,
              label_map: dict | None = None) -> list[Event]:
    """The events of a LABELS.csv's rows (the header first), read as ``parse`` reads its bytes. ``labels`` None:
    labels are kept as written, unchecked (for which texts are answered, not what they were answered)."""
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
    from .labelled import label_resolver

    resolve = label_resolver(labels, label_map) if labels is not None else (lambda value: value or None)
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
                               f"{', '.join(labels)}; {fix}")
    return events


def effective(events: list[Event]) -> Effective:
    retracted = {e.undoes for e in events if e.action == "undo" and e.undoes}
    live = [e for e in events if e.action in ("answer", "skip") and (not e.answer_id or e.answer_id not in retracted)]
    latest = {}
    for e in live:
        latest[e.text] = e
    return Effective(labels={t: e.label for t, e in latest.items() if e.action == "answer"},
                     skipped={t for t, e in latest.items() if e.action == "skip"}, events=live)


