"""``koelectra-kit suggest`` as a command: a pool file in (label's readers, formats and column rules), the rows
``rows.suggest_rows`` picks written out whole (``out``: .csv .tsv .jsonl) with the model's guess beside each.
The scores and the choice itself live in ``rows.py``."""
from __future__ import annotations

import contextlib
import io
import tempfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from ..config import check_not_blank
from ..errors import ConfigError, InputError
from ..io.printed import quoted
from .rows import Suggestions, check_options, entropies, margins, suggest_rows

# -- koelectra-kit suggest ----------------------------------------------------------------------------------------


@dataclass
class SuggestConfig:
    """``koelectra-kit suggest``: a classifier, a pool of unlabelled rows, the file of rows to label next."""

    STAGE: ClassVar[str] = "suggest"

    model: str = ""  # classifier folder: fine-tuned (finetune), TF-IDF (baseline out=) or ensemble, or a hub id
    pool: str = ""  # unlabelled table (.csv .tsv .jsonl .parquet .xlsx) or dataset (hf:..., a folder), as label reads
    # the suggestions: .csv (UTF-8 with a BOM, for Excel), .tsv or .jsonl, in a folder that exists; written whole or
    # not at all
    out: str = ""
    n: int = 100  # rows to suggest (fewer when the pool runs out of distinct, unlabelled texts)
    strategy: Literal["margin", "entropy", "random"] = "margin"  # margin: smallest top-1 minus top-2 first (why: above)
    text_column: str | None = None  # the pool's text column; None = first present of review, text, document, ...
    # tables of rows already labelled (one or a list): a pool row whose normalized text is in one is skipped (a row
    # with an empty label, where the table has a label column, is not labelled; for the app's LABELS.csv: a text
    # whose latest answer or skip stands, a row typed by hand with only text and label included; an undone answer is
    # asked again; a label outside the model's is the file's one error line, as `label --human-labels` says it; a
    # last line torn mid-write is left out, with a warning)
    labelled: list[str] = field(default_factory=list)
    labelled_text_column: str | None = None  # their text column; None = the pool's if present, else detected
    # character 3-gram Jaccard from which a row is a near-duplicate of one already picked (1: the same 3-grams only)
    dedupe_threshold: float = 0.7
    seed: int = 0  # strategy=random's order
    format: str | None = None  # the pool's format: csv|tsv|jsonl|parquet; None = from the extension
    encoding: str | None = None  # the pool's encoding; None = detect (utf-8, utf-8 with BOM, cp949/EUC-KR, UTF-16)
    batch_size: int = 128  # texts per model call: 1 to 4096
    device: str = "auto"  # auto | cpu | cuda | cuda:1
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    # false: an existing out is refused (you may have typed labels into it); true: replaced whole
    overwrite: bool = False
    allow_generic_labels: bool = False  # accept a model whose labels are LABEL_0, LABEL_1 (no trained head), as label

    def validate(self) -> None:
        from ..label.config import FORMATS, MAX_BATCH, WRITABLE

        for key in ("model", "pool", "out"):
            if not getattr(self, key):
                raise ConfigError(f"{key} is required: {key}=...")
        check_options(self.n, self.strategy, self.dedupe_threshold)
        check_not_blank(self, ("text_column", "labelled_text_column", "format"))  # "" was read as: detect it
        if not 1 <= self.batch_size <= MAX_BATCH:
            raise ConfigError(f"batch_size={self.batch_size}: between 1 and {MAX_BATCH} texts per model call")
        if self.format is not None and self.format not in FORMATS:
            raise ConfigError(f"format={self.format!r}: use one of {', '.join(FORMATS)}")
        if not self.out.lower().endswith(WRITABLE):
            raise ConfigError(f"out={self.out}: write {', '.join(WRITABLE)} (a .csv opens in Excel)")
        if self.encoding is not None:
            from ..io.tables import encoding_problem

            if problem := encoding_problem(self.encoding):
                raise ConfigError(f"encoding={self.encoding!r} {problem} (try utf-8, cp949)")


@dataclass
class SuggestSummary:
    out: str
    strategy: str
    rows: int  # the pool's rows
    picked: int
    asked: int
    skipped: dict
    malformed: int
    guesses: dict  # the model's label -> rows among the picked

    def lines(self) -> list[str]:
        why = {"margin": "least confident first: smallest top-1 minus top-2 probability",
               "entropy": "least confident first: largest entropy", "random": "in a seeded random order"}
        s = self.skipped
        counts = {"already labelled": s.get("labelled", 0), "repeated text": s.get("duplicate", 0),
                  "near-duplicate of a picked row": s.get("near_duplicate", 0),
                  "empty": s.get("empty", 0) - self.malformed, "malformed line": self.malformed}
        passed = ", ".join(f"{k} {v:,}" for k, v in counts.items() if v) or "none"
        out = [f"wrote {self.picked:,} rows to label next to {self.out} ({why[self.strategy]})",
               f"pool: {self.rows:,} rows; passed over: {passed}",
               "the model's guesses: " + (", ".join(f"{quoted(k)} {v:,}" for k, v in self.guesses.items())
                                           or "none")]
        if self.picked < self.asked:
            out.append(f"note: {self.asked:,} asked, only {self.picked:,} distinct unlabelled texts left in the pool")
        return out


def run_suggest(cfg: SuggestConfig, classifier=None) -> SuggestSummary:
    """Read the pool, load the model (or use ``classifier``), read the labelled files, pick, write ``cfg.out``. The
    pool is checked before the model loads, and that the labelled files are there; their contents are read after it,
    since a LABELS.csv's labels are checked against the model's and its last line torn mid-write (a label cut short)
    is told by them, as ``label human_labels=`` does both. Nothing is written unless all of it succeeds."""
    from ..io.fileio import check_input_file
    from ..io.hfdata import is_dataset_source
    from ..io.labellog import without_torn_tail
    from ..label import check_trained_head

    cfg.validate()
    out = _check_out(cfg)
    with _opened(cfg.pool, cfg.format, cfg.encoding) as (reopen, kind):
        columns, column, texts, malformed = read_texts(reopen, cfg.text_column, cfg.pool, "text_column", fmt=kind)
        if not texts:
            raise InputError(f"{cfg.pool} has a header row but no rows under it: nothing to suggest")
        for path in cfg.labelled:  # a mistyped one is said before the model loads
            if not is_dataset_source(path):
                check_input_file(path)
        if classifier is None:
            from ..classify.classifier import Classifier

            classifier = Classifier.load(cfg.model, device=cfg.device, precision=cfg.precision)
        check_trained_head(classifier, cfg.allow_generic_labels, override="pass allow_generic_labels=true")
        exclude = []
        for path in cfg.labelled:
            # only read: a torn last line is left out with one warning, the file left as it is
            with without_torn_tail(path, path, list(classifier.labels), logs_only=True) as readable, \
                    _opened(str(readable), None, None) as (again, kind):
                exclude += labelled_texts(again, cfg.labelled_text_column, path, list(classifier.labels),
                                          prefer=column, fmt=kind)
        picked = suggest_rows(classifier, texts, cfg.n, cfg.strategy, exclude=exclude,
                              threshold=cfg.dedupe_threshold, seed=cfg.seed, batch_size=cfg.batch_size)
        rows = _picked_rows(reopen, picked.indices)
    _write(out, _frame(picked, columns, rows))
    return SuggestSummary(out=str(out), strategy=cfg.strategy, rows=len(texts), picked=len(picked.indices),
                          asked=cfg.n, skipped=picked.skipped, malformed=malformed,
                          guesses=dict(Counter(picked.guesses).most_common()))


def _check_out(cfg: SuggestConfig) -> Path:
    from ..io.fileio import check_output_parent

    out = Path(cfg.out)
    if out.is_dir():
        raise InputError(f"out={out} is a folder; give a file path (next.csv)")
    for name, value in [("pool", cfg.pool), *(("labelled", p) for p in cfg.labelled)]:
        if out.exists() and Path(value).exists() and out.resolve() == Path(value).resolve():
            raise InputError(f"out={out} is also the {name} file: it would be overwritten; name another file")
    if out.exists() and not cfg.overwrite:
        raise InputError(f"{out} exists; pass overwrite=true to replace it (labels typed into it would be lost)")
    check_output_parent(out)
    if not out.parent.is_dir():  # as label's --output: a mistyped folder is not made silently
        raise InputError(f"out={out}: folder {out.parent} does not exist; create it first")
    return out


# -- reading tables: label's formats, encodings and column rules ---------------------------------------------------


@contextlib.contextmanager
def _opened(path: str, fmt: str | None, encoding: str | None):
    """A table to read more than once (the texts, then the picked rows): yields ``(reopen, kind)``, ``kind`` the format
    it is read as (csv, tsv, jsonl, parquet, txt; xlsx; dataset) and ``reopen() -> (columns, records)``
    with label's readers (``tables.read_records``, an .xlsx converted once to a temporary CSV, a dataset through
    ``hfdata``) and its one-line errors; ``reopen(whole=True) -> (table, records)``: the table whole as a DataFrame
    of strings, as ``label human_labels=`` and ``finetune train=`` read one (``tables.read_table``,
    ``hfdata.read_dataframe``), and a log's records with their lines or Excel rows (``labellog.log_records``) or None."""
    from ..io.fileio import check_input_file
    from ..io.hfdata import is_dataset_source, open_rows, read_dataframe
    from ..io.labellog import log_records
    from ..io.tables import CONFIG_HINTS, detect_encoding, read_records, read_table, table_format
    from ..io.workbook import WORKBOOK_SUFFIXES, xlsx_to_csv

    if is_dataset_source(path):
        def rows(whole: bool = False):
            if whole:
                return read_dataframe(path), None
            opened = open_rows(path)
            return opened.columns, opened.records
        yield rows, "dataset"
        return
    src = check_input_file(path)
    if fmt is None and src.suffix.lower() in WORKBOOK_SUFFIXES:
        with tempfile.TemporaryDirectory(prefix="koelectra-suggest-") as tmp:
            sheet = Path(tmp) / "sheet.csv"
            xlsx_to_csv(src, sheet, str(src))

            def sheet_rows(whole: bool = False):
                if whole:
                    df = read_table(sheet, "csv", "utf-8")
                    return df, log_records(src, df)  # a log's rows as Excel numbers them
                return read_records(sheet, "csv", "utf-8", None)
            yield sheet_rows, "xlsx"
        return
    kind = table_format(src, fmt)
    enc = "utf-8" if kind == "parquet" else detect_encoding(src, encoding, hints=CONFIG_HINTS)

    def rows(whole: bool = False):
        if whole:
            df = read_table(src, kind, enc)
            return df, log_records(src, df, enc, kind)
        return read_records(src, kind, enc, None)
    yield rows, kind


def text_column_of(columns: list[str], given: str | None, path: str, key: str = "text_column", fmt: str | None = None,
                   fix=None) -> str:
    """``given`` (which must be present), else the first of the toolkit's text-column names present. Where it is
    absent and ``fmt`` (the format the table was read as) is csv or tsv, a header read as one column holding another
    separator ('review;label') is refused as ``label`` refuses it, ``fix`` (``tables.table_separator_fix`` unless
    given) saying the way past it."""
    from ..io.tables import TEXT_COLUMNS, pick_column, refuse_other_separator, table_separator_fix
    from ..io.workbook import other_sheets_hint

    try:
        column = pick_column(columns, given, path=path)
    except InputError as e:  # a named column absent: perhaps on a workbook's other sheet
        refuse_other_separator(path, fmt, columns, fix=fix or table_separator_fix)
        raise InputError(f"{e}{other_sheets_hint(path, [given])}") from None
    if column is None:
        refuse_other_separator(path, fmt, columns, fix=fix or table_separator_fix)
        raise InputError(f"{path}: no text column (none of {', '.join(TEXT_COLUMNS[:5])}, ... is present); columns "
                         f"present: {', '.join(columns) or 'none'}; name the column of reviews with {key}=..."
                         f"{other_sheets_hint(path, TEXT_COLUMNS)}")
    if columns.count(column) > 1:
        raise InputError(f"{path}: {columns.count(column)} columns are named {column!r}; rename them so the text "
                         "column is unambiguous")
    return column


def read_texts(reopen, given: str | None, path: str, key: str = "text_column", prefer: str | None = None,
               fmt: str | None = None, fix=None) -> tuple:
    """(columns, text column, texts, malformed lines): one text per row, None for a malformed line. The column:
    ``given``, else ``prefer`` where present (a labelled file's column named as the pool's), else detected
    (``text_column_of``, which ``fmt`` and ``fix`` are for)."""
    from ..io.records import cell_text
    from ..io.textcheck import check_text_column

    columns, records = reopen()
    columns = [str(c) for c in columns]
    try:
        column = text_column_of(columns, given or (prefer if prefer in columns else None), path, key, fmt, fix)
        at = columns.index(column)
        texts, malformed = [], 0
        for rec in records:
            text, why = cell_text(rec.fields[at]) if not rec.error else ("", "malformed")
            if why:  # a malformed line, or a JSON object or non-UTF-8 bytes as the text: never suggested
                malformed += 1
                texts.append(None)
            else:
                texts.append(text)  # bytes as their UTF-8 text
    except UnicodeDecodeError as e:  # the file changed under us: detect_encoding read all of it
        raise InputError(f"{path}: bytes invalid in its encoding ({e.reason}); pass encoding=...") from None
    finally:
        getattr(records, "close", lambda: None)()
    check_text_column(texts, column, columns, path)
    return columns, column, texts, malformed


def labelled_texts(reopen, given: str | None, path: str, labels: list[str], prefer: str | None = None,
                   fmt: str | None = None) -> list:
    """The texts a ``labelled`` table has labelled: every row's text, or for the app's LABELS.csv (its ``text``,
    ``label`` and ``action`` columns) the texts whose latest answer or skip no undo retracts, as teach mode's queue
    counts them (an undone answer is asked again), a row typed by hand with only ``text`` and ``label`` included.
    ``labels``: the model's, which every answer in the log must be one of."""
    from ..io.labellog import is_label_log, table_labels

    columns, records = reopen()
    getattr(records, "close", lambda: None)()
    if not (is_label_log(columns) and given in (None, "text")):
        columns, column, texts, _ = read_texts(reopen, given, path, "labelled_text_column", prefer=prefer, fmt=fmt)
        return _answered(reopen, columns, column, texts, path, labels)
    # the log read whole, as `label human_labels=` and `finetune train=` read it (read_table, then labellog's
    # table_labels): a row typed by hand with fewer fields than the header (좋아요,positive) is an answer, its other
    # fields empty; row by row it was a malformed line, dropped, and the text suggested again. A row with more fields
    # than the header is that reader's one error line. Labels are checked as those readers check them, against the
    # model's labels (the only label set suggest has: the one `label --human-labels` checks with this model, and the
    # one a torn last line was told by) in the spellings `finetune` takes (긍정/부정/중립, pos/neg, any case).
    # Suggest only asks which texts were answered, but a typo such as `posi` is a file the app, `label` and
    # `finetune` each refuse: counted as answered, the analyst would find that out after labelling the next batch.
    df, records = reopen(whole=True)
    state = table_labels(df, path, labels, fix="fix the file", records=records)
    return [*state.labels, *state.skipped]


def _answered(reopen, columns: list[str], column: str, texts: list, path: str, labels: list[str]) -> list:
    """``texts`` without the rows whose label is empty, where the table has a label column (``label``,
    ``sentiment``, ...): a sheet labelled half-way has no answer on those rows, as ``label --human-labels`` and
    ``finetune`` read it, so they are suggested again. A table without one (texts already sent out) counts every
    row. A label that is none of the model's (in the spellings finetune takes) where the others are is refused, as
    in the app's log: a typo such as `posi` counted as answered, in a file `finetune` and `baseline` refuse."""
    from ..io.labelled import LABEL_COLUMNS, label_resolver
    from ..io.tables import pick_column

    label_col = pick_column(columns, None, LABEL_COLUMNS, path)
    if label_col is None or label_col == column:
        return texts
    at, (_, records) = columns.index(label_col), reopen()
    resolve, unknown, known = label_resolver(labels), [], 0
    try:
        answered = []
        for rec in records:
            value = None if rec.error else rec.fields[at]
            answered.append(_filled(value))
            if answered[-1]:
                if resolve(str(value).strip()) is None:
                    unknown.append((rec.line, value))
                else:
                    known += 1
    finally:
        getattr(records, "close", lambda: None)()
    if unknown and known:  # (none known: another label scheme, ratings or codes, not a typo to catch here)
        line, value = unknown[0]
        raise InputError(f"{path} line {line}: label {value!r} is none of the model's ({', '.join(labels)})"
                         f"{resolve.alias_hint()} where {known:,} other rows' are ({len(unknown):,} such row(s)); "
                         "fix the file")
    return [t for t, a in zip(texts, answered) if a]


def _filled(value) -> bool:
    return value is not None and value == value and str(value).strip() != ""  # NaN != NaN: a Parquet null


def _picked_rows(reopen, indices: np.ndarray) -> dict[int, list]:
    """The picked rows' fields, by position (a second pass: only the texts were kept from the first)."""
    wanted, rows = set(int(i) for i in indices), {}
    if not wanted:
        return rows
    _, records = reopen()
    try:
        for i, rec in enumerate(records):
            if i in wanted:
                rows[i] = rec.fields
                if len(rows) == len(wanted):
                    break
    finally:
        getattr(records, "close", lambda: None)()
    if len(rows) != len(wanted):
        raise InputError("the pool changed while suggest read it: run it again")
    return rows


def _frame(picked: Suggestions, columns: list[str], rows: dict[int, list]):
    import pandas as pd

    added = ["rank", "row", "label", "confidence", *[f"prob_{lab}" for lab in picked.labels], "margin", "entropy",
             "copies"]
    name = {a: ("suggest_" + a if any(a == c for c in columns) else a) for a in added}
    if any(name[a] != a for a in added):
        name = {a: "suggest_" + a for a in added}  # all or none prefixed: the columns read as one set
    data = pd.DataFrame([rows[int(i)] for i in picked.indices], columns=columns, dtype=object)
    probs = np.round(picked.probs, 4)
    data.insert(0, name["row"], picked.indices.astype(np.int64))
    data.insert(0, name["rank"], np.arange(1, len(picked.indices) + 1))
    data[name["label"]] = picked.guesses
    data[name["confidence"]] = probs.max(axis=1) if len(probs) else []
    for j, lab in enumerate(picked.labels):
        data[name[f"prob_{lab}"]] = probs[:, j]
    data[name["margin"]] = np.round(margins(picked.probs), 4)
    data[name["entropy"]] = np.round(entropies(picked.probs), 4)
    data[name["copies"]] = picked.copies
    return data


def _write(out: Path, df) -> None:
    from ..io.fileio import write_bytes_atomic
    from ..label import write_chunk
    from ..io.tables import table_format

    fmt = table_format(out)
    buf = io.StringIO()
    write_chunk(buf, df, fmt, header=True)
    write_bytes_atomic(out, buf.getvalue().encode("utf-8-sig" if fmt == "csv" else "utf-8"))
