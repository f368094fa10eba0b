"""One run at a time per output. ``label`` appends chunk after chunk to ``OUTPUT.partial`` and renames it into place
at the end; a second run given the same ``--output`` (a retried script, two inputs sent to one name) used to delete
the first one's partial and start its own, and both then appended to and renamed each other's file: two exits 0 and
an output missing rows and its header. Each run now holds an exclusive ``flock`` on the partial from before it reads
the input until the partial has become the output, and a second run stops with one line before it touches a file.

The lock is the kernel's, on the open file: a run killed with -9 leaves none behind (its partial stays, for
``--resume``). Where ``fcntl`` does not exist (Windows) runs are not locked."""
from __future__ import annotations

import os
from pathlib import Path

from ..errors import InputError
from ..io.fileio import fcntl, try_hold


class PartialLock:
    """``with PartialLock(partial):`` the partial exists (created empty where it did not) and no other run holds it."""

    def __init__(self, partial: Path, output: Path):
        self.partial, self.output, self.fd = partial, output, None

    def __enter__(self) -> PartialLock:
        if fcntl is None:
            return self
        for _ in range(8):
            try:
                fd = os.open(self.partial, os.O_RDWR | os.O_CREAT, 0o666)
            except PermissionError:
                raise InputError(f"{self.partial} (an earlier run's unfinished output) can't be written by this user; "
                                 "make it writable (chmod u+w) or remove it") from None
            held = try_hold(fd)
            if not held:
                os.close(fd)
                if held is None:  # a file system without locks (some network mounts): unlocked, as on Windows
                    return self
                raise InputError(f"{self.output} is being written by another run (it holds {self.partial.name}); "
                                 "wait for it to finish, or give another --output")
            if _same_file(fd, self.partial):
                self.fd = fd
                return self
            # the run that held it renamed it into place (or removed it) between our open and our lock: the path
            # now names another file, or none; take the lock on what it names now
            os.close(fd)
        raise InputError(f"{self.output}: another run keeps replacing {self.partial.name}; give another --output")

    def __exit__(self, *exc) -> None:
        if self.fd is not None:
            os.close(self.fd)  # after the rename: the output is in place before another run can take the name
            self.fd = None


def _same_file(fd: int, path: Path) -> bool:
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (held.st_dev, held.st_ino)
