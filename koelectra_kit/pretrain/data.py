"""Pretraining data: the corpus files, the tokenizer (given, or trained on the corpus), the corpus packed
into full-length sequences ``[CLS] t1 [SEP] t2 [SEP] ...`` in a memory-mapped Arrow cache keyed by (corpus,
tokenizer, seq_len), a deterministic row order from (seed, epoch), and the batch source that cuts each global
batch into this rank's masked micro-batches.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Iterator

import numpy as np

from ..errors import InputError
from ..io.fileio import cache_dir, file_sha256, hash_file, write_json_atomic
from ..io.hfdata import DatasetSource, check_input
from ..runtime import log, warn, warnings_said
from .config import PretrainConfig


def check_corpus(paths: list[str]) -> list[Path | DatasetSource]:
    """Every corpus file exists, is a file and is not empty, every dataset (``hf:``, a ``save_to_disk`` or Parquet
    folder) is one (one-line ``InputError`` otherwise). ``hfdata.corpus_paths`` turns a dataset into a file later."""
    return [check_input(p) for p in paths]


def check_tokenizer_dir(path: str) -> None:
    if not Path(path).is_dir():
        raise InputError(f"tokenizer dir not found: {path} (train one with `koelectra-kit tokenizer`)")


TOKENIZER_REQUEST = "tokenizer-request.json"  # what out/tokenizer was trained for (prepare_tokenizer)


def prepare_tokenizer(cfg: PretrainConfig, out: Path, dist_ctx, corpus: list[Path] | None = None,
                      shown_as: Path | None = None, resuming: bool = False):
    """The given tokenizer, or one trained on the corpus (``corpus``: its files, else ``cfg.corpus``) into
    ``out/tokenizer``; with ``init=``, the checkpoint's own (``continued.init_tokenizer``). ``shown_as``: the folder
    the log names (a staging ``out`` is renamed later). A tokenizer already in ``out/tokenizer`` is reused by a
    resume (its checkpoint checks the fingerprint) and by a fresh start that asks for the same one (the same corpus
    files and settings, ``out/tokenizer-request.json``); one trained for other settings is trained again: a rerun
    with another corpus or vocab_size kept the first run's tokenizer, and said nothing."""
    from ..tokenizer import KoTokenizer, TokenizerConfig, train_tokenizer

    if cfg.init:
        from .continued import init_tokenizer

        return init_tokenizer(cfg)
    if cfg.tokenizer:
        check_tokenizer_dir(cfg.tokenizer)
        return KoTokenizer.from_pretrained(cfg.tokenizer)
    tok_dir, record = out / "tokenizer", out / TOKENIZER_REQUEST
    files = [Path(p) for p in corpus or cfg.corpus]
    request = {"corpus": [[str(p.resolve()), p.stat().st_size, p.stat().st_mtime_ns] for p in files],
               "vocab_size": cfg.vocab_size, "tokenizer_model": cfg.tokenizer_model, "presplit": cfg.presplit,
               "text_column": cfg.text_column}
    if dist_ctx.is_main and (tok_dir / "tokenizer.json").exists() and not resuming and record.exists():
        try:
            made_for = json.loads(record.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            made_for = None
        if made_for != request:
            log(f"{shown_as or tok_dir} was trained for another corpus or other tokenizer settings: training it again")
            shutil.rmtree(tok_dir)
    # every rank decides after rank 0 removed a stale folder, and before it writes a new one: a rank that looked
    # once rank 0 had written tokenizer.json would skip the barrier below that the others wait at
    dist_ctx.barrier()
    need = not (tok_dir / "tokenizer.json").exists()
    dist_ctx.barrier()
    if need:
        if dist_ctx.is_main:
            kind = "character" if cfg.tokenizer_model == "characters" else f"{cfg.vocab_size}-token"
            log(f"training a {kind} tokenizer on the corpus into {shown_as or tok_dir} (no tokenizer= given)")
            kwargs = {"text_column": cfg.text_column} if cfg.text_column else {}
            record.unlink(missing_ok=True)
            train_tokenizer(TokenizerConfig(input=[str(p) for p in files], out=str(tok_dir),
                                            vocab_size=cfg.vocab_size, model=cfg.tokenizer_model,
                                            presplit=cfg.presplit,
                                            progress=cfg.progress, **kwargs), shown_as=shown_as)
            write_json_atomic(record, request)
        dist_ctx.barrier()
    return KoTokenizer.from_pretrained(tok_dir)


def corpus_fingerprint(paths: list[Path], text_column: str | None) -> str:
    """Content hash (not path/mtime): the same text under another name reuses the cache; an edited file
    does not. Streams the files (blake2b, ~1 GB/s)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"text_column={text_column}\0".encode())
    for p in paths:
        h.update(p.suffix.lower().encode() + b"\0")
        hash_file(p, h)
        h.update(b"\0\0")
    return h.hexdigest()


_AGAIN = re.compile(r" \(as read when cached in [^()]*\)$")  # the pre-split cache's own "said again" note


def _said_again(cache: Path) -> Path:
    """The packed cache, after saying again what reading its corpus warned about when it was built."""
    try:
        lines = json.loads((cache / "meta.json").read_text(encoding="utf-8")).get("warnings", [])
    except (OSError, ValueError, AttributeError):
        lines = []  # PackedRows reads meta.json next and says what is wrong with it
    for line in lines:
        warn(f"{line} (as read when the packed rows were cached in {cache})")
    return cache


def pack_sequences(texts: Iterator[list[int]], seq_len: int, cls_id: int, sep_id: int,
                   stats: dict) -> Iterator[list[int]]:
    """``[CLS] t1 [SEP] t2 [SEP] ...`` cut into rows of exactly ``seq_len`` ids; a text longer than the room
    left continues in the next row (after that row's [CLS]). No compute goes to padding: only the very last
    row may be short (the caller pads it; ``PackedRows`` completes it for training). Texts are the tokenizer's id
    lists without special tokens."""
    row = [cls_id]
    for ids in texts:
        if not ids:
            continue
        stats["texts"] += 1
        row.extend(ids)
        row.append(sep_id)
        while len(row) >= seq_len:
            yield row[:seq_len]
            row = [cls_id] + row[seq_len:]
    if len(row) > 1:
        yield row


PACK_FORMAT = 2  # bump when packing changes, so old caches are not reused (2: special strings in a line are ids)


def build_packed_cache(cfg: PretrainConfig, tok, tok_fp: str, corpus: list[Path], cache_root: Path,
                       say_again: bool = True) -> Path:
    """Tokenize the corpus once (all cores, the tokenizer's own cached pre-split) and write the packed rows to
    ``cache_root/packed/<key>/rows.arrow`` (an Arrow IPC stream of fixed-size lists, written in blocks: RAM
    stays flat however big the corpus). The key is (corpus content, tokenizer, seq_len); a later run with the
    same three reuses the file, and says again what reading the corpus warned about (``say_again``: not the ranks
    that only map rank 0's cache). Returns the cache dir (with meta.json)."""
    import pyarrow as pa

    key_src = f"{corpus_fingerprint(corpus, cfg.text_column)}|{tok_fp}|{cfg.seq_len}|{PACK_FORMAT}"
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    cache = cache_root / "packed" / key
    if (cache / "meta.json").exists():
        if not say_again or cache_intact(cache):  # (the ranks that map rank 0's cache: it checked it just now)
            return _said_again(cache) if say_again else cache
        warn(f"warning: the packed rows cached in {cache} changed since they were written (a prepared folder's "
             "rows.arrow written over in place shares the cache's file, or a copy cut short): packing the corpus "
             "again")
        # the rebuilt file is a new one: a folder that shared the old keeps it (another run that found it changed
        # too may have removed it first)
        shutil.rmtree(cache, ignore_errors=True)
    L = cfg.seq_len
    dtype = np.uint16 if tok.vocab_size <= 65535 else np.int32
    block_rows = max(1, (4 << 20) // (L * np.dtype(dtype).itemsize))  # ~4 MB per Arrow record batch
    schema = pa.schema([pa.field("input_ids", pa.list_(pa.from_numpy_dtype(dtype), L))])
    stats = {"texts": 0}
    n_rows = n_tokens = last_len = n_unknown = 0
    unk = tok.unk_token_id
    t0 = time.time()
    tmp = cache.parent / f".tmp-{key}-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        ids_iter = tok.iter_corpus_ids([str(p) for p in corpus], text_column=cfg.text_column,
                                       num_workers=cfg.num_workers, cache_dir=str(cache_root),
                                       progress=cfg.progress)
        buf = np.full((block_rows, L), tok.pad_token_id, dtype=dtype)
        filled = 0
        with pa.OSFile(str(tmp / "rows.arrow"), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer, \
                warnings_said() as said:
            def flush(n):
                flat = pa.array(buf[:n].reshape(-1), type=pa.from_numpy_dtype(dtype))
                writer.write_batch(pa.record_batch([pa.FixedSizeListArray.from_arrays(flat, L)], schema=schema))
            try:
                for row in pack_sequences(ids_iter, L, tok.cls_token_id, tok.sep_token_id, stats):
                    buf[filled, :len(row)] = row
                    buf[filled, len(row):] = tok.pad_token_id
                    filled += 1
                    n_rows += 1
                    n_tokens += len(row)
                    n_unknown += row.count(unk) if unk is not None else 0
                    last_len = len(row)
                    if filled == block_rows:
                        flush(filled)
                        filled = 0
            except UnicodeDecodeError as e:
                raise InputError(f"corpus {', '.join(map(str, corpus))} has bytes that are not valid text "
                                 f"({e.reason} at byte {e.start} of a chunk); convert it to UTF-8") from None
            if filled:
                flush(filled)
        if n_rows == 0:
            raise InputError(f"corpus {', '.join(map(str, corpus))} has no text after tokenization "
                             "(empty lines only, or the wrong text_column?)")
        meta = {"rows": n_rows, "seq_len": L, "tokens": n_tokens, "texts": stats["texts"], "last_row_len": last_len,
                "unk_tokens": n_unknown,  # (said by say_unknown, on every run this cache serves)
                "block_rows": block_rows, "dtype": np.dtype(dtype).name, "vocab_size": tok.vocab_size,
                "tokenizer_fingerprint": tok_fp, "corpus": [str(p) for p in corpus], "format": PACK_FORMAT,
                "build_seconds": round(time.time() - t0, 1),
                # what reading the corpus warned about (skipped records): said again on every run this cache serves
                "warnings": [_AGAIN.sub("", line) for line in said]}
        # the file as written: a later run (or a prepared folder, whose rows.arrow is a hard link to it) checks it
        meta["rows_digest"] = file_sha256(tmp / "rows.arrow")
        write_json_atomic(tmp / "meta.json", meta)
        try:
            os.replace(tmp, cache)
        except OSError:  # another process published the same cache meanwhile: use theirs
            if not (cache / "meta.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cache


def cache_intact(cache: Path) -> bool:
    """Whether the cached rows.arrow is the file its meta.json describes (``rows_digest``, ~0.1 s for 100 MB): the
    cache trusted its files, so a prepared folder's rows.arrow refreshed with ``cp`` from another corpus (a hard
    link to the cache's file) made later runs train on that corpus while naming their own, exit 0. A cache written
    before the digest was kept is taken as it is."""
    try:
        meta = json.loads((cache / "meta.json").read_text(encoding="utf-8"))
        digest = meta.get("rows_digest")
        return digest is None or (cache / "rows.arrow").is_file() and file_sha256(cache / "rows.arrow") == digest
    except (OSError, ValueError, AttributeError):
        return False


class PackedRows:
    """The packed cache, memory-mapped: rows are numpy views into the file's pages (the OS pages them in and
    out), so resident memory does not grow with the corpus."""

    def __init__(self, cache: Path):
        import pyarrow as pa

        self.meta = json.loads((cache / "meta.json").read_text())
        self._mmap = pa.memory_map(str(cache / "rows.arrow"), "r")
        table = pa.ipc.open_stream(self._mmap).read_all()  # zero-copy: buffers point into the mapping
        # the rows' shape as the file itself holds it, not as meta.json says (a prepared folder checks the two agree)
        self.seq_len, self.n = table.schema.field("input_ids").type.list_size, table.num_rows
        # [block_rows, L] numpy views into the mapped file, one per Arrow record batch (not copies in RAM)
        self.blocks = [c.values.to_numpy(zero_copy_only=True).reshape(-1, self.seq_len)
                       for c in table.column("input_ids").chunks]
        self._block_rows = self.meta["block_rows"]
        self.last_row = self.completed_last_row()

    def stored(self, rows: np.ndarray) -> np.ndarray:
        """[len(rows), L] int64 ids of the given row numbers as the file has them (the last row padded)."""
        b = self._block_rows
        return np.stack([self.blocks[r // b][r % b] for r in rows]).astype(np.int64)

    def take(self, rows: np.ndarray) -> np.ndarray:
        """[len(rows), L] int64 ids of the given row numbers, every row full (``completed_last_row``)."""
        ids = self.stored(rows)
        ids[rows == self.n - 1] = self.last_row
        return ids

    def completed_last_row(self) -> np.ndarray:
        """The last row with its padding replaced by the stream's start (row 0 after its [CLS], repeated when the
        corpus is one short row), as packing would have continued had the corpus wrapped around. Every training
        row is then full and no batch needs an attention mask: a batch with a pad in it once per epoch made a
        compiled step recompile (a mask where there was None): a stall of about half a minute on a GPU."""
        row = self.stored(np.array([self.n - 1]))[0]
        m = self.meta["last_row_len"]
        if m < self.seq_len:
            start = self.stored(np.array([0]))[0][1:self.seq_len if self.n > 1 else m]
            row[m:] = np.resize(start, self.seq_len - m)
        return row

    def real_tokens(self, rows: np.ndarray) -> int:
        """Tokens trained on in these rows: every row is full (``completed_last_row``)."""
        return len(rows) * self.seq_len


def data_fingerprint(data: PackedRows) -> str:
    """What a checkpoint's data position means: the packed rows' counts and their first and last rows. A resume
    on another corpus (or prepared folder) applied the saved position to other rows without a word."""
    h = hashlib.sha256(json.dumps([data.n, data.seq_len, data.meta.get("tokens"), data.meta.get("texts")]).encode())
    for row in (0, data.n - 1):
        h.update(data.stored(np.array([row])).tobytes())
    return h.hexdigest()[:24]


class RowOrder:
    """Row number at each position of the training stream: epoch e = position // N visits the rows in a
    permutation drawn from (seed, e). A batch may straddle two epochs. The data position saved in checkpoints
    is one integer (rows consumed so far, all ranks together)."""

    def __init__(self, n_rows: int, seed: int, shuffle: bool):
        self.n, self.seed, self.shuffle = n_rows, seed, shuffle
        self._perm: dict[int, np.ndarray] = {}

    def epoch(self, e: int) -> np.ndarray:
        """Epoch ``e``'s row order (at most two epochs kept in RAM)."""
        if e not in self._perm:
            self._perm = {k: v for k, v in self._perm.items() if k >= e - 1}  # keep at most two epochs in RAM
            perm = np.random.default_rng([self.seed, e]).permutation(self.n) if self.shuffle else np.arange(self.n)
            self._perm[e] = perm.astype(np.uint32 if self.n < 2**32 else np.int64)
        return self._perm[e]

    def segments(self, start: int, count: int) -> Iterator[tuple[int, int, int]]:
        """Positions start .. start + count of the stream as (epoch, offset, length) runs within one epoch."""
        pos, end = start, start + count
        while pos < end:
            e, off = divmod(pos, self.n)
            take = min(self.n - off, end - pos)
            yield e, off, take
            pos += take

    def rows(self, start: int, count: int) -> np.ndarray:
        return np.concatenate([self.epoch(e)[off:off + take] for e, off, take in self.segments(start, count)]
                              ).astype(np.int64)


def open_packed_data(cfg: PretrainConfig, tok, tok_fp: str, corpus: list[Path], dist_ctx) -> PackedRows:
    """The run's packed rows: rank 0 builds the cache (or finds it), the other ranks wait and map it. A corpus
    too small for two full sequences is an ``InputError``."""
    cache_root = cache_dir(cfg.cache_dir)
    if dist_ctx.is_main:
        cache = build_packed_cache(cfg, tok, tok_fp, corpus, cache_root)
    dist_ctx.barrier()
    if not dist_ctx.is_main:
        cache = build_packed_cache(cfg, tok, tok_fp, corpus, cache_root, say_again=False)  # finds rank 0's cache
    data = checked_rows(PackedRows(cache), cache, dist_ctx.is_main)
    if dist_ctx.is_main:
        say_unknown(data.meta, tok)
    return data


def say_unknown(meta: dict, tok) -> None:
    """The [UNK] check (``tokenizer.unknown``) on the packed corpus, from the count its meta.json keeps (made as
    the rows were packed; a cache or prepared folder from before the count says nothing)."""
    from ..tokenizer.unknown import unk_report

    if isinstance(meta.get("unk_tokens"), int):
        # text tokens: the packed ones less each row's [CLS] and each text's [SEP]
        line = unk_report(tok, meta["unk_tokens"], meta["tokens"] - meta["rows"] - meta["texts"], "the corpus")
        if line:
            warn(line)


def checked_rows(data: PackedRows, where: Path, main: bool, fix: str = "add text (or lower seq_len)") -> PackedRows:
    """``data`` when it holds at least two full sequences of text (``InputError`` otherwise, ending with ``fix``),
    logged once."""
    real = data.meta["tokens"] - data.n  # minus one [CLS] per row: the text tokens (+[SEP]s)
    if real < 2 * data.seq_len:
        raise InputError(f"corpus too small: {data.meta['texts']} texts give {data.meta['tokens']} tokens, less "
                         f"than two sequences of {data.seq_len}; {fix}")
    if main:
        log(f"data: {data.meta['texts']:,} texts -> {data.n:,} sequences of {data.seq_len} tokens "
            f"({data.meta['tokens']:,} tokens) in {where}")
    return data


class DeviceRows:
    """The packed rows and each epoch's row order as tensors on the training device (``data_on_device``): a
    batch is then an ``index_select`` queued behind the previous step, with no host-to-device copy per step. A
    copy from pageable host memory makes CUDA wait for every queued kernel first, so the host could never run
    ahead of the GPU. ``rows`` gives exactly ``RowOrder.rows``'s numbers (one copy per epoch, not per step)."""

    def __init__(self, data: PackedRows, order: RowOrder, device):
        import torch

        # int32 on the device: half of int64, and every op the batch meets takes it after one .long(). Copied a
        # block (~4 MB) at a time: host memory never holds more than one block's copy.
        self.ids = torch.empty((data.n, data.seq_len), dtype=torch.int32, device=device)
        start = 0
        for block in data.blocks:
            block = block[:data.n - start]
            self.ids[start:start + len(block)] = torch.from_numpy(block.astype(np.int32))
            start += len(block)
        self.ids[data.n - 1] = torch.from_numpy(data.last_row.astype(np.int32))
        self.order, self.device = order, device
        self._perm: dict = {}

    def _epoch(self, e: int):
        import torch

        if e not in self._perm:
            self._perm = {k: v for k, v in self._perm.items() if k >= e - 1}
            self._perm[e] = torch.from_numpy(self.order.epoch(e).astype(np.int64)).to(self.device)
        return self._perm[e]

    def rows(self, start: int, count: int):
        """[count] int64 row numbers on the device: positions start .. start + count of the stream."""
        import torch

        parts = [self._epoch(e)[off:off + take] for e, off, take in self.order.segments(start, count)]
        return parts[0] if len(parts) == 1 else torch.cat(parts)

    def take(self, rows) -> "torch.Tensor":  # noqa: F821
        """[len(rows), L] int64 ids of the given device row numbers."""
        return self.ids.index_select(0, rows).long()


def wants_device_rows(setting, data: PackedRows, device) -> bool:
    """``data_on_device``: true/false as given; auto: on a GPU whose memory holds the packed ids (as int32) in a
    tenth of it (a 20M-token corpus is 80 MB). On a CPU the memory-mapped file is already the fastest source."""
    if setting != "auto":
        return bool(setting)
    if device.type != "cuda":
        return False
    import torch

    return data.n * data.seq_len * 4 <= torch.cuda.get_device_properties(device).total_memory // 10


class BatchSource:
    """This rank's masked micro-batches of the global batch at a stream position. The global batch
    (``batch_size`` rows from ``RowOrder``) is split into accum x ranks slices; rank r takes slice
    a * ranks + r for accumulation step a. Masking draws from ``mask_rng`` (one stream per rank).

    The ids come from the memory-mapped file (through pinned memory on a GPU: the copy overlaps the previous
    step) or from ``DeviceRows``. Nothing here waits for the device: the host stays steps ahead of a GPU."""

    def __init__(self, cfg: PretrainConfig, data: PackedRows, tok, device, mask_rng, rank: int, world: int):
        import torch

        self.cfg, self.data, self.tok, self.device, self.mask_rng = cfg, data, tok, device, mask_rng
        self.rank, self.world = rank, world
        self.micro_bs = cfg.batch_size // (world * cfg.grad_accum)
        self.order = RowOrder(data.n, cfg.seed, cfg.shuffle)
        self.on_device = DeviceRows(data, self.order, device) if wants_device_rows(cfg.data_on_device, data,
                                                                                   device) else None
        self.pin = device.type == "cuda"
        self.special = torch.tensor(sorted(set(tok.all_special_ids)), dtype=torch.long, device=device)
        self.mask_probs = cfg.mask_probs()

    def ids(self, data_pos: int, rows) -> "torch.Tensor":  # noqa: F821
        """[len(rows), L] int64 ids on the device of the stream positions data_pos.. (``rows``: their numbers)."""
        import torch

        if self.on_device is not None:
            return self.on_device.take(self.on_device.rows(data_pos, len(rows)))
        ids = torch.from_numpy(self.data.take(rows))
        return (ids.pin_memory() if self.pin else ids).to(self.device, non_blocking=True)

    def micro_batches(self, data_pos: int) -> tuple[list, int]:
        """(this rank's ``electra.MaskedBatch`` per accumulation step, the global batch's real-token count)."""
        from ..electra.model import mask_batch

        cfg, data, tok, mb_size = self.cfg, self.data, self.tok, self.micro_bs
        rows_all = self.order.rows(data_pos, cfg.batch_size)
        out = []
        for a in range(cfg.grad_accum):
            s = (a * self.world + self.rank) * mb_size
            rows = rows_all[s:s + mb_size]
            ids = self.ids(data_pos + s, rows)
            # Every row is full (PackedRows.completed_last_row): no attention mask (SDPA runs faster, and a
            # compiled step sees one input signature for the whole run).
            out.append(mask_batch(ids, None, self.special, tok.mask_token_id, tok.vocab_size, cfg.mask_prob,
                                  *self.mask_probs, self.mask_rng, data.real_tokens(rows)))
        return out, data.real_tokens(rows_all)
