"""Reading review tables the way Korean users have them: CSV/TSV/JSONL/Parquet, in UTF-8, UTF-8 with
a BOM (Excel) or cp949/EUC-KR (older Windows exports), with a clear error for anything else.

Used by fine-tuning/evaluation (whole table) and, for the encoding and format choice, by the labeller
(which streams in chunks itself).
"""
from __future__ import annotations

import codecs
import csv
from pathlib import Path

from .errors import InputError

FORMATS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".jsonl": "jsonl", ".json": "jsonl",
           ".parquet": "parquet", ".pq": "parquet", ".txt": "tsv"}
# cp949 is a superset of EUC-KR, so trying it covers both.
CANDIDATE_ENCODINGS = ("utf-8", "cp949")


def table_format(path: str | Path, fmt: str | None = None) -> str:
    """csv | tsv | jsonl | parquet, from ``fmt`` or the file extension."""
    if fmt:
        if fmt not in set(FORMATS.values()):
            raise InputError(f"unknown format '{fmt}'; use one of csv, tsv, jsonl, parquet")
        return fmt
    ext = Path(path).suffix.lower()
    if ext not in FORMATS:
        raise InputError(f"{path}: can't tell the format from the extension '{ext}'; "
                         "pass the format (csv, tsv, jsonl, parquet)")
    return FORMATS[ext]


def check_file(path: str | Path) -> Path:
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    return path


def detect_encoding(path: str | Path, encoding: str | None = None, chunk: int = 1 << 20) -> str:
    """Return a Python codec name that decodes the whole file: ``utf-8-sig`` when a BOM is present,
    else the first of utf-8, cp949 that decodes every byte. Streams the file (constant memory)."""
    path = check_file(path)
    if encoding:
        try:
            codecs.lookup(encoding)
        except LookupError:
            raise InputError(f"unknown encoding '{encoding}' (try utf-8, utf-8-sig, cp949)") from None
        return encoding
    with open(path, "rb") as f:
        if f.read(3) == codecs.BOM_UTF8:
            return "utf-8-sig"
    failures = []
    for enc in CANDIDATE_ENCODINGS:
        decoder = codecs.getincrementaldecoder(enc)()
        offset = 0
        try:
            with open(path, "rb") as f:
                while block := f.read(chunk):
                    decoder.decode(block)
                    offset += len(block)
                decoder.decode(b"", final=True)
            return enc
        except UnicodeDecodeError as e:
            failures.append(f"{enc} fails at byte {offset + e.start}")
    raise InputError(f"{path}: not UTF-8 or cp949/EUC-KR text ({'; '.join(failures)}); "
                     "convert it to UTF-8 or pass the encoding")


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
        enc = detect_encoding(path, encoding)
        if fmt == "jsonl":
            df = pd.read_json(path, lines=True, encoding=enc, dtype=False)
            return df
        sep = sep or ("\t" if fmt == "tsv" else ",")
        return pd.read_csv(path, sep=sep, encoding=enc, dtype=str, keep_default_na=False,
                           quoting=csv.QUOTE_MINIMAL)
    except InputError:
        raise
    except (pd.errors.ParserError, ValueError) as e:
        raise InputError(f"{path}: could not parse as {fmt}: {str(e).strip().splitlines()[-1]}") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: no columns found (empty table)") from None


def require_columns(df, columns: list[str], path: str | Path) -> None:
    """An unknown column is an error that lists the columns present."""
    missing = [c for c in columns if c not in df.columns]
    if missing:
        present = ", ".join(map(str, df.columns))
        raise InputError(f"{path}: no column {', '.join(repr(m) for m in missing)}; columns present: {present}")
