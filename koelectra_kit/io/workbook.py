"""Excel workbooks in: the first worksheet of an .xlsx as a UTF-8 CSV, which every reader here then streams (and its
rows as typed values, ``sheet_rows``, which the web app's .xlsx download is made from); and out: ``write_xlsx``, the
web app's .xlsx downloads, and ``csv_to_xlsx``, a labelled CSV as a workbook (the app's Excel download and
``label --output FILE.xlsx``).

An .xlsx is a zip of XML that can't be read row by row as text, so it is converted once, up front (openpyxl in
read-only mode: constant memory). Used by ``label`` and by the web app's uploads. Needs openpyxl (the ``xlsx``
or ``app`` extra)."""
from __future__ import annotations

import csv
import io
import re
from contextlib import suppress
from itertools import chain
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from .csvlines import RowWriter

WORKBOOK_SUFFIXES = (".xlsx", ".xlsm")  # what openpyxl reads
EXCEL_SUFFIXES = (*WORKBOOK_SUFFIXES, ".xls")  # .xls too: the old binary format, readable by none of ours
EXCEL_MAX_ROWS = 1_048_576  # a worksheet's limit, header included


def sheet_rows(src: Path, name: str, formulas: bool = False) -> Iterator[tuple]:
    """The first worksheet's rows that hold anything, header first, as openpyxl gives their values (numbers, dates,
    text, None): what ``xlsx_to_csv`` writes as text, and the app's .xlsx download keeps typed, row for row. The
    workbook opens on the first row asked for and closes when the rows end or are dropped. ``formulas``: first
    refuse formulas with no saved value (``check_formulas``; ``xlsx_to_csv``, every reader's way in, asks)."""
    rows = numbered_rows(src, name, formulas)
    try:
        for _, values in rows:
            yield values
    finally:
        rows.close()


def sheet_records(src: Path, name: str) -> list[tuple[int, list[str]]]:
    """(the row number Excel shows, the row's cells as ``xlsx_to_csv`` writes them) for each of ``sheet_rows``,
    header first: a message about a row of the CSV copy names the row the analyst finds in Excel (empty rows, which
    the copy leaves out, and rows above the header counted)."""
    rows, found = numbered_rows(src, name), []
    try:
        for n, values in rows:
            found.append((n, [cell(v) for v in values] if found else header_names(values)))
    finally:
        rows.close()
    return found


def numbered_rows(src: Path, name: str, formulas: bool = False) -> Iterator[tuple[int, tuple]]:
    """``sheet_rows`` with each row's number as Excel shows it (1-based; openpyxl's read-only rows start at row 1
    and fill the gaps between the rows a sheet stores with empty ones, so counting them is Excel's count)."""
    try:
        import openpyxl
    except ImportError:
        raise InputError("reading .xlsx needs openpyxl: pip install 'koelectra-kit[xlsx]'") from None
    try:
        wb = openpyxl.load_workbook(src, read_only=True, data_only=True)
    except Exception as e:  # noqa: BLE001 - zipfile, XML and openpyxl each raise their own types for a bad file
        raise InputError(f"{name} is not a readable .xlsx workbook ({first_line(e)})") from None
    try:
        ws = wb.worksheets[0]
        if formulas:
            check_formulas(src, getattr(ws, "_worksheet_path", None), name)
        # The sheet's size record (<dimension ref=...>) is a floor on the width, as openpyxl pads rows to it, but not
        # a limit: some exporters write a stale one ("A1"), and read-only mode trusted it: 0 rows of 5 were read.
        declared = ws.max_column or 0
        ws.reset_dimensions()
        width = None
        for n, r in enumerate(ws.iter_rows(values_only=True), 1):
            if any(v is not None for v in r):
                width = width or max(declared, len(r))  # the header's (first kept row's) width, at least
                yield n, tuple(r) + (None,) * (width - len(r))
    finally:
        wb.close()


# A formula cell and what follows it: its saved value, an empty one, or none (the cell ends). XML names may carry a
# namespace prefix (x:c), which some writers use. A formula's text is escaped XML: no "<" inside it.
_P = rb"(?:[A-Za-z_][\w.-]*:)?"
_FORMULA_CELL = re.compile(
    rb"<" + _P + rb"c\b(?P<attrs>[^>]*)>\s*<" + _P + rb"f\b[^>]*(?:/>|>[^<]*</" + _P + rb"f>)\s*(?:"
    rb"(?P<empty><" + _P + rb"v\s*/>|<" + _P + rb"v>\s*</" + _P + rb"v>)|(?P<none></" + _P + rb"c>)|<" + _P + rb"v>)")
_CELL_REF = re.compile(rb'\br="([A-Z]+[0-9]+)"')
_OVERLAP = 1 << 16  # a cell is far shorter (Excel caps a formula at 8,192 characters): one found whole in a window


def uncomputed_formulas(src: Path, part: str) -> tuple[int, str | None]:
    """(how many formula cells of the worksheet ``part`` have no saved value, the first one's reference). A program
    that writes formulas (openpyxl, a script's export) leaves their values to Excel, which computes and saves them
    on its next save; openpyxl reads such a cell as empty, so a review column of formulas labelled every row "empty",
    exit 0. A formula whose saved value is the empty string (``t="str"``, an empty ``<v>``) is computed: not counted.
    Streams the sheet's XML in windows, in flat memory."""
    import zipfile

    count, first = 0, None
    with zipfile.ZipFile(src) as z, z.open(part) as f:
        buf = b""
        while True:
            chunk = f.read(1 << 22)
            buf += chunk
            cut = len(buf) - _OVERLAP if chunk else len(buf)  # a match starting past it is read in the next window
            for m in _FORMULA_CELL.finditer(buf, 0, len(buf)):
                if m.start() >= cut:
                    break
                if m.group("none") is None and (m.group("empty") is None or b't="str"' in m.group("attrs")):
                    continue  # a saved value, or a computed empty string (t="str" and an empty <v>)
                count += 1
                if first is None:
                    ref = _CELL_REF.search(m.group("attrs"))
                    first = ref.group(1).decode() if ref else None
            if not chunk:
                return count, first
            buf = buf[cut:]


def check_formulas(src: Path, part: str | None, name: str) -> None:
    """``uncomputed_formulas`` of the first worksheet as one ``InputError``; nothing when the part isn't known (an
    openpyxl that no longer names it) or the workbook has none."""
    if not part:
        return
    try:
        count, first = uncomputed_formulas(src, part.lstrip("/"))
    except (KeyError, OSError, ValueError, EOFError):  # zipfile's own errors for a bad member: openpyxl's say
        return
    if count:
        at = f", the first in cell {first}" if first else ""
        raise InputError(f"{name}: {count:,} formula cell{'s' if count > 1 else ''} on the first worksheet "
                         f"{'have' if count > 1 else 'has'} no saved value{at} (the workbook was written by a program "
                         "that leaves formulas for Excel to compute), so they would read as empty: open it in Excel "
                         "or LibreOffice, save it, and try again")


def other_sheets_hint(src: str | Path, names) -> str:
    """For an error about a column the first worksheet lacks (every reader here reads only that one): "; the
    workbook's sheet 'Reviews' has a column 'review', but only the first sheet is read: ..." naming the other sheets whose header
    has one of ``names`` (case and surrounding spaces aside, as ``tables.pick_column`` matches), else "". A workbook
    whose reviews sit on sheet 2 was refused with sheet 1's columns only, which left the analyst looking for a typo.
    There is no option to pick a sheet: the way out is to move the sheet or save it alone."""
    if Path(src).suffix.lower() not in WORKBOOK_SUFFIXES:
        return ""
    wanted = {str(n).strip().casefold() for n in names if n is not None}
    found = []
    try:
        import openpyxl

        wb = openpyxl.load_workbook(src, read_only=True, data_only=True)
    except Exception:  # noqa: BLE001 - only a hint for an error already being raised: that error must stand
        return ""
    try:
        for ws in wb.worksheets[1:]:
            header = next((r for r in ws.iter_rows(values_only=True) if any(v is not None for v in r)), ())
            hit = next((str(v) for v in header if v is not None and str(v).strip().casefold() in wanted), None)
            if hit is not None:
                found.append((ws.title, hit))
    except Exception:  # noqa: BLE001 - as above
        return ""
    finally:
        wb.close()
    if not found:
        return ""
    where = " and ".join(f"sheet {title!r} has a column {column!r}" for title, column in found[:3])
    return (f"; the workbook's {where}, but only the first sheet is read: move "
            f"{'that sheet' if len(found) == 1 else 'the one to read'} first in the workbook, or save it as its own "
            "file (CSV UTF-8)")


def xlsx_to_csv(src: Path, dst: Path, name: str) -> int:
    """The first worksheet as a UTF-8 CSV (header = its first non-empty row); returns the number of data rows."""
    rows = sheet_rows(src, name, formulas=True)
    try:
        header = next(rows, None)
        if header is None:
            raise InputError(f"{name}: the first worksheet is empty: nothing to label")
        n = 0
        with open(dst, "w", encoding="utf-8", newline="") as f:
            out = RowWriter(f)  # a cell with a "\r" (Excel's _x000D_) quoted
            out.writerow(header_names(header))
            for n, row in enumerate(rows, 1):
                out.writerow([cell(v) for v in row])
        return n
    finally:
        rows.close()


def write_xlsx(dst: Path, header: list, rows, name: str = "the file",
               instead: str = "download the CSV UTF-8 file instead") -> None:
    """A one-sheet workbook of ``header`` and ``rows`` (numbers, dates and booleans as such; openpyxl's write-only
    mode: ``rows`` is streamed). Text is written as text, never as a formula: a review such as ``=_= 별로`` (an
    emoticon) was written as a formula, which Excel shows as an error, not the review. Text holding a control
    character a worksheet can't store (XML 1.0 has no place for U+0000-U+001F but tab and line breaks) is one
    ``InputError`` naming its row (``name``'s, the first under the header is row 1) and ending in ``instead`` (what
    the user has in its place), not openpyxl's exception."""
    try:
        import openpyxl
    except ImportError:
        raise InputError("writing .xlsx needs openpyxl: pip install 'koelectra-kit[xlsx]'") from None
    from openpyxl.cell import WriteOnlyCell
    from openpyxl.cell.cell import ILLEGAL_CHARACTERS_RE
    from openpyxl.utils.exceptions import IllegalCharacterError

    wb = openpyxl.Workbook(write_only=True)
    ws = wb.create_sheet()

    def text(v):
        if not (isinstance(v, str) and v.startswith("=")):
            return v
        c = WriteOnlyCell(ws, value=v)
        c.data_type = "s"  # openpyxl takes any str that starts with "=" for a formula
        return c

    try:
        for i, row in enumerate(chain([header], rows)):  # not (header, *rows): that holds every row in memory first
            try:
                ws.append([text(v) for v in row])
            except IllegalCharacterError:  # openpyxl checks every string anyway; only a refused row is searched again
                bad = next(m for v in row if isinstance(v, str) for m in [ILLEGAL_CHARACTERS_RE.search(v)] if m)
                raise InputError(f"{name}: {f'row {i}' if i else 'the header'} holds the control character "
                                 f"U+{ord(bad.group()):04X}, which an Excel worksheet can't store; {instead}") from None
    except BaseException:
        # openpyxl streams the sheet to a temporary file of its own, removed by a save (else only when Python exits):
        # a save to nowhere removes it, and ``dst`` is left as it was (no workbook cut short)
        with suppress(Exception):
            wb.save(io.BytesIO())
        raise
    wb.save(dst)


def csv_to_xlsx(src: Path, dst: Path, numbers: list[str], name: str, too_long: str, *, encoding: str = "utf-8-sig",
                instead: str = "download the CSV UTF-8 file instead") -> None:
    """Write the labelled CSV ``src`` as the workbook ``dst`` (``write_xlsx``; the caller writes ``dst`` beside and
    renames it). Each cell is text as the CSV holds it ("007" stays "007", "-_- 별로" a text cell), but the columns
    named in ``numbers`` (confidence, prob_*), which are numbers, as every typed download has them. A name in
    ``numbers`` is never one of the input's: ``label.output_columns`` prefixes the added columns when the input has
    one of them. A blank cell is no cell, as Excel shows an empty field of a CSV. A row past a worksheet's
    ``EXCEL_MAX_ROWS`` is the ``InputError`` ``too_long`` before it is written (``within_a_sheet``)."""
    import pandas as pd

    with open(src, encoding=encoding, newline="") as f:  # the names verbatim: pandas renames a repeated one
        header = next(csv.reader(f), [])
    at_number = [c in numbers for c in header]
    chunks = pd.read_csv(src, encoding=encoding, dtype=str, keep_default_na=False, chunksize=50_000)
    rows = ([number(v) if num else (v if v != "" else None) for v, num in zip(row, at_number)]
            for chunk in chunks for row in chunk.itertuples(index=False, name=None))
    try:
        write_xlsx(dst, header, within_a_sheet(rows, too_long), name, instead)
    finally:
        chunks.close()


def within_a_sheet(rows, too_long: str):
    """``rows``, refused (the ``InputError`` ``too_long``) at the first that a worksheet (``EXCEL_MAX_ROWS`` rows,
    header included) can't hold, before it is written: the caller writes to a temporary file, which goes with the
    error, so no workbook is ever cut off. Callers that know the row count refuse before this; this is the writer's
    own guard."""
    limit = EXCEL_MAX_ROWS  # read when called: the one place the limit lives (a test makes it small here)
    for i, row in enumerate(rows, 2):  # row 1 is the header
        if i > limit:
            raise InputError(too_long)
        yield row


def number(v):
    """A figure of a labelled CSV (``label`` writes them at 4 decimals) as a number; blank or not one: None."""
    try:
        return round(float(v), 4)
    except (TypeError, ValueError):
        return None


def header_names(header: tuple) -> list[str]:
    """A header row's cells as column names; an empty one is ``column_N`` (N counts from 1)."""
    return [cell(v) if v is not None else f"column_{i + 1}" for i, v in enumerate(header)]


def cell(v) -> str:
    """A worksheet value as the text a CSV of it holds."""
    if v is None:
        return ""
    if isinstance(v, float) and v.is_integer():
        return str(int(v))  # Excel stores every number as a float: 3 is 3.0
    if hasattr(v, "isoformat"):
        return v.isoformat()
    return str(v)


def first_line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [type(e).__name__])[0][:200]
