"""The record that makes ``--resume`` safe: ``OUTPUT.partial.json`` says which input, model, text column and
labels wrote ``OUTPUT.partial``, and how many rows and bytes of it are whole. A resume that would mix two
inputs or two models' labels in one file is refused, naming what differs."""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import asdict, dataclass, field
from pathlib import Path

from ..classify.classifier import model_digest  # noqa: F401 - what label/record.py takes from here
from ..errors import InputError
from ..io.fileio import file_sha256
from .paths import naming

STATE_VERSION = 3  # 3: TSV written unquoted, JSONL columns every object's keys (a partial of 2 would mix them)
# What must match for a resume to continue the same job (what differs is named in the refusal).
IDENTITY = ("input_fingerprint", "text_column", "labels", "model_digest", "tokenizer_fingerprint", "shard",
            "human_labels", "output_encoding", "reading")
KEPT_LATER = ("output_encoding", "reading")  # absent from older records, which resumed without them


def reading_key(reading: str | None) -> str | None:
    """How the input was read, for comparing two runs' records: the format, separator and encoding, not what a bad
    byte did (``errors=``). Rows read whole under ``strict`` read the same under ``replace``, so a run stopped by a
    bad byte goes on with ``--encoding-errors replace`` (its message says to); refusing it left only starting over."""
    return None if reading is None else reading.split(" errors=")[0]


def same_job_value(key: str, recorded, now) -> bool:
    """Whether two records (a resume's, a shard's or a finished output's) agree on ``key``: the reading by
    ``reading_key``, not by what a bad byte did."""
    if key == "reading":
        return reading_key(recorded) == reading_key(now)
    return recorded == now


CONTENT = "c2:"  # marks ``content_fingerprint``'s values: a job record without it holds the older, partial one


def content_fingerprint(path: Path) -> str:
    """The whole file's content (SHA-256; ~0.7 GB/s, next to labelling's ~1-2 MB/s of text, nothing): equal for
    copies of one file on several machines, what a shard's job record keeps of its input and its output. The first
    and last MiB missed an edit in the middle of a file over 2 MiB between two shard runs, or of a shard before
    label-merge."""
    return CONTENT + file_sha256(path)


def same_content(path: Path, recorded: str) -> bool:
    """Whether ``path`` holds what a job record's ``recorded`` fingerprint says, in the way it was taken (records of
    an earlier koelectra-kit: size and the first and last MiB)."""
    return recorded == (content_fingerprint(path) if recorded.startswith(CONTENT)
                        else input_fingerprint(path, mtime=False))


def input_fingerprint(path: Path, mtime: bool = True) -> str:
    """Size + mtime + hash of the first and last MiB: what resume records of earlier versions kept (a resume
    compares the whole content now, ``content_fingerprint``: a ``touch`` or a copy of the same bytes made them
    refuse). ``mtime=False``: what job records of earlier versions kept."""
    st = path.stat()
    h = hashlib.sha256(f"{st.st_size}:{st.st_mtime_ns}".encode() if mtime else f"{st.st_size}".encode())
    with open(path, "rb") as f:
        h.update(f.read(1 << 20))
        if st.st_size > 2 << 20:
            f.seek(-(1 << 20), os.SEEK_END)
            h.update(f.read())
    return h.hexdigest()[:24]


@dataclass
class LabelState:
    input: str
    input_fingerprint: str
    text_column: str
    labels: list
    model: str
    model_digest: str
    tokenizer_fingerprint: str
    shard: str | None = None  # "K/N" for a shard (None: the whole file, also in records written before shards)
    human_labels: str | None = None  # the digest of the analyst's labels put over the model's (None: none)
    # the bytes already written are in it: a resume in another would leave a file no encoding reads whole
    output_encoding: str | None = None
    # how the input's bytes became rows (format, separator, encoding, what a bad byte does): a resume read another
    # way parsed the rest differently (a .tsv resumed with --format csv --sep '\t' flagged a row the first run labelled)
    reading: str | None = None
    version: int = STATE_VERSION
    rows_done: int = 0
    bytes_done: int = 0
    chunks_done: int = 0
    per_label: dict = field(default_factory=dict)
    status: dict = field(default_factory=dict)
    malformed: list = field(default_factory=list)
    reused: int = 0  # rows answered with an identical text's prediction
    human: int = 0  # rows that carry the analyst's label
    flattened: int = 0  # TSV cells whose tabs or line breaks were written as spaces (writer.tsv_cells)

    def check_same_job(self, saved: dict, partial: Path) -> None:
        if saved.get("version") != STATE_VERSION:
            raise InputError(f"can't resume {partial}: it was written by another version of koelectra-kit; "
                             "drop --resume to start over")
        for key in IDENTITY:
            if key in KEPT_LATER and key not in saved:
                continue  # a record from before it was kept: as those resumed
            if not same_job_value(key, saved.get(key), getattr(self, key)):
                what = _DIFFERS.get(key) or (f"another {key.replace('_', ' ')} "
                                             f"({_short(saved.get(key))} vs {_short(getattr(self, key))})")
                raise InputError(f"can't resume {partial}: it was made with {what}; drop --resume to start over")

    def take_progress(self, saved: dict) -> None:
        for key in ("rows_done", "bytes_done", "chunks_done", "per_label", "status", "malformed"):
            setattr(self, key, saved[key])
        self.reused = saved.get("reused", 0)  # absent from records written before deduplication
        self.human = saved.get("human", 0)
        self.flattened = saved.get("flattened", 0)

    def record_chunk(self, out, names: dict, errors: list, bytes_done: int, reused: int = 0, human: int = 0) -> None:
        import pandas as pd

        self.bytes_done = bytes_done
        self.reused += reused
        self.human += human
        self.rows_done += len(out)
        self.chunks_done += 1
        for lab, c in out[names["label"]].value_counts().items():
            if lab:
                self.per_label[lab] = self.per_label.get(lab, 0) + int(c)
        for st, c in pd.Series([s.split(":")[0] for s in out[names["status"]]]).value_counts().items():
            self.status[st] = self.status.get(st, 0) + int(c)
        self.malformed += [e for e in errors if e][: max(0, 20 - len(self.malformed))]

    def save(self, path: Path) -> None:
        # written beside and renamed: a kill during the write leaves the previous, consistent state
        tmp = path.with_name(path.name + ".tmp")
        with naming(path):
            tmp.write_text(json.dumps(asdict(self)), encoding="utf-8")
        os.replace(tmp, path)


# what a refusal says differs, where the key's name and values say nothing to a user (digests)
_DIFFERS = {
    "input_fingerprint": "another input (the file's content differs from the one it was labelled from)",
    "model_digest": "another model (the weights as loaded differ: another folder or training, or another "
                    "--precision, --quantize or --backend)",
    "tokenizer_fingerprint": "another tokenizer (the model folder's tokenizer files differ)",
    "human_labels": "other human labels (the labels file changed since, or another was given)",
}


def read_state(path: Path) -> dict | None:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except PermissionError:  # whole but unreadable: as None, the resume deleted the rows already labelled
        raise InputError(f"can't resume: {path} can't be read by this user (permission denied); make it readable "
                         "(chmod u+r) and rerun with --resume (the rows already labelled are kept)") from None
    except (OSError, ValueError):
        return None


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
