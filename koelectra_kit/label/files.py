"""One run, many files: ``--input a.csv b.csv`` or ``--input 'data/*.csv'`` becomes one ``FileLabeller`` job per
file, each with its own output (a file in the ``--output`` folder, or INPUT_STEM + ``--output-suffix`` beside the
input; ``--shard K/N`` renames it OUTPUT.shard-K-of-N.EXT). A dataset input (``hf:...``, a ``save_to_disk`` or
Parquet folder) is labelled alone, into the ``--output`` file named. Every job's paths are checked before the first
is labelled, the model is loaded once and the prediction cache is shared, so a text repeated across files is
analysed once."""
from __future__ import annotations

import glob
import json
import os
from dataclasses import replace
from pathlib import Path

from ..errors import ConfigError, InputError
from ..io.fileio import path_arg, same_file
from ..io.hfdata import is_dataset_source
from ..runtime import log, warn
from .config import OUTPUTS, WRITABLE, LabelConfig
from .dedupe import PredictionCache
from .human import check_labels_file
from .paths import is_working_file, output_target
from .record import check_same_job, finished_record
from .run import FileLabeller
from .shard import done_path, shard_path, unsharded_name
from .summary import LabelSummary

GLOB_CHARS = set("*?[")


def expand_inputs(inputs: list[str], skip_suffix: str | None = None) -> tuple[list[Path], bool]:
    """(paths, many): each pattern becomes its matches, sorted (an existing path is taken as named, whatever
    characters it holds); ``many`` when the user asked for several files (more than one value, or a pattern).
    Left out of a pattern's matches: the files a run writes beside its output (``paths.is_working_file``: a killed
    run's .partial, a record), an output an earlier run labelled from another of this run's inputs
    (``_labelled_from``: said in a note), and with ``skip_suffix`` one ending in it or a shard of one
    (``'data/*.csv'`` with ``.labelled.csv``: said in a note, since a real input may end in it too)."""
    groups, many = [], len(inputs) > 1  # (the pattern, or None for a path taken as named; its files)
    suffixed = []  # matches ending in --output-suffix without a record: said in a note (a real input may end in it)
    for item in inputs:
        if is_dataset_source(item):  # hf:..., a dataset folder: one input, never a pattern (hf:x/y:train[:10%])
            groups.append((None, [Path(item)]))
        elif GLOB_CHARS & set(item) and not Path(item).exists():
            matches = [Path(m) for m in sorted(glob.glob(item, recursive=True))]
            found = [m for m in matches if m.is_file() and not is_working_file(m)]
            ours = [m for m in found if skip_suffix and unsharded_name(str(m)).endswith(skip_suffix)]
            files = [m for m in found if m not in ours]
            if not files:
                why = (f" to label (each ends in --output-suffix {skip_suffix!r}, as this run's outputs do: name "
                       f"them one by one, or give another --output-suffix)" if ours else " to label" if matches else "")
                raise InputError(f"--input {item!r} matches no file{why}")
            # (an output with its record is this toolkit's, left out without a word; one without may be a real input)
            suffixed += [m for m in ours if unsharded_name(str(m)) == str(m) and _labelled_from(m) is None]
            groups.append((item, files))
            many = True
        else:
            groups.append((None, [Path(item)]))
    sources = {str(p.resolve()) for _, files in groups for p in files}
    paths, earlier = [], []
    for pattern, files in groups:
        left_out = [p for p in files if pattern and _labelled_from(p) in sources]
        if left_out and len(left_out) == len(files):
            raise InputError(f"--input {pattern!r} matches no file to label (only outputs labelled from the other "
                             f"inputs: {left_out[0]}, ...)")
        earlier += left_out
        paths += [p for p in files if p not in left_out]
    if earlier:
        warn(f"note: left out {_shown(earlier)}: labelled by an earlier run from another of these inputs (its record, "
             f"{done_path(earlier[0]).name}, says which); name it to label it again")
    if suffixed:
        warn(f"note: left out {_shown(suffixed)}: each ends in --output-suffix {skip_suffix!r}, as this run's outputs "
             "do; name it to label it")
    seen = set()
    return [p for p in paths if not (p.resolve() in seen or seen.add(p.resolve()))], many


def _shown(paths: list[Path]) -> str:
    return ", ".join(map(str, paths[:3])) + (f" and {len(paths) - 3} more" if len(paths) > 3 else "")


def _labelled_from(path: Path) -> str | None:
    """The input ``path`` was labelled from, where it is a finished output with its record (``shard.done_path``).
    With --output-suffix the outputs land beside the inputs: a pattern over that folder, run again with another
    suffix, labelled a.csv and its earlier output a_l.csv both (a_l.v2.csv: the first model's labels relabelled).
    A folder of outputs alone (their inputs elsewhere) is labelled as asked."""
    try:
        record = json.loads(done_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return record.get("input") if isinstance(record, dict) else None


def _check_folder_input(src: Path) -> None:
    """A folder given as --input is a dataset (``save_to_disk``, Parquet files) or refused here as what it is: a folder
    of CSV files was called "a dataset: label it in a run of its own" (with --output DIR/), which it is not."""
    from ..io.hfdata import DATASET_MARKERS, DICT_MARKER, parse_source
    from ..io.tables import FORMATS
    from ..io.workbook import EXCEL_SUFFIXES

    try:
        parse_source(src)
    except InputError:
        suffixes = sorted({f.suffix.lower() for f in src.iterdir() if f.is_file() and not f.name.startswith(".")
                           and f.suffix.lower() in (*FORMATS, *EXCEL_SUFFIXES)})
        if not suffixes or any((src / m).is_file() for m in (*DATASET_MARKERS, DICT_MARKER)):
            raise  # no files to label in it, or a dataset's own error (one of no rows, say)
        raise InputError(f"--input {src} is a folder, not a dataset; to label the files in it, give a quoted pattern: "
                         f"--input '{src / ('*' + suffixes[0])}'") from None


def _output_for(cfg: LabelConfig, src: Path, many: bool) -> Path:
    if is_dataset_source(src):  # no file to name the output after, or to write beside
        if src.is_dir():
            _check_folder_input(src)
        if cfg.output_suffix or many or cfg.output.endswith(("/", os.sep)):
            raise InputError(f"{src} is a dataset: label it in a run of its own, into a file you name "
                             "(--output FILE.csv, .tsv, .jsonl or .xlsx)")
        return Path(cfg.output)
    if cfg.output_suffix:
        return src.with_name(src.stem + cfg.output_suffix)
    # an existing folder, with or without its slash, takes the file as `cp` would (it was "can't tell the format"),
    # unless it is named like a file (a folder out.csv is refused where the file is opened: "is a folder")
    named = Path(cfg.output).is_dir() and Path(cfg.output).suffix.lower() not in OUTPUTS
    if many or cfg.output.endswith(("/", os.sep)) or named:
        folder = Path(cfg.output)
        if not folder.is_dir() and not many:  # one input: the "several inputs" below was no help
            raise InputError(f"--output {cfg.output}: " + ("is a file, not a folder; drop the trailing /" if
                             folder.exists() else "a folder (it ends in /) that does not exist; create it first, or "
                             "drop the / to name a file"))
        if not folder.is_dir():
            raise InputError(f"--output {cfg.output}: several inputs write one file each into a folder; create "
                             "it first (or use --output-suffix to write beside each input)")
        # named like the input; a .parquet input gets .csv (parquet output can't be streamed and resumed)
        return folder / (src.name if src.suffix.lower() in WRITABLE else src.stem + ".csv")
    return Path(cfg.output)


def plan_jobs(cfg: LabelConfig) -> tuple[list[LabelConfig], bool]:
    """One config per input file, its output named; (jobs, many). Two inputs writing one output is an error."""
    cfg.validate()
    paths, many = expand_inputs(cfg.inputs(), cfg.output_suffix)
    if many and cfg.plot:
        raise InputError("--plot draws one file's label distribution: label the files one at a time to plot them")
    k, n = cfg.shard_parts()
    jobs, owners = [], {}
    for src in paths:
        out = _output_for(cfg, src, many)
        if cfg.shard and same_file(out, src):  # the shard's name differs; the
            # joined file's would not: label-merge --overwrite replaced the input with it
            raise InputError("--output must differ from --input (the input is never overwritten; label-merge would "
                             "write the joined shards there)")
        if cfg.shard:
            out = shard_path(out, k, n)
        if out.resolve() in owners:
            raise InputError(f"{owners[out.resolve()]} and {src} would both write {out}: give them different names "
                             "or label them in separate runs")
        owners[out.resolve()] = src
        jobs.append(replace(cfg, input=str(src), output=str(out), output_suffix=None))  # output now named
    clash = next((src for src in paths if src.resolve() in owners and owners[src.resolve()] != src), None)
    if clash is not None:
        raise InputError(f"{clash} is an input and also {owners[clash.resolve()]}'s output: it would be overwritten")
    if cfg.plot:
        _check_plot(Path(cfg.plot))
    return jobs, many


def _check_plot(plot: Path) -> None:
    """Before any labelling: the chart is drawn after the last row, and it once replaced the input file it was
    pointed at (--plot reviews.csv) with a PNG. Inputs and outputs never end in .png, so the suffix rules that out."""
    if plot.suffix.lower() != ".png":
        raise InputError(f"--plot {plot}: the chart is a PNG image; give a file ending in .png")
    if plot.is_dir():
        raise InputError(f"--plot {plot} is a folder; give a file ending in .png")
    if not plot.parent.is_dir():  # as --output: a mistyped folder is not made silently
        raise InputError(f"--plot {plot}: folder {plot.parent} does not exist; create it first")


class FilesLabeller:
    """Runs the planned jobs in order. ``current`` is the job running (the CLI names its partial file when
    interrupted)."""

    def __init__(self, cfg: LabelConfig, classifier=None, after_chunk=None, keep_complete: bool = False,
                 skip: tuple[str, ...] = ()):
        self.jobs, self.many = plan_jobs(cfg)
        # ``skip``: the inputs a torchrun job found labelled before its ranks started (``torchrun.Launch.finished``)
        self.jobs = [job for job in self.jobs if job.input not in skip]
        # with --resume, a complete output is skipped, not refused: a many-file run's (its record says whose it is)
        # and a shard's (its job record: a SLURM array resubmitted with --resume skips its finished tasks)
        self.keep_complete = keep_complete or self.many or bool(cfg.shard)
        self.clf, self.after_chunk = classifier, after_chunk
        self.cache = PredictionCache(cfg.cache_rows) if cfg.dedupe else None
        self.current: FileLabeller | None = None

    def finished(self, job: LabelConfig) -> bool:
        """Whether ``job``'s output is complete and this job's, to be skipped, not labelled again: with --resume, in
        a many-file run or a shard's. This job's by its record (``record.check_same_job``: a complete output of
        another input, model, reading, ... is refused naming what differs); one without a record (an earlier
        version's) by its input and model being no newer than it (a file replaced since kept its old output)."""
        out = output_target(Path(job.output))  # where FileLabeller writes it and its .partial
        if not (self.keep_complete and job.resume and out.exists()
                and not out.with_name(out.name + ".partial").exists()):
            return False
        record = finished_record(out, bool(job.shard))
        if record is None:
            changed = [what for what, path in (("its input", job.input), ("the model", job.model))
                       if path and _newest_mtime(Path(path)) > out.stat().st_mtime]
            if changed:
                raise InputError(f"{out} is complete, but {' and '.join(changed)} changed after it was labelled; pass "
                                 "--overwrite to label it again")
            return True
        check_same_job(out, bool(job.shard), record, self._identity(job))
        return True

    def _identity(self, job: LabelConfig) -> dict:
        """``job``'s identity as a record keeps it: its input opened and the model loaded (kept for the files still
        to label), nothing labelled."""
        labeller = FileLabeller(job, classifier=self.clf, cache=self.cache)
        try:
            labeller.check_paths(writable=False)  # (a read-only folder of finished outputs resumes)
            labeller.open_input()
            labeller.load_model()
            self.clf = labeller.clf
            labeller.state = labeller.job_state()
            return labeller.job_identity()
        finally:
            getattr(getattr(labeller, "records", None), "close", lambda: None)()
            if labeller.converted is not None:  # a workbook input's CSV copy, made to read it
                labeller.converted.unlink(missing_ok=True)

    def run(self) -> list[LabelSummary]:
        todo = []
        for job in self.jobs:
            if not self.finished(job):
                todo.append(job)
            elif job.progress:
                log(f"{job.output} is complete: skipped")
        for job in todo:  # every path is checked before any file is labelled
            FileLabeller(job).check_paths()
        if todo and todo[0].human_labels:
            check_labels_file(todo[0].human_labels)
        summaries, human = [], None
        for job in todo:
            self.current = FileLabeller(job, classifier=self.clf, after_chunk=self.after_chunk, cache=self.cache,
                                        human=human)
            try:
                summaries.append(self.current.run())
            except InputError as e:
                if not summaries:
                    raise
                # the files before it are complete: said, so that their outputs are not taken for half-written
                done = ", ".join(s.output for s in summaries[:3]) + (" ..." if len(summaries) > 3 else "")
                what = "file(s) labelled before it are complete" if not job.shard else \
                    f"file(s) before it have this process's shard {job.shard} complete"  # (torchrun: joined at the end)
                raise InputError(f"{e} ({len(summaries)} {what}: {done}; after the fix, rerun with --resume to skip "
                                 "them)") from None
            self.clf, human = self.current.clf, self.current.human  # loaded and read once, by the first file
        return summaries


def _newest_mtime(path: Path) -> float:
    """A file's modification time; a folder's (a model) newest file's. 0 where there is none (a hub id, a dataset id)."""
    try:
        if path.is_dir():
            return max((f.stat().st_mtime for f in path.rglob("*") if f.is_file()), default=0.0)
        return path.stat().st_mtime
    except OSError:
        return 0.0


def _config(model, input, output, text_column, fmt, classifier, options) -> LabelConfig:
    """The Python functions' arguments as the command's config: built as ``--config``'s keys are (``from_dict``), so
    a mistyped option gets its "did you mean" and a value of the wrong type a ConfigError, not a TypeError from
    inside. ``format=`` (the config's name for ``fmt=``) is taken as ``fmt=``."""
    from ..config import from_dict

    if "format" in options:
        if fmt is not None:
            raise ConfigError("fmt= and format= both given: they name the same option (the input's format); give one")
        fmt = options.pop("format")
    if model is not None:
        model = path_arg(model, "model", "a model folder or hub id (a loaded one goes in classifier=)")
    if output is not None:
        output = path_arg(output, "output")
    return from_dict(LabelConfig, {"model": model or getattr(classifier, "source", "") or "in-memory", "input": input,
                                   "output": output or "", "text_column": text_column, "format": fmt, **options})


def label_files(model, inputs, output=None, text_column: str | None = None, *, fmt: str | None = None,
                classifier=None, _after_chunk=None, **options) -> list[LabelSummary]:
    """Label several files (paths and/or globs), one output each: ``output`` a folder, or ``output_suffix=``.
    ``options``: any ``LabelConfig`` field (batch_size, resume, shard, backend, dedupe, ...)."""
    instead = "label_dataframe(df, ...) labels a DataFrame"
    if isinstance(inputs, (str, os.PathLike)):
        inputs = [inputs]
    elif not isinstance(inputs, (list, tuple)):  # a DataFrame was its column names, a str() of anything a glob
        raise ConfigError(f"inputs: a list of file paths or globs, not a {type(inputs).__name__}; {instead}")
    inputs = [path_arg(i, f"inputs[{n}]", instead) for n, i in enumerate(inputs)]
    cfg = _config(model, inputs, output, text_column, fmt, classifier, options)
    return FilesLabeller(cfg, classifier=classifier, after_chunk=_after_chunk).run()


def label_file(model, input, output=None, text_column: str | None = None, *, fmt: str | None = None,
               classifier=None, _after_chunk=None, **options) -> LabelSummary:
    """Label ``input`` into ``output``: the Python face of ``koelectra-kit label`` (same options, same checks).
    ``classifier``: an already loaded ``Classifier`` (``model`` is then only recorded). ``options``: any
    ``LabelConfig`` field (batch_size, chunk_rows, resume, overwrite, shard, backend, dedupe, cache_rows, ...);
    with ``shard="K/N"`` the output is OUTPUT.shard-K-of-N.EXT."""
    instead = ("label_files(model, paths, output_folder) labels several files" if isinstance(input, (list, tuple))
               else "label_dataframe(df, ...) labels a DataFrame")
    cfg = _config(model, path_arg(input, "input", instead), output, text_column, fmt, classifier, options)
    labeller = FilesLabeller(cfg, classifier=classifier, after_chunk=_after_chunk)
    if len(labeller.jobs) != 1:
        raise InputError(f"{input} names {len(labeller.jobs)} files: label_file labels one (use label_files)")
    return labeller.run()[0]
