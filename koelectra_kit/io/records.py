"""The streaming side of the table reader (``tables`` re-exports it): ``read_records`` yields one ``Record`` per
row of a CSV, TSV, JSONL, Parquet or .txt file, a malformed line kept as a flagged record, so a file of any size is
read in flat memory and one bad line costs one row. ``tables`` holds the formats, encodings and column rules."""
from __future__ import annotations

import csv
import io
import json
import re
import numbers
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator

from ..errors import InputError

# A JSON string may escape half of a UTF-16 pair alone ("\\ud83d": a tool that cut an emoji in two). json.loads makes
# it a str no encoder writes and the tokenizer's Rust side refuses: a traceback mid-run, or an output half-written.
_LONE_SURROGATE = re.compile("[\ud800-\udfff]")
LINES_COLUMN = "text"  # a .txt file's one column: a review per line, no header

# A review may be longer than the csv module's default 128 KiB field limit; that is legal CSV, so lift it.
csv.field_size_limit(2**31 - 1)


@dataclass
class Record:
    fields: list  # one value per header column (padded/cut for malformed lines)
    line: int  # 1-based physical line where the record starts (header = line 1)
    error: str | None = None
    raw: str | None = None  # a malformed record's text exactly as read (its fields can't be trusted)


def _csv_records(lines: Iterator[str], sep: str, header_len: int, start_line: int,
                 max_record_lines: int = 200) -> Iterator[Record]:
    """RFC 4180 records from physical lines. A record is complete when its quotes balance (doubled quotes
    inside a quoted field keep the parity even); one that does not balance within ``max_record_lines`` lines
    or by the end of the file has an unbalanced quote: its first line becomes an error row and the lines
    after it are read again, so one stray quote costs one row, not the rest of the file."""
    from collections import deque

    def parse(text: str, lineno: int) -> Record:
        try:
            # a record without a quote, a line break or a NUL (which Python 3.10's csv refuses) reads as its fields
            # split at the delimiter, as the csv module reads it (tests/test_tables.py compares the two on random
            # lines of separators and control characters); a reader per line cost label ~13 ms per 4,000 rows
            row = text.split(sep) if not ('"' in text or "\r" in text or "\n" in text or "\0" in text) else \
                next(csv.reader([text], delimiter=sep, strict=True), [])
        except csv.Error as e:
            return Record(fit_fields([text], header_len), lineno, f"malformed line {lineno}: {e}", raw=text)
        if len(row) != header_len:
            return Record(fit_fields(row, header_len), lineno,
                          f"malformed line {lineno}: {len(row)} fields, expected {header_len}", raw=text)
        return Record(row, lineno)

    source = ((start_line + i, ln) for i, ln in enumerate(lines))
    again: deque = deque()  # lines to read again after a bad one was cut out
    pending: list[tuple[int, str]] = []
    quotes = 0
    while True:
        if again:
            item = again.popleft()
        else:
            item = next(source, None)
        if item is None:
            if not pending:
                return
            # end of file inside a quoted field: the first pending line has the stray quote
            (lineno, bad), rest = pending[0], pending[1:]
            yield Record(fit_fields([bad.rstrip("\r\n")], header_len), lineno, f"malformed line {lineno}: unbalanced quote",
                         raw=bad.rstrip("\r\n"))
            again.extendleft(reversed(rest))
            pending, quotes = [], 0
            continue
        lineno, line = item
        pending.append((lineno, line))
        quotes += line.count('"')
        if quotes % 2 == 0:
            text = "".join(ln for _, ln in pending).rstrip("\r\n")
            rec = parse(text, pending[0][0]) if text or len(pending) > 1 else None
            if rec is not None and rec.error and len(pending) > 1:
                # The quotes balanced only by swallowing later lines and the result is not a valid record:
                # the first line's quote was stray. Flag that line alone and read the others again.
                (lineno, bad), rest = pending[0], pending[1:]
                rec = Record(fit_fields([bad.rstrip("\r\n")], header_len), lineno,
                             f"malformed line {lineno}: unbalanced quote", raw=bad.rstrip("\r\n"))
                again.extendleft(reversed(rest))
            if rec is not None:
                yield rec
            pending, quotes = [], 0
        elif len(pending) >= max_record_lines:
            (lineno, bad), rest = pending[0], pending[1:]
            yield Record(fit_fields([bad.rstrip("\r\n")], header_len), lineno, f"malformed line {lineno}: unbalanced quote",
                         raw=bad.rstrip("\r\n"))
            again.extendleft(reversed(rest))
            pending, quotes = [], 0


def csv_records(lines: Iterable[str], **dialect) -> Iterator[tuple[int, list[str]]]:
    """(line, fields) of each record the csv module reads from ``lines`` (a file opened with ``newline=""``, or its
    lines): ``line`` is where the record starts, 1-based as an editor numbers lines (the header is line 1). A quoted
    field with line ends in it spans several lines and a blank line is a record of no fields, so counting records
    would name a later line wrongly in an editor. ``dialect``: the reader's (``delimiter``, ``quoting``)."""
    reader = csv.reader(lines, **dialect)
    while True:
        line = reader.line_num + 1  # the reader takes lines only as a record needs them: the next one starts here
        fields = next(reader, None)
        if fields is None:
            return
        yield line, fields


def cell_text(value) -> tuple[str, str | None]:
    """(the text a text column's cell holds, why it holds none or None). None and NaN are empty; bytes (a Parquet
    binary column: Spark and older writers store strings so, with no UTF-8 mark) are their UTF-8 text; a number or a
    bool its str(), as a review of "10" is. A JSON object or array (a JSONL or Parquet nested value) and bytes that
    are not UTF-8 hold no review: empty, and the reason (``label`` gives the row that status, ``error: ...``). A numpy
    array is an array too (what pandas reads a Parquet list column as): its printed form was labelled as a review."""
    if isinstance(value, str):  # first: nearly every cell is one
        return value, None
    if value is None or type(value).__name__ in ("NAType", "NaTType"):  # pandas' missing values: pd.NA, pd.NaT
        return "", None
    if isinstance(value, numbers.Real) and value != value:  # NaN of any float type (numpy's float32 too)
        return "", None
    if isinstance(value, (bytes, bytearray)):
        try:
            return bytes(value).decode("utf-8"), None
        except UnicodeDecodeError:
            return "", "the text is binary data, not UTF-8 text"
    if isinstance(value, (dict, list, tuple)) or getattr(value, "ndim", 0):  # (a numpy scalar's ndim is 0)
        return "", f"the text is a JSON {'object' if isinstance(value, dict) else 'array'}, not a string"
    return str(value), None


def texts_of(texts) -> list[str]:
    """``texts`` (a list, tuple, Series, 1-D array, Index, generator, a Dataset's column) as the strings a model
    reads, each as a file's cell is read (``cell_text``: missing values empty, bytes as UTF-8). What is not one column
    of texts is refused, since read item by item each was scored as something else, without a word: a str (each
    character a text), a dict (its keys), a DataFrame (its column names), a ``datasets.Dataset`` (each row's dict, as
    the empty text), a 2-D array (each row, as the empty text), a set (no order to answer in)."""
    name = type(texts).__name__
    if texts is None or isinstance(texts, (str, bytes, bytearray)):
        raise InputError(f"texts: a list of texts, not {name}; put one text in a list: [text]")
    if hasattr(texts, "columns"):  # pandas', polars' DataFrame
        raise InputError(f"texts: a list of texts, not a {name}; pass its text column: df[\"review\"]")
    if hasattr(texts, "column_names"):  # datasets' Dataset, IterableDataset, DatasetDict
        raise InputError(f"texts: a list of texts, not a {name}; pass its text column: ds[\"text\"]")
    if isinstance(texts, dict):
        raise InputError("texts: a list of texts, not a dict; pass the texts themselves: list(d.values())")
    if isinstance(texts, (set, frozenset)):
        raise InputError(f"texts: a list of texts, not a {name} (no order for the answers); pass a list")
    if getattr(texts, "ndim", 1) != 1:  # a numpy array of any other shape; a Series and an Index are 1-D
        shape = tuple(getattr(texts, "shape", ()))
        raise InputError(f"texts: a 1-D array of texts, not one of shape {shape}; pass one column: a[:, 0], or "
                         "a.ravel() for every cell")
    return [cell_text(t)[0] for t in texts]


def fit_fields(row: list, n: int) -> list:
    """``row`` padded with "" or cut to ``n`` fields."""
    return (list(row) + [""] * n)[:n]


def _tsv_records(lines: Iterator[str], header_len: int, start_line: int) -> Iterator[Record]:
    # TSV as NLP corpora write it: unquoted, one record per line (a quote is text).
    for i, line in enumerate(lines):
        row = line.rstrip("\r\n").split("\t")
        lineno = start_line + i
        if len(row) != header_len:
            yield Record(fit_fields(row, header_len), lineno,
                         f"malformed line {lineno}: {len(row)} fields, expected {header_len}", raw=line.rstrip("\r\n"))
        else:
            yield Record(row, lineno)


def class_label_decoders(features: dict | None) -> dict[str, Callable]:
    """{column: stored value -> what it means} for the ``ClassLabel`` columns of a ``datasets`` features dict in its
    JSON form (``Features.to_dict()``, or a Parquet file's ``huggingface`` metadata), lists of them (multi-label
    tags) included: every reader sees what a file would spell out (NSMC's 0/1 as negative/positive), so label sets
    and aliases match and ``label`` copies the names into its output. -1 ("no label") is a missing value; an integer
    past the names (no ``ClassLabel`` encoder lets one in) stays as stored."""
    out = {}
    for column, feature in (features or {}).items():
        if (decode := _decoder(feature)) is not None:
            out[column] = decode
    return out


def _decoder(feature) -> Callable | None:
    if isinstance(feature, dict) and feature.get("_type") == "ClassLabel" and isinstance(feature.get("names"), list):
        names = feature["names"]
        return lambda v: None if v is None or v == -1 else \
            names[v] if isinstance(v, int) and 0 <= v < len(names) else v
    inner = feature[0] if isinstance(feature, list) and len(feature) == 1 else \
        feature.get("feature") if isinstance(feature, dict) else None  # [ClassLabel], Sequence / List of one
    one = _decoder(inner) if isinstance(inner, dict) and inner.get("_type") == "ClassLabel" else None
    return None if one is None else (lambda vs: None if vs is None else [one(v) for v in vs])


def _hf_features(schema) -> dict | None:
    """The ``datasets`` features a Parquet file's schema records (None: a file another tool wrote)."""
    try:
        return json.loads((schema.metadata or {})[b"huggingface"])["info"]["features"]
    except (KeyError, ValueError, TypeError):
        return None


def read_records(path: Path, fmt: str, encoding: str, sep: str | None, errors: str = "strict",
                 stop: int | None = None) -> tuple[list[str], Iterator[Record]]:
    """(columns, records) streamed from the file. ``errors="replace"`` decodes bytes invalid in ``encoding``
    as U+FFFD instead of failing. ``stop``: read a text file's first ``stop`` bytes only (its size when a run
    started: what is appended meanwhile, half a row included, is not read)."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise InputError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
        columns = pf.schema_arrow.names
        # a file `datasets` wrote (to_parquet, the hub's Parquet copies) keeps its features in the schema: a ClassLabel
        # column reads as its names, as the same dataset's save_to_disk folder does (hfdata), not its integers
        decode = {columns.index(c): f for c, f in class_label_decoders(_hf_features(pf.schema_arrow)).items()
                  if c in columns}

        def gen():
            n = 0
            for batch in pf.iter_batches(batch_size=8192):
                cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                for i, to_names in decode.items():
                    cols[i] = [to_names(v) for v in cols[i]]
                for row in zip(*cols):
                    n += 1
                    yield Record(list(row), n + 1)
        return columns, gen()
    f = open(path, encoding=encoding, errors=errors, newline="") if stop is None else \
        io.TextIOWrapper(io.BufferedReader(_Upto(open(path, "rb", buffering=0), stop), 1 << 16), encoding=encoding,
                         errors=errors, newline="")
    if fmt == "jsonl":
        return _jsonl_records(path, f, errors)
    if fmt == "txt":
        return [LINES_COLUMN], _closing(f, (Record([line.rstrip("\r\n").lstrip("\ufeff") if i == 1 else
                                                    line.rstrip("\r\n")], i) for i, line in enumerate(f, 1)))
    sep = sep or ("\t" if fmt == "tsv" else ",")
    header_line, blank = f.readline(), 0
    while header_line and not header_line.lstrip("\ufeff").strip():  # blank lines above the header: skipped, as
        header_line, blank = f.readline(), blank + 1                   # pandas does (the header was read as none)
    if not header_line:
        f.close()
        raise InputError(f"{path}: empty file (no header row)")
    header = next(csv.reader([header_line.rstrip("\r\n")], delimiter=sep))
    header = [h.lstrip("\ufeff") for h in header]
    if fmt == "tsv" and sep == "\t":
        return header, _closing(f, _tsv_records(f, len(header), 2 + blank))
    return header, _closing(f, _csv_records(f, sep, len(header), 2 + blank))


def check_lines_file(path: Path, encoding: str, text_column: str | None, default_column: str | None,
                     fmt_given: str | None) -> None:
    """A .txt input is one review per line, no columns. Refuse a ``text_column`` it can't have (other than the
    default and ``text``), and, unless ``--format txt`` says so, a .txt whose first lines all hold the same number of
    tabs: a table saved as text (Excel's "Unicode Text" is tab-separated with a header), whose header would be
    labelled as a review and whose ids would be glued to each text."""
    if text_column not in (None, default_column, LINES_COLUMN):
        raise InputError(f"{path}: a .txt file is read as one review per line, with no columns, so text column "
                         f"{text_column!r} names nothing; for a table saved as text (Excel's 'Unicode Text' is "
                         "tab-separated, its cells quoted where they hold tabs, quotes or line breaks) pass "
                         "--format csv --sep '\\t'")
    if fmt_given == "txt":
        return
    tabs = []
    with open(path, encoding=encoding, errors="replace", newline="") as f:
        for line in f:
            if line.strip():
                tabs.append(line.count("\t"))
            if len(tabs) == 20:
                break
    # the first line's count on most lines, not on every one: a cell Excel quotes across lines breaks the run
    if len(tabs) >= 2 and tabs[0] > 0 and 2 * tabs.count(tabs[0]) > len(tabs):
        lines = "every line holds" if len(set(tabs)) == 1 else f"{tabs.count(tabs[0])} of the first {len(tabs)} lines hold"
        raise InputError(f"{path}: {lines} {tabs[0]} tab{'s' if tabs[0] > 1 else ''}: a tab-separated table "
                         "saved as .txt (Excel's 'Unicode Text')? Pass --format csv --sep '\\t' (and "
                         "--text-column; Excel quotes the cells that hold tabs, quotes or line breaks, which "
                         "--format tsv would read as text), or --format txt to label each whole line as one review")


def _whole_characters(value, path: Path, lineno: int, errors: str):
    """``value`` (a JSON line's, nested or not) without lone surrogates: under ``errors="replace"`` each becomes
    U+FFFD, as an undecodable byte does; otherwise one line naming the line and the way past it."""
    if isinstance(value, str):
        if not _LONE_SURROGATE.search(value):
            return value
        if errors != "replace":
            raise InputError(f"{path}: line {lineno} holds {_LONE_SURROGATE.search(value).group()!r}, half of a "
                             "UTF-16 pair escaped alone (a tool cut a character in two), which is no character: "
                             "fix the line (`label --encoding-errors replace` reads each such half as U+FFFD)")
        return _LONE_SURROGATE.sub("\ufffd", value)
    if isinstance(value, dict):
        return {_whole_characters(k, path, lineno, errors): _whole_characters(v, path, lineno, errors)
                for k, v in value.items()}
    if isinstance(value, list):
        return [_whole_characters(v, path, lineno, errors) for v in value]
    return value


class JsonNumber(float):
    """A JSON number with a fraction or an exponent as a JSONL line spelled it: its value, and its text (``text``),
    which ``label``'s JSONL output writes back (``label.writer.json_line``): ``1E2`` stays ``1E2``, not ``100.0``,
    and ``1e400``, past a float's range, stays itself, not ``Infinity``, which strict JSON readers refuse."""

    __slots__ = ("text",)

    def __new__(cls, text: str):
        number = super().__new__(cls, text)
        number.text = text
        return number


def _jsonl_records(path: Path, f, errors: str = "strict") -> tuple[list[str], Iterator[Record]]:
    """A JSONL's columns are every key any of its objects has, in the order they first appear: an object may leave
    out a key (a review with no reply), and the first object alone lost the keys that came later (a text column
    that first appears on line 2 was "no column"). So one pass collects them before the rows stream."""
    keys, first = {}, None
    for lineno, line in enumerate(f, 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except json.JSONDecodeError:
            if first is None:
                f.close()
                raise InputError(f"{path}: line {lineno} is not JSON; a .jsonl file has one object per line") \
                    from None
            continue  # a malformed line: flagged when the rows stream
        if first is None and not isinstance(obj, dict):
            f.close()
            raise InputError(f"{path}: line {lineno} is a JSON {type(obj).__name__}, not an object; a .jsonl file "
                             "has one object per line (its keys are the columns)")
        first = first or lineno
        if isinstance(obj, dict):
            try:
                keys.update(dict.fromkeys(_whole_characters(list(obj), path, lineno, errors)))
            except InputError:
                f.close()
                raise
    columns = list(keys)
    f.seek(0)

    def gen_json():
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line, parse_float=JsonNumber)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
                obj = _whole_characters(obj, path, i, errors)
                yield Record([obj.get(c) for c in columns], i)
            except ValueError as e:
                yield Record([None] * len(columns), i, f"malformed line {i}: not a JSON object ({e})",
                             raw=line.rstrip("\r\n"))

    return columns, _closing(f, gen_json())


class _Upto(io.RawIOBase):
    """A binary file that ends at byte ``stop``."""

    def __init__(self, f, stop: int):
        self.f, self.stop = f, stop

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def readinto(self, b) -> int:
        n = max(0, min(len(b), self.stop - self.f.tell()))
        return self.f.readinto(memoryview(b)[:n]) if n else 0

    def seek(self, pos: int, whence: int = 0) -> int:
        return self.f.seek(pos, whence)

    def tell(self) -> int:
        return self.f.tell()

    def close(self) -> None:
        self.f.close()
        super().close()


def _closing(f, it):
    # close the file when the record stream is exhausted or dropped
    try:
        yield from it
    finally:
        f.close()
