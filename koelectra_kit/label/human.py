"""The analyst's own labels over the model's (``label human_labels=FILE``, and the app's downloads): a row whose
text the analyst labelled carries that label in ``label``; ``label_source`` says ``human`` or ``model`` (empty for
a row not labelled: a flagged one) and ``model_label`` keeps the model's own. Confidence and probabilities stay
the model's.

The labels file is either the app's LABELS.csv (an ``action`` column: the latest answer per text that no undo
retracts, ``io/labellog.py``) or a labelled table (CSV, TSV, JSONL, Parquet as ``finetune`` reads them, or an Excel
workbook's first sheet; a text column such as ``text``/``review``/``document`` and a label column such as
``label``/``sentiment``): there, a row with an empty label is no answer, and a text labelled twice takes its last
row's label (the count is reported). A file labelled with human labels before gives its ``human`` rows only; a file
``label`` wrote without them is refused (its labels are the model's). A row matches a labelled text when both are
the same in NFC with their spacing collapsed (``match_key``).
"""
from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from .chunk import prefixed


@dataclass
class HumanLabels:
    labels: dict  # text -> label
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
    """What two texts must share to be the same review here: the text in NFC with its spacing collapsed. A file
    saved on a Mac can hold decomposed Hangul (NFD), which looks the same and compares unequal; a spreadsheet adds or
    drops spaces. Nothing else is folded ("ㅋㅋㅋ" and "ㅋㅋ" stay two texts). A blank text has the key ""."""
    return " ".join(unicodedata.normalize("NFC", text).split()) if isinstance(text, str) else ""


def apply_human_labels(chunk, names: dict, text_column: str, human: dict) -> int:
    """Put the analyst's labels (``human``: text -> label) over the model's in ``chunk`` (a labelled DataFrame,
    changed in place; ``names``: ``output_columns`` with ``human_columns``); returns the rows that carry one. Texts
    match by ``match_key``; a blank text is flagged empty and never labelled."""
    keyed = {match_key(t): lab for t, lab in human.items()}
    keyed.pop("", None)
    model = chunk[names["label"]]
    answer = chunk[text_column].map(lambda t: keyed.get(match_key(t)))  # None where the analyst gave no label
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
    from ..io.labelled import LABEL_COLUMNS, label_resolver
    from ..io.tables import TEXT_COLUMNS, pick_column

    src = check_labels_file(path)
    name = f"human_labels {src}"
    df = _read(src, name)
    columns = [str(c) for c in df.columns]
    if is_label_log(columns):  # the app's log: undo and skip mean what they mean there (also saved from Excel)
        return HumanLabels(table_labels(df, name, labels).labels, str(src))
    text_col = pick_column(df.columns, None, TEXT_COLUMNS)
    label_col = pick_column(df.columns, None, LABEL_COLUMNS)
    if text_col is None or label_col is None:
        raise InputError(f"{name}: needs a text column ({', '.join(TEXT_COLUMNS[:4])}, ...) and a label column "
                         f"({', '.join(LABEL_COLUMNS[:3])}, ...); its columns: {', '.join(columns)}")
    sources = [""] * len(df)
    if "label_source" in columns:  # a file labelled with human labels before (label, the app): its human rows only
        sources = df["label_source"].tolist()
    elif {"confidence", "status"} <= set(columns):  # `label`'s own output: every label in it is the model's
        raise InputError(f"{name} is a file `label` wrote (it has confidence and status columns): its labels are a "
                         "model's, not yours; give the file you labelled")
    resolve = label_resolver(labels)
    found, bad, conflicts = {}, [], set()
    for row, (text, value, source) in enumerate(zip(df[text_col].tolist(), df[label_col].tolist(), sources), 1):
        if source not in ("", "human"):
            continue  # the model's label in a file labelled before
        text = match_key(text)  # two spellings of one review are one text (and one conflict when labelled apart)
        value = "" if value is None or value != value else str(value).strip()  # NaN: no label
        if not text or not value:
            continue  # nothing to match, or no answer given
        label = resolve(value)
        if label is None:
            bad.append(f"row {row}: {value!r}")
            continue
        if found.get(text, label) != label:
            conflicts.add(text)
        found[text] = label
    if bad:
        more = f" and {len(bad) - 3} more" if len(bad) > 3 else ""
        raise InputError(f"{name}: {'; '.join(bad[:3])}{more}: not one of the model's labels {', '.join(labels)} "
                         "(or 긍정/부정/중립, pos/neg/neu)")
    return HumanLabels(found, str(src), len(conflicts))


def _read(src: Path, name: str):
    """The labels file as a table of strings: any format ``finetune`` reads, and an Excel workbook's first sheet
    (where analysts keep hand labels)."""
    import tempfile

    from ..io.tables import read_table
    from ..io.workbook import WORKBOOK_SUFFIXES, xlsx_to_csv

    try:
        if src.suffix.lower() not in WORKBOOK_SUFFIXES:
            return read_table(src)
        with tempfile.TemporaryDirectory(prefix="koelectra-labels-") as tmp:
            xlsx_to_csv(src, Path(tmp) / "sheet.csv", name)
            return read_table(Path(tmp) / "sheet.csv", encoding="utf-8")
    except InputError as e:
        if "encoding" in str(e):  # the reader's hint names the input's encoding= option, not this file's
            raise InputError(f"{name}: not UTF-8 or cp949 text; save it as 'CSV UTF-8'") from None
        raise InputError(str(e) if str(e).startswith(name) else f"human_labels {e}") from None
