"""What a finished job offers: the rows to review first, and the labelled file in the format the user wants, with
the analyst's own labels over the model's.

The labeller writes one file per job, a CSV in UTF-8 with a BOM (``labelled.csv``: what Excel opens with Korean
intact, and a download as it is). The input's own format is made from it on demand: the same CSV/TSV re-encoded
(cp949 stays cp949), JSONL, Parquet or an Excel workbook. Columns come back as text, except the confidence and
probability columns, which are numbers.

**The analyst's labels win** (``with_human_labels``): with a labels file (teach mode, or ``--labels``), every row
whose text the analyst answered or fixed carries that answer in ``label``; ``label_source`` says ``human`` or
``model`` (empty for a row not labelled: a flagged one), and ``model_label`` keeps the model's own. The model's
file stays as the labeller wrote it (``labelled.model.csv``); the download is made from it and LABELS.csv as it is
at that moment, so an answer or a fix saved after the file was labelled is in the next download."""
from __future__ import annotations

import shutil
from pathlib import Path

from ..errors import InputError
from ..io.fileio import atomic_path
from ..label import write_chunk
from ..label.human import apply_human_labels

MASTER_ENCODING = "utf-8-sig"
EXCEL_MAX_ROWS = 1_048_576  # a worksheet's limit, header included


def read_master(master: Path, chunksize: int | None = None, usecols=None):
    import pandas as pd

    return pd.read_csv(master, encoding=MASTER_ENCODING, dtype=str, keep_default_na=False, chunksize=chunksize,
                       usecols=usecols)


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
            chunk.to_csv(out, index=False, header=first, lineterminator="\n")
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
            "confidence": _num(r[names["confidence"]]), "status": r[names["status"]],
            "probs": [_num(r[c]) for c in prob_cols], "labels": labels}


def _num(v):
    try:
        return round(float(v), 4)
    except (TypeError, ValueError):
        return None


def convert(master: Path, dst: Path, kind: str, encoding: str | None, number_columns: list[str], name: str) -> Path:
    """Write ``dst`` (in ``kind``: csv tsv jsonl parquet xlsx) from the job's labelled CSV; written beside and
    renamed, so a download never sees half a file."""
    if dst.exists():
        return dst
    with atomic_path(dst) as tmp:
        if kind == "csv":  # same bytes, other encoding: a streamed re-encode
            try:
                with open(master, encoding=MASTER_ENCODING, newline="") as src, \
                        open(tmp, "w", encoding=encoding or "utf-8", newline="") as out:
                    shutil.copyfileobj(src, out, 1 << 20)
            except UnicodeEncodeError as e:
                raise InputError(f"the labelled {name} holds characters that {encoding} can't store "
                                 f"({e.object[e.start:e.end]!r}); download the CSV UTF-8 file instead") from None
        elif kind in ("tsv", "jsonl"):
            with open(tmp, "w", encoding=encoding or "utf-8", newline="") as out:
                for i, chunk in enumerate(read_master(master, chunksize=50_000)):
                    write_chunk(out, _numbers(chunk, number_columns), kind, header=i == 0)
        elif kind == "parquet":
            _numbers(read_master(master), number_columns).to_parquet(tmp, index=False)
        elif kind == "xlsx":
            df = read_master(master)
            if len(df) >= EXCEL_MAX_ROWS:
                raise InputError(f"{len(df):,} rows do not fit in an Excel worksheet; download the CSV UTF-8 file")
            _numbers(df, number_columns).to_excel(tmp, index=False, engine="openpyxl")
        else:
            raise InputError(f"no download in format {kind!r}")
    return dst


def _numbers(df, columns: list[str]):
    import pandas as pd

    for c in columns:
        if c in df.columns:
            df[c] = pd.to_numeric(df[c], errors="coerce")
    return df
