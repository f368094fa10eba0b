"""The word cache across processes: a ``kiwi_word`` process starts with the words earlier processes analysed, and
leaves its own for the next.

A fresh ``koelectra-kit label`` process has an empty word cache, so every distinct word of its file goes to Kiwi
once: on 10,000 reviews of other movies that is half the run's time (benchmarks/bench_label.py's cold bound). The
same file labelled again (another model, a fixed label, the next day's export) repeats those words. So the cache's
entries are kept in one file under the cache folder, read at a process's first Kiwi pre-split and written back,
most recently used last, when the process ends (a process that finds all its words there never loads Kiwi's model):

    $KOELECTRA_CACHE/words/words-1-kiwipiepy0.24.1-model0.24.0.tsv      word<TAB>cut,cut   (one line a word)

Exact: a word's cuts depend on the word and Kiwi alone (wordsplit.py), so the file is keyed by the Kiwi versions
that made it (and this format's number): another Kiwi never reads it. It is a cache, so it never fails a run: a file
that cannot be read, or holds one malformed line, is ignored whole (with one warning), and one that cannot be
written is skipped. A process merges what the file holds when it ends (words other processes left since it started,
e.g. the shards of one file) under its own, most recent, words, and writes the whole file atomically.
``KOELECTRA_WORD_FILE=0`` turns it off (the test suite does, so that no test depends on what another left).
"""
from __future__ import annotations

import atexit
import os
import threading
from pathlib import Path

from .config import WORD_CACHE

FORMAT = 1  # raise it when wordsplit.word_cuts would cut a word differently: older files then go unread
ENTRIES = WORD_CACHE  # words the file keeps, the most recently used (labelling's in-memory cache size; 18 bytes a
# word on nsmc3 dev's 39,552 words, so ~3.7 MB full)
_STATE = {"path": None, "pid": None, "loaded": False, "stored": 0}
_LOCK = threading.Lock()  # the app and Classifier.predict encode on worker threads: one of them loads


def enabled() -> bool:
    return os.environ.get("KOELECTRA_WORD_FILE", "1") != "0"


def path() -> Path:
    """This Kiwi's word file."""
    from ..io.fileio import cache_dir
    from .kiwi import kiwi_versions

    v = kiwi_versions()
    return cache_dir() / "words" / f"words-{FORMAT}-kiwipiepy{v['kiwipiepy']}-model{v['kiwipiepy_model']}.tsv"


def parse(text: str) -> list[tuple[str, tuple[int, ...]]]:
    """The (word, cuts) entries of a word file; ValueError naming the first line that is not one. Each distinct cut
    list is parsed and checked once (a few thousand patterns for 200,000 words) into one tuple its words share."""
    out, patterns = [], {}
    for n, line in enumerate(text.splitlines(), start=1):
        word, sep, cuts = line.partition("\t")
        points = patterns.get(cuts)
        if points is None:
            try:
                points = tuple(int(c) for c in cuts.split(",")) if cuts else ()
            except ValueError:
                points = (0,)  # fails the check below
            if any(b <= a for a, b in zip(points, points[1:])) or (points and points[0] <= 0):
                raise ValueError(f"line {n}: cuts {cuts!r} are not increasing positions")
            patterns[cuts] = points
        if not sep or not word or (points and points[-1] >= len(word)) or len(word.split()) != 1 \
                or word != word.strip():
            raise ValueError(f"line {n} is not word<TAB>cuts inside the word")
        out.append((word, points))
    return out


def load_into(cache) -> None:
    """Once per process, before its first lookup: the file's entries into ``cache`` (a wordsplit.WordCache), and
    the file written back with the cache's entries when the process ends."""
    if _STATE["loaded"]:
        return
    with _LOCK:
        if not _STATE["loaded"]:
            _load(cache)
            _STATE["loaded"] = True


def _load(cache) -> None:
    if not enabled():
        return
    from ..errors import KitError
    from ..runtime import warn

    try:
        p = path()
    except KitError as e:  # no home folder for the caches: a cache, so the run goes on without it
        warn(f"no word cache this run: {e}")
        return
    _STATE["path"], _STATE["pid"] = p, os.getpid()
    try:
        entries = parse(p.read_text(encoding="utf-8")) if p.is_file() else []
    except (OSError, UnicodeDecodeError, ValueError) as e:
        warn(f"ignoring the word cache {p} ({e}); this run's words replace it")
        entries = []
    cache.store(entries[-cache.capacity:])
    _STATE["stored"] = cache.stored
    if not _STATE.get("registered"):
        atexit.register(save, cache)
        _STATE["registered"] = True


def forget() -> None:
    """The next lookup reads the file again, as a fresh process's first one does (benchmarks/bench_label.py times
    that start)."""
    with _LOCK:
        _STATE["loaded"] = False


def save(cache) -> None:
    """The cache's most recently used ``ENTRIES`` words into the file, if this process analysed new ones."""
    if _STATE["path"] is None or cache.stored == _STATE["stored"] or os.getpid() != _STATE["pid"]:
        return  # off, nothing new, or a forked child (its parent writes)
    from ..io.fileio import atomic_path

    ours = cache.items()
    known = {w for w, _ in ours}
    try:  # what processes that ended since this one started wrote (shards of one file, say): kept, as older entries
        theirs = [e for e in parse(_STATE["path"].read_text(encoding="utf-8")) if e[0] not in known]
    except (OSError, UnicodeDecodeError, ValueError):
        theirs = []
    entries = (theirs + ours)[-ENTRIES:]
    try:
        with atomic_path(_STATE["path"]) as tmp:
            with open(tmp, "w", encoding="utf-8", newline="\n") as f:
                f.writelines(f"{w}\t{','.join(map(str, c))}\n" for w, c in entries)
    except OSError:
        pass  # a full disk or a read-only cache folder: the next run analyses the words again
    _STATE["stored"] = cache.stored
