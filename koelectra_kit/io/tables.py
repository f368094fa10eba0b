"""The one table reader. Review tables come the way Korean users have them: CSV/TSV/JSONL/Parquet, in
UTF-8, UTF-8 with a BOM (Excel), cp949/EUC-KR (older Windows exports) or UTF-16/32 with a BOM (Excel's "Unicode
Text"), with a clear error for anything else. Two ways to read one:

- ``read_table``: the whole table as strings (fine-tuning, evaluation, the baseline);
- ``read_records``: a stream of records with malformed lines kept as flagged records (labelling, corpora),
  so a file of any size is read in flat memory and one bad line costs one row, not the file.

Both apply the same format, encoding and quoting rules: CSV follows RFC 4180; TSV is unquoted (a quote is
text), the way NLP corpora write it. Hugging Face datasets (``hf:...``, ``save_to_disk`` and Parquet folders) are
read by ``hfdata``, which builds on this module (``Record``, ``pick_column``, ``TEXT_COLUMNS``).
"""
from __future__ import annotations

import codecs
import csv
import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from .fileio import check_input_file
from .workbook import EXCEL_SUFFIXES

# A review may be longer than the csv module's default 128 KiB field limit; that is legal CSV, so lift it.
csv.field_size_limit(2**31 - 1)

# Column names tried, in order, when no text column is given (every stage uses this one list).
TEXT_COLUMNS = ("review", "text", "document", "sentence", "comment", "comments", "content", "contents", "body",
                "리뷰", "내용", "댓글", "텍스트", "문장")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl",
           ".parquet": "parquet", ".pq": "parquet", ".txt": "txt"}
# A .txt file is one review per line and no header (a corpus, a pasted list): its one column is named this.
LINES_COLUMN = "text"
# cp949 is a superset of EUC-KR, so trying it covers both.
CANDIDATE_ENCODINGS = ("utf-8", "cp949")


def is_wide(encoding: str | None) -> bool:
    """UTF-16/32 (detected by their BOM, or given): a b"\n" byte is not a line end there, so readers that split
    raw bytes at newlines must decode first."""
    try:
        return bool(encoding) and codecs.lookup(encoding).name.startswith(("utf-16", "utf-32"))
    except LookupError:
        return False


def refuse_workbook(path: str | Path) -> None:
    """An Excel workbook is a zip file: read as text it is noise. Only the web app converts one."""
    if Path(path).suffix.lower() in EXCEL_SUFFIXES:
        raise InputError(f"{path} is an Excel workbook; this command reads csv, tsv, jsonl, parquet: save the sheet "
                         "as 'CSV UTF-8' in Excel (`koelectra-kit label` and `koelectra-kit app` read .xlsx)")


def table_format(path: str | Path, fmt: str | None = None) -> str:
    """csv | tsv | jsonl | parquet | txt (one review per line, no header), from ``fmt`` or the file extension."""
    if fmt:
        if fmt not in set(FORMATS.values()):
            raise InputError(f"unknown format '{fmt}'; use one of csv, tsv, jsonl, parquet, txt")
        return fmt
    ext = Path(path).suffix.lower()
    refuse_workbook(path)
    if ext not in FORMATS:
        raise InputError(f"{path}: can't tell the format from the extension '{ext}'; "
                         "pass the format (csv, tsv, jsonl, parquet, txt)")
    return FORMATS[ext]


check_file = check_input_file  # the name other modules and users know


LABEL_HINTS = ("the right --encoding", "--encoding-errors replace")  # how `label` spells the two ways out of a bad byte
# commands that read a table whole: an encoding key, and no "replace"
CONFIG_HINTS = ("the file's encoding (e.g. encoding=cp949)", None)


def detect_encoding(path: str | Path, encoding: str | None = None, chunk: int = 1 << 20,
                    hints: tuple[str, str | None] = LABEL_HINTS) -> str:
    """Return a Python codec name that decodes the whole file: ``encoding`` when given (checked against the
    bytes), else ``utf-8-sig`` when a BOM is present, else the first of utf-8, cp949 that decodes every byte.
    Streams the file (constant memory). A failure names the line of the first bad byte and the caller's own
    spelling (``hints``) of the options that get past it."""
    path = check_file(path)
    option, replace = hints
    rest = f"{replace} to label the rest and flag the bad lines" if replace else None
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise InputError(f"unknown encoding '{encoding}' (try utf-8, utf-8-sig, cp949)") from None
        bad = _first_bad_byte(path, encoding, chunk)
        if bad is not None:
            raise InputError(f"{path}: line {_line_of(path, bad)} is not valid {encoding} (byte {bad}); pass "
                             f"{option}" + (f", or {rest}" if rest else ""))
        return encoding
    with open(path, "rb") as f:
        head = f.read(4)
    if head.startswith(codecs.BOM_UTF8):
        bad = _first_bad_byte(path, "utf-8-sig", chunk)
        if bad is not None:
            raise InputError(f"{path}: starts with a UTF-8 BOM but line {_line_of(path, bad)} is not UTF-8; "
                             "fix that line" + (f", or pass {rest}" if rest else ""))
        return "utf-8-sig"
    # Excel's "Unicode Text" is UTF-16 with a BOM (which no UTF-8 or cp949 text starts with); UTF-32's BOM begins
    # with UTF-16 LE's, so it is tried first
    for bom, enc in ((codecs.BOM_UTF32_LE, "utf-32"), (codecs.BOM_UTF32_BE, "utf-32"),
                     (codecs.BOM_UTF16_LE, "utf-16"), (codecs.BOM_UTF16_BE, "utf-16")):
        if head.startswith(bom) and _looks_like_text(path, enc):
            bad = _first_bad_byte(path, enc, chunk)
            if bad is not None:
                raise InputError(f"{path}: starts with a {enc.upper()} BOM but byte {bad} is not {enc.upper()}; "
                                 "fix the file" + (f", or pass {rest}" if rest else ""))
            return enc
    failures = []
    for enc in CANDIDATE_ENCODINGS:
        bad = _first_bad_byte(path, enc, chunk)
        if bad is None:
            return enc
        failures.append(f"{enc} fails on line {_line_of(path, bad)}")
    raise InputError(f"{path}: not UTF-8 or cp949/EUC-KR text ({'; '.join(failures)}); convert it to UTF-8 or pass "
                     f"{option}" + (f", or {rest}" if rest else ""))


def _looks_like_text(path: Path, encoding: str, sample: int = 1 << 16) -> bool:
    """Whether a file with a UTF-16/32 BOM reads as text in ``encoding``: almost any bytes decode in UTF-16, so a
    binary file that happens to start with FF FE would otherwise pass for it. Text has spaces, tabs, commas or
    line ends (Korean reviews: one every few characters); random bytes decode to one of them in ~1 of 13,000."""
    with open(path, "rb") as f:
        text = f.read(sample).decode(encoding, errors="replace")
    seps = sum(text.count(c) for c in " \t\n,")
    return len(text) < 20 or seps * 200 >= len(text)


def _first_bad_byte(path: Path, encoding: str, chunk: int) -> int | None:
    decoder = codecs.getincrementaldecoder(encoding)()
    offset = 0
    try:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                decoder.decode(block)
                offset += len(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as e:
        return max(0, offset + e.start - len(getattr(decoder, "buffer", b"") or b""))
    return None


def _line_of(path: Path, offset: int) -> int:
    """1-based line number of byte ``offset``."""
    line, done = 1, 0
    with open(path, "rb") as f:
        while done < offset:
            block = f.read(min(1 << 20, offset - done))
            if not block:
                break
            line += block.count(b"\n")
            done += len(block)
    return line


def read_table(path: str | Path, fmt: str | None = None, encoding: str | None = None,
               sep: str | None = None):
    """Read a whole table as strings (no NaN guessing: an empty cell is ''), with one-line errors."""
    import pandas as pd

    path = check_file(path)
    fmt = table_format(path, fmt)
    try:
        if fmt == "parquet":
            df = pd.read_parquet(path)
            return df.astype({c: "string" for c in df.columns if df[c].dtype == object}).fillna("")
        enc = detect_encoding(path, encoding, hints=CONFIG_HINTS)
        if fmt == "jsonl":
            df = pd.read_json(path, lines=True, encoding=enc, dtype=False)
            return df
        if fmt == "txt":  # one review per line, no header: the first line is a review, not a column name
            with open(path, encoding=enc, newline="") as f:
                return pd.DataFrame({LINES_COLUMN: [line.rstrip("\r\n") for line in f]}, dtype=str)
        sep = sep or ("\t" if fmt == "tsv" else ",")
        # TSV has no quoting convention and Korean review sets (NSMC and its derivatives) hold unbalanced '"'
        # in the text: read with CSV quoting, 413 of nsmc3's 150,000 training rows silently merge into
        # their neighbours.
        quoting = csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL
        return pd.read_csv(path, sep=sep, encoding=enc, dtype=str, keep_default_na=False, quoting=quoting)
    except InputError:
        raise
    except (pd.errors.ParserError, ValueError) as e:
        raise InputError(f"{path}: could not parse as {fmt}: {str(e).strip().splitlines()[-1]}") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: no columns found (empty table)") from None


def column_hint(name: str, columns) -> str:
    """" (did you mean ' review '?)" when a column differs from ``name`` only in case or surrounding spaces (an
    Excel header typed with a trailing space looks right everywhere but in this message), else ""."""
    near = [c for c in columns if str(c).strip().casefold() == str(name).strip().casefold() and c != name]
    return f" (did you mean {near[0]!r}? spaces and case are part of a column's name)" if near else ""


def require_columns(df, columns: list[str], path: str | Path) -> None:
    """An unknown column is an error that lists the columns present."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        present = ", ".join(map(str, df.columns))
        raise InputError(f"{path}: no column {', '.join(repr(m) for m in missing)}; columns present: {present}"
                         f"{column_hint(missing[0], df.columns)}")


_NUMBER = re.compile(r"[+-]?(\d+([.,]\d*)?|[.,]\d+)(e[+-]?\d+)?", re.IGNORECASE)
# What a column of records holds besides review text: dates (2024-01-02, 2024.1.2, 2024년 1월 2일, with a time or
# not), times, fractions (5/5), UUIDs and ids (letters and digits with a digit, no space: a1b2c3, ORD-1042).
# A review is never only one of these (a review of "10" or "5/5" alone exists, hence the share below, not "any").
_NOT_TEXT = re.compile(r"""\s*(?:
    [+-]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?%?
  | \d{2,4}\s*[-./년]\s*\d{1,2}\s*[-./월]\s*\d{1,4}\s*일?\.?(?:\s*[T ]?\s*\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?
  | \d{1,2}:\d{2}(?::\d{2})?
  | \d+\s*/\s*\d+
  | (?=[a-z_-]*\d)[a-z0-9_-]{3,}
)\s*""", re.IGNORECASE | re.VERBOSE)
TEXT_SHARE = 0.1  # a column where under 10% of the non-empty values could be a review is not the review column
EMPTY_SHARE = 0.9  # nor one that is empty in 90% of its rows (from 20 rows on)


def looks_like_text(value) -> bool:
    """Whether ``value`` could be a review: not empty and not a number, date, time, fraction or id."""
    text = "" if value is None else str(value).strip()
    return bool(text) and _NOT_TEXT.fullmatch(text) is None


def check_text_column(values, column, columns, path, empty: bool = False) -> None:
    """A text column that holds no review text is a rating, date or id column picked by mistake
    (text_column=rating, or a file with no text column at all): each value would be labelled, or trained on, as a
    review, exit 0. Refused when at least three values are filled and under ``TEXT_SHARE`` of them could be text;
    with ``empty`` (labelling), also when ``EMPTY_SHARE`` of 20 or more rows are empty. ``values``: the column's
    values, or its first chunk when streaming."""
    filled = numbers = texts = rows = 0
    for v in values:
        rows += 1
        text = "" if v is None else str(v).strip()
        if not text:
            continue
        filled += 1
        if _NUMBER.fullmatch(text):
            numbers += 1
        elif looks_like_text(text):
            texts += 1
    others = ", ".join(str(c) for c in columns if c != column)
    if filled >= 3 and texts <= TEXT_SHARE * filled:
        what = "only numbers" if numbers == filled else "numbers, dates or ids"
        raise InputError(f"{path}: column {column!r} holds {what} ({filled:,} values, {texts:,} that read as text), "
                         f"not review text; name the text column (other columns: {others or 'none'})")
    if empty and rows >= 20 and rows - filled >= EMPTY_SHARE * rows:
        raise InputError(f"{path}: column {column!r} is empty in {rows - filled:,} of its first {rows:,} rows, not "
                         f"a review column; name the text column (other columns: {others or 'none'})")


check_not_numbers = check_text_column  # its name before it refused dates, ids and empty columns too (issue 41)


def pick_column(columns, given: str | None, candidates: tuple[str, ...] = TEXT_COLUMNS, path="") -> str | None:
    """``given`` (which must be present), else the first of ``candidates`` present (ignoring case and
    surrounding spaces), else None."""
    columns = list(columns)
    if given:
        if given not in columns:
            raise InputError(f"{path}: no column {given!r}; columns present: {', '.join(map(str, columns))}"
                             f"{column_hint(given, columns)}")
        return given
    lower = {str(c).strip().casefold(): c for c in columns}
    for name in candidates:
        if name.casefold() in lower:
            return lower[name.casefold()]
    return None


# ---------------------------------------------------------------------------------------------
# Streaming records, malformed lines included
# ---------------------------------------------------------------------------------------------


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
            row = next(csv.reader([text], delimiter=sep, strict=True), [])
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


def read_records(path: Path, fmt: str, encoding: str, sep: str | None,
                 errors: str = "strict") -> tuple[list[str], Iterator[Record]]:
    """(columns, records) streamed from the file. ``errors="replace"`` decodes bytes invalid in ``encoding``
    as U+FFFD instead of failing."""
    if fmt == "parquet":
        import pyarrow.parquet as pq

        try:
            pf = pq.ParquetFile(path)
        except Exception as e:  # noqa: BLE001 - pyarrow raises several types for a damaged file
            raise InputError(f"{path}: not a readable Parquet file ({str(e).splitlines()[0]})") from None
        columns = pf.schema_arrow.names

        def gen():
            n = 0
            for batch in pf.iter_batches(batch_size=8192):
                cols = [batch.column(i).to_pylist() for i in range(batch.num_columns)]
                for row in zip(*cols):
                    n += 1
                    yield Record(list(row), n + 1)
        return columns, gen()
    f = open(path, encoding=encoding, errors=errors, newline="")
    if fmt == "jsonl":
        return _jsonl_records(path, f)
    if fmt == "txt":
        return [LINES_COLUMN], _closing(f, (Record([line.rstrip("\r\n").lstrip("\ufeff") if i == 1 else
                                                    line.rstrip("\r\n")], i) for i, line in enumerate(f, 1)))
    sep = sep or ("\t" if fmt == "tsv" else ",")
    header_line = f.readline()
    if not header_line:
        f.close()
        raise InputError(f"{path}: empty file (no header row)")
    header = next(csv.reader([header_line.rstrip("\r\n")], delimiter=sep))
    header = [h.lstrip("\ufeff") for h in header]
    if fmt == "tsv" and sep == "\t":
        return header, _closing(f, _tsv_records(f, len(header), 2))
    return header, _closing(f, _csv_records(f, sep, len(header), 2))


def check_lines_file(path: Path, encoding: str, text_column: str | None, default_column: str | None,
                     fmt_given: str | None) -> None:
    """A .txt input is one review per line, no columns. Refuse a ``text_column`` it can't have (other than the
    default and ``text``), and, unless ``--format txt`` says so, a .txt whose first lines all hold the same number of
    tabs: a table saved as text (Excel's "Unicode Text" is tab-separated with a header), whose header would be
    labelled as a review and whose ids would be glued to each text."""
    if text_column not in (None, default_column, LINES_COLUMN):
        raise InputError(f"{path}: a .txt file is read as one review per line, with no columns, so text column "
                         f"{text_column!r} names nothing; for a table saved as text (Excel's 'Unicode Text' is "
                         "tab-separated) pass --format tsv")
    if fmt_given == "txt":
        return
    tabs = []
    with open(path, encoding=encoding, errors="replace", newline="") as f:
        for line in f:
            if line.strip():
                tabs.append(line.count("\t"))
            if len(tabs) == 20:
                break
    if len(tabs) >= 2 and tabs[0] > 0 and len(set(tabs)) == 1:
        raise InputError(f"{path}: every line holds {tabs[0]} tab{'s' if tabs[0] > 1 else ''}: a tab-separated table "
                         "saved as .txt (Excel's 'Unicode Text')? Pass --format tsv (and --text-column), or "
                         "--format txt to label each whole line as one review")


def _jsonl_records(path: Path, f) -> tuple[list[str], Iterator[Record]]:
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
            keys.update(dict.fromkeys(obj))
    columns = list(keys)
    f.seek(0)

    def gen_json():
        for i, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict):
                    raise ValueError("not an object")
                yield Record([obj.get(c) for c in columns], i)
            except ValueError as e:
                yield Record([None] * len(columns), i, f"malformed line {i}: not a JSON object ({e})",
                             raw=line.rstrip("\r\n"))

    return columns, _closing(f, gen_json())


def _closing(f, it):
    # close the file when the record stream is exhausted or dropped
    try:
        yield from it
    finally:
        f.close()
