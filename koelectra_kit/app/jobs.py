"""Uploads and their labelling jobs, while the app runs.

Each upload gets a folder under the app's workdir and a ``Job``. Starting it queues the file on one worker
thread, which runs the same ``FileLabeller`` as ``koelectra-kit label`` (same columns, same ``status`` flags,
nothing dropped) and counts its rows after each chunk for the progress bar; the page polls ``Job.public()``.
One worker, not one per upload: the model already uses every core, two files at once would only thrash.

With a labels file (teach mode, ``--labels``) the analyst's answers and fixes win over the model's labels in
every download (``results.with_human_labels``), as LABELS.csv reads at the moment of the download.

Files go away on their own: an upload's input once one of its results is downloaded (a JSONL, Parquet or .xlsx
upload stays with its results: its own-format download is made from it, ``results.TYPED_KINDS``), everything when the
app stops (``JobStore.close``), a job's whole folder when the page says "start over"."""
from __future__ import annotations

import logging
import re
import shutil
import tempfile
import threading
import time
import traceback
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import InputError, KitError
from ..label import FileLabeller, LabelConfig, output_columns
from ..io.textcheck import MostlyEmptyColumn, check_text_column
from ..io.labellog import LabelFileProblem
from ..label.human import human_columns, log_labels
from .results import (EXCEL, MASTER_ENCODING, TYPED_KINDS, convert, excel_refusal, review_rows,
                      with_human_labels)
from .settings import AppSettings
from .uploads import Upload

logger = logging.getLogger("koelectra_kit.app")


# The labeller's advice that names command-line flags, as it reads on the page, where no flag can be passed
PAGE_ADVICE = [
    (re.compile(r", or --allow-mostly-empty if it is the review column$"),
     ", or label it anyway if it is the review column"),
    (re.compile(r"; pass the right --encoding or --encoding-errors replace; finished chunks are kept: rerun with "
                r"--resume$"), ": save it as 'CSV UTF-8' in Excel, or convert it to UTF-8, and upload it again"),
]


def page_message(message: str) -> str:
    """A labelling error as the page says it: advice meant for the command line (``PAGE_ADVICE``) rewritten."""
    for pattern, advice in PAGE_ADVICE:
        message = pattern.sub(advice, message)
    return message


def disk_message(e: OSError, settings: AppSettings) -> str:
    """One line for a file the app could not write or read (a full or read-only disk, a file that vanished): what
    the system said, which file, and where the app's files are."""
    where = f" ({e.filename})" if getattr(e, "filename", None) else ""
    folders = f"--workdir {settings.workdir or 'the temporary folder'}" + (
        f" and --labels {settings.labels}" if settings.labels else "")
    return f"{e.strerror or e}{where}: the app's files are in {folders}; free space there or start it with others"


class NotFound(KitError):
    """An id the app does not know (HTTP 404)."""


class Busy(KitError):
    """The job can't do that in its current state (HTTP 409)."""


class _Stopped(Exception):
    """Raised from the chunk callback when the app shuts down mid-job."""


class SharedClassifier:
    """The one loaded classifier, shared by the review box (request threads) and the file worker: their predict
    calls take turns (torch and Kiwi already use every core; and Kiwi's thread safety is not documented).

    Teach mode swaps in each retrained model (``swap``); a file job ``pin``s the model it started with, so one file
    is never labelled by two models. ``None`` (an encoder without a classifier yet): predict answers ``Busy``."""

    def __init__(self, clf, labels: list[str] | None = None, lock: threading.Lock | None = None):
        self._clf, self._lock = clf, lock or threading.Lock()
        self._labels = list(labels or getattr(clf, "labels", []))

    def predict(self, *args, **kwargs):
        with self._lock:
            if self._clf is None:
                raise Busy("no classifier yet: answer reviews in Teach; the first retrain makes one")
            return self._clf.predict(*args, **kwargs)

    def swap(self, clf) -> None:
        with self._lock:  # never mid-predict
            self._clf = clf

    def current(self):
        return self._clf

    def pin(self) -> "SharedClassifier":
        """The model serving now, behind the same lock: what a file job labels with from start to end."""
        if self._clf is None:
            raise Busy("no classifier yet: answer reviews in Teach; the first retrain makes one")
        return SharedClassifier(self._clf, self._labels, self._lock)

    @property
    def labels(self) -> list[str]:
        return list(self._clf.labels) if self._clf is not None else self._labels

    def __getattr__(self, name):
        if self._clf is None:
            raise AttributeError(name)
        return getattr(self._clf, name)


class Job:
    def __init__(self, upload: Upload):
        self.upload = upload
        self.state = "uploaded"  # uploaded -> queued -> running -> done | error (and again, on a restart)
        self.text_column: str | None = None
        self.allow_mostly_empty = False  # label a text column that is empty in most rows (the page's "label anyway")
        self.retry: str | None = None  # what the page may offer after an error: "allow_mostly_empty"
        self.rows_done = 0
        self.message = ""
        self.summary = None
        self.review: list = []
        self.flagged: list = []
        self.seconds = 0.0
        self.master = upload.folder / "labelled.csv"  # what is downloaded: the model's labels, the analyst's over them
        self.model_csv = upload.folder / "labelled.model.csv"  # the labeller's own output (with a labels file)
        self.human = 0  # rows carrying the analyst's label in the download
        self.human_version = None  # the labels file's version ``master`` was made with
        self.names: dict = {}
        self.clf = None  # the model this job labels with (pinned at start)
        self.full_texts: dict = {}  # row -> the whole text of a review/flagged row (the page shows 300 characters)
        self.lock = threading.Lock()  # one conversion at a time per job

    def downloads(self) -> list[dict]:
        """The labelled file as the input was (format and encoding), as CSV UTF-8 with a BOM, and as an Excel
        workbook (``excel``), where every review is a text cell: Excel opening the CSV reads one that starts with
        = + - @ (``-_- 별로``) as a formula. An .xlsx upload's own-format download is that workbook already (its
        cells typed as the upload had them), so it gets no second one. An entry with ``refused`` is listed but not
        served: the one line why (a file longer than a worksheet; openpyxl missing)."""
        if self.state != "done":
            return []
        up, stem = self.upload, Path(self.upload.name).stem
        own = {"csv": f"CSV ({up.encoding}, like your file)", "tsv": f"TSV ({up.encoding}, like your file)",
               "xlsx": "Excel (.xlsx, like your file)"}.get(up.kind, f"{up.kind.upper()} (like your file)")
        same = {"kind": "same", "filename": f"{stem}.labelled{Path(up.name).suffix.lower()}", "label": own}
        bom = {"kind": "csv", "filename": f"{stem}.labelled.csv", "label": "CSV UTF-8 with BOM"}
        if up.kind == "xlsx":
            return [same, bom]
        excel = {"kind": EXCEL, "filename": f"{stem}.labelled.xlsx",
                 "label": "Excel (.xlsx, every review kept as text)"}
        if (up.kind == "csv" and up.encoding == MASTER_ENCODING) or up.kind == "txt":  # a .txt has no room for
            offer = [bom, excel]  # the label columns: no download in its own format
        else:
            if up.kind == "csv":
                bom["filename"] = f"{stem}.labelled.utf8.csv"
            offer = [same, bom, excel]
        refused = excel_refusal(up.name, self.rows_done, " or ".join(d["filename"] for d in offer[:-1]))
        if refused:
            excel["refused"] = refused
        return offer

    def public(self) -> dict:
        s = self.summary
        total = self.upload.rows if self.state != "done" else self.rows_done
        return {"id": self.upload.id, "state": self.state, "message": self.message, "retry": self.retry,
                "text_column": self.text_column,
                "rows_done": self.rows_done, "rows_total": max(total, self.rows_done),
                "seconds": round(self.seconds, 2),
                "rows_per_s": round(self.rows_done / self.seconds, 1) if self.seconds else None,
                "summary": None if s is None else {"rows": s.rows, "per_label": s.per_label, "status": s.status,
                                                   "malformed": s.malformed, "human": self.human},
                "review": self.review, "flagged": self.flagged, "downloads": self.downloads()}


class JobStore:
    def __init__(self, settings: AppSettings, classifier, labels_log=None):
        self.settings = settings
        self.clf = classifier
        self.labels_log = labels_log  # LABELS.csv (labelstore.LabelLog) whose answers win in downloads, or None
        try:
            if settings.workdir:
                Path(settings.workdir).mkdir(parents=True, exist_ok=True)
            # a fresh folder of its own, even inside a given workdir: close() deletes it whole
            self.root = Path(tempfile.mkdtemp(prefix="koelectra-app-", dir=settings.workdir))
        except OSError as e:
            raise InputError(f"--workdir {settings.workdir or tempfile.gettempdir()}: can't make the app's folder "
                             f"there ({e.strerror or e}); give a folder you can write to") from None
        self.jobs: dict[str, Job] = {}
        self.pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="koelectra-label")
        self.closing = False

    # -- uploads
    def new_upload(self, name: str, kind: str) -> Upload:
        uid = uuid.uuid4().hex[:12]
        folder = self.root / uid
        folder.mkdir()
        return Upload(id=uid, name=name, folder=folder, original=folder / f"input{Path(name).suffix.lower()}",
                      kind=kind)

    def add(self, upload: Upload) -> Job:
        self.jobs[upload.id] = job = Job(upload)
        return job

    def get(self, job_id: str) -> Job:
        job = self.jobs.get(job_id)
        if job is None:
            raise NotFound(f"no upload {job_id!r} here (the app was restarted, or it was removed): upload the file "
                           "again")
        return job

    def discard(self, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)

    # -- labelling
    def start(self, job_id: str, text_column: str | None, allow_mostly_empty=False) -> Job:
        job = self.get(job_id)
        if not isinstance(allow_mostly_empty, bool):
            raise InputError("allow_mostly_empty: true or false")
        up = job.upload
        if job.state in ("queued", "running"):
            raise Busy(f"{up.name} is already being labelled")
        if not up.source.exists():
            raise Busy(f"{up.name} was removed after its result was downloaded: upload it again to relabel it")
        if not text_column:
            raise InputError(f"choose the column of {up.name} that holds the text")
        if text_column not in up.columns:
            raise InputError(f"{up.name} has no column {text_column!r}; columns: {', '.join(up.columns)}")
        at = up.columns.index(text_column)  # a column of dates or ids is refused now, not after labelling it
        check_text_column([row[at] for row in up.preview if len(row) == len(up.columns)], text_column, up.columns,
                          up.name)
        job.clf = self.clf.pin()  # the model serving now labels the whole file, even if a retrain swaps it
        job.text_column, job.state, job.rows_done, job.message = text_column, "queued", 0, ""
        job.summary, job.review, job.flagged, job.seconds = None, [], [], 0.0
        job.allow_mostly_empty, job.retry = allow_mostly_empty, None
        for old in up.folder.glob("labelled*"):
            old.unlink(missing_ok=True)
        self.pool.submit(self._run, job)
        return job

    def _run(self, job: Job) -> None:
        t0 = time.perf_counter()
        job.state = "running"
        try:
            self._label(job)
            job.state = "done"
        except _Stopped:
            job.state, job.message = "error", "the app stopped before this file was finished"
        except KitError as e:
            job.state, job.message = "error", page_message(str(e).replace(str(job.upload.source), job.upload.name))
            job.retry = "allow_mostly_empty" if isinstance(e, MostlyEmptyColumn) else None
        except OSError as e:  # the disk said no (full, read-only): the analyst's to fix, in one line
            job.state, job.message = "error", disk_message(e, self.settings)
        except Exception as e:  # noqa: BLE001 - the worker must outlive any one file; the log keeps the traceback
            logger.error("labelling %s failed:\n%s", job.upload.name, traceback.format_exc())
            job.state, job.message = "error", f"internal error while labelling ({type(e).__name__}: {_line(e)})"
        finally:
            job.seconds = time.perf_counter() - t0

    def _label(self, job: Job) -> None:
        up, s, clf = job.upload, self.settings, job.clf
        out = job.model_csv if self.labels_log is not None else job.master
        cfg = LabelConfig(model=str(clf.source or s.model), input=str(up.source), output=str(out),
                          text_column=job.text_column, format=up.source_format, encoding=up.encoding,
                          output_encoding=MASTER_ENCODING, batch_size=s.batch_size,
                          chunk_rows=s.chunk_rows_for(up.rows), progress=False, overwrite=True,
                          allow_mostly_empty=job.allow_mostly_empty)
        labeller = FileLabeller(cfg, classifier=clf)

        def after_chunk(_chunks_done: int) -> None:
            job.rows_done = labeller.state.rows_done
            if self.closing:
                raise _Stopped()

        labeller.after_chunk = after_chunk
        job.summary = labeller.run()
        job.rows_done = job.summary.rows
        job.text_column = labeller.cfg.text_column  # a .txt file's one column
        job.names = output_columns(list(clf.labels), up.columns)
        if self.labels_log is not None:
            job.names |= human_columns(up.columns)
        self.apply_human_labels(job)
        job.review, job.flagged = review_rows(job.master, job.names, job.text_column, list(clf.labels),
                                              s.review_rows)
        job.full_texts = {r["row"]: r.pop("full_text") for r in job.review + job.flagged}  # what a correction keeps

    # -- results
    def apply_human_labels(self, job: Job) -> None:
        """(Re)make the job's download from the model's labels and LABELS.csv as it reads now, when it changed."""
        log = self.labels_log
        if log is None:
            return
        with job.lock:
            state = log.state()  # re-reads a hand edit; its version says whether anything changed
            if job.human_version == log.version and job.master.exists():
                return
            version = log.version
            got = with_human_labels(job.model_csv, job.master, job.text_column, job.names, log_labels(state)[0])
            for old in [*job.upload.folder.glob("labelled.same*"), *job.upload.folder.glob(f"labelled.{EXCEL}*")]:
                old.unlink(missing_ok=True)  # made from the previous labels: made again on request
            job.human, job.human_version = got["human"], version
            if job.summary is not None:
                job.summary.per_label = {lab: got["per_label"].get(lab, 0) for lab in job.clf.labels}

    def download(self, job_id: str, kind: str) -> tuple[Path, str]:
        """(file, name to save it as); the same-format file is made on the first request."""
        job = self.get(job_id)
        if job.state == "done":
            self.apply_human_labels(job)
            problem = self.labels_log.problem if self.labels_log is not None else None
            if problem:  # its labels as last read well would be served as the analyst's latest: not without a word
                raise LabelFileProblem(f"{problem}; downloads wait until it reads well (they hold your labels)")
        up = job.upload
        if kind == EXCEL and up.kind == "xlsx":
            kind = "same"  # a workbook's own-format download is its Excel one (``Job.downloads``)
        offer = {d["kind"]: d for d in job.downloads()}
        if kind not in offer:
            raise NotFound(f"no {kind!r} download for {job.upload.name}" +
                           ("" if job.state == "done" else ": it is not labelled yet"))
        if offer[kind].get("refused"):
            raise InputError(offer[kind]["refused"])
        numbers = [v for k, v in job.names.items() if k == "confidence" or k.startswith("prob_")]
        if kind == EXCEL:
            dst, fmt, encoding = up.folder / f"labelled.{EXCEL}.xlsx", EXCEL, None
        elif kind == "csv" or (up.kind == "csv" and up.encoding == MASTER_ENCODING):
            return job.master, offer[kind]["filename"]
        else:
            dst, fmt, encoding = up.folder / f"labelled.same{up.original.suffix}", up.kind, up.encoding
        with job.lock:
            convert(job.master, dst, fmt, encoding, numbers, up.name, up.original)
        return dst, offer[kind]["filename"]

    def forget_input(self, job_id: str) -> None:
        """Delete the uploaded file (and its CSV copy) once a result is downloaded: only the results stay. A JSONL,
        Parquet or .xlsx upload is one of them: its own-format download is made (again, after the analyst's labels
        change) from its typed values, which the labelled CSV holds only as text; the CSV copy of a workbook goes."""
        job = self.jobs.get(job_id)
        if job is not None and job.state not in ("queued", "running"):
            up = job.upload
            for path in {up.original, up.source} - ({up.original} if up.kind in TYPED_KINDS else set()):
                path.unlink(missing_ok=True)

    def remove(self, job_id: str) -> None:
        job = self.get(job_id)
        if job.state in ("queued", "running"):
            raise Busy(f"{job.upload.name} is being labelled; wait for it to finish")
        self.jobs.pop(job_id, None)
        self.discard(job.upload.folder)

    def close(self) -> None:
        """Stop after the current chunk, then delete every upload and result."""
        self.closing = True
        self.pool.shutdown(wait=True, cancel_futures=True)
        self.discard(self.root)


def _line(e: Exception) -> str:
    return (str(e).strip().splitlines() or [""])[0][:200]
