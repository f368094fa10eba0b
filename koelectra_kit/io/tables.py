"""The one table reader. Review tables come the way Korean users have them: CSV/TSV/JSONL/Parquet, in
UTF-8, UTF-8 with a BOM (Excel), cp949/EUC-KR (older Windows exports) or UTF-16/32 with a BOM (Excel's "Unicode
Text"), with a clear error for anything else. Two ways to read one:

- ``read_table``: the whole table as strings (fine-tuning, evaluation, the baseline);
- ``read_records`` (``records.py``, re-exported here): a stream of records with malformed lines kept as flagged
  records (labelling, corpora), so a file of any size is read in flat memory and one bad line costs one row.

Both apply the same format, encoding and quoting rules: CSV follows RFC 4180; TSV is unquoted (a quote is
text), the way NLP corpora write it. Hugging Face datasets (``hf:...``, ``save_to_disk`` and Parquet folders) are
read by ``hfdata``, which builds on this module (``Record``, ``pick_column``, ``TEXT_COLUMNS``).
"""
from __future__ import annotations

import codecs
import csv
import re
import warnings
from itertools import islice
from pathlib import Path

from ..errors import InputError
from .fileio import check_input_file
from .records import (LINES_COLUMN, Record, check_lines_file, csv_records, fit_fields,  # noqa: F401 - the readers
                      read_records)
from .textcheck import (check_not_numbers, check_text_column, checked_texts, is_blank,  # noqa: F401 - here until
                        looks_like_text)  # textcheck.py took them: the old spelling still imports
from .workbook import EXCEL_SUFFIXES

# Column names tried, in order, when no text column is given (every stage uses this one list).
TEXT_COLUMNS = ("review", "text", "document", "sentence", "comment", "comments", "content", "contents", "body",
                "리뷰", "내용", "댓글", "텍스트", "문장")
FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl",
           ".parquet": "parquet", ".pq": "parquet", ".txt": "txt"}
# A .txt file is one review per line and no header (a corpus, a pasted list): its one column is named this.
# cp949 is a superset of EUC-KR, so trying it covers both.
CANDIDATE_ENCODINGS = ("utf-8", "cp949")


def encoding_problem(encoding: str) -> str | None:
    """Why ``encoding`` cannot read or write a text file ("is not an encoding"), or None. Python's codec registry
    also holds bytes-to-bytes and str-to-str transforms (base64, hex, zlib, rot13) and codecs of single names
    (idna, punycode): as a file's encoding each ended in a traceback."""
    try:
        info = codecs.lookup(encoding)
    except LookupError:
        return "is not an encoding"
    if not getattr(info, "_is_text_encoding", True) or info.name in ("idna", "punycode", "undefined"):
        return f"is not an encoding of text files ({info.name} is a codec of another kind)"
    return None


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
                         "as 'CSV UTF-8' in Excel (`koelectra-kit label`, `tokenizer words` and `app` read .xlsx)")


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
        if problem := encoding_problem(encoding):
            raise InputError(f"encoding '{encoding}' {problem} (try utf-8, utf-8-sig, cp949)")
        bad = _first_bad_byte(path, encoding, chunk)
        if bad is not None:
            where = f"{path}: line {_line_of(path, bad)} is not valid {encoding} (byte {bad})"
            found = _detected(path, chunk)
            if found:
                # encoding=cp949 given for a UTF-8 file: the hint was "pass the file's encoding (e.g. encoding=cp949)",
                # the one just passed; the detection names the encoding that reads it
                raise InputError(f"{where}, but the file reads as {ENCODING_NAMES.get(found, found)}: leave the "
                                 f"encoding out (it is detected) or give {found}")
            raise InputError(f"{where}; pass {option}" + (f", or {rest}" if rest else ""))
        if not codecs.lookup(encoding).name.startswith("utf") and _utf8_beyond_ascii(path, chunk):
            # encoding=latin-1 (or cp949) given for a UTF-8 file: every byte decodes, so it trained on, or labelled,
            # garbled Hangul with exit 0. A legacy-encoded Korean text is next to never valid UTF-8 (a lead byte
            # such as cp949's B0 is a UTF-8 continuation byte), so a file that is, is one
            raise InputError(f"{path}: encoding {encoding!r} given, but the file is UTF-8 (its non-ASCII bytes are "
                             f"UTF-8 sequences), which {encoding} would read as other characters: leave the encoding "
                             "out (it is detected) or give utf-8")
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


def likeliest_encoding(path: Path) -> str:
    """The encoding to read ``path`` in with errors replaced (``label --encoding-errors replace``): the one
    ``detect_encoding`` finds, else a UTF-8 BOM's, else whichever of ``CANDIDATE_ENCODINGS`` fails later in the file
    (a tie: utf-8). "utf-8" whenever none read it whole made a cp949 export with one broken byte U+FFFD throughout:
    every row flagged, none labelled."""
    try:
        return detect_encoding(path)
    except InputError:
        pass
    with open(path, "rb") as f:
        if f.read(3) == codecs.BOM_UTF8:
            return "utf-8-sig"
    fails = {enc: _first_bad_byte(path, enc, 1 << 20) for enc in CANDIDATE_ENCODINGS}
    return max(CANDIDATE_ENCODINGS, key=lambda enc: -1 if fails[enc] is None else fails[enc])


ENCODING_NAMES = {"utf-8": "UTF-8", "utf-8-sig": "UTF-8 (with a BOM)", "cp949": "cp949/EUC-KR", "utf-16": "UTF-16",
                  "utf-32": "UTF-32"}  # detect_encoding's results, as an error names them


def _detected(path: Path, chunk: int) -> str | None:
    """The encoding ``detect_encoding`` finds for the file, or None where none reads it."""
    try:
        return detect_encoding(path, None, chunk)
    except InputError:
        return None


def _looks_like_text(path: Path, encoding: str, sample: int = 1 << 16) -> bool:
    """Whether a file with a UTF-16/32 BOM reads as text in ``encoding``: almost any bytes decode in UTF-16, so a
    binary file that happens to start with FF FE would otherwise pass for it. Text has spaces, tabs, commas or
    line ends (Korean reviews: one every few characters); random bytes decode to one of them in ~1 of 13,000."""
    with open(path, "rb") as f:
        text = f.read(sample).decode(encoding, errors="replace")
    seps = sum(text.count(c) for c in " \t\n,")
    return len(text) < 20 or seps * 200 >= len(text)


def _utf8_beyond_ascii(path: Path, chunk: int) -> bool:
    """Whether the file is valid UTF-8 with a byte beyond ASCII (one pass)."""
    decoder, ascii_only = codecs.getincrementaldecoder("utf-8")(), True
    try:
        with open(path, "rb") as f:
            while block := f.read(chunk):
                ascii_only = ascii_only and block.isascii()
                decoder.decode(block)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError:
        return False
    return not ascii_only


def _first_bad_byte(path: Path, encoding: str, chunk: int) -> int | None:
    if codecs.lookup(encoding).name == "utf-8-sig":
        # the same bytes are valid or not in plain UTF-8 (a BOM is a valid character), and its offsets count the
        # BOM's 3 bytes, which utf-8-sig's drop: the line named was the one above the bad byte's
        encoding = "utf-8"
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
    except UnicodeError:
        # encoding=utf-16 (or utf-32) given for a file without that BOM: the codec refuses the stream before
        # decoding a byte ("does not start with BOM"), a UnicodeError that is no UnicodeDecodeError
        return 0
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
            return _values_table(path, fmt, None)
        enc = detect_encoding(path, encoding, hints=CONFIG_HINTS)
        if fmt == "jsonl":
            return _values_table(path, fmt, enc)
        if fmt == "txt":  # one review per line, no header: the first line is a review, not a column name
            with open(path, encoding=enc, newline="") as f:
                return pd.DataFrame({LINES_COLUMN: [line.rstrip("\r\n") for line in f]}, dtype=str)
        sep = sep or ("\t" if fmt == "tsv" else ",")
        # TSV has no quoting convention and Korean review sets (NSMC and its derivatives) hold unbalanced '"'
        # in the text: read with CSV quoting, 413 of nsmc3's 150,000 training rows silently merge into
        # their neighbours.
        quoting = csv.QUOTE_NONE if fmt == "tsv" else csv.QUOTE_MINIMAL
        refuse_other_separator(path, fmt, _header(path, enc, sep, quoting), sep)
        with warnings.catch_warnings():
            # A first row wider than the header (a review with an unquoted comma) made pandas take the first column
            # as the index: every column moved one to the left, without a word. index_col=False stops that, and
            # the warning it gives instead (the row's extra fields dropped) is made the error it is.
            warnings.filterwarnings("error", message="Length of header or names does not match",
                                    category=pd.errors.ParserWarning)
            df = pd.read_csv(path, sep=sep, encoding=enc, dtype=str, keep_default_na=False, quoting=quoting,
                             index_col=False)
        df.attrs[REPEATED_COLUMNS] = _repeated_names(path, enc, sep, quoting, df.columns)
        return df
    except InputError:
        raise
    except pd.errors.ParserWarning:
        raise InputError(f"{path}: could not parse as {fmt}: {_wider_than_header(path, enc, sep, quoting)}") from None
    except (pd.errors.ParserError, ValueError) as e:
        why = str(e).strip().splitlines()[-1]
        if fmt in ("csv", "tsv"):
            why = _at_its_line(why, path, enc, dict(delimiter=sep, quoting=quoting))
        raise InputError(f"{path}: could not parse as {fmt}: {why}") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: no columns found (empty table)") from None


# df.attrs key of read_table's CSV/TSV tables: {pandas' column name: the header's} of each column whose name the
# header repeats. pandas renames a repeat ('label', 'label' -> 'label', 'label.1'), so picking a column by its
# name took the first of two without a word (read_labelled refuses to pick one).
REPEATED_COLUMNS = "repeated_columns"


def _header(path: Path, encoding: str, sep: str, quoting: int) -> list[str]:
    """The header's fields, as the csv module reads them."""
    with open(path, encoding=encoding, newline="") as f:
        return next(csv_records(f, delimiter=sep, quoting=quoting), (1, []))[1]


def _repeated_names(path: Path, encoding: str, sep: str, quoting: int, columns) -> dict[str, str]:
    if not any(re.search(r"\.\d+$", str(c)) for c in columns):  # no name pandas renamed: no header read again
        return {}
    header = _header(path, encoding, sep, quoting)
    if len(header) != len(columns):
        return {}
    return {str(c): h for c, h in zip(columns, header) if header.count(h) > 1}


def _values_table(path: Path, fmt: str, encoding: str | None):
    """A Parquet or JSONL table whole, each value as written ('' for a missing one), read as ``label`` streams it
    (``read_records``). pandas' own readers make an integer column with a missing value float: a label 1 read as
    '1.0', which labels=[0,1] or label_map={1: ...} no longer match, and a Parquet Int64/boolean column with a
    missing value was a traceback. A malformed JSONL line is an error naming it (pandas named a byte position)."""
    columns, records = read_records(path, fmt, encoding, None)
    return values_frame(columns, records, path, fmt)


def values_frame(columns, records, path, fmt: str):
    """A DataFrame of ``records`` (``Record``s, as ``read_records`` or ``hfdata.open_rows`` stream them), each value
    as written, '' for a missing one; a record with an error is an ``InputError`` naming it."""
    import pandas as pd

    rows = []
    for rec in records:
        if rec.error:
            getattr(records, "close", lambda: None)()
            raise InputError(f"{path}: could not parse as {fmt}: {rec.error}")
        rows.append(["" if v is None else v for v in rec.fields])
    return pd.DataFrame(rows, columns=list(columns), dtype=object)


def _at_its_line(why: str, path: Path, encoding: str, dialect: dict) -> str:
    """pandas' parse error ``why`` naming the line an editor shows. pandas names a record by its count (a quoted
    review with line ends in it is one record, so is a blank line), which in a file of such reviews (a LABELS.csv)
    names a line far above the one to fix: the record it names is read again with the csv module
    (``records.csv_records``) for the line it starts on, where it is what pandas says (wider than the header, or the
    last, its quote left open); ``why`` as pandas wrote it for any other error or where the two readers differ."""
    wide = re.search(r"(Expected (\d+) fields in line )(\d+)", why)
    eof = re.search(r"(EOF inside string starting at )row (\d+)", why)
    if not (wide or eof):
        return why
    k = int(wide[3]) if wide else int(eof[2]) + 1  # the record, 1-based, blank lines counted (rows count from 0)
    try:
        with open(path, encoding=encoding, newline="") as f:
            records = csv_records(f, **dialect)
            line, fields = next(islice(records, k - 1, None), (None, []))
            last = next(records, None) is None
    except (OSError, UnicodeDecodeError):
        return why  # changed since pandas read it
    if wide and len(fields) > int(wide[2]):
        return f"{why[:wide.end(1)]}{line}{why[wide.end(3):]}"
    if eof and line is not None and last:
        return f"{why[:eof.end(1)]}line {line}{why[eof.end(2):]}"
    return why


SEPARATORS = {",": "commas", "\t": "tabs", ";": "semicolons", "|": "pipes"}  # what a table's fields come between


def other_separator(header: list[str], sep: str) -> str | None:
    """The separator a header read as one column holds ('review;label' read with commas: ';'), or None. Such a file
    was read as one column: pandas' "Expected 1 fields in line 6, saw 2" (a text with a comma) or "no column
    'review'; columns present: review;label", neither saying what is wrong."""
    if len(header) != 1:
        return None
    return next((c for c in SEPARATORS if c != sep and sum(bool(p.strip()) for p in str(header[0]).split(c)) > 1),
                None)


def table_separator_fix(other: str, key: str | None = "format") -> str:
    """How a command with no sep key (finetune, evaluate, baseline, suggest, ...) gets past ``other``: its ``key``
    for the format, or, where it has none (``key`` None: the web app's uploads and teach pool), the file's name."""
    kind = {"\t": "tsv", ",": "csv"}.get(other)
    if kind is None:
        return "save it with commas (Excel: 'CSV UTF-8') or with tabs as a .tsv"
    return f"read it as {kind.upper()}: {key}={kind}, or name the file .{kind}" if key else f"name the file .{kind}"


def refuse_other_separator(path, fmt: str, header: list[str], sep: str | None = None,
                           fix=table_separator_fix) -> None:
    """An error when the header is one column holding another separator (``other_separator``); ``sep``: the one
    ``fmt`` was read with (None: ``read_records``' own, a comma for csv and a tab for tsv); a format with no separator
    (jsonl, parquet, a workbook's or a dataset's rows) is never refused. ``fix``: the caller's way past it, given
    that separator."""
    if fmt not in ("csv", "tsv"):
        return
    sep = sep or ("\t" if fmt == "tsv" else ",")
    other = other_separator(header, sep)
    if other is None:
        return
    raise InputError(f"{path}: the header is one column, {header[0]!r}, holding {SEPARATORS[other]}: the fields are "
                     f"separated by {SEPARATORS[other]}, not {SEPARATORS.get(sep, repr(sep))} as {fmt} is read; {fix(other)}")


def _wider_than_header(path: Path, encoding: str, sep: str, quoting: int) -> str:
    """Which line holds more fields than the header (the first that does, as an editor numbers lines)."""
    with open(path, encoding=encoding, newline="") as f:
        records = csv_records(f, delimiter=sep, quoting=quoting)
        _, header = next(records, (1, []))
        for line, fields in records:
            if len(fields) > len(header):
                why = "a TSV has no quoting: a tab inside a text" if sep == "\t" else f"a text holding '{sep}' must be quoted"
                return f"line {line} has {len(fields)} fields and the header {len(header)} ({why})"
    return "a row has more fields than the header"


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


def pick_column(columns, given: str | None, candidates: tuple[str, ...] = TEXT_COLUMNS, path="") -> str | None:
    """``given`` (which must be present), else the first of ``candidates`` present (ignoring case and
    surrounding spaces; a column spelled exactly as the candidate wins over others that differ in case or spaces),
    else None. Two columns that match a candidate only so ('Label' and 'label ') are an error naming both: the
    last of them was taken without a word, which of an old and a corrected label column was a guess."""
    columns = list(columns)
    if given:
        if given not in columns:
            raise InputError(f"{path}: no column {given!r}; columns present: {', '.join(map(str, columns))}"
                             f"{column_hint(given, columns)}")
        return given
    for name in candidates:
        near = [c for c in columns if str(c).strip().casefold() == name.casefold()]
        exact = [c for c in near if str(c) == name]  # a name repeated as written: the callers' own error names it
        if len(near) > 1 and not exact:
            raise InputError(f"{path}: columns {', '.join(repr(str(c)) for c in near)} "
                             f"{'both' if len(near) == 2 else 'all'} read as {name!r} (case and "
                             "surrounding spaces aside); which one to read is a guess: rename the others, or name "
                             "the column to read")
        if near:
            return exact[0] if exact else near[0]
    return None


# ---------------------------------------------------------------------------------------------
# Streaming records, malformed lines included
# ---------------------------------------------------------------------------------------------
