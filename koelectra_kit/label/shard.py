"""Shards: one file fanned out over N workers by row ranges, and the N outputs joined back.

``--shard K/N`` labels rows [(K-1)*R//N, K*R//N) of the input's R rows (a malformed line counts as the one row it
becomes) into ``OUTPUT.shard-K-of-N.EXT``. The split depends on R and N only, so any scheduler (a SLURM array, a
Kubernetes indexed job, xargs -P) can start the N commands independently, each resumable with ``--resume``.
``koelectra-kit label-merge OUTPUT`` checks that shards 1..N are all complete and come from one job, and
concatenates them, the header once, into an unsharded run's rows, columns and statuses. Not always its bytes: a
text's scores depend slightly on the batch it is scored in, and a shard's batches are not one run's (its chunks
start at its first row; a repeat across a shard boundary is scored again, not copied), so in bf16 a probability can
differ by less than 0.01, in fp32 by a tie at the 4th decimal's rounding (README, tests/test_label_scale.py). The
same batches whatever the boundaries would mean scoring a text alone (batch 1, no padding): far slower. The job: each
finished shard leaves ``SHARD.job.json`` (input content, row count, text column, model, tokenizer, output
encoding, the shard file's own content); shards of another input or model that happen to share an output name, or
a shard's file copied over another's name, are refused, not joined.
"""
from __future__ import annotations

import itertools
import json
import os
import re
import shutil
from pathlib import Path

from ..errors import InputError
from ..io.fileio import same_file, write_json_atomic
from ..io.workbook import EXCEL_SUFFIXES
from ..runtime import warn
from .paths import naming, output_target
from .resume import content_fingerprint, same_job_value

BOM = b"\xef\xbb\xbf"


def shard_path(output: Path, k: int, n: int) -> Path:
    """labelled.csv -> labelled.shard-03-of-12.csv (zero-padded so shell globs list shards in order)."""
    width = len(str(n))
    return output.with_name(f"{output.stem}.shard-{k:0{width}d}-of-{n}{output.suffix}")


def unsharded_name(name: str) -> str:
    """The name a shard's is made from (``shard_path``: out.shard-03-of-12.csv -> out.csv); another name as it is."""
    return re.sub(r"\.shard-\d+-of-\d+(?=(\.[^./]*)?$)", "", name)


# What every shard of one job shares. The input by content (``resume.content_fingerprint``), not path or time: a copy of
# the input on each machine of a cluster is the same job.
JOB_IDENTITY = {"input_content": "input", "rows": "row count", "text_column": "text column", "labels": "labels",
                "model_digest": "model", "tokenizer_fingerprint": "tokenizer", "output_encoding": "output encoding",
                "human_labels": "human labels", "reading": "reading of the input (format, separator, encoding)"}
# Not in records written before they were: compared only where both records have one
LATER_KEYS = ("reading",)


_SHOWN = {"input_content": "input", "model_digest": "model", "tokenizer_fingerprint": "model"}


def job_path(shard: Path) -> Path:
    return shard.with_name(shard.name + ".job.json")


def done_path(output: Path) -> Path:
    """The record of a finished (unsharded) output, beside it and hidden (``.NAME.job.json``): what a many-file
    ``--resume`` checks it by before skipping it. Hidden, unlike a shard's (copied with its shard between machines),
    so that a pattern over the folder (``--input 'data/*'`` with ``--output-suffix``) never takes it for an input."""
    return output.with_name(f".{output.name}.job.json")


def write_done(output: Path, record: dict) -> None:
    """``output``'s record (``done_path``), once it is in place: the job of ``record`` (a run's ``job_record``, or a
    shard's, for the file its shards were joined into), without what only a shard has, and the output's content."""
    job = {k: v for k, v in record.items() if k not in ("shard", "output_content", "counts", "rows")}
    with naming(done_path(output)):
        write_json_atomic(done_path(output), {**job, "output_content": content_fingerprint(output)})


def write_job(shard: Path, job: dict) -> None:
    with naming(job_path(shard)):
        write_json_atomic(job_path(shard), job)


def read_job(shard: Path, path: Path | None = None) -> dict | None:
    """``shard``'s job record (or the record at ``path``: ``done_path``'s), None where there is none."""
    path = path or job_path(shard)
    if not path.exists():
        return None
    try:
        job = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        job = None
    if not isinstance(job, dict) or (path != job_path(shard) and not isinstance(job.get("output_content"), str)):
        fix = f"rerun {shard.name} with --overwrite" if path == job_path(shard) else \
            f"delete it to keep {shard.name} as it is, or pass --overwrite to label it again"
        raise InputError(f"{path} is damaged (not a job record); {fix}")
    return job


def check_one_job(output: Path, shards: list[Path]) -> None:
    """Every shard's job record agrees with the first's, or the shard is named with what differs. A shard without
    a record beside others that have theirs is refused (copied without its .job.json: a shard cut short at a line
    end, or of another model, was joined, exit 0); shards of which none has one (labelled by a version that wrote
    none) are joined unchecked, with a warning."""
    records = {path: read_job(path) for path in shards}
    missing = [path.name for path, job in records.items() if job is None]
    if missing and len(missing) < len(shards):
        record = job_path(Path(missing[0])).name
        raise InputError(f"can't merge {output}: {', '.join(missing)} has no job record ({record}) while the other "
                         "shards have theirs, so it can't be checked against them: copy each shard's .job.json with "
                         "it, or rerun that shard with --overwrite")
    if missing:
        warn(f"warning: none of the shards of {output} has a job record (SHARD.job.json: not copied with them, or "
             "labelled by an earlier koelectra-kit that wrote none): their input, model and rows are not checked")
    first = None
    for path in shards:
        job = records[path]
        if job is None:
            continue
        if first is None:
            first = (path, job)
            continue
        for key, what in JOB_IDENTITY.items():
            if key in LATER_KEYS and (job.get(key) is None or first[1].get(key) is None):
                continue
            if same_job_value(key, job.get(key), first[1].get(key)):
                continue
            if key == "human_labels":
                raise InputError(f"can't merge {output}: {path.name} was labelled with other human labels than "
                                 f"{first[0].name} ({job.get('human_labels_file')} vs "
                                 f"{first[1].get('human_labels_file')}: the labels changed between the shard runs, or "
                                 "another file was given); rerun it with the others' command and --overwrite")
            shown = _SHOWN.get(key, key)  # a digest means nothing to a user: its path does
            if key == "model_digest" and job.get("model") == first[1].get("model") and job.get("loading"):
                shown = "loading"  # one folder loaded another way: the paths alone read "x vs x"
            other = "other" if what.endswith("s") else "another"  # (labels: "another labels" read wrong)
            if key == "input_content" and job.get("input") == first[1].get("input"):  # one path: "x vs x"
                raise InputError(f"can't merge {output}: {job.get('input')} changed between the shard runs ("
                                 f"{path.name} was labelled from other content than {first[0].name}); rerun every "
                                 "shard on the file as it is now, with --overwrite")
            raise InputError(f"can't merge {output}: {path.name} was labelled with {other} {what} than "
                             f"{first[0].name} ({job.get(shown)} vs {first[1].get(shown)}: shards of "
                             "different jobs?); rerun it with the others' command and --overwrite")


def check_shard_files(output: Path, shards: list[Path]) -> None:
    """Each shard file is the one its job record describes: shard k of n by its record, and the bytes labelled
    then. A shard copied over another's name (shard 1 as shard 3, its record with it or not) was joined: shard 1's
    rows twice, shard 3's none, exit 0. Records written before ``output_content`` are not checked for content."""
    from .resume import same_content

    n = len(shards)
    for k, path in enumerate(shards, 1):
        job = read_job(path)
        if job is None:
            continue  # check_one_job has said so
        if job.get("shard") and _parts(job["shard"]) != (k, n):
            raise InputError(f"can't merge {output}: {path.name} holds shard {job['shard']}, not {k}/{n} (a shard "
                             f"copied or renamed over another?); rerun shard {k}/{n} with --overwrite")
        if job.get("output_content") and not same_content(path, str(job["output_content"])):
            raise InputError(f"can't merge {output}: {path.name} is not the file shard {k}/{n} wrote (another "
                             f"shard's file copied over it, or it was edited since); rerun shard {k}/{n} with "
                             "--overwrite")


def _parts(shard: str) -> tuple[int, int] | None:
    """"2/3" -> (2, 3); None for anything else."""
    m = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", str(shard))
    return (int(m[1]), int(m[2])) if m else None


def row_range(total: int, k: int, n: int) -> tuple[int, int]:
    """Rows [start, stop) of shard ``k`` of ``n``: sizes differ by at most one row."""
    return (k - 1) * total // n, k * total // n


def _shard_files(output: Path) -> dict[int, dict[int, Path]]:
    """{N: {k: path}} of the shard files (finished ones) beside ``output``."""
    pattern = re.compile(rf"{re.escape(output.stem)}\.shard-(\d+)-of-(\d+){re.escape(output.suffix)}")
    found: dict[int, dict[int, Path]] = {}
    folder = output.parent if str(output.parent) else Path(".")
    for p in folder.iterdir() if folder.is_dir() else ():
        m = pattern.fullmatch(p.name)
        if m:
            found.setdefault(int(m.group(2)), {})[int(m.group(1))] = p
    return found


def shard_counts(output: Path) -> list[int]:
    """The shard counts (N) of the shard files beside ``output``: more than one, and label-merge refuses them."""
    return sorted(_shard_files(output))


def find_shards(output: Path) -> list[Path]:
    """Shards 1..N of ``output``, in order; a missing or unfinished shard is an error naming it."""
    folder = output.parent if str(output.parent) else Path(".")
    if not folder.is_dir():
        raise InputError(f"{output}: folder {folder} does not exist")
    found = _shard_files(output)
    if not found:
        raise InputError(f"no shards of {output} (files named {shard_path(output, 1, 2).name}, ...) in {folder}")
    if len(found) > 1:
        raise InputError(f"shards of {output} from runs with different shard counts ({sorted(found)}): remove "
                         "the stale ones")
    (n, shards), = found.items()
    if sum(1 for k in shards if 1 <= k <= n) < n:
        # the first five missing, found lazily: a list of all of 1..N was a MemoryError for a file "-of-10**12"
        missing = itertools.islice((k for k in range(1, n + 1) if k not in shards), 5)
        what = []
        for k in missing:
            part = shard_path(output, k, n).with_name(shard_path(output, k, n).name + ".partial")
            what.append(f"{k} ({'unfinished: rerun it with --resume' if part.exists() else 'not run'})")
        raise InputError(f"can't merge {output}: shard {', '.join(what)} of {n} missing")
    return [shards[k] for k in range(1, n + 1)]


def _header_length(path: Path) -> int:
    """Bytes of a CSV/TSV shard's BOM + header record. The writer quotes a field holding a quote, separator or
    newline with doubled inner quotes, so the header ends at the first newline after an even number of quotes
    (true of every ASCII-compatible encoding the labeller writes: utf-8, cp949)."""
    with open(path, "rb") as f:
        head = f.read(1 << 20)
    pos, quotes = 0, 0
    while True:
        nl = head.find(b"\n", pos)
        if nl < 0:
            return len(head)  # a header-only file without a final newline can't come from the labeller; keep all
        quotes += head.count(b'"', pos, nl)
        pos = nl + 1
        if quotes % 2 == 0:
            return pos


def _cut_short(path: Path) -> bool:
    """The labeller ends every file it writes with a line end (and renames a shard into place only when whole),
    so a shard that doesn't was truncated afterwards: merging it would lose rows without a word."""
    if path.stat().st_size in (0, len(BOM)) and path.read_bytes() in (b"", BOM):
        return False  # a JSONL shard of no rows (with --output-encoding utf-8-sig: its BOM alone)
    with open(path, "rb") as f:
        f.seek(-1, os.SEEK_END)
        return f.read(1) != b"\n"


def merge_shards(output: str | Path, overwrite: bool = False) -> tuple[Path, int]:
    """Concatenate the complete shards of ``output`` into it, written beside and renamed. Returns (output,
    number of shards). The shards are kept (delete them once the merged file is checked)."""
    output = Path(output)
    if output.suffix.lower() in EXCEL_SUFFIXES:  # shards are joined by their bytes; label --shard writes no .xlsx
        raise InputError(f"{output}: label-merge joins .csv, .tsv or .jsonl shards into a file of their kind; give "
                         "the --output the shards were labelled with")
    if output.is_dir():  # --overwrite would get as far as writing OUTPUT.merging, then fail on the rename
        raise InputError(f"{output} is a folder; give the --output file the shards were labelled with")
    if output.exists() and not overwrite:
        raise InputError(f"{output} exists; pass --overwrite to replace it")
    shards = find_shards(output)
    check_one_job(output, shards)
    inputs = {str(job.get("input")) for job in map(read_job, shards) if job}
    dest = output_target(output)  # a symlink: its target written and the link kept, as label writes it
    if any(same_file(dest, i) for i in inputs):  # by inode: also through a hard link or a bind mount
        raise InputError(f"{output} is the file the shards labelled: the input is never overwritten; merge into "
                         "another name (label the shards again with another --output)")
    with open(shards[0], "rb") as f:  # (before the cut-short check, which reads newlines as utf-8 ones)
        if f.read(2) in (b"\xff\xfe", b"\xfe\xff"):  # utf-16/32: a newline is not the byte the header scan looks for
            raise InputError(f"can't merge {output}: its shards are UTF-16/32; label-merge joins utf-8 or cp949 "
                             "outputs (label them with the default --output-encoding)")
    for path in shards:
        if _cut_short(path):
            raise InputError(f"can't merge {output}: {path.name} ends mid-line, cut short after labelling (an "
                             "interrupted copy?); copy it again, or rerun that shard with --overwrite")
    check_shard_files(output, shards)
    headerless = output.suffix.lower() in (".csv", ".tsv")
    first_header = None
    tmp = dest.with_name(dest.name + ".merging")
    try:
        with naming(tmp), open(tmp, "wb") as out:
            for i, path in enumerate(shards):
                skip = _header_length(path) if headerless else 0
                with open(path, "rb") as f:
                    header = f.read(skip)
                    if i == 0:
                        first_header = header
                        out.write(header)
                    elif headerless and header != first_header:
                        raise InputError(f"can't merge {output}: {path.name} has other columns than "
                                         f"{shards[0].name} (shards of different jobs?)")
                    elif not headerless and f.read(3) != BOM:  # JSONL: only the first shard keeps a BOM
                        f.seek(0)
                    shutil.copyfileobj(f, out, 1 << 20)
            out.flush()
            os.fsync(out.fileno())
    except BaseException:  # a full disk or a kill mid-join: no half-joined file left beside the shards
        tmp.unlink(missing_ok=True)
        raise
    done_path(dest).unlink(missing_ok=True)  # an earlier run's record: it no longer describes the output
    os.replace(tmp, dest)
    first = read_job(shards[0])
    if first:  # the joined output's record, as an unsharded run leaves it (what a many-file --resume checks)
        write_done(dest, first)
    return output, len(shards)
