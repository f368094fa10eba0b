"""Texts -> token ids, once per run, and the token cache that lets a second fine-tune of the same data skip
Kiwi: a `datasets` Arrow dataset per (tokenizer, max_length, texts), memory-mapped on the way back in."""
from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np

from ..io.fileio import staged_dir
from ..runtime import log, warn

TOKEN_CACHE_FORMAT = 2  # bump when what encode_texts stores changes (2: special strings in a text are ids)


def encode_texts(tok, texts: list[str], max_length: int, progress: bool = False, desc: str = "tokenizing",
                 cache_dir: str | Path | None = None) -> tuple[list[list[int]], np.ndarray]:
    """Token ids per text (with [CLS]/[SEP], truncated, unpadded) and a truncated flag per text.

    ``cache_dir``: look the result up in, or store it to, a `datasets` Arrow dataset under
    ``cache_dir/finetune-ids/<key>``; the key hashes the tokenizer's saved files (vocabulary, normalization,
    pre-split settings, Kiwi versions), ``max_length`` and every text, so any change makes a new entry. Arrow
    files hold plain columns (nothing is unpickled) and are written beside the entry, renamed when complete:
    a killed run leaves no half-written entry."""
    if cache_dir is None:
        return _encode_uncached(tok, texts, max_length, progress, desc)
    path = Path(cache_dir) / "finetune-ids" / _cache_key(tok, texts, max_length)
    cached = _read_cache(path, desc)
    if cached is not None:
        return cached
    ids, truncated = _encode_uncached(tok, texts, max_length, progress, desc)
    _write_cache(path, ids, truncated)
    return ids, truncated


def _cache_key(tok, texts: list[str], max_length: int) -> str:
    from ..tokenizer import tokenizer_fingerprint

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{TOKEN_CACHE_FORMAT}|{tokenizer_fingerprint(tok)}|{max_length}|{len(texts)}".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def _read_cache(path: Path, desc: str) -> tuple[list[list[int]], np.ndarray] | None:
    if not (path / "state.json").exists():
        return None
    from datasets import load_from_disk

    try:
        table = load_from_disk(str(path)).data  # memory-mapped Arrow
        ids = table.column("input_ids").to_pylist()
        truncated = np.asarray(table.column("truncated").to_numpy(zero_copy_only=False), dtype=bool)
    except (OSError, ValueError, KeyError) as e:  # a damaged entry is recomputed, never trusted
        warn(f"ignoring the damaged token cache {path} ({str(e).splitlines()[0]})")
        return None
    log(f"{desc}: {len(ids):,} texts' tokens read from the cache {path}")
    return ids, truncated


def _write_cache(path: Path, ids: list[list[int]], truncated: np.ndarray) -> None:
    import datasets
    from datasets import Dataset

    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a sub-second save needs no bar of its own
    try:
        with staged_dir(path) as staging:
            Dataset.from_dict({"input_ids": ids, "truncated": truncated.tolist()}).save_to_disk(str(staging))
    except OSError as e:  # a full disk or a read-only cache must not stop the fine-tune
        warn(f"warning: could not write the token cache {path}: {e}")
    finally:
        if not quiet:
            datasets.enable_progress_bars()


def _encode_uncached(tok, texts: list[str], max_length: int, progress: bool, desc: str):
    """Chunked only so the progress bar moves (Kiwi's morpheme split is the slow part, where it runs)."""
    from tqdm.auto import tqdm

    ids: list[list[int]] = []
    truncated: list[bool] = []
    chunk = 4096
    for start in tqdm(range(0, len(texts), chunk), desc=desc, disable=not progress or len(texts) <= chunk,
                      unit_scale=chunk, unit="texts", leave=False):
        enc = tok.encode_batch(texts[start:start + chunk], max_length=max_length, padding=False,
                               truncation=True)
        ids.extend(list(x) for x in enc["input_ids"])
        truncated.extend(bool(t) for t in enc["truncated"])
    return ids, np.array(truncated, dtype=bool)
