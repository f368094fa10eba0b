"""The paths one ``label`` run reads and writes, as a shell gives them: the output through a symlink, the files
written beside it (``OUTPUT.partial``, its record, ...) that an input must not be, names too long for the folder,
and an input that changes while it is read (``InputGuard``)."""
from __future__ import annotations

import hashlib
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io.fileio import same_file

TEMP_TAIL = ".XXXXXXXX.tmp"  # what tempfile.mkstemp adds to ``atomic_path``'s ".NAME" (its name's length, not its name)
# The files a run writes beside its output OUT, besides OUT: OUT.partial, its resume record OUT.partial.json and that
# record's .tmp while it is saved (run.py, resume.py), a shard's OUT.job.json (shard.py), label-merge's OUT.merging;
# and hidden ones: a finished output's .OUT.job.json, a workbook input's .OUT.sheet.csv, atomic_path's .OUT.*.tmp
WORKING_TAILS = (".partial", ".partial.json", ".partial.json.tmp", ".job.json", ".merging")


def output_target(given: Path) -> Path:
    """The file ``--output`` names. Through a symlink: its target, written in place and the link kept, as ``>`` and
    ``cp`` write (the rename put a plain file where the link was, and the target kept its old labels)."""
    return Path(os.path.realpath(given)) if os.path.islink(given) else given


def is_working_file(path: Path) -> bool:
    """Whether ``path`` is named as one of the files a run writes beside its output (``WORKING_TAILS``): never an
    input a pattern means (``--input 'd/*'`` over the folder where a killed run with ``--output-suffix`` left its
    .partial: resumed, the pattern took it for an input)."""
    name = path.name
    return name.endswith(WORKING_TAILS) or (name.startswith(".") and name.endswith((".sheet.csv", ".tmp")))


def check_name_lengths(dst: Path, beside: list[Path]) -> None:
    """Every name the run writes beside ``dst`` fits the folder's limit (255 bytes on Linux): for an output name that
    fits, ``OUTPUT.partial.json.tmp`` failed after the first chunk was labelled, leaving ``OUTPUT.partial`` behind."""
    try:
        limit = os.pathconf(dst.parent if dst.parent.is_dir() else ".", "PC_NAME_MAX")
    except (OSError, ValueError):
        limit = 255
    longest = max([dst, *beside], key=lambda p: len(os.fsencode(p.name)))
    over = len(os.fsencode(longest.name)) - limit
    if over > 0:
        side = longest.name.replace(TEMP_TAIL, ".*.tmp").replace(dst.name, "NAME")
        also = "" if longest == dst else f", and the run also writes {side} beside it (NAME the output's name)"
        raise InputError(f"--output {dst}: its name is {len(os.fsencode(dst.name))} bytes{also}, over the folder's "
                         f"limit of {limit} bytes a name: shorten it by {over} bytes")


def check_not_written(inputs: dict[str, str | Path | None], writes: dict[Path, str]) -> None:
    """No file this run reads (``--input``, ``--human-labels``) is one it writes, by any name (a hard link, a bind
    mount, ``..``): ``--input out.csv.partial --output out.csv`` deleted the input, and ``--human-labels L.csv
    --output L.csv --overwrite`` replaced the user's labels with the output."""
    for flag, path in inputs.items():
        if not path:
            continue
        for out, what in writes.items():
            if same_file(path, out):
                raise InputError(f"{flag} {path} is {what} ({out}), which this run writes{one_file(path, out)}: "
                                 "the input is never overwritten; choose another "
                                 + ("--plot" if "--plot" in what else "--output"))


def one_file(a, b) -> str:
    """Said where two spellings are one file that no path resolves to the other (a hard link, a bind mount)."""
    same = os.path.realpath(a) == os.path.realpath(b)
    return "" if same else " (one file under two names: a hard link or a bind mount)"


def check_writable(folder: Path, dst: Path) -> None:
    """``folder`` takes the files the run writes beside ``dst``, checked before the model loads."""
    # a real probe: permission bits say nothing for root, and a read-only mount ignores them
    import tempfile

    try:
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".write-probe-"):
            pass
    except OSError as e:
        raise InputError(f"{dst}: can't write in folder {folder} ({e.strerror or e})") from None


@contextmanager
def naming(path: Path):
    """An OSError in the block that names no file names ``path``: a write() or fsync() on a full disk says "No space
    left on device" and nothing more, and the error line of an hour-long run named no file."""
    try:
        yield
    except OSError as e:
        if e.filename is not None:
            raise
        raise OSError(e.errno, e.strerror or str(e), str(path)) from e


@dataclass
class InputGuard:
    """What the input file was when the run opened it: size, identity, a digest of its first and last MiB. Read up to
    that size only, the rows are those of that moment; checked after each chunk, a file written in place meanwhile
    (cut short, or rewritten by an export) is an error instead of a shorter or mixed output published with exit 0."""
    path: Path
    identity: tuple
    size: int
    mtime_ns: int
    digest: str

    @classmethod
    def take(cls, path: Path) -> InputGuard:
        st = os.stat(path)
        return cls(path, (st.st_dev, st.st_ino), st.st_size, st.st_mtime_ns, _ends_digest(path, st.st_size))

    def change(self) -> str | None:
        """None (as it was), "replaced" (another file renamed over it: the open one is still read whole),
        "appended" (grown, its first ``size`` bytes kept) or "changed" (written in place: what was read is lost)."""
        try:
            st = os.stat(self.path)
            if (st.st_dev, st.st_ino) != self.identity:
                return "replaced"
            if (st.st_size, st.st_mtime_ns) == (self.size, self.mtime_ns):
                return None
            if st.st_size < self.size or _ends_digest(self.path, self.size) != self.digest:
                return "changed"
        except OSError:
            return "replaced"  # deleted or moved away: the open file is still read whole
        return "appended" if st.st_size > self.size else None

    def check(self, partial: Path, state_path: Path) -> str | None:
        """``change()``, raising for "changed" (the unfinished output and its record removed: no resume can
        continue them, the file they came from is gone)."""
        change = self.change()
        if change == "changed":
            partial.unlink(missing_ok=True)
            state_path.unlink(missing_ok=True)
            raise InputError(f"{self.path} changed while it was labelled (written in place: {self.size:,} bytes when "
                             f"the run started, {_size(self.path):,} now), so the rows read are not one version of it and no output "
                             "is written; label it again once it is complete (a copy, if something keeps writing it)")
        return change

    def note(self, change: str | None, dst: Path) -> str | None:
        """The warning a finished run gives for a file replaced or appended to meanwhile (None: nothing to say)."""
        if change == "replaced":
            return (f"warning: {self.path} was replaced or removed while it was labelled: {dst} labels the file as it "
                    "was when the run started; label it again for the new one")
        if change == "appended":
            grown = _size(self.path) - self.size
            return (f"warning: {grown:,} bytes were appended to {self.path} while it was labelled: {dst} holds its "
                    f"rows up to byte {self.size:,} (where it ended when the run started); label it again to include "
                    "the rest")
        return None


def _size(path: Path) -> int:
    try:
        return os.stat(path).st_size
    except OSError:
        return 0


def _ends_digest(path: Path, size: int) -> str:
    """SHA-256 of the first and the last MiB of the file's first ``size`` bytes."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read(min(size, 1 << 20)))
        if size > 2 << 20:
            f.seek(size - (1 << 20))
            h.update(f.read(1 << 20))
    return h.hexdigest()
