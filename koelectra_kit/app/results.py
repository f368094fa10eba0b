"""What a finished job offers: the rows to review first, and the labelled file in the format the user wants, with
the analyst's own labels over the model's.

The labeller writes one file per job, a CSV in UTF-8 with a BOM (``labelled.csv``: what Excel opens with Korean
intact, and a download as it is). The input's own format is made from it on demand: the same CSV/TSV re-encoded
(cp949 stays cp949), JSONL, Parquet or an Excel workbook, with the input's column names as it had them (a repeated
name, an empty one: pandas would read them back as ``note.1`` and ``Unnamed: 2``, so the header is read with the
csv module, ``master_header``). A CSV holds only text, so a JSONL, Parquet or .xlsx download takes the input's own
columns from the upload itself (``TYPED_KINDS``: numbers, booleans, nulls, nested values, Arrow types, dates as the
file had them), row for row beside the columns the job added from the labelled CSV: ``confidence`` and ``prob_*``
as numbers, the rest text. The labeller writes exactly one row per record its reader yields (a malformed line
included), so the two line up; a row the labeller flagged malformed keeps what the CSV holds (its line whole in the
text column), and files that do not line up are refused, never zipped askew.

**Excel** (``EXCEL``, every upload but an .xlsx, whose own-format download already is a workbook): the
labelled CSV as a workbook, each cell text as the CSV holds it but ``confidence`` and ``prob_*``, numbers. Why a
workbook and not only the CSV with a BOM: Excel opening a CSV reads a cell that starts with ``=``, ``+``, ``-`` or
``@`` as a formula, and Korean reviews often start so (``-_- 별로`` shows as ``#NAME?``; ``=HYPERLINK(...)`` becomes a
live link); a workbook's text cell is text. A worksheet holds ``EXCEL_MAX_ROWS`` rows: a longer file gets no
workbook (``excel_refusal``), never a cut one.

**The analyst's labels win** (``with_human_labels``): with a labels file (teach mode, or ``--labels``), every row
whose text the analyst answered or fixed carries that answer in ``label``; ``label_source`` says ``human`` or
``model`` (empty for a row not labelled: a flagged one), and ``model_label`` keeps the model's own. The model's
file stays as the labeller wrote it (``labelled.model.csv``); the download is made from it and LABELS.csv as it is
at that moment, so an answer or a fix saved after the file was labelled is in the next download."""
from __future__ import annotations

import csv
import importlib.util
import shutil
from pathlib import Path

from ..errors import InputError
from ..io.csvlines import frame_csv
from ..io.fileio import atomic_path
from ..io.records import Record, read_records
from ..io import workbook
from ..io.workbook import csv_to_xlsx, header_names, number, sheet_rows, within_a_sheet, write_xlsx
from ..label.writer import json_line, write_chunk
from ..label.human import apply_human_labels

MASTER_ENCODING = "utf-8-sig"
TYPED_KINDS = ("jsonl", "parquet", "xlsx")  # same-format downloads made from the upload itself (jobs keeps it)
EXCEL = "excel"  # the labelled CSV as a workbook: every upload's download for Excel (an .xlsx upload's own is one)


def excel_refusal(name: str, rows: int, instead: str = "the CSV UTF-8 file") -> str | None:
    """Why the labelled ``name`` (``rows`` rows under its header) gets no Excel workbook, in one line naming what to
    download ``instead``; None when it gets one."""
    if importlib.util.find_spec("openpyxl") is None:  # in the app extra; a core install may lack it
        return "the Excel (.xlsx) download needs openpyxl: pip install 'koelectra-kit[xlsx]'"
    if rows + 1 > workbook.EXCEL_MAX_ROWS:
        return _too_long_for_excel(name, f"{rows:,}", instead)
    return None


def _too_long_for_excel(name: str, rows: str, instead: str) -> str:
    return (f"{name} has {rows} rows, more than an Excel worksheet holds ({workbook.EXCEL_MAX_ROWS:,} rows, header "
            f"included), so it has no .xlsx download: download {instead}")


def master_header(master: Path) -> list[str]:
    """The labelled CSV's column names exactly as written: the input's (repeats and empty names included), then the
    job's."""
    with open(master, encoding=MASTER_ENCODING, newline="") as f:
        return next(csv.reader(f), [])


def read_master(master: Path, chunksize: int | None = None, usecols=None):
    """The labelled CSV as text (a DataFrame, or an iterator of them with ``chunksize``); without ``usecols`` its
    columns carry the names verbatim (``master_header``), not pandas' renamed ones."""
    import pandas as pd

    df = pd.read_csv(master, encoding=MASTER_ENCODING, dtype=str, keep_default_na=False, chunksize=chunksize,
                     usecols=usecols)
    if usecols is not None:
        return df
    header = master_header(master)
    return df.set_axis(header, axis=1) if chunksize is None else (c.set_axis(header, axis=1) for c in df)


def with_human_labels(model_csv: Path, dst: Path, text_column: str, names: dict, human: dict) -> dict:
    """Write ``dst`` (the job's labelled CSV) from the model's ``model_csv`` with the analyst's labels
    (``human``: ``label.human.match_key`` of a text -> label, ``log_labels``) over the model's; returns {"per_label": counts of the final labels, "human": rows
    that carry the analyst's label}. ``names``: ``label.output_columns`` with ``human_columns`` of the input's
    columns. Streamed, written beside and renamed."""
    from collections import Counter

    per_label, n_human, first = Counter(), 0, True
    with atomic_path(dst) as tmp, open(tmp, "w", encoding=MASTER_ENCODING, newline="") as out:
        for chunk in read_master(model_csv, chunksize=50_000):
            n_human += apply_human_labels(chunk, names, text_column, human)
            per_label.update(v for v in chunk[names["label"]] if v)
            out.write(frame_csv(chunk, first))
            first = False
    return {"per_label": dict(per_label), "human": n_human}


def review_rows(master: Path, names: dict, text_column: str, labels: list[str], n: int) -> tuple[list, list]:
    """(the ``n`` least confident rows the model labelled, lowest first; the first ``n`` flagged rows), each a dict
    with its 1-based row number (and the file's ``id`` where it has that column). Rows carrying the analyst's own
    label are not offered for review. One streaming pass over the labelled file."""
    import pandas as pd

    from .pool import id_column

    prob_cols = [names[f"prob_{lab}"] for lab in labels]
    header = list(pd.read_csv(master, encoding=MASTER_ENCODING, nrows=0).columns)
    source = names.get("label_source")  # with a labels file: rows the analyst labelled are not offered
    ident = id_column(header, text_column)
    cols = [text_column, names["label"], names["confidence"], *prob_cols, names["status"]]
    cols += [c for c in (source, ident) if c and c in header and c not in cols]
    least, flagged, offset = None, [], 0
    for chunk in read_master(master, chunksize=50_000, usecols=cols):
        chunk.index = range(offset + 1, offset + 1 + len(chunk))
        offset += len(chunk)
        status = chunk[names["status"]]
        if len(flagged) < n:
            flagged += [_row(i, r, names, text_column, prob_cols, labels, ident)
                        for i, r in chunk[status != "ok"].head(n - len(flagged)).iterrows()]
        labelled = chunk[chunk[names["label"]] != ""]
        if source:
            labelled = labelled[labelled[source] != "human"]
        labelled = labelled.copy()
        labelled["_conf"] = pd.to_numeric(labelled[names["confidence"]], errors="coerce")
        least = pd.concat([least, labelled]) if least is not None else labelled
        least = least.nsmallest(n, "_conf", keep="first")
    rows = [] if least is None else [_row(i, r, names, text_column, prob_cols, labels, ident)
                                     for i, r in least.iterrows()]
    return rows, flagged


def _row(i, r, names: dict, text_column: str, prob_cols: list, labels: list, ident: str | None = None) -> dict:
    text = r[text_column]
    return {"row": int(i), "id": r[ident] if ident else None,
            "text": text if len(text) <= 300 else text[:300] + "…", "full_text": text,
            "label": r[names["label"]],
            "confidence": number(r[names["confidence"]]), "status": r[names["status"]],
            "probs": [number(r[c]) for c in prob_cols], "labels": labels}


def convert(master: Path, dst: Path, kind: str, encoding: str | None, number_columns: list[str], name: str,
            original: Path | None = None) -> Path:
    """Write ``dst`` (in ``kind``: csv tsv jsonl parquet xlsx, or excel: the labelled CSV as a workbook) from the job's
    labelled CSV and, for ``TYPED_KINDS``, the upload itself (``original``); written beside and renamed, so a download
    never sees half a file."""
    if dst.exists():
        return dst
    with atomic_path(dst) as tmp:
        if kind in ("csv", "tsv"):
            _text_download(master, tmp, kind, encoding, name)
        elif kind in TYPED_KINDS:
            if original is None or not original.exists():
                raise InputError(f"{name} is no longer here, and its {kind} download is made from it: upload it "
                                 "again, or download the CSV UTF-8 file")
            {"jsonl": _jsonl, "parquet": _parquet, "xlsx": _xlsx}[kind](master, original, tmp, encoding,
                                                                          number_columns, name)
        elif kind == EXCEL:
            _excel(master, tmp, number_columns, name)
        else:
            raise InputError(f"no download in format {kind!r}")
    return dst


def _text_download(master: Path, tmp: Path, kind: str, encoding: str | None, name: str) -> None:
    """The CSV (the same rows re-encoded, streamed) or TSV (text in, text out: the labelled CSV holds the input's cells
    as they were) in the upload's encoding. A character that encoding can't store (a cp949 upload read with its
    undecodable bytes replaced by U+FFFD, say) is one line, not a 500."""
    try:
        with open(tmp, "w", encoding=encoding or "utf-8", newline="") as out:
            if kind == "csv":
                with open(master, encoding=MASTER_ENCODING, newline="") as src:
                    shutil.copyfileobj(src, out, 1 << 20)
            else:
                for i, chunk in enumerate(read_master(master, chunksize=50_000)):
                    write_chunk(out, chunk, kind, header=i == 0)
    except UnicodeEncodeError as e:
        raise InputError(f"the labelled {name} holds characters that {encoding} can't store "
                         f"({e.object[e.start:e.end]!r}); download the CSV UTF-8 file instead") from None


def _jsonl(master: Path, original: Path, tmp: Path, encoding: str | None, numbers: list[str], name: str) -> None:
    columns, records = read_records(original, "jsonl", encoding, None)
    try:
        header, rows = _labelled_rows(master, columns, records, numbers, name)
        with open(tmp, "w", encoding=encoding or "utf-8", newline="") as out:
            for row in rows:
                out.write(json_line(header, row))
    finally:
        records.close()


def _parquet(master: Path, original: Path, tmp: Path, encoding: str | None, numbers: list[str], name: str) -> None:
    # the upload's own table, Arrow types and schema metadata as they were; ParquetFile.read, not read_table,
    # which refuses a file with a repeated column name. No row of a Parquet file is malformed, so no row of the
    # labelled CSV stands in for one.
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.ParquetFile(original).read()
    header = master_header(master)
    width = _check_columns(header, table.column_names, name)
    added = read_master(master, usecols=range(width, len(header)))
    if table.num_rows != len(added):
        raise _rows_differ(name, f"{table.num_rows:,}", f"{len(added):,}")
    for j, col in enumerate(header[width:]):
        values = added.iloc[:, j].tolist()
        if col in numbers:
            table = table.append_column(pa.field(col, pa.float64()), pa.array([number(v) for v in values],
                                                                               pa.float64()))
        else:
            table = table.append_column(pa.field(col, pa.string()), pa.array(values, pa.string()))
    pq.write_table(table, tmp)


def _xlsx(master: Path, original: Path, tmp: Path, encoding: str | None, numbers: list[str], name: str) -> None:
    rows = sheet_rows(original, name)
    try:
        columns = header_names(next(rows, ()))  # the CSV copy the labeller read names an empty header cell so too
        # a row wider or narrower than the header was a malformed line of that copy: its labelled row stands in
        records = (Record(list(r), i, None if len(r) == len(columns) else "malformed") for i, r in enumerate(rows, 2))
        header, typed = _labelled_rows(master, columns, records, numbers, name)
        write_xlsx(tmp, header, within_a_sheet(typed, _too_long(name)), name)
    finally:
        rows.close()


def _excel(master: Path, tmp: Path, numbers: list[str], name: str) -> None:
    csv_to_xlsx(master, tmp, numbers, name, _too_long(name), encoding=MASTER_ENCODING)


def _too_long(name: str) -> str:
    """The writer's own refusal (``io.workbook.within_a_sheet``); the app refuses a file known to be too long before
    it writes (``excel_refusal``)."""
    return _too_long_for_excel(name, f"more than {workbook.EXCEL_MAX_ROWS - 1:,}", "the CSV UTF-8 file")


def _labelled_rows(master: Path, columns: list, records, numbers: list[str], name: str):
    """(header, rows): each of the upload's ``records`` (``io.records.Record``, as the labeller read them) with its
    own values, then the columns the job added from the labelled CSV, streamed in step with it; ``numbers`` of those
    as floats (None where blank), the rest text. A record flagged malformed takes the labelled CSV's row whole (its
    line in the text column, as ``label`` writes it). Files that part are one ``InputError``."""
    header = master_header(master)
    width = _check_columns(header, columns, name)
    at_number = [c in numbers for c in header[width:]]

    def rows():
        n = 0
        for chunk in read_master(master, chunksize=50_000):
            for labelled in chunk.itertuples(index=False, name=None):
                rec = next(records, None)
                if rec is None:
                    raise _rows_differ(name, f"{n:,}", "more")
                n += 1
                own = labelled[:width] if rec.error else rec.fields
                yield [*own, *(number(v) if num else v for v, num in zip(labelled[width:], at_number))]
        if next(records, None) is not None:
            raise _rows_differ(name, f"more than {n:,}", f"{n:,}")

    return header, rows()


def _check_columns(header: list[str], columns: list, name: str) -> int:
    """The number of the upload's own columns, once the labelled CSV is seen to begin with them."""
    own = [str(c) for c in columns]
    if not own or header[:len(own)] != own or len(header) == len(own):
        raise InputError(f"{name}: the labelled file does not begin with the upload's columns "
                         f"({', '.join(own)}); label the file again")
    return len(own)


def _rows_differ(name: str, upload: str, labelled: str) -> InputError:
    return InputError(f"{name} has {upload} rows and its labelled file {labelled}: they no longer line up, so no "
                      "row is paired with another's labels; label the file again")

