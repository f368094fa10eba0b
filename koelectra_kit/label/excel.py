"""``label --output FILE.xlsx``: an .xlsx is a zip, written whole, so ``run.FileLabeller`` labels into
``FILE.xlsx.partial`` as a CSV (streamed and resumable as any output) and, once it is complete, this makes the
workbook from it (``io.workbook.csv_to_xlsx``, the web app's Excel download too): the input's columns as text,
exactly as the CSV holds them (a review ``-_- 별로`` is a text cell, where Excel opening a CSV reads a formula);
``confidence`` and ``prob_*`` as numbers."""
from __future__ import annotations

from pathlib import Path

from ..errors import InputError
from ..io import workbook
from ..io.fileio import atomic_path
from ..runtime import log
from .chunk import output_columns


def check_fits(dst: Path, src, rows: int) -> None:
    """Before labelling, where the input's row count is known (a workbook, a dataset): one that a worksheet can't
    hold is refused before hours of labelling, not after."""
    if rows + 1 > workbook.EXCEL_MAX_ROWS:
        raise InputError(f"{dst}: {src} has {rows:,} rows, more than an Excel worksheet holds "
                         f"({workbook.EXCEL_MAX_ROWS:,} rows, header included); write .csv instead")


def to_workbook(partial: Path, dst: Path, rows: int, labels: list[str], columns: list[str], encoding: str,
                progress: bool) -> None:
    """The complete labelled CSV ``partial`` (``rows`` rows, the input's ``columns`` then the labeller's, in
    ``encoding``) as the workbook ``dst``, written beside and renamed. A file a worksheet can't hold (its row count
    known only now, for a CSV input) or a control character a worksheet can't store is one error line, and the CSV
    is kept, complete, where it says: the labelling is not lost, nor a workbook cut short."""
    limit = workbook.EXCEL_MAX_ROWS
    kept = (f"the complete labelled CSV is kept in {partial} (UTF-8: rename it to .csv, or open it in Excel with "
            "Data > From Text/CSV)")
    too_long = (f"{dst}: {rows:,} rows labelled, more than an Excel worksheet holds ({limit:,} rows, header "
                f"included), so no .xlsx is written; {kept}")
    if rows + 1 > limit:
        raise InputError(too_long)
    names = output_columns(list(labels), columns)
    numbers = [names["confidence"], *(names[f"prob_{lab}"] for lab in labels)]
    if progress:
        log(f"writing {dst} from {partial}")
    with atomic_path(dst) as tmp:
        workbook.csv_to_xlsx(partial, tmp, numbers, str(dst), too_long, encoding=encoding, instead=kept)
