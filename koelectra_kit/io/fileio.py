"""Files the toolkit writes and reads back: every output is written beside its final path and renamed
into place (a file with ``atomic_path``, a folder with ``staged_dir``), so a kill, a full disk or an
error leaves the old output or none, never half of one. Also the one input-file check and the one
cache-folder rule."""
from __future__ import annotations

import contextlib
import json
import os
import shutil
import stat
import tempfile
from glob import escape as glob_escape
from pathlib import Path
from typing import Iterator

from ..errors import ConfigError, InputError

try:
    import fcntl
except ImportError:  # Windows: nothing is held (label's outputs, staging folders)
    fcntl = None


def try_hold(fd: int) -> bool | None:
    """An exclusive ``flock`` on ``fd`` without waiting: True (held, until ``fd`` closes or the process ends),
    False (another process holds it), None (no locks here: Windows, or a file system without them, such as some
    network mounts; the caller runs unheld)."""
    if fcntl is None:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return True
    except BlockingIOError:
        return False
    except OSError:
        return None


def hash_file(path: str | Path, h) -> None:
    """``path``'s bytes into the hashlib object ``h``, streamed (4 MiB at a time: RAM stays flat)."""
    with open(path, "rb") as f:
        while block := f.read(1 << 22):
            h.update(block)


def file_sha256(path: str | Path) -> str:
    """The file's content as a short SHA-256 (24 hex digits; ~1 GB/s where the CPU has SHA instructions)."""
    import hashlib

    h = hashlib.sha256()
    hash_file(path, h)
    return h.hexdigest()[:24]


def cache_dir(override: str | Path | None = None) -> Path:
    """Where caches live (Kiwi pre-split, packed ids, token ids): ``override``, else ``$KOELECTRA_CACHE``,
    else ``~/.cache/koelectra-kit``."""
    if override:
        check_cache_dir(override)
        return Path(override)
    if os.environ.get("KOELECTRA_CACHE"):
        return Path(os.environ["KOELECTRA_CACHE"])
    try:  # asked only now: Path.home() as the default of .get() raised even with KOELECTRA_CACHE set
        home = Path.home()
    except RuntimeError:  # HOME unset and no passwd entry (a container run as an arbitrary uid): was a traceback
        raise InputError("no folder for the caches: HOME is unset and this user has no home folder; set "
                         "KOELECTRA_CACHE (or HOME) to a folder you can write") from None
    return home / ".cache" / "koelectra-kit"


def check_cache_dir(value: str | Path | None, key: str = "cache_dir") -> None:
    """``cache_dir=`` names a folder (made when missing), never a file: pointed at one, the run failed with "Not a
    directory (FILE/presplit)", naming neither the option nor what it must be, and pretraining only after it had
    trained its tokenizer. Given as nothing (an unset shell variable) it was read as "not given". None: the
    default, nothing to check."""
    if value is None:
        return
    if not str(value).strip():
        raise InputError(f"{key}={str(value)!r} is empty (an unset shell variable?): give a folder, or leave {key} out "
                         "for $KOELECTRA_CACHE or ~/.cache/koelectra-kit")
    path = probe = Path(value)
    try:
        while not probe.exists() and probe != probe.parent:
            probe = probe.parent
        is_file = probe.exists() and not probe.is_dir()
    except OSError:  # a folder above it this user may not enter: said where the cache is written
        return
    if is_file:
        what = f"{key}={value} is a file" if probe == path else f"{key}={value}: {probe} is a file"
        raise InputError(f"{what}, and {key} must be a folder (the caches are written in it, made when missing): "
                         f"give a folder, or leave {key} out for $KOELECTRA_CACHE or ~/.cache/koelectra-kit")


def path_arg(value, key: str, instead: str = "") -> str:
    """A Python function's path argument (a str or a Path) as a str; anything else in one line, ``instead`` saying
    what takes it: str(DataFrame) was taken for a file name ("File name too long"), str([path]) for a glob that
    matched nothing."""
    if isinstance(value, (str, os.PathLike)):
        return str(value)
    raise ConfigError(f"{key}: a file path (a str or Path), not a {type(value).__name__}"
                      f"{'; ' + instead if instead else ''}")


def check_input_file(path: str | Path) -> Path:
    """An input file that exists, is a file and is not empty, or a one-line error saying which it is not."""
    if not str(path).strip():
        # Path("") is ".", the working folder: a key given with nothing after it (corpus=$FILE with $FILE unset)
        # was read as that folder, and a folder of Parquet files there as the dataset to train on
        raise InputError("an input path is empty (a key given as KEY= with nothing after it, or an unset shell "
                         "variable?); give a file")
    path = Path(path)
    try:
        exists = path.exists()
    except PermissionError:  # a folder above it this user may not enter (no x): exists() raises, not False
        raise InputError(f"{path}: permission denied: a folder above it can't be entered by this user; make it "
                         "searchable (chmod +x) or copy the file somewhere you can read") from None
    if not exists:
        if str(path) == "-":  # the shell's "standard input": was "-: file not found"
            raise InputError("-: reading standard input is not supported (the input is read more than once: its "
                             "encoding, its rows, a fingerprint for --resume); save it to a file and name that")
        raise InputError(f"{path}: file not found")
    if path.is_dir():
        raise InputError(f"{path}: is a directory, expected a file")
    if not path.is_file():  # a FIFO, `<(cmd)`, a piped /dev/stdin or a device: its size reads 0, so it was "empty"
        raise InputError(f"{path}: is {file_kind(path)}, not a regular file: the input is read more than once (its "
                         "encoding, its rows, a fingerprint for --resume); save it to a file and name that")
    if not os.access(path, os.R_OK):  # said here, naming what to do (was "Permission denied (path)" from the reader)
        raise InputError(f"{path}: permission denied: this user can't read it; make it readable (chmod +r) or copy "
                         "it somewhere you can read")
    if path.stat().st_size == 0:
        raise InputError(f"{path}: file is empty")
    return path


def file_kind(path: Path) -> str:
    """What a path that is no regular file is, in words."""
    mode = path.stat().st_mode
    return ("a pipe (FIFO)" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode) else
            "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a file")


def file_identity(path: str | Path) -> tuple[int, int] | None:
    """(device, inode) of what ``path`` names after links, None when nothing is there: one file reached by two
    names (a hard link, a bind mount of its folder, a symlink, ./ or ..) has one identity."""
    try:
        st = os.stat(path)
    except (OSError, ValueError):
        return None
    return st.st_dev, st.st_ino


def same_file(a: str | Path, b: str | Path) -> bool:
    ia = file_identity(a)
    return ia is not None and ia == file_identity(b)


MODEL_SUFFIXES = (".json", ".safetensors", ".bin", ".txt")  # what loaders read: a model card or a plot is no matter


def unreadable_in(folder: str | Path) -> Path | None:
    """The first of ``folder`` and the model files directly in it that this user can't read (None: all readable), so
    a model folder is refused naming what to fix: safetensors says "No such file or directory" for a file it may not
    open, and the loaders' errors read as a damaged model."""
    folder = Path(folder)
    if not os.access(folder, os.R_OK | os.X_OK):
        return folder
    return next((f for f in sorted(folder.iterdir())
                 if f.suffix in MODEL_SUFFIXES and f.is_file() and not os.access(f, os.R_OK)), None)


def check_distinct_inputs(values, key: str) -> None:
    """Each corpus input given once: a file listed twice (or as a.txt and ./a.txt, or through a link) was read twice,
    every text of it counted double in the vocabulary and packed twice for pretraining, without a word."""
    seen: dict[str, str] = {}
    for value in values:
        text = str(value)
        where = _input_identity(text)
        if where in seen:
            also = "" if seen[where] == text else f" (as {seen[where]} and {text})"
            raise InputError(f"{key} lists {text} twice{also}: its texts would count double; give each file once")
        seen[where] = text


def distinct_inputs(values) -> list:
    """``values`` with each input kept once (the first spelling of a file named twice, as a.txt and ./a.txt or through
    a link): for a command whose result is a set, such as a word list, where reading a file twice only costs time."""
    seen: set[str] = set()
    kept = []
    for value in values:
        where = _input_identity(str(value))
        if where not in seen:
            seen.add(where)
            kept.append(value)
    return kept


def _input_identity(text: str) -> str:
    return text if text.startswith("hf:") else os.path.realpath(text)


def check_output_parent(path: str | Path) -> Path:
    """The folder an output goes into must exist (or be creatable) and be writable: say so before any work."""
    path = Path(path)
    parent = path.parent if str(path.parent) else Path(".")
    probe = parent
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    if probe.exists() and not probe.is_dir():
        raise InputError(f"{path}: {probe} is a file, not a folder")
    if probe.exists() and not os.access(probe, os.W_OK | os.X_OK):
        raise InputError(f"{path}: folder {probe} is not writable by this user; choose a folder you can write, or "
                         "make it writable (chmod u+w)")
    return path


@contextlib.contextmanager
def atomic_path(final: str | Path, suffix: str = "") -> Iterator[Path]:
    """Yield a temporary path beside ``final``; move it into place only if the block succeeds.

    The temp file lives in the same directory so ``os.replace`` is an atomic rename: a reader sees
    either the old file or the complete new one, never half of it (a kill or a full disk mid-write
    leaves ``final`` untouched and the temp file removed).
    """
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{final.name}.", suffix=suffix + ".tmp", dir=final.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        with open(tmp, "rb+") as f:  # make the bytes durable before the rename publishes them
            os.fsync(f.fileno())
        _umask_permissions(tmp)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            tmp.unlink()


def write_text_atomic(path: str | Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_bytes_atomic(path: str | Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


def write_json_atomic(path: str | Path, obj) -> None:
    write_text_atomic(path, json.dumps(obj, ensure_ascii=False, indent=2) + "\n")


def make_staging_dir(final: str | Path) -> Path:
    """An empty folder beside ``final`` to build it in; ``publish_dir`` moves it into place. It is held (a
    ``flock`` on it, the kernel's, gone with the process) while this process lives, so that the next run for the
    same ``final`` can tell the staging folders of killed runs (a fine-tune's holds its best checkpoint: a model's
    size, left hidden beside the output by every ``kill -9``) from those of runs still going, and remove them."""
    final = Path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    _remove_abandoned(final)
    staging = Path(tempfile.mkdtemp(prefix=f".{final.name}.partial-", dir=final.parent))
    if fcntl is not None:
        fd = os.open(staging, os.O_RDONLY)
        if try_hold(fd):  # a folder just made: no one else holds it (None: no locks, never taken for abandoned)
            _HELD[str(staging)] = fd
        else:
            os.close(fd)
    return staging


_HELD: dict[str, int] = {}  # staging folders this process builds -> the descriptor holding each one's lock


def _release(staging: Path) -> None:
    fd = _HELD.pop(str(staging), None)
    if fd is not None:
        os.close(fd)


def remove_staging(staging: str | Path) -> None:
    """A staging folder given up (the run failed, or ``publish_dir`` moved it already): removed, its hold let go."""
    _release(Path(staging))
    if Path(staging).exists():
        shutil.rmtree(staging, ignore_errors=True)


def _remove_abandoned(final: Path) -> None:
    """Remove the staging folders for ``final`` that no live process holds: left by a run killed mid-way."""
    if fcntl is None:
        return
    for old in final.parent.glob(f".{glob_escape(final.name)}.partial-*"):
        if not old.is_dir() or old.is_symlink() or str(old) in _HELD:
            continue
        try:
            fd = os.open(old, os.O_RDONLY)
        except OSError:
            continue
        try:
            abandoned = try_hold(fd)  # False: a run still building it; None: no locks, nothing can be told
        finally:
            os.close(fd)
        if not abandoned:
            continue
        shutil.rmtree(old, ignore_errors=True)
        if not old.exists():
            import warnings

            warnings.warn(f"removed {old}: the unfinished output of an earlier run for {final} that was killed")


def publish_dir(staging: str | Path, final: str | Path) -> None:
    """Move the finished staging folder to ``final``. A previous ``final`` is renamed aside first and
    removed after: readers see the old complete folder or the new complete one, never a mix."""
    staging, final = Path(staging), Path(final)
    _release(staging)
    _umask_permissions(staging)
    for f in staging.rglob("*"):
        _umask_permissions(f)
    if final.exists():
        old = final.with_name(f".{final.name}.old-{os.getpid()}")
        os.rename(final, old)
        os.rename(staging, final)
        shutil.rmtree(old, ignore_errors=True)
        if old.exists():  # write-protected inside (chmod a-w): kept, and said, not left unnamed beside the output
            import warnings

            warnings.warn(f"could not remove the replaced {final} (write-protected), kept as {old}: delete it "
                          "yourself")
    else:
        os.rename(staging, final)


@contextlib.contextmanager
def staged_dir(final: str | Path) -> Iterator[Path]:
    """Build a folder beside ``final`` and swap it in whole when the block succeeds; on any error the
    staging folder is removed and ``final`` is left as it was."""
    staging = make_staging_dir(final)
    try:
        yield staging
        publish_dir(staging, final)
    finally:
        remove_staging(staging)


def _umask_permissions(path: Path) -> None:
    # mkdtemp/mkstemp create owner-only (0700/0600) entries; give what we publish the permissions any other
    # file would get (umask), so a shared model folder is readable.
    umask = os.umask(0)
    os.umask(umask)
    path.chmod((0o777 if path.is_dir() else 0o666) & ~umask)
