"""An uploaded file, from bytes on the wire to something the labeller can read: saved under a size limit, then
its format, encoding, columns, first rows and text column found; an Excel workbook is converted to a UTF-8 CSV
first (the labeller streams CSV/TSV/JSONL/Parquet). Every refusal is a one-line ``InputError`` that names the
file as the user called it, never the server's temp path."""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import InputError
from ..io.tables import (TEXT_COLUMNS, detect_encoding, is_wide, pick_column, read_records, refuse_other_separator,
                         table_separator_fix)
from ..io.textcheck import looks_like_text
from ..io.workbook import cell as _cell
from ..io.workbook import other_sheets_hint, xlsx_to_csv

# upload extension -> kind; every kind but xlsx is a format the labeller reads directly
KINDS = {".csv": "csv", ".tsv": "tsv", ".tab": "tsv", ".txt": "txt", ".jsonl": "jsonl", ".json": "jsonl",
         ".parquet": "parquet", ".pq": "parquet", ".xlsx": "xlsx"}
PREVIEW_CHARS = 200  # a preview cell is cut here: the page shows what a column holds, not a whole essay


class TooLarge(InputError):
    """An upload over the size limit (HTTP 413)."""


@dataclass
class Upload:
    id: str
    name: str  # the file's name as the user gave it
    folder: Path  # this upload's own folder under the app's workdir (its results go here too)
    original: Path  # the uploaded bytes
    kind: str  # csv | tsv | txt (one review per line, no header) | jsonl | parquet | xlsx
    source: Path = None  # what the labeller reads: ``original``, or the workbook's CSV copy
    source_format: str = ""
    encoding: str | None = None  # None for parquet (binary)
    columns: list = field(default_factory=list)
    preview: list = field(default_factory=list)  # first rows, one list of strings per row
    guessed: str | None = None  # the text column, guessed
    note: str = ""  # how the guess was made, when it was not by name
    rows: int = 0  # an estimate for the progress bar (a quoted line break counts as a row)

    def public(self) -> dict:
        return {"id": self.id, "name": self.name, "kind": self.kind, "encoding": self.encoding or "binary",
                "columns": self.columns, "preview": self.preview, "guessed": self.guessed, "note": self.note,
                "rows": self.rows}


def upload_kind(name: str) -> str:
    ext = Path(name).suffix.lower()
    if ext == ".xls":
        raise InputError(f"{name}: old Excel (.xls) files can't be read; save it as .xlsx or CSV UTF-8 in Excel")
    if ext not in KINDS:
        raise InputError(f"{name}: can't tell the format from '{ext or 'no extension'}'; upload .csv, .tsv, "
                         ".xlsx, .parquet, .jsonl or .txt (a review a line)")
    return KINDS[ext]


def too_large(name: str, size: int, limit: int) -> TooLarge:
    return TooLarge(f"{name} is {_mb(size)}; the limit is {_mb(limit)}: split the file, or label it with "
                    "`koelectra-kit label` on the command line (no size limit)")


async def receive(stream, dest: Path, name: str, limit: int, declared: int | None) -> int:
    """Write the request body to ``dest``, refusing it as soon as it is known to be over ``limit`` bytes: by
    its Content-Length before a byte is read, else by counting as it streams in."""
    if declared is not None and declared > limit:
        raise too_large(name, declared, limit)
    size = 0
    with open(dest, "wb") as f:
        async for block in stream:
            size += len(block)
            if size > limit:
                raise too_large(name, size, limit) if declared is None else too_large(name, declared, limit)
            f.write(block)
    return size


def inspect(upload: Upload, preview_rows: int) -> Upload:
    """Fill in what the page shows before labelling starts; a file the labeller could not read is refused here."""
    try:
        _inspect(upload, preview_rows)
    except InputError as e:
        raise InputError(_user_paths(str(e), upload)) from None
    return upload


def _inspect(up: Upload, preview_rows: int) -> None:
    if up.original.stat().st_size == 0:
        raise InputError(f"{up.name} is empty (0 bytes): nothing to label")
    up.source, up.source_format = up.original, up.kind
    if up.kind == "xlsx":
        up.source, up.source_format, up.encoding = up.folder / "workbook.csv", "csv", "utf-8"
        up.rows = xlsx_to_csv(up.original, up.source, up.name)
    elif up.kind != "parquet":
        up.encoding = _detect_encoding(up)
    columns, records = read_records(up.source, up.source_format, up.encoding, None)
    if not columns:
        raise InputError(f"{up.name} holds no JSON object: nothing to label")
    up.columns = [str(c) for c in columns]
    up.preview = [[_cell(v)[:PREVIEW_CHARS] for v in (rec.fields if rec.error is None else [rec.raw])]
                  for rec, _ in zip(records, range(preview_rows))]
    records.close()
    if not up.preview:
        raise InputError(f"{up.name} has a header row but no rows under it: nothing to label")
    # only a workbook's first sheet is read: where the text column is on another, the refusal (or a guess made from
    # the first sheet's contents) says so, instead of leaving the analyst to search sheet 1 for it
    try:
        up.guessed, up.note = guess_text_column(up.columns, up.preview, up.name, up.kind)
    except InputError as e:
        raise InputError(f"{e}{other_sheets_hint(up.original, TEXT_COLUMNS)}") from None
    if up.note and up.kind == "xlsx":
        up.note += other_sheets_hint(up.original, TEXT_COLUMNS)
    if up.kind == "parquet":
        import pyarrow.parquet as pq

        up.rows = pq.ParquetFile(up.source).metadata.num_rows
    elif up.kind != "xlsx":
        up.rows = _count_lines(up.source, up.encoding) - (up.kind not in ("jsonl", "txt"))


def guess_text_column(columns: list[str], preview: list[list[str]], name: str,
                      kind: str | None = None) -> tuple[str, str]:
    """The text column by name (the toolkit's one list), else the column whose first rows hold the most review-like
    text (not numbers, dates or ids: ``textcheck.looks_like_text``); a file where no column holds any is refused, in
    one line naming its columns. A column picked by name is checked when labelling starts (``label``'s check). A
    ``kind`` csv or tsv file whose header is one column holding another separator is refused as the CLI refuses it
    (``tables.refuse_other_separator``): its one column was guessed, and 'review;label' rows labelled as reviews."""
    by_name = pick_column(columns, None, path=name)
    if by_name:
        return by_name, ""
    refuse_other_separator(name, kind, columns, fix=upload_separator_fix)
    width = len(columns)
    scores = [sum(len(v) for row in preview if len(row) == width and looks_like_text(v := row[i]))
              for i in range(width)]
    if not any(scores):
        raise InputError(f"{name}: no column holds review text (columns: {', '.join(columns)}; the first rows hold "
                         "only numbers, dates, ids or nothing); upload the file with its column of reviews")
    best = columns[scores.index(max(scores))]
    return best, (f"no column is named like a text column ({', '.join(TEXT_COLUMNS[:3])}, 리뷰, ...): guessed "
                  f"'{best}' from the first rows; check it below")


def upload_separator_fix(other: str) -> str:
    """The way past a file separated by ``other`` where no format can be given (an upload, ``--teach POOL``)."""
    return f"{table_separator_fix(other, key=None)}, and give it again"


def _detect_encoding(up: Upload) -> str:
    try:
        return detect_encoding(up.original)
    except InputError as e:  # its advice names CLI flags: say what a page user can do instead
        text = str(e)
        where = re.search(r"\((.*?)\)", text)
        # "PATH: not UTF-8 ... (what failed); pass ..." or "PATH: starts with a UTF-8 BOM but line 2 is not ...; fix"
        why = where.group(1) if where and "not UTF-8 or cp949" in text else text.split("; ")[0]
        for path in (str(up.original), up.name):
            why = why.replace(f"{path}: ", "")
        raise InputError(f"{up.name} is not UTF-8 or cp949/EUC-KR text ({why}): save it as 'CSV UTF-8' in Excel, "
                         "or convert it to UTF-8, and upload it again") from None


def _count_lines(path: Path, encoding: str | None = None) -> int:
    wide = is_wide(encoding)  # a b"\n" byte is half a character there: count decoded newlines
    nl = "\n" if wide else b"\n"
    n, last = 0, nl
    with open(path, encoding=encoding, errors="replace", newline="") if wide else open(path, "rb") as f:
        while block := f.read(1 << 20):
            n += block.count(nl)
            last = block[-1:]
    return n + (last != nl)


def _user_paths(message: str, up: Upload) -> str:
    for path in (up.original, up.source):
        if path is not None:
            message = message.replace(str(path), up.name)
    return message


def _mb(size: int) -> str:
    return f"{size / (1 << 20):,.1f} MB" if size >= 1 << 20 else f"{size / 1024:,.0f} KB"
