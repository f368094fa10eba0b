"""Corpus passes that run Kiwi once: the pre-split text of a corpus file, and its token ids, cached on disk.

``presplit_file`` writes the pre-split text (one line per text, pieces joined by spaces) under a key of (file
content, normalization, pre-split mode, Kiwi versions); the second pass over the same corpus (tokenizer training,
then pretraining) reads it and does no Kiwi work. ``cached_ids`` caches the ids of that text for one exact
tokenizer model beside it, so a third pass does neither Kiwi nor WordPiece work, only a memory-mapped read.

A corpus is pre-split in pieces of ``PIECE_BYTES`` of its text, by one process per core (each with a one-thread
Kiwi and, for ``kiwi_word``, its own word cache: the Python side of the work, normalization and joining pieces,
then runs on every core too, not only Kiwi's threads). Each finished piece is a file of its own in a folder beside
the cache, so a killed run continues from the pieces it had finished; the pieces are joined in order once all are
done, so the cache is byte for byte what one uninterrupted pass writes (tests/test_presplit_word.py kills one).
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import threading
import time
from collections import deque
from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
from contextlib import contextmanager
from pathlib import Path
from typing import Callable, Iterable, Iterator

from .. import runtime
from ..config import to_dict
from ..io.corpus import iter_texts, refuse_archive
from ..errors import InputError
from ..io.fileio import atomic_path, cache_dir as resolve_cache_dir, write_json_atomic
from .normalize import NormalizeConfig, Normalizer
from . import kiwi, wordsplit
from .config import CORPUS_WORD_CACHE, FORMAT, KIWI_PRESPLITS, SPECIAL_TOKENS
from .specials import SpecialStrings, joined, regroup

# Part of the pre-split cache key: raise it when ``corpus.iter_texts`` reads a file differently, so a cache made
# by the old reader is not reused (2: tables through ``tables.read_records``, malformed records skipped; 3: a short
# file of mostly undecodable lines, a binary one, refused).
READER = 3
# Text (UTF-8 bytes) per piece of the pre-split: a kill loses at most the pieces in flight (two per process), and
# a piece's texts held in memory stay small (~16 MB of text is ~50 MB of Python strings).
PIECE_BYTES = 16 << 20
CHUNK = 2048  # texts a kiwi_word process sends through its cache (and the misses to Kiwi) at a time


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def presplit_file(path: str | Path, *, text_column: str | None, normalize: NormalizeConfig, presplit: str,
                  num_workers: int | None = None, cache_dir: str | Path | None = None, progress: bool = False,
                  max_lines: int = 0, word_cache: int = CORPUS_WORD_CACHE, piece_bytes: int = PIECE_BYTES,
                  specials: tuple[str, ...] = tuple(SPECIAL_TOKENS)) -> Path:
    """The corpus file as pre-split text (one line per non-empty text, pieces joined by spaces), from the cache
    when this file and these settings were seen before. Built in pieces (see the module docstring) by
    ``num_workers`` processes (None: all cores); the cache appears only once complete. ``specials``: the special
    strings ([MASK], [SEP], ...) kept whole as pieces of their own (specials.py): a line's "[SEP]" is the [SEP] id."""
    path = Path(path)
    refuse_archive(path)  # here, not only in the reader: a cache made before archives were refused is not served
    # "specials" is in the key since special strings were kept whole: a cache made before cut them into pieces
    # ("[ ##SEP ##]"), so none made then is served (nor the packed rows and id caches keyed by it)
    key_src = json.dumps({"file": file_digest(path), "column": text_column, "normalize": to_dict(normalize),
                          "presplit": presplit, "kiwi": kiwi.kiwi_versions() if presplit in KIWI_PRESPLITS else None,
                          "max_lines": max_lines, "format": FORMAT, "reader": READER,
                          "specials": sorted(specials)}, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    target = resolve_cache_dir(cache_dir) / "presplit" / f"{path.stem[:40]}-{key}.txt"
    if target.exists():
        return _said_again(target)
    target.parent.mkdir(parents=True, exist_ok=True)
    # Two runs on one corpus at once (two pretraining runs started together) would write and sweep the same parts
    # folder: the second waits here for the first, then finds the finished cache.
    lock = target.parent / f".{target.stem}.lock"
    with _locked(lock):
        if target.exists():
            return _said_again(target)
        _presplit_to(target, path, text_column=text_column, normalize=normalize, presplit=presplit,
                     num_workers=num_workers, progress=progress, max_lines=max_lines, word_cache=word_cache,
                     piece_bytes=piece_bytes, specials=tuple(specials))
        # Safe to remove while held: whoever waits on it, or comes later, finds the cache before doing any work.
        lock.unlink(missing_ok=True)
    return target


def _warnings_file(target: Path) -> Path:
    return target.with_name(target.name + ".warnings")


def _said_again(target: Path) -> Path:
    """The cached pre-split, after saying again what reading its file warned about (a skipped malformed record
    was said once, when the cache was made, and never on the runs that used it)."""
    with contextlib.suppress(OSError):
        for line in _warnings_file(target).read_text(encoding="utf-8").splitlines():
            runtime.warn(f"{line} (as read when cached in {target.parent})")
    return target


@contextmanager
def _locked(lock: Path):
    """An exclusive advisory lock on ``lock`` (fcntl; where there is none, as on Windows, no lock)."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not POSIX
        yield
        return
    with open(lock, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def _presplit_to(target: Path, path: Path, *, text_column, normalize, presplit, num_workers, progress, max_lines,
                 word_cache, piece_bytes, specials) -> Path:
    """``presplit_file``'s work once it holds the cache's lock: the pieces, then ``target`` published whole."""
    from tqdm.auto import tqdm

    # the piece size is in the folder's name: pieces cut another way cannot be mixed with these
    parts = target.parent / f".{target.stem}.parts-{piece_bytes}"
    parts.mkdir(parents=True, exist_ok=True)
    for stale in parts.glob(".*.tmp"):  # a piece being written when an earlier run was killed
        stale.unlink(missing_ok=True)
    done = {int(f.stem): json.loads(f.read_text()) for f in parts.glob("[0-9]*.json")}
    size = path.stat().st_size
    resumed = sum(d["bytes"] for d in done.values())
    bar = tqdm(total=size, initial=min(resumed, size), unit="B", unit_scale=True, disable=not progress,
               desc=f"pre-splitting {path.name}", leave=False)
    if progress and done:
        runtime.log(f"pre-split {path.name}: continuing after {len(done)} finished piece(s) "
                    f"({resumed / 1e6:,.0f} MB) in {parts}")
    job = PieceJob(normalize, presplit, word_cache, parts, specials)
    processes = kiwi.resolve_workers(num_workers)
    t0 = time.perf_counter()
    said: list[str] = []
    pieces = _pieces(iter_texts(path, text_column, said=said), piece_bytes)
    if processes > 1 and not max_lines and size > piece_bytes and not _is_daemon():
        n = _split_in_processes(job, pieces, done, processes, bar)
    else:  # one process: Kiwi's own threads (num_workers of them) take the cores
        n, processes = _split_here(job, pieces, done, num_workers, max_lines, bar), 1
    bar.close()
    stats = {k: sum(done[i][k] for i in range(n)) for k in ("texts", "empty")}
    if max_lines:
        stats["texts"] = min(stats["texts"], max_lines)
    if stats["texts"] == 0:
        shutil.rmtree(parts, ignore_errors=True)
        raise InputError(f"{path}: no text in it ({stats['empty']} empty lines)")
    if said:  # before the cache appears: a run that finds it finds these too
        _warnings_file(target).write_text("\n".join(said) + "\n", encoding="utf-8")
    _join(parts, n, target, max_lines)
    shutil.rmtree(parts, ignore_errors=True)
    if progress:
        s = time.perf_counter() - t0
        runtime.log(f"pre-split {path.name}: {stats['texts']:,} texts ({stats['empty']:,} empty skipped) in {s:.1f}s "
                    f"({(size - resumed) / 1e6 / max(s, 1e-9):.2f} MB/s, {processes} process{'es' if processes > 1 else ''}) "
                    f"-> {target}")
    return target


def _pieces(texts: Iterable[str], piece_bytes: int) -> Iterator[tuple[int, list[str], int]]:
    """(index, texts, their UTF-8 bytes with newlines) for consecutive runs of about ``piece_bytes``: the same cuts
    on every run over the same file, so a rerun knows which pieces an earlier one finished. At least one piece."""
    buf: list[str] = []
    n = i = 0
    for raw in texts:
        buf.append(raw)
        n += len(raw.encode("utf-8", "replace")) + 1
        if n >= piece_bytes:
            yield i, buf, n
            buf, n, i = [], 0, i + 1
    if buf or i == 0:
        yield i, buf, n


class PieceJob:
    """What a process needs to pre-split one piece and write it into the parts folder (picklable, so a worker
    process gets it with each piece)."""

    def __init__(self, normalize: NormalizeConfig, presplit: str, word_cache: int, parts: Path,
                 specials: tuple[str, ...] = tuple(SPECIAL_TOKENS)):
        self.normalize, self.presplit, self.word_cache, self.parts = normalize, presplit, word_cache, parts
        self.specials = specials

    def lines(self, texts: list[str], num_workers: int | None, stats: dict,
              tick: Callable[[int], None] | None = None) -> Iterator[str]:
        """The pre-split line of each non-empty normalized text, in order; ``stats`` counts texts and empties. A
        text's special strings are pieces of their own, the parts between them normalized and pre-split as texts
        of their own (``KoTokenizer.presplit_batch``'s line)."""
        norm, specials = Normalizer(self.normalize), SpecialStrings(self.specials)
        found: deque = deque()  # the special strings of each text whose parts went to the pre-split

        def normalized():  # the normalized parts of each non-empty text, in order (a text without specials: itself)
            for raw in texts:
                if tick is not None:
                    tick(len(raw.encode("utf-8", "replace")) + 1)
                parts, (f,), _ = specials.split([raw])
                parts = [norm(x) for x in parts]
                if f or parts[0]:
                    stats["texts"] += 1
                    found.append(f)
                    yield from parts
                else:
                    stats["empty"] += 1

        if self.presplit == "kiwi":
            pieces = (kiwi.mark_pieces(text, spans) for text, spans in kiwi.presplit_pairs(normalized(), num_workers))
        elif self.presplit == "kiwi_word":
            pieces = self._word_pieces(normalized(), num_workers)
        else:
            pieces = ([t] if t else [] for t in normalized())
        for first, rest in regroup(pieces, found):
            yield " ".join(joined(first, rest))

    def _word_pieces(self, texts: Iterator[str], num_workers: int | None) -> Iterator[list[str]]:
        """The kiwi_word pieces of each text, ``CHUNK`` texts to the word cache (and Kiwi) at a time."""
        chunk: list[str] = []
        for t in texts:
            chunk.append(t)
            if len(chunk) == CHUNK:
                yield from wordsplit.pieces(chunk, num_workers, self.word_cache)
                chunk = []
        yield from wordsplit.pieces(chunk, num_workers, self.word_cache)

    def run(self, index: int, texts: list[str], nbytes: int, num_workers: int | None = 1,
            tick: Callable[[int], None] | None = None) -> dict:
        """Pre-split one piece into parts/NNNNNN.txt, then its counts into NNNNNN.json (the mark of a finished
        piece), each written beside its name and renamed."""
        stats = {"texts": 0, "empty": 0, "bytes": nbytes}
        with atomic_path(self.parts / f"{index:06d}.txt") as tmp, open(tmp, "w", encoding="utf-8") as f:
            for line in self.lines(texts, num_workers, stats, tick):
                f.write(line)
                f.write("\n")
        write_json_atomic(self.parts / f"{index:06d}.json", stats)
        return stats


def _split_here(job: PieceJob, pieces, done: dict, num_workers: int | None, max_lines: int, bar) -> int:
    """Every piece not finished yet, in this process, in order; with ``max_lines``, only until that many texts.
    Returns the number of pieces the cache is made of."""
    n = total = 0
    for i, texts, nbytes in pieces:
        if i not in done:
            done[i] = job.run(i, texts, nbytes, num_workers, tick=bar.update)
        n, total = i + 1, total + done[i]["texts"]
        if max_lines and total >= max_lines:
            break
    return n


def _split_in_processes(job: PieceJob, pieces, done: dict, processes: int, bar) -> int:
    """Every piece not finished yet, ``processes`` at a time in worker processes (two pieces in flight each, so
    none waits while this one reads the file). Returns the number of pieces."""
    import multiprocessing as mp

    # fork where there is one (no re-import of the caller's script; Kiwi and the word cache reset themselves in a
    # forked child, see kiwi.py and wordsplit.py); spawn elsewhere
    ctx = mp.get_context("fork" if "fork" in mp.get_all_start_methods() else "spawn")
    n = 0
    with ProcessPoolExecutor(processes, mp_context=ctx, initializer=_worker_start, initargs=(os.getpid(),)) as pool:
        pending: dict = {}

        def finish(futures) -> None:
            for fut in futures:
                i, nbytes = pending.pop(fut)
                done[i] = fut.result()  # a worker's error is raised here
                bar.update(nbytes)

        try:
            for i, texts, nbytes in pieces:
                n = i + 1
                if i in done:
                    continue
                while len(pending) >= 2 * processes:
                    finish(wait(pending, return_when=FIRST_COMPLETED)[0])
                pending[pool.submit(job.run, i, texts, nbytes)] = (i, nbytes)
            while pending:
                finish(wait(pending, return_when=FIRST_COMPLETED)[0])
        except BaseException:
            pool.shutdown(wait=False, cancel_futures=True)
            raise
    return n


def _is_daemon() -> bool:
    """A daemonic process (a multiprocessing pool's worker) may not start processes of its own."""
    import multiprocessing as mp

    return mp.current_process().daemon


def _worker_start(parent: int) -> None:
    """A worker process ends when the process that started it is gone (killed): it would otherwise wait for the
    next piece forever, holding its Kiwi (~0.5 GB)."""
    def watch():
        while os.getppid() == parent:
            time.sleep(1)
        os._exit(1)

    threading.Thread(target=watch, daemon=True, name="koelectra-presplit-watch").start()


def _join(parts: Path, n: int, target: Path, max_lines: int) -> None:
    """The pieces, in order, as the cache file (the first ``max_lines`` lines when set), written beside it and
    renamed."""
    with atomic_path(target) as tmp, open(tmp, "wb") as out:
        left = max_lines or -1
        for i in range(n):
            with open(parts / f"{i:06d}.txt", "rb") as f:
                if left < 0:
                    shutil.copyfileobj(f, out, 1 << 20)
                    continue
                for line in f:
                    if left == 0:
                        break
                    out.write(line)
                    left -= 1


def encode_lines(backend, lines: Iterable[str], chunk: int, rewrite=None) -> Iterator[list[int]]:
    """Ids of each line (pre-split text, or plain text for a tokenizer without pre-split), encoded ``chunk``
    lines at a time; ``rewrite``: the tokenizer's fallback for pre-split lines (``KoTokenizer.presplit_line``)."""
    buf: list[str] = []
    for line in lines:
        buf.append(rewrite(line) if rewrite is not None else line)
        if len(buf) >= chunk:
            yield from (e.ids for e in backend.encode_batch(buf, add_special_tokens=False))
            buf = []
    if buf:
        yield from (e.ids for e in backend.encode_batch(buf, add_special_tokens=False))


def cached_ids(backend, presplit_path: Path, chunk: int, rewrite=None) -> Iterator[list[int]]:
    """Ids of a pre-split cache file, themselves cached beside it (keyed by this tokenizer's exact model and
    whether it rewrites lines with the fallback; the pre-split text itself is the same either way): raw
    int32 ids + int64 text offsets (no pickle), each written beside its final name and renamed once complete, so
    a consumer that stops early (or dies) leaves no truncated id cache."""
    import numpy as np

    # (a tokenizer without the fallback keeps the key it always had, so its existing id caches stay valid)
    key = hashlib.sha256((presplit_path.name + backend.to_str() + ("+fallback" if rewrite else "")).encode()
                         ).hexdigest()[:20]
    root = presplit_path.parent.parent / "ids"
    ids_path, idx_path = root / f"{presplit_path.stem}-{key}.ids", root / f"{presplit_path.stem}-{key}.idx"
    if ids_path.exists() and idx_path.exists():
        ids = np.memmap(ids_path, dtype=np.int32, mode="r") if ids_path.stat().st_size else np.zeros(0, np.int32)
        idx = np.fromfile(idx_path, dtype=np.int64)
        for a, b in zip(idx[:-1].tolist(), idx[1:].tolist()):
            yield ids[a:b].tolist()
        return
    with atomic_path(ids_path) as tmp_ids, atomic_path(idx_path) as tmp_idx:
        with open(tmp_ids, "wb") as fi, open(tmp_idx, "wb") as fx:
            total, offsets = 0, [0]
            with open(presplit_path, encoding="utf-8") as lines:
                for ids in encode_lines(backend, (line.rstrip("\n") for line in lines), chunk, rewrite):
                    np.asarray(ids, dtype=np.int32).tofile(fi)
                    total += len(ids)
                    offsets.append(total)
                    if len(offsets) >= 65536:  # flush the offsets now and then: flat memory on any corpus
                        np.asarray(offsets[:-1], dtype=np.int64).tofile(fx)
                        offsets = offsets[-1:]
                    yield ids
            np.asarray(offsets, dtype=np.int64).tofile(fx)
