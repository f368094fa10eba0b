"""What names one labelling job, and the records that keep it: the resume record's identity (``resume.LabelState``,
in ``OUTPUT.partial.json``), a shard's job record (``SHARD.job.json``: what label-merge checks its shards by) and a
finished output's (``.OUTPUT.job.json``: what a many-file ``--resume`` checks it by before skipping it). Built from
the labeller's input, model and options, written around the rename that puts the output in place, and compared with
the job a command gives now."""
from __future__ import annotations

import codecs
import hashlib
from contextlib import contextmanager
from pathlib import Path

from ..errors import InputError
from .resume import LabelState, content_fingerprint, input_fingerprint, model_digest, same_content, same_job_value
from .shard import JOB_IDENTITY, LATER_KEYS, done_path, job_path, read_job, write_done, write_job


class JobRecords:
    """``run.FileLabeller``'s records of its job. A part of it, not a thing of its own: these read the labeller's
    ``cfg``, ``src``, ``in_fmt``, ``read_fmt``, ``encoding``, ``rows`` (a dataset's), ``clf``, ``human``, ``input_fp``,
    ``total_rows`` (a shard's), ``state``, ``dst`` and ``partial``, as ``open_input`` and ``load_model`` leave them."""

    def job_state(self) -> LabelState:
        """This job as a resume record names it (nothing done yet): after ``open_input`` and ``load_model``."""
        from ..tokenizer import tokenizer_fingerprint

        cfg = self.cfg
        return LabelState(input=self._input_name(), input_fingerprint=self.input_fp,
                          text_column=cfg.text_column, labels=list(self.clf.labels),
                          model=str(cfg.model or self.clf.source), model_digest=model_digest(self.clf),
                          tokenizer_fingerprint=(tokenizer_fingerprint(self.clf.tok) if self.clf.tok is not None
                                                 else "none"),  # TF-IDF/ensemble: in the digest
                          shard=cfg.shard,
                          human_labels=self.human.digest() if self.human is not None else None,
                          output_encoding=self._output_encoding(), reading=self._reading())

    def job_identity(self) -> dict:
        """What a shard's job record says every shard of one job shares (``shard.JOB_IDENTITY``), for this job."""
        st = self.state
        return {"input_content": self.input_fp, "rows": getattr(self, "total_rows", None),
                "text_column": st.text_column, "labels": st.labels, "model_digest": st.model_digest,
                "tokenizer_fingerprint": st.tokenizer_fingerprint, "output_encoding": self._output_encoding(),
                "human_labels": st.human_labels, "reading": st.reading}

    def job_record(self) -> dict:
        """What a finished output's record holds: the job (``shard.JOB_IDENTITY``), how the model was loaded, and
        the counts. A shard's adds its number and content (``shard_job``); an unsharded output's is written by
        ``shard.write_done`` once the output is in place."""
        st, cfg = self.state, self.cfg
        return {**self.job_identity(), "input": st.input, "model": st.model,
                # how the model was loaded: shards of one folder loaded another way have another model_digest
                "loading": f"--precision {cfg.precision}, --quantize {'on' if cfg.quantize else 'off'}, --backend "
                           f"{getattr(self.clf, 'backend', 'torch')}",
                "human_labels_file": self.human.path if self.human else None,
                # the counts: a torchrun job (label/torchrun.py) reports the whole file from its shards'
                "counts": {"rows": st.rows_done, "per_label": st.per_label, "status": st.status,
                           "malformed": st.malformed, "reused": st.reused, "human": st.human,
                           "flattened": st.flattened, "human_conflicts": self.human.conflicts if self.human else 0}}

    def shard_job(self) -> dict:
        """A shard's job record: what label-merge checks every shard agrees on (``shard.JOB_IDENTITY``), and the
        shard's own number, rows and counts."""
        # the shard file's own content (complete: written just before the rename), so label-merge can tell this
        # shard from another's file copied over it (``shard.check_shard_files``)
        return {**self.job_record(), "shard": self.cfg.shard, "output_content": content_fingerprint(self.partial)}

    @contextmanager
    def recorded(self):
        """Around the rename that puts the complete output in place: a shard's job record written before it
        (label-merge finds no shard without its record), an unsharded output's after it (its content is part of
        it), and an earlier run's record removed first (it no longer describes the output). Every run leaves one:
        a many-file ``--resume`` skipped an output by the times alone, also one relabelled since with another model."""
        if self.cfg.shard:
            write_job(self.dst, self.shard_job())
        record = None if self.cfg.shard else self.job_record()  # (before the rename: the counts of the partial)
        done_path(self.dst).unlink(missing_ok=True)
        yield
        if record:
            write_done(self.dst, record)

    def _input_name(self) -> str:
        return self.src.identity if self.in_fmt == "dataset" else str(self.src.resolve())

    def _input_fingerprint(self, content: bool = False) -> str:
        """The input file's fingerprint (``content``: the whole file's, as a shard's job record keeps it); a
        dataset's is its data files' together (the Arrow or Parquet files a resume or a shard reads the same rows
        from)."""
        def one(path):
            return content_fingerprint(path) if content else input_fingerprint(path)
        if self.in_fmt != "dataset":
            return one(self.src)
        parts = [one(f) for f in self.rows.files] or [self.src.identity]
        return hashlib.sha256("|".join(parts).encode()).hexdigest()[:24]

    def _reading(self) -> str:
        """How the input is parsed: its format, separator, encoding (codecs' name) and errors setting."""
        cfg = self.cfg
        sep = cfg.sep or {"tsv": "\t", "csv": ","}.get(self.read_fmt, "")
        return f"{self.read_fmt} sep={sep!r} {codecs.lookup(self.encoding).name} errors={cfg.encoding_errors}"

    def _output_encoding(self) -> str:
        if self.cfg.output_encoding:  # codecs' own name: UTF-8 and utf_8 are one encoding to --resume
            return codecs.lookup(self.cfg.output_encoding).name
        return "utf-8-sig" if self.out_fmt == "csv" else "utf-8"


def finished_record(out: Path, shard: bool) -> dict | None:
    """The record of the complete output ``out`` (``shard``: a shard's job record, else a finished output's), None
    where it has none (an output of a version that wrote none). An unsharded output written over since its record
    (another run's output copied in, an edit, a re-save in Excel) is no job's a command can check: refused, and kept
    only when told to."""
    record = read_job(out) if shard else read_job(out, done_path(out))
    if record is not None and not shard and not same_content(out, str(record.get("output_content"))):
        raise InputError(f"{out} is complete, but changed since it was labelled (its record, "
                         f"{done_path(out).name}, is of other content: copied over, edited or saved again); pass "
                         f"--overwrite to label it again, or delete {done_path(out).name} beside it to keep it")
    return record


def check_same_job(out: Path, shard: bool, record: dict, now: dict) -> None:
    """The complete output ``out``'s ``record`` names the job ``now`` is (``JobRecords.job_identity``), or it is
    refused naming what differs: skipped unchecked, a finished shard of a 200-row file labelled by another model
    stood for a 2,000-row file's (`--nproc 2 --resume`: 200 rows, exit 0)."""
    differ = [what for key, what in JOB_IDENTITY.items()
              if not (key in LATER_KEYS and record.get(key) is None)
              and not same_job_value(key, record.get(key), now.get(key))]
    if differ:
        raise InputError(f"{out} is complete, but was labelled with another {', '.join(differ)} than this command "
                         f"gives (its record, {(job_path(out) if shard else done_path(out)).name}); pass "
                         "--overwrite to label it again")
