"""Label a file into another: streaming, resumable, nothing lost (see the package docstring for the
output's contract). ``FileLabeller`` reads top to bottom: check the paths, open the input and pick its text column,
load the model, decide between a fresh start and a resume, then one loop over chunks. What names the job, and the
records kept of it (a resume's, a shard's, a finished output's), are ``record.JobRecords``'s."""
from __future__ import annotations

import gc
import io
import os
import time
from contextlib import contextmanager
from dataclasses import replace
from itertools import islice
from pathlib import Path

from ..errors import InputError
from ..io.fileio import check_input_file, file_kind, same_file
from ..io.hfdata import is_dataset_source, open_rows, parse_source
from ..io.records import cell_text
from ..runtime import log, warn
from ..io.tables import (FORMATS, LINES_COLUMN, TEXT_COLUMNS, check_lines_file, column_hint, detect_encoding,
                         likeliest_encoding, pick_column, read_records, refuse_other_separator, table_format)
from ..io.textcheck import check_text_column
from ..io.workbook import EXCEL_SUFFIXES, WORKBOOK_SUFFIXES, other_sheets_hint, xlsx_to_csv
from . import excel
from .chunk import check_trained_head, label_chunk, load_classifier, output_columns, pick_text_column
from .config import WORKBOOK, LabelConfig
from .dedupe import PredictionCache
from .paths import (TEMP_TAIL, InputGuard, check_name_lengths, check_not_written, check_writable, naming, one_file,
                    output_target)
from .human import HumanLabels, apply_human_labels, human_columns, read_human_labels
from .lock import PartialLock
from .record import JobRecords
from .resume import read_state
from .shard import job_path, row_range
from .summary import LabelSummary, plot_distribution
from .writer import check_json_keys, encoded, write_chunk


class FileLabeller(JobRecords):
    def __init__(self, cfg: LabelConfig, classifier=None, after_chunk=None, cache: PredictionCache | None = None,
                 human: HumanLabels | None = None):
        cfg.validate()
        if not isinstance(cfg.input, str):  # one file here; label_files / FilesLabeller plan several
            if len(cfg.input) != 1:
                raise InputError(f"{len(cfg.input)} inputs given: FileLabeller labels one file (use label_files)")
            cfg = replace(cfg, input=cfg.input[0])
        self.cfg = cfg
        self.clf = classifier
        self.after_chunk = after_chunk  # test hook: called with the number of chunks done
        # shared by the files of one run (same model, so a text seen in one file is answered in the next)
        self.cache = cache if cache is not None or not cfg.dedupe else PredictionCache(cfg.cache_rows)
        self.src = self.dst = self.converted = None
        self.human = human  # cfg.human_labels as read (once per run: FilesLabeller hands it to the next file)

    # -- setup, in order
    def check_paths(self, writable: bool = True) -> None:
        """The input, the output and the files beside it; ``writable``: and that the output's folder takes them (not
        where a finished output is only checked before it is skipped: a read-only folder of them resumes)."""
        cfg = self.cfg
        self.dst = output_target(Path(cfg.output))
        if is_dataset_source(cfg.input):  # hf:..., a save_to_disk or Parquet folder: rows from hfdata (open_input)
            self.src, self.in_fmt = parse_source(cfg.input), "dataset"
        else:
            self.src = check_input_file(cfg.input)
            if same_file(self.dst, self.src):  # by inode: a hard link or a bind mount is the input too
                raise InputError("--output must differ from --input (the input is never overwritten)"
                                 f"{one_file(self.dst, self.src)}")
            sheet = cfg.format is None and self.src.suffix.lower() in WORKBOOK_SUFFIXES
            self.in_fmt = "xlsx" if sheet else table_format(self.src, cfg.format)
        # an .xlsx is a zip, written whole: the rows are labelled into OUTPUT.xlsx.partial as a CSV (streamed and
        # resumable as any), which becomes the workbook once complete (``excel.to_workbook``)
        self.workbook = self.dst.suffix.lower() == WORKBOOK
        if self.dst.suffix.lower() in EXCEL_SUFFIXES and not self.workbook:
            raise InputError(f"{self.dst}: write .xlsx for Excel ({self.dst.suffix} is "
                             f"{'the old binary format' if self.dst.suffix.lower() == '.xls' else 'a macro workbook'}"
                             "), or .csv, .tsv or .jsonl")
        if self.workbook:
            import importlib.util

            if importlib.util.find_spec("openpyxl") is None:  # said before labelling, not after it
                raise InputError(f"{self.dst}: writing .xlsx needs openpyxl: pip install 'koelectra-kit[xlsx]'")
        if not self.workbook and self.dst.suffix.lower() not in FORMATS:  # the extension is the only format option
            raise InputError(f"{self.dst}: write .csv, .tsv or .jsonl, or .xlsx for Excel (the output's format is "
                             "its extension)")
        self.out_fmt = "csv" if self.workbook else table_format(self.dst)
        if self.out_fmt == "txt":
            raise InputError(f"{self.dst}: write .csv, .tsv or .jsonl, or .xlsx for Excel (a .txt file holds one "
                             "review per line: no room for the label columns)")
        if self.out_fmt == "parquet":
            raise InputError(f"{self.dst}: write .csv, .tsv or .jsonl, or .xlsx for Excel (parquet output can't be "
                             "streamed and resumed); convert afterwards with pandas if you need parquet")
        self.partial = self.dst.with_name(self.dst.name + ".partial")
        self.state_path = self.dst.with_name(self.dst.name + ".partial.json")
        self._check_beside(cfg)
        folder = self.dst.parent
        if not folder.is_dir():
            raise InputError(f"{self.dst}: {folder} is a file, not a folder" if folder.exists() else
                             f"{self.dst}: folder {folder} does not exist; create it first")
        if writable:
            check_writable(folder, self.dst)
        if self.dst.is_dir():
            raise InputError(f"{self.dst} is a folder; give a file path for --output")
        if self.dst.exists() and not self.dst.is_file():  # a FIFO's reader waited forever: the rename replaced it
            raise InputError(f"{self.dst} is {file_kind(self.dst)}: the output is written beside it and renamed into "
                             "place (so --resume can continue it), never streamed; give a file path for --output")
        if self.dst.exists() and not (cfg.overwrite or cfg.resume):
            raise InputError(f"{self.dst} exists; pass --overwrite to replace it")

    def _check_beside(self, cfg: LabelConfig) -> None:
        """The files written beside the output: no input is one of them, and each name fits the folder."""
        writes = {self.dst: "the output", self.partial: "the unfinished output", self.state_path: "its resume record"}
        if self.in_fmt == "xlsx":
            writes[self._sheet_csv()] = "the worksheet's CSV copy"
        if cfg.shard:
            writes[job_path(self.dst)] = "the shard's job record"
        if cfg.plot:
            writes[Path(cfg.plot)] = "the --plot chart"
        # and the temporary names: the record's, and atomic_path's for the shard's job record or the .xlsx
        last = job_path(self.dst) if cfg.shard else self.dst
        temps = [self.state_path.with_name(self.state_path.name + ".tmp"), last.with_name(f".{last.name}{TEMP_TAIL}")]
        check_name_lengths(self.dst, [p for p in [*writes, *temps] if p.parent == self.dst.parent])
        check_not_written({"--input": None if self.in_fmt == "dataset" else self.src,
                           "--human-labels": cfg.human_labels}, writes)

    def _sheet_csv(self) -> Path:
        return self.dst.with_name(f".{self.dst.name}.sheet.csv")

    def open_input(self) -> None:
        cfg = self.cfg
        self.read_path, self.read_fmt = self.src, self.in_fmt
        # a text file is read as it is now, up to its present size (InputGuard: checked after each chunk)
        self.guard = InputGuard.take(self.src) if self.in_fmt in ("csv", "tsv", "txt", "jsonl") else None
        stop = self.guard.size if self.guard else None
        if self.in_fmt == "xlsx":
            # converted once, beside the output (a folder checked writable); made again on a resume, deleted at the
            # end. The resume fingerprint stays the workbook's own.
            self.converted = self._sheet_csv()
            with naming(self.converted):
                rows = xlsx_to_csv(self.src, self.converted, str(self.src))
            if self.workbook:
                excel.check_fits(self.dst, self.src, rows)
            self.read_path, self.read_fmt, self.encoding = self.converted, "csv", "utf-8"
        elif self.in_fmt in ("parquet", "dataset"):
            self.encoding = "utf-8"
        elif cfg.encoding_errors == "replace":
            self.encoding = cfg.encoding or likeliest_encoding(self.src)
        else:
            self.encoding = detect_encoding(self.src, cfg.encoding)
        if self.in_fmt == "dataset":  # a table's load (cached by datasets for hf:...): its row count and files known
            self.rows = open_rows(self.src)
            self.columns, self.records = self.rows.columns, self.rows.records
            if self.workbook:
                excel.check_fits(self.dst, self.src, self.rows.num_rows)
        else:
            self.columns, self.records = read_records(self.read_path, self.read_fmt, self.encoding, cfg.sep,
                                                      errors=cfg.encoding_errors, stop=stop)
        self._pick_text_column()
        cfg = self.cfg
        if self.out_fmt == "jsonl":
            check_json_keys([str(c) for c in self.columns], self.src)
        self.row_start, self.row_stop = 0, None
        if cfg.shard:
            # a row range needs the row count: one extra pass of the reader (parsing only, no model)
            k, n = cfg.shard_parts()
            total = self.rows.num_rows if self.in_fmt == "dataset" else \
                sum(1 for _ in read_records(self.read_path, self.read_fmt, self.encoding, cfg.sep,
                                            errors=cfg.encoding_errors, stop=stop)[1])
            self.row_start, self.row_stop = row_range(total, k, n)
            self.total_rows = total
        # the resume record's fingerprint, of the file opened: taken later (after the model loads) it was the one of
        # a file renamed over it meanwhile, which a resume then continued with the other's rows
        self.input_fp = self._input_fingerprint(content=True)
        if self.guard is not None and self.guard.change() in ("replaced", "changed"):
            raise InputError(f"{self.src} changed as the run started (while its encoding and columns were read); "
                             "run again once it is complete")

    def _pick_text_column(self) -> None:
        """The text column: the one named, else the usual names' first; refused where it is missing or ambiguous.
        ``self.cfg`` names it from here (a .txt file's lines: ``LINES_COLUMN``)."""
        cfg = self.cfg
        if self.read_fmt == "txt":  # one review per line: the line is the text
            check_lines_file(self.read_path, self.encoding, cfg.text_column, "review", cfg.format)
            self.cfg = cfg = replace(cfg, text_column=LINES_COLUMN)
        # none named: review, else the first of the usual names, as finetune, evaluate and suggest pick it (an NSMC
        # file's document was "no column 'review'"), said in a note; a column named is never replaced
        column = cfg.text_column if cfg.text_column is not None else pick_column(self.columns, None, TEXT_COLUMNS,
                                                                                 self.src)
        if column not in self.columns and self.read_fmt in ("csv", "tsv"):  # 'review;label' read with commas
            refuse_other_separator(self.src, self.read_fmt, self.columns,
                                   cfg.sep or ("\t" if self.read_fmt == "tsv" else ","),
                                   _separator_fix if cfg.sep is None else _given_separator_fix(self.read_fmt))
        if cfg.text_column is None:
            column = pick_text_column(self.columns, str(self.src), hint=other_sheets_hint(self.src, TEXT_COLUMNS)
                                      if self.in_fmt == 'xlsx' else '')
            self.cfg = cfg = replace(cfg, text_column=column)
        if cfg.text_column not in self.columns:
            raise InputError(f"{self.src}: no column {cfg.text_column!r}; columns present: {self.columns}"
                             f"{column_hint(cfg.text_column, self.columns)}"
                             f"{other_sheets_hint(self.src, [cfg.text_column]) if self.in_fmt == 'xlsx' else ''}")
        if self.columns.count(cfg.text_column) > 1:
            raise InputError(f"{self.src}: {self.columns.count(cfg.text_column)} columns are named "
                             f"{cfg.text_column!r}; rename them so the text column is unambiguous")
        self.text_idx = self.columns.index(cfg.text_column)

    def check_resumable(self) -> None:
        """--resume on a finished output with nothing to resume: said before the model loads (seconds, for a large
        one), as ``prepare_state`` would say it after."""
        if self.cfg.resume and self.dst.exists() and (not self.partial.exists() or read_state(self.state_path) is None):
            raise InputError(f"{self.dst} is complete (no {self.partial.name} to resume); pass --overwrite to label it "
                             "again")

    def load_model(self) -> None:
        cfg = self.cfg
        if self.clf is None:
            self.clf = load_classifier(cfg.model, cfg.backend, device=cfg.device, precision=cfg.precision,
                                       quantize=cfg.quantize, threads=cfg.threads)
        check_trained_head(self.clf, cfg.allow_generic_labels)
        if cfg.human_labels and self.human is None:  # read against the model's labels, before any row is written
            self.human = read_human_labels(cfg.human_labels, list(self.clf.labels))

    def prepare_state(self) -> None:
        cfg = self.cfg
        self.state = self.job_state()
        saved = read_state(self.state_path) if self.partial.exists() else None
        if saved is not None and cfg.resume:
            if saved.get("input_fingerprint") not in (None, self.input_fp) and \
                    saved["input_fingerprint"] == self._input_fingerprint(content=False):
                self.state.input_fingerprint = saved["input_fingerprint"]  # an older record (size, mtime, ends)
            self.state.check_same_job(saved, self.partial)
            self.state.take_progress(saved)
            size, whole = self.partial.stat().st_size, self.state.bytes_done
            if size < whole:  # cut after the run stopped (a copy, a full disk): truncate would pad it with NULs
                raise InputError(f"can't resume {self.partial}: it holds {size:,} bytes, fewer than the {whole:,} its "
                                 f"record ({self.state_path.name}) says were written whole, so it was cut short after "
                                 "the run stopped; drop --resume to label from the first row")
            with open(self.partial, "r+b") as f:  # drop whatever a killed chunk had half-written
                f.truncate(whole)
            if cfg.progress:
                log(f"resuming {self.partial}: {self.state.rows_done:,} rows already labelled")
        else:
            self.check_resumable()  # (run() said it before the model loaded; a caller of the steps hears it here)
            if cfg.resume and cfg.progress:
                log("nothing to resume: starting from the first row")
            if saved is not None and saved.get("rows_done"):
                # kept until this run's first chunk replaces it (write_chunk): a run stopped before then leaves it
                warn(f"note: {self.partial} holds {saved['rows_done']:,} labelled rows of an earlier run; this run "
                     "starts over and replaces them (stop now and rerun with --resume to continue them instead)")
        self.out_enc = self._output_encoding()

    def state_path_exists(self) -> bool:
        """True once a chunk is whole on disk (what an interrupted run can resume from)."""
        path = getattr(self, "state_path", None)
        return bool(path and path.exists() and getattr(self, "partial", None) and self.partial.exists())

    # -- the loop
    def run(self) -> LabelSummary:
        self.check_paths()
        with PartialLock(self.partial, self.dst):  # before any file is touched: one run per output (label/lock.py)
            try:
                self.open_input()
                self.check_resumable()
                self.load_model()
                self.prepare_state()
                with frozen_gc():
                    return self._loop()
            except BaseException:
                if not self.state_path_exists():  # nothing whole in it (the lock made it, or a first chunk died)
                    self.partial.unlink(missing_ok=True)
                raise
            finally:
                if self.converted is not None:
                    getattr(getattr(self, "records", None), "close", lambda: None)()  # its file, before the unlink
                    self.converted.unlink(missing_ok=True)

    def _loop(self) -> LabelSummary:
        from tqdm.auto import tqdm

        cfg, state = self.cfg, self.state
        bar = tqdm(total=None, unit="rows", desc="labelling", disable=not cfg.progress, dynamic_ncols=True,
                   initial=state.rows_done)
        t0, new_rows, chunk = time.perf_counter(), 0, []
        # rows already written (a resume) and, for a shard, the rows before its range are read and skipped
        todo = islice(self._records(), self.row_start + state.rows_done, self.row_stop)
        try:
            for rec in todo:
                chunk.append(rec)
                if len(chunk) >= cfg.chunk_rows:
                    new_rows += self.write_chunk(chunk)
                    bar.update(len(chunk))
                    chunk = []
            if chunk or state.bytes_done == 0:
                new_rows += self.write_chunk(chunk)
                bar.update(len(chunk))  # the last, short chunk: a file smaller than chunk_rows is nothing else
            change = self.guard.check(self.partial, self.state_path) if self.guard is not None else None
            with self.recorded():  # the job's record beside the output (label/record.py)
                if self.workbook:
                    with naming(self.dst):
                        excel.to_workbook(self.partial, self.dst, self.state.rows_done, self.clf.labels,
                                          self.columns, self.out_enc, self.cfg.progress)
                    self.state_path.unlink(missing_ok=True)
                    self.partial.unlink()
                else:
                    os.replace(self.partial, self.dst)
                    self.state_path.unlink(missing_ok=True)
        finally:
            bar.close()
        if change and (note := self.guard.note(change, self.dst)):
            warn(note)
        summary = LabelSummary(rows=state.rows_done, per_label=state.per_label, status=state.status,
                               malformed=state.malformed, seconds=time.perf_counter() - t0, output=str(self.dst),
                               new_rows=new_rows, reused=state.reused, shard=cfg.shard, human=state.human,
                               human_labels=self.human.path if self.human is not None else None,
                               human_conflicts=self.human.conflicts if self.human is not None else 0,
                               flattened=state.flattened)
        if cfg.plot:
            plot_distribution(summary, cfg.plot)
        return summary

    def _records(self):
        try:
            yield from self.records
        except UnicodeDecodeError as e:  # the file changed under us, or a codec's check missed it
            raise InputError(f"{self.src}: bytes invalid in {self.encoding} ({e.reason}); pass the right --encoding "
                             "or --encoding-errors replace; finished chunks are kept: rerun with --resume") from None

    def write_chunk(self, chunk: list) -> int:
        """Label ``chunk`` and append it to the partial file; the state file then says it is whole."""
        import pandas as pd

        cfg, state = self.cfg, self.state
        if self.guard is not None:  # a file cut short or rewritten under the reader: stop now, not at the end
            self.guard.check(self.partial, self.state_path)
        rows, errors = [], []
        for rec in chunk:
            fields, error = rec.fields, rec.error
            if error and rec.raw is not None:
                # the fields of a malformed line can't be trusted: keep its text whole in the text column
                fields = [""] * len(self.columns)
                fields[self.text_idx] = rec.raw
            elif error is None and cfg.encoding_errors == "replace" and any(
                    isinstance(v, str) and "\ufffd" in v for v in fields):
                error = f"line {rec.line} has bytes invalid in {self.encoding} (shown as U+FFFD)"
            elif error is None and (why := cell_text(fields[self.text_idx])[1]):
                error = f"line {rec.line}: {why}"  # flagged, not labelled as its Python repr
            rows.append(fields)
            errors.append(error)
        # object dtype: ids and numbers are written back as they were read (no int -> float through NaN)
        df = pd.DataFrame(rows, columns=self.columns, dtype=object)
        if state.bytes_done == 0:
            check_text_column(df[cfg.text_column], cfg.text_column, self.columns, self.src,
                              empty=not cfg.allow_mostly_empty)
        reused_before = self.cache.reused if self.cache is not None else 0
        out, names = label_chunk(self.clf, df, cfg.text_column, errors, cfg.batch_size, self.cache) if chunk else \
            (pd.DataFrame(columns=[*self.columns, *self.added_columns()]), None)
        human = 0
        if self.human is not None and names is not None:
            names = names | human_columns(self.columns)
            human = apply_human_labels(out, names, cfg.text_column, self.human.labels)
        reused = (self.cache.reused if self.cache is not None else 0) - reused_before
        first = state.bytes_done == 0
        buf = io.StringIO()
        flattened = write_chunk(buf, out, self.out_fmt, header=first)
        # encoded before anything is written, so a character the encoding lacks leaves the partial file whole
        data = encoded(buf.getvalue(), self.out_enc, first,
                        state.rows_done + (0 if first or self.out_fmt == "jsonl" else 1))
        if first:  # an earlier run's record (kept until now: prepare_state) no longer describes the partial
            self.state_path.unlink(missing_ok=True)
        with naming(self.partial), open(self.partial, "wb" if first else "ab") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        if names is not None:
            state.record_chunk(out, names, errors, self.partial.stat().st_size, reused, human)
            state.flattened += flattened
        else:
            state.bytes_done = self.partial.stat().st_size
        state.save(self.state_path)
        if self.after_chunk is not None and chunk:
            self.after_chunk(state.chunks_done)
        return len(chunk)

    def added_columns(self) -> list[str]:
        """The columns this run adds after the input's (a file with no rows still gets the header)."""
        names = output_columns(self.clf.labels, self.columns)
        if self.human is not None:
            names = names | human_columns(self.columns)
        return list(names.values())


@contextmanager
def frozen_gc():
    """Python's full collections skip the objects alive before the loop (the model, the vocabulary, Kiwi, the
    reader): each would otherwise walk all of them again, about a tenth of label's time with the cpu-30min shape
    (10,000 nsmc3 dev rows: 1.87 s vs 2.1 s). Unfrozen afterwards, so they are collectable again."""
    if gc.get_freeze_count():  # the caller froze its own: leave that as it is
        yield
        return
    gc.freeze()
    try:
        yield
    finally:
        gc.unfreeze()


def _given_separator_fix(fmt: str):
    """The way past when --sep itself named the wrong separator (--format csv was no help to `--sep ';'`)."""
    own = "\t" if fmt == "tsv" else ","
    return lambda other: ("drop --sep: the format's own separates them" if other == own else
                          f"pass --sep '{other}'" if other != "\t" else "pass --format tsv (or --sep '\\t')")


def _separator_fix(other: str) -> str:
    """How `label` reads a file whose fields ``other`` separates (``tables.refuse_other_separator``)."""
    return {"\t": "pass --format tsv", ",": "pass --format csv"}.get(other, f"pass --sep '{other}'")
