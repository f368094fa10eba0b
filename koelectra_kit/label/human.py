"""The analyst's own labels over the model's (``label human_labels=FILE``, and the app's downloads): a row whose
text the analyst labelled carries that label in ``label``; ``label_source`` says ``human`` or ``model`` (empty for
a row not labelled: a flagged one) and ``model_label`` keeps the model's own. Confidence and probabilities stay
the model's.

The labels file is either the app's LABELS.csv (an ``action`` column: the latest answer per text that no undo
retracts, ``io/labellog.py``) or a labelled table (CSV, TSV, JSONL, Parquet as ``finetune`` reads them, or an Excel
workbook's first sheet; a text column such as ``text``/``review``/``document`` and a label column such as
``label``/``sentiment``): there, a row with an empty label is no answer, and a text labelled twice takes its last
row's label (the count is reported). A file labelled with human labels before gives its ``human`` rows only; a file
``label`` wrote without them is refused (its labels are the model's). A row matches a labelled text when both
normalize to the same text (``match_key``: the key teach mode and ``suggest`` already tell reviews apart by).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..tokenizer.normalize import normalize
from .chunk import prefixed


@dataclass
class HumanLabels:
    labels: dict  # match_key(text) -> label
    path: str
    conflicts: int = 0  # texts the table labels differently on different rows (the last row's label is used)

    def digest(self) -> str:
        """What a resume and a shard's job record compare: the labels themselves, not the file's bytes."""
        h = hashlib.sha256()
        for text, label in sorted(self.labels.items()):
            h.update(f"{len(text)}:{text}{label}\n".encode())
        return h.hexdigest()[:24]


def human_columns(existing: list[str]) -> dict[str, str]:
    """Names of the two columns a labels file adds (``label_source``, ``model_label``), named as ``label`` names its
    own (``pred_`` before them when the input has one already)."""
    return prefixed(["label_source", "model_label"], existing)


def match_key(text) -> str:
    """What makes two rows the same review: the text after the toolkit's own normalization, whatever the model's
    tokenizer (``tokenizer.normalize`` with its defaults: NFC, so a Mac's decomposed Hangul is the same text;
    zero-width characters out; ㅋㅋㅋㅋ -> ㅋㅋ; spacing collapsed). Teach mode asks each such text once and
    ``suggest`` skips a labelled one by this key (``suggest.text_key`` is this), so an answer reaches every row the
    app counted as answered. A cell that is not a string is read as ``label`` reads it (a number as its digits); a
    blank or missing one has the key ""."""
    if text is None or (isinstance(text, float) and text != text):
        return ""
    return normalize(str(text))


def keyed_labels(events) -> tuple[dict, int]:
    """(match_key -> label, texts answered differently under one key) from answers in the order they were given:
    ``(text, label)`` pairs, a label of None retracting the key's (a skip that came later). The latest wins."""
    found, conflicts = {}, set()
    for text, label in events:
        key = match_key(text)
        if not key:
            continue
        if label is None:
            found.pop(key, None)
            continue
        if found.get(key, label) != label:
            conflicts.add(key)
        found[key] = label
    return found, len(conflicts)


def log_labels(state) -> tuple[dict, int]:
    """``keyed_labels`` of a LABELS.csv's effective state (``io.labellog.Effective``): its live answers and skips
    in file order, so the latest of two spellings of a review wins as the latest answer to one does."""
    return keyed_labels((e.text, e.label if e.action == "answer" else None) for e in state.events)


def apply_human_labels(chunk, names: dict, text_column: str, human: dict) -> int:
    """Put the analyst's labels (``human``: match_key -> label, ``keyed_labels``) over the model's in ``chunk`` (a
    labelled DataFrame, changed in place; ``names``: ``output_columns`` with ``human_columns``); returns the rows
    that carry one. A blank text is flagged empty and never labelled."""
    model = chunk[names["label"]]
    keys = chunk[text_column].map(match_key)
    # map(human.get), not map(human): pandas turns a dict into an index first, 10x the lookups' time for 100k labels
    answer = keys.map(human.get).where(keys != "")  # None where the analyst gave no label; a blank text never has one
    is_human = answer.notna()
    chunk[names["label_source"]] = [("human" if h else ("model" if m else "")) for h, m in zip(is_human, model)]
    chunk[names["model_label"]] = model
    chunk[names["label"]] = answer.where(is_human, model)
    return int(is_human.sum())


def check_labels_file(path: str | Path) -> Path:
    """The labels file, or one ``InputError`` line saying that it is missing, a folder or empty."""
    from ..io.fileio import check_input_file

    try:
        return check_input_file(str(path))
    except InputError as e:
        raise InputError(f"human_labels {e}") from None


def read_human_labels(path: str | Path, labels: list[str]) -> HumanLabels:
    """The effective labels of ``path`` for a model whose labels are ``labels``; one ``InputError`` line for a file
    that can't be used (missing, no text or label column, a label outside the set)."""
    from ..io.labellog import is_label_log, table_labels
    from ..io.labelcols import written_by_label
    from ..io.labelled import LABEL_COLUMNS, label_resolver
    from ..io.tables import TEXT_COLUMNS, pick_column

    src = check_labels_file(path)
    name = f"human_labels {src}"
    df, records = _read(src, name, labels)
    columns = [str(c) for c in df.columns]
    if is_label_log(columns):  # the app's log: undo and skip mean what they mean there (also saved from Excel)
        found, conflicts = log_labels(table_labels(df, name, labels, records=records))
        return HumanLabels(found, str(src), conflicts)
    text_col = pick_column(df.columns, None, TEXT_COLUMNS, name)
    label_col, sources = pick_column(df.columns, None, LABEL_COLUMNS, name), [""] * len(df)
    written = written_by_label(columns)
    if written is not None:  # `label`'s output: its model's labels are not the analyst's
        label_col, source_col = written
        if source_col is None:
            raise InputError(f"{name} is a file `label` wrote (it has confidence and status columns): its labels "
                             "are a model's, not yours; give the file you labelled")
        sources = df[source_col].tolist()  # labelled with human labels before: its human rows only
    if text_col is None or label_col is None:
        from ..io.workbook import other_sheets_hint

        missing = (TEXT_COLUMNS if text_col is None else ()) + (LABEL_COLUMNS if label_col is None else ())
        raise InputError(f"{name}: needs a text column ({', '.join(TEXT_COLUMNS[:4])}, ...) and a label column "
                         f"({', '.join(LABEL_COLUMNS[:3])}, ...); its columns: {', '.join(columns)}"
                         f"{other_sheets_hint(src, missing)}")
    resolve, answers, bad = label_resolver(labels), [], []
    for row, (text, value, source) in enumerate(zip(df[text_col].tolist(), df[label_col].tolist(), sources), 1):
        value = "" if value is None or value != value else str(value).strip()  # NaN: no label
        if source not in ("", "human") or not value:
            continue  # the model's label in a file labelled before, or no answer given
        label = resolve(value)
        if label is None:
            bad.append((row, value))
        answers.append((text, label))
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        at = _excel_rows(src, name)  # a workbook's: the row Excel shows, not the count under the header
        said = "; ".join(f"row {at[row] if at else row}: {value!r}" for row, value in bad[:3])
        raise InputError(f"{name}: {said}{more}: not one of the model's labels {', '.join(labels)}"
                         f"{resolve.alias_hint()}")  # (the aliases only where they apply: one label of that meaning)
    found, conflicts = keyed_labels(answers)
    return HumanLabels(found, str(src), conflicts)


def _excel_rows(src: Path, name: str) -> list[int] | None:
    """For a workbook: the row number Excel shows of each row of the table read from it (index 0: the header, so the
    k-th row under it is at index k); for any other file None ("row k" counts from the first row under the header,
    as the app's tables and ``label``'s output count rows)."""
    from ..io.workbook import WORKBOOK_SUFFIXES, sheet_records

    return [n for n, _ in sheet_records(src, name)] if src.suffix.lower() in WORKBOOK_SUFFIXES else None


def _read(src: Path, name: str, labels: list[str]):
    """(the labels file as a table of strings, a log's records with their lines or Excel rows, or None: ``io.
    labellog.log_records``): any format ``finetune`` reads, and an Excel workbook's first sheet (where analysts keep hand
    labels). A CSV whose last line was torn mid-write (``io.labellog.torn_tail``) is read without it, with one
    warning: this command only reads the file (``io.labellog.without_torn_tail``)."""
    import tempfile

    from ..io.labellog import log_records, without_torn_tail
    from ..io.tables import read_table
    from ..io.workbook import WORKBOOK_SUFFIXES, xlsx_to_csv

    try:
        if src.suffix.lower() in WORKBOOK_SUFFIXES:
            with tempfile.TemporaryDirectory(prefix="koelectra-labels-") as tmp:
                xlsx_to_csv(src, Path(tmp) / "sheet.csv", name)
                df = read_table(Path(tmp) / "sheet.csv", encoding="utf-8")
                return df, log_records(src, df)  # a log's rows as Excel numbers them
        with without_torn_tail(src, name, labels) as readable:
            df = read_table(readable)
            return df, log_records(readable, df)
    except InputError as e:
        if "not UTF-8 or cp949" in str(e):  # the reader's hint names the input's encoding= option, not this one
            raise InputError(f"{name}: not UTF-8 or cp949 text; save it as 'CSV UTF-8'") from None
        raise InputError(str(e) if str(e).startswith(name) else f"human_labels {e}") from None
