"""Corpus passes that run Kiwi once: the pre-split text of a corpus file, and its token ids, cached on disk.

``presplit_file`` writes the pre-split text (one line per text, pieces joined by spaces) under a key of (file
content, normalization, Kiwi versions); the second pass over the same corpus (tokenizer training, then
pretraining) reads it and does no Kiwi work. ``iter_corpus_ids`` caches the ids of that text for one exact
tokenizer model beside it, so a third pass does neither Kiwi nor WordPiece work, only a memory-mapped read.
"""
from __future__ import annotations

import hashlib
import json
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable, Iterator

from .. import runtime
from ..config import to_dict
from ..corpus import iter_texts
from ..errors import InputError
from ..fileio import atomic_path, cache_dir as resolve_cache_dir, check_input_file
from ..normalize import NormalizeConfig, Normalizer
from . import kiwi
from .config import FORMAT

if TYPE_CHECKING:
    from .core import KoTokenizer

# Part of the pre-split cache key: raise it when ``corpus.iter_texts`` reads a file differently, so a cache made
# by the old reader is not reused (2: tables through ``tables.read_records``, malformed records skipped; 3: a short
# file of mostly undecodable lines, a binary one, refused).
READER = 3


def file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def presplit_file(path: str | Path, *, text_column: str | None, normalize: NormalizeConfig, presplit: str,
                  num_workers: int | None = None, cache_dir: str | Path | None = None, progress: bool = False,
                  max_lines: int = 0) -> Path:
    """The corpus file as pre-split text (one line per non-empty text, pieces joined by spaces), from the cache
    when this file and these settings were seen before. Written atomically, so a killed pass leaves no cache."""
    from tqdm.auto import tqdm

    path = Path(path)
    key_src = json.dumps({"file": file_digest(path), "column": text_column, "normalize": to_dict(normalize),
                          "presplit": presplit, "kiwi": kiwi.kiwi_versions() if presplit == "kiwi" else None,
                          "max_lines": max_lines, "format": FORMAT, "reader": READER}, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    target = resolve_cache_dir(cache_dir) / "presplit" / f"{path.stem[:40]}-{key}.txt"
    if target.exists():
        return target
    norm = Normalizer(normalize)
    stats = {"texts": 0, "empty": 0}
    bar = tqdm(total=path.stat().st_size, unit="B", unit_scale=True, desc=f"pre-splitting {path.name}",
               disable=not progress, leave=False)

    def texts():  # the normalized non-empty texts, the first max_lines of them
        done = 0
        for raw in iter_texts(path, text_column):
            bar.update(len(raw.encode("utf-8", "replace")) + 1)
            t = norm(raw)
            if not t:
                stats["empty"] += 1
                continue
            yield t
            done += 1
            if max_lines and done >= max_lines:
                return

    t0 = time.perf_counter()
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        if presplit == "kiwi":
            for text, spans in kiwi.presplit_pairs(texts(), num_workers):
                f.write(" ".join(kiwi.mark_pieces(text, spans)))
                f.write("\n")
                stats["texts"] += 1
        else:
            for t in texts():
                f.write(t)
                f.write("\n")
                stats["texts"] += 1
    bar.close()
    if stats["texts"] == 0:
        target.unlink(missing_ok=True)
        raise InputError(f"{path}: no text in it ({stats['empty']} empty lines)")
    if progress:
        runtime.log(f"pre-split {path.name}: {stats['texts']:,} texts ({stats['empty']:,} empty skipped) in "
                    f"{time.perf_counter() - t0:.1f}s -> {target}")
    return target


def iter_corpus_ids(tok: KoTokenizer, paths, text_column: str | None = None, num_workers: int | None = None,
                    cache_dir: str | None = None, progress: bool = False, chunk: int = 4096) -> Iterator[list[int]]:
    """Token ids (no special tokens) of every non-empty text of the corpus files, in order, streaming.
    Kiwi runs once per (file, settings): the pre-split text is cached (see ``presplit_file``), and so are the
    ids for this tokenizer (``cached_ids``): a second pass reads them memory-mapped. A foreign Hugging Face
    tokenizer encodes the texts as they are (it has its own normalization and no pre-split)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    for p in [check_input_file(x) for x in paths]:
        if tok.hf is not None:
            yield from encode_lines(tok.backend, iter_texts(p, text_column), chunk)
            continue
        cached = presplit_file(p, text_column=text_column, normalize=tok.normalize_cfg, presplit=tok.presplit,
                               num_workers=num_workers or tok.num_workers, cache_dir=cache_dir, progress=progress)
        yield from cached_ids(tok.backend, cached, chunk, tok.presplit_line if tok.fallback else None)


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
