"""Batch-label review files with a fine-tuned classifier: streaming, resumable, nothing lost.

    koelectra-kit label --model runs/sentiment --input reviews.csv --text-column review --output labelled.csv

Output = every input column unchanged and in order, then ``label``, ``confidence``, ``prob_<label>`` per class
and ``status`` (ok | empty | truncated | error: ...). Exactly the input's rows, in the input's order:
- empty/NaN text -> status ``empty`` (no label), never dropped;
- a malformed line (an unbalanced quote, a wrong number of fields, a line that is not JSON) -> its own row,
  fields as far as they could be read, status ``error: malformed line N: ...``, and a report at the end;
- texts longer than the model's max_length are labelled from their start and flagged ``truncated``.

The file is read and labelled in chunks (memory stays flat for millions of rows) and written to
``OUTPUT.partial``; a small ``OUTPUT.partial.json`` records the rows and bytes done after each chunk, so
``--resume`` after a crash or kill truncates the partial file to the last whole chunk and continues from
there. The final path appears only when every row is written (one rename).
"""
from __future__ import annotations

import csv
import hashlib
import io
import json
import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import numpy as np

from .errors import InputError
from .tables import Record, check_file, detect_encoding, read_records, table_format

STATE_VERSION = 1


# ---------------------------------------------------------------------------------------------
# 2. Writing chunks; resume state
# ---------------------------------------------------------------------------------------------


def _fingerprint(path: Path) -> str:
    """Size + mtime + hash of the first and last MiB: cheap, and changes when the input does."""
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        if st.st_size > 2 << 20:
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read())
    return h.hexdigest()[:24]


def _out_format(path: Path) -> str:
    fmt = table_format(path)
    if fmt == "parquet":
        raise InputError(f"{path}: write .csv, .tsv or .jsonl (parquet output can't be streamed and resumed); "
                         "convert afterwards with pandas if you need parquet")
    return fmt


def _write_chunk(f, df, fmt: str, header: bool) -> None:
    if fmt == "jsonl":
        text = df.to_json(orient="records", lines=True, force_ascii=False) if len(df) else ""
        f.write(text if not text or text.endswith("\n") else text + "\n")
    else:
        df.to_csv(f, sep="\t" if fmt == "tsv" else ",", index=False, header=header, lineterminator="\n")


# ---------------------------------------------------------------------------------------------
# 3. Labelling
# ---------------------------------------------------------------------------------------------


@dataclass
class LabelSummary:
    rows: int = 0
    per_label: dict = field(default_factory=dict)
    status: dict = field(default_factory=dict)
    malformed: list = field(default_factory=list)  # first few "line N: why"
    seconds: float = 0.0
    output: str = ""

    @property
    def rows_per_s(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def output_columns(labels: list[str], existing: list[str]) -> dict[str, str]:
    """Names of the columns we add; prefixed with ``pred_`` when the input already has one of them."""
    names = ["label", "confidence", *[f"prob_{lab}" for lab in labels], "status"]
    prefix = "pred_" if any(n in existing for n in names) else ""
    return {n: prefix + n for n in names}


def label_chunk(clf, df, text_column: str, errors: list[str | None], batch_size: int):
    """Add the prediction columns to one chunk (a DataFrame of the input columns)."""
    import pandas as pd

    names = output_columns(clf.labels, list(df.columns))
    raw = df[text_column].tolist()
    texts = ["" if (v is None or (isinstance(v, float) and np.isnan(v))) else str(v) for v in raw]
    status = ["ok"] * len(df)
    todo = []
    for i, (t, err) in enumerate(zip(texts, errors)):
        if err:
            status[i] = f"error: {err}"
        elif not t.strip():
            status[i] = "empty"
        else:
            todo.append(i)
    k = len(clf.labels)
    probs = np.full((len(df), k), np.nan, dtype=np.float32)
    label = [""] * len(df)
    if todo:
        pred = clf.predict([texts[i] for i in todo], batch_size=batch_size)
        probs[todo] = pred.probs
        for j, i in enumerate(todo):
            label[i] = pred.labels[j]
            if pred.truncated[j]:
                status[i] = "truncated"
    out = df.copy()
    out[names["label"]] = label
    conf = np.nanmax(np.where(np.isnan(probs), -1, probs), axis=1)
    out[names["confidence"]] = pd.array([round(float(c), 4) if c >= 0 else None for c in conf], dtype="Float64")
    for j, lab in enumerate(clf.labels):
        col = probs[:, j]
        out[names[f"prob_{lab}"]] = pd.array([None if np.isnan(v) else round(float(v), 4) for v in col],
                                             dtype="Float64")
    out[names["status"]] = status
    return out, names


def label_dataframe(df, model=None, text_column: str = "review", batch_size: int = 64, classifier=None,
                    **load_kwargs):
    """Label an in-memory DataFrame: the same columns and rows plus the prediction columns."""
    from .classifier import Classifier

    if text_column not in df.columns:
        raise InputError(f"no column {text_column!r}; columns present: {list(df.columns)}")
    clf = classifier or Classifier.load(model, **load_kwargs)
    out, _ = label_chunk(clf, df, text_column, [None] * len(df), batch_size)
    return out


def label_file(model, input, output, text_column: str = "review", *, fmt: str | None = None,
               sep: str | None = None, encoding: str | None = None, output_encoding: str | None = None,
               batch_size: int = 64, chunk_rows: int = 20000, device: str = "auto", precision: str = "auto",
               quantize: bool = False, threads: int | None = None, resume: bool = False, plot: str | None = None,
               progress: bool = True, classifier=None, _after_chunk=None) -> LabelSummary:
    """Label ``input`` into ``output`` (see the module docstring). ``_after_chunk(n_chunks_done)``: test hook."""
    import pandas as pd
    from tqdm.auto import tqdm

    from .classifier import Classifier

    src = check_file(input)
    dst = Path(output)
    if dst.resolve() == src.resolve():
        raise InputError("--output must differ from --input (the input is never overwritten)")
    fmt = table_format(src, fmt)
    out_fmt = _out_format(dst)
    enc = detect_encoding(src, encoding) if fmt != "parquet" else "utf-8"
    columns, records = read_records(src, fmt, enc, sep)
    if text_column not in columns:
        raise InputError(f"{src}: no column {text_column!r}; columns present: {columns}")

    partial = dst.with_name(dst.name + ".partial")
    state_path = dst.with_name(dst.name + ".partial.json")
    clf = classifier or Classifier.load(model, device=device, precision=precision, quantize=quantize,
                                        threads=threads)
    state = {"version": STATE_VERSION, "input": str(src.resolve()), "input_fingerprint": _fingerprint(src),
             "model": str(model or getattr(clf, "source", "")), "labels": clf.labels, "text_column": text_column,
             "rows_done": 0, "bytes_done": 0, "chunks_done": 0, "per_label": {}, "status": {}, "malformed": []}
    if resume and state_path.exists() and partial.exists():
        saved = json.loads(state_path.read_text(encoding="utf-8"))
        for key in ("input_fingerprint", "labels", "text_column"):
            if saved.get(key) != state[key]:
                raise InputError(f"can't resume {partial}: it was made with another {key.replace('_', ' ')} "
                                 f"({saved.get(key)!r} vs {state[key]!r}); drop --resume to start over")
        state.update({k: saved[k] for k in ("rows_done", "bytes_done", "chunks_done", "per_label", "status",
                                             "malformed")})
        with open(partial, "r+b") as f:  # drop whatever a killed chunk had half-written
            f.truncate(state["bytes_done"])
        if progress:
            print(f"resuming {partial}: {state['rows_done']:,} rows already labelled", file=sys.stderr)
    else:
        if resume and progress:
            print("nothing to resume: starting from the first row", file=sys.stderr)
        partial.unlink(missing_ok=True)
        state_path.unlink(missing_ok=True)
    out_enc = output_encoding or ("utf-8-sig" if out_fmt == "csv" else "utf-8")

    total = src.stat().st_size
    bar = tqdm(total=None, unit="rows", desc="labelling", disable=not progress, dynamic_ncols=True,
               initial=state["rows_done"])
    t0 = time.perf_counter()
    new_rows = 0
    skip = state["rows_done"]
    try:
        chunk: list[Record] = []

        def flush(chunk: list[Record]) -> None:
            nonlocal new_rows
            df = pd.DataFrame([r.fields for r in chunk], columns=columns)
            errors = [r.error for r in chunk]
            out, names = label_chunk(clf, df, text_column, errors, batch_size)
            first = state["bytes_done"] == 0
            mode = "w" if first else "a"
            # the BOM (Excel needs it to read UTF-8) only at the very start of the file
            with open(partial, mode, encoding=out_enc if first else out_enc.replace("-sig", ""), newline="") as f:
                _write_chunk(f, out, out_fmt, header=first)
                f.flush()
                os.fsync(f.fileno())
            state["bytes_done"] = partial.stat().st_size
            state["rows_done"] += len(chunk)
            state["chunks_done"] += 1
            for lab, c in out[names["label"]].value_counts().items():
                if lab:
                    state["per_label"][lab] = state["per_label"].get(lab, 0) + int(c)
            for st, c in pd.Series([s.split(":")[0] for s in out[names["status"]]]).value_counts().items():
                state["status"][st] = state["status"].get(st, 0) + int(c)
            state["malformed"] += [e for e in errors if e][: max(0, 20 - len(state["malformed"]))]
            tmp = state_path.with_name(state_path.name + ".tmp")
            tmp.write_text(json.dumps(state), encoding="utf-8")
            os.replace(tmp, state_path)
            new_rows += len(chunk)
            bar.update(len(chunk))
            if _after_chunk is not None:
                _after_chunk(state["chunks_done"])

        for rec in records:
            if skip:
                skip -= 1
                continue
            chunk.append(rec)
            if len(chunk) >= chunk_rows:
                flush(chunk)
                chunk = []
        if chunk or state["bytes_done"] == 0:
            flush(chunk) if chunk else _write_header_only(partial, columns, clf, out_fmt, out_enc)
        os.replace(partial, dst)
        state_path.unlink(missing_ok=True)
    finally:
        bar.close()
    seconds = time.perf_counter() - t0
    summary = LabelSummary(rows=state["rows_done"], per_label=state["per_label"], status=state["status"],
                           malformed=state["malformed"], seconds=seconds, output=str(dst))
    summary.new_rows = new_rows
    if plot:
        plot_distribution(summary, plot)
    return summary


def _write_header_only(partial: Path, columns, clf, out_fmt, out_enc) -> None:
    import pandas as pd

    names = output_columns(clf.labels, columns)
    df = pd.DataFrame(columns=[*columns, *names.values()])
    with open(partial, "w", encoding=out_enc, newline="") as f:
        _write_chunk(f, df, out_fmt, header=True)


def format_summary(s: LabelSummary) -> str:
    lines = [f"labelled {s.rows:,} rows -> {s.output}"]
    total = max(1, sum(s.per_label.values()))
    for lab, c in sorted(s.per_label.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {lab:<12}{c:>10,}  {c / total:6.1%}")
    flagged = {k: v for k, v in s.status.items() if k != "ok"}
    if flagged:
        lines.append("  flagged: " + ", ".join(f"{k} {v:,}" for k, v in sorted(flagged.items())))
    for m in s.malformed[:5]:
        lines.append(f"  {m}")
    if len(s.malformed) > 5:
        lines.append(f"  ... ({s.status.get('error', 0)} malformed rows in all; status column says which)")
    new = getattr(s, "new_rows", s.rows)
    lines.append(f"  {new:,} rows in {s.seconds:.1f}s ({new / max(s.seconds, 1e-9):,.0f} rows/s)")
    return "\n".join(lines)


def plot_distribution(s: LabelSummary, path: str | Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from .metrics import _use_korean_font

    _use_korean_font()
    labels = list(s.per_label)
    fig, ax = plt.subplots(figsize=(5, 3))
    ax.bar(labels, [s.per_label[lab] for lab in labels], color="#4C72B0")
    ax.set_ylabel("rows")
    ax.set_title(f"{s.rows:,} rows labelled")
    fig.tight_layout()
    from .utils import atomic_path

    with atomic_path(path, suffix=".png") as tmp:
        fig.savefig(tmp, dpi=120, format="png")
    plt.close(fig)
    return Path(path)


__all__ = ["label_file", "label_dataframe", "label_chunk", "read_records", "format_summary", "LabelSummary"]
