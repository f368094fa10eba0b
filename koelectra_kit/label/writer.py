"""How a chunk of labelled rows is written: CSV, TSV (no quoting: tabs and line breaks in a cell become spaces) or
JSONL (each value with JSON's own type), JSON objects and arrays as their JSON text, binary values (a Parquet binary
column) as their UTF-8 text or else ``base64:`` and their base64 (``binary_text``), and the chunk's bytes in the
output's encoding (a BOM only at the very start). ``FileLabeller`` (run.py) appends each chunk; the app's
downloads (app/results.py) write with the same functions."""
from __future__ import annotations

import base64
import codecs
import csv
import json
import re

from ..errors import InputError
from ..io.csvlines import frame_csv
from ..io.records import JsonNumber


def write_chunk(f, df, fmt: str, header: bool) -> int:
    """``df`` as ``fmt`` (csv, tsv or jsonl) into ``f``; returns the cells a TSV had to change (``tsv_cells``)."""
    if fmt == "jsonl":
        # json.dumps, not DataFrame.to_json: that keeps 10 significant digits of a float (0.12345678901234567 came
        # back 0.123456789) and fails on a repeated column name (refused before labelling: ``check_json_keys``)
        columns = [str(c) for c in df.columns]
        f.writelines(json_line(columns, row) for row in df.itertuples(index=False, name=None))
        return 0
    df = plain_cells(df)
    if fmt == "tsv":
        df, changed = tsv_cells(df)
        df.to_csv(f, sep="\t", index=False, header=header, lineterminator="\n", quoting=csv.QUOTE_NONE)
        return changed
    f.write(frame_csv(df, header))  # a cell with a lone "\r" quoted (io/csvlines.py)
    return 0


def json_line(columns: list[str], values) -> str:
    """One JSONL object: the values as they were read (JSON's own types; a JSONL input's numbers with a fraction or
    an exponent as it spelled them, ``records.JsonNumber``), numpy scalars as Python's, NaN (pandas' missing value) as
    null, a date or time (a Parquet input's) in ISO 8601, bytes as ``binary_text``, anything else JSON lacks as its
    text. Laid out as ``json.dumps`` lays out an object."""
    return "{" + ", ".join(f"{json.dumps(c, ensure_ascii=False)}: {_json_value(v)}" for c, v in zip(columns, values)) \
        + "}\n"


def _json_value(v) -> str:
    if isinstance(v, JsonNumber):  # its own text
        return v.text
    return json.dumps(_json_plain(v), ensure_ascii=False, default=_json_other)


def _json_plain(v):
    if type(v).__module__ == "numpy" and hasattr(v, "item"):
        v = v.item()
    if type(v).__name__ == "NAType":  # pd.NA: a flagged row's confidence and prob_ (chunk._rounded), written "<NA>"
        return None
    if isinstance(v, (bytes, bytearray)):
        return binary_text(v)
    return None if isinstance(v, float) and v != v else v


def _json_other(v):
    return v.isoformat() if hasattr(v, "isoformat") else str(v)


def check_json_keys(columns: list[str], path) -> None:
    """A JSONL object can't hold two keys of one name: a table with a repeated column name is refused before any
    labelling, rather than one of the two columns dropped."""
    seen = [c for i, c in enumerate(columns) if c in columns[:i]]
    if seen:
        raise InputError(f"{path}: column {seen[0]!r} appears more than once, and a JSONL object can't hold two keys "
                         "of one name; write .csv or .tsv, or rename the columns")


BASE64 = "base64:"  # what a binary value that is not UTF-8 text starts with in an output


def binary_text(v: bytes) -> str:
    """A binary value as a cell's text: its UTF-8 text where it is text (Spark and older writers store strings as
    binary with no UTF-8 mark: ``records.cell_text`` reads a text column's so), else ``base64:`` and its base64
    (``base64.b64decode`` of the rest gives the bytes back). pandas wrote its Python repr (``b'\\xed\\x95...'``), which
    no reader takes back and which hid Korean text behind escapes. Bytes that decode but hold a control character
    other than a tab or line break (a hash, a packed id: b"\\x00\\x07") are data, not text: base64 too."""
    try:
        text = bytes(v).decode("utf-8")
    except UnicodeDecodeError:
        text = None
    if text is None or _CONTROL.search(text):
        return BASE64 + base64.b64encode(bytes(v)).decode("ascii")
    return text


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f]")


_PLAIN_KINDS = {"string", "empty", "integer", "floating", "mixed-integer-float", "boolean", "decimal", "datetime",
                "datetime64", "date", "time", "timedelta", "timedelta64", "period", "interval", "complex"}


def plain_cells(df):
    """``df`` with each JSON object or array (a JSONL's nested value, a Parquet list, struct or map) as its JSON text,
    as the input held it, each binary value as ``binary_text``, and each number a JSONL spelled with a fraction or
    an exponent as it spelled it (``records.JsonNumber``, as the JSONL output writes it); pandas wrote their Python
    repr ("{'a': 1, 'b': None}", "['x', 'y']", "b'\\x00'") and str(float) (1E2 as 100.0, 1e400 as inf)."""
    from pandas.api.types import infer_dtype, is_numeric_dtype

    out = df
    for j in range(df.shape[1]):
        col = df.iloc[:, j]
        if is_numeric_dtype(col.dtype):  # (the prob_ columns label adds): plain numbers
            continue
        kind = infer_dtype(col, skipna=True)
        # a column of plain scalars (pandas' C type scan: "string", ...) holds none of them; a Python call per cell
        # was a seventh of labelling time with a small model. Floats may be JsonNumbers: looked at.
        if kind in _PLAIN_KINDS and kind not in ("floating", "mixed-integer-float"):
            continue
        hit = col.map(_needs_text).to_numpy(bool)
        if hit.any():
            out = out.copy() if out is df else out
            values = col.to_numpy(dtype=object, copy=True)
            values[hit] = [_cell_text(v) for v in values[hit]]
            out.isetitem(j, values)
    return out


def _needs_text(v) -> bool:
    return isinstance(v, (dict, list, tuple, bytes, bytearray, JsonNumber))


def _cell_text(v) -> str:
    if isinstance(v, (bytes, bytearray)):
        return binary_text(v)
    if isinstance(v, JsonNumber):
        return v.text
    return json.dumps(v, ensure_ascii=False, default=_json_other)


_BREAKS = re.compile(r"\r\n|[\t\r\n]")


def tsv_cells(df):
    """(``df`` with each tab or line break inside a cell written as a space, the cells changed). A TSV is written
    as every TSV here is read, with no quoting (review sets hold unbalanced '"'; ``io.tables``), so a cell can hold
    neither. CSV quoting (what was written before) came back with its quotes doubled in the text."""
    from pandas.api.types import is_numeric_dtype

    changed, out = 0, df
    for j in range(df.shape[1]):
        col = df.iloc[:, j]
        if is_numeric_dtype(col.dtype):
            continue
        hit = col.map(lambda v: isinstance(v, str) and ("\t" in v or "\n" in v or "\r" in v)).to_numpy(bool)
        if hit.any():
            out = out.copy() if out is df else out
            values = col.to_numpy(dtype=object, copy=True)
            values[hit] = [_BREAKS.sub(" ", v) for v in values[hit]]
            out.isetitem(j, values)
            changed += int(hit.sum())
    if any(_BREAKS.search(str(c)) for c in df.columns):  # a header cell too
        out = out.set_axis([_BREAKS.sub(" ", str(c)) for c in df.columns], axis=1)
    return out, changed


def encoded(text: str, encoding: str, first: bool, lines_before: int) -> bytes:
    """A chunk's bytes. A BOM (utf-8-sig: Excel needs it to read UTF-8; utf-16) only at the very start of the file,
    as a text-mode append would do. A character ``--output-encoding`` can't store (cp949 has no emoji) is one
    error line naming it."""
    encoder = codecs.getincrementalencoder(encoding)()
    if not first:
        encoder.setstate(0)  # what TextIOWrapper does when it opens a file to append: no BOM mid-file
    try:
        return encoder.encode(text, final=True)
    except UnicodeEncodeError as e:
        bad = e.object[e.start:e.end]
        line = lines_before + text.count("\n", 0, e.start) + 1
        raise InputError(f"output line {line} holds {bad!r} (U+{ord(bad[0]):04X}), which {encoding} can't store; "
                         "rerun without --output-encoding (UTF-8 stores every character), with --overwrite: a resume "
                         "continues in the encoding the file began with") from None
