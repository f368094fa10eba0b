"""Pretrain an ELECTRA discriminator (replaced token detection, Clark et al. ICLR 2020) on a comment corpus,
or the same encoder BERT-style (``objective: mlm``) for comparison.

    koelectra-kit pretrain --config configs/pretrain/small.yaml corpus=comments.txt out=runs/small
    torchrun --nproc_per_node=2 -m koelectra_kit pretrain --config configs/pretrain/small.yaml ...

Reads top to bottom like a script:
  1. config (``PretrainConfig``; YAML + ``key=value`` overrides), every knob of the recipe
  2. data: tokenizer (given, or trained on the corpus), corpus -> ids -> packed full-length sequences
     ``[CLS] t1 [SEP] t2 [SEP] ...`` in a memory-mapped Arrow cache keyed by (corpus, tokenizer, seq_len),
     a deterministic row order from (seed, epoch); each DDP rank reads only its own rows
  3. model, masking, loss: ``electra.py`` (transformers' ELECTRA classes, shared embeddings, masked-only
     generator logits, sampling, joint loss) + the learning-rate and lambda schedules here
  4. checkpoints (atomic; everything needed to resume bit-exactly) and resume
  5. export: ``out/discriminator`` and ``out/generator`` as Hugging Face model dirs with the tokenizer
  6. plot of the learning curves (``out/curves.png``)
  7. ``pretrain(cfg)``: the explicit training loop, metrics to ``out/metrics.jsonl``
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import math
import os
import random
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator, Literal

import numpy as np

from .config import dump_yaml, to_dict
from .errors import ConfigError, InputError, KitError
from .tokenizer import tokenizer_fingerprint
from .utils import atomic_path, write_json_atomic, write_text_atomic

# ---------------------------------------------------------------------------------------------
# 1. Config
# ---------------------------------------------------------------------------------------------


@dataclass
class ModelConfig:
    """The discriminator: the encoder that gets fine-tuned. Defaults are ELECTRA-Small (paper, Table 6)."""

    hidden_size: int = 256
    num_layers: int = 12
    num_heads: int = 4
    intermediate_size: int = 1024  # feed-forward inner size
    # Width of the token/position tables, shared with the generator; each model projects E -> its hidden size.
    embedding_size: int = 128
    max_position_embeddings: int = 512  # >= seq_len; fine-tuning may feed longer texts than pretraining did
    hidden_dropout: float = 0.1  # 0 allowed ("Cramming": no dropout when the budget is short)
    attention_dropout: float = 0.1
    initializer_range: float = 0.02  # std of the normal init of every Linear and Embedding weight
    hidden_act: str = "gelu"
    # normal: transformers' init (the paper's). positional: the same plus a positional-attention prior (each
    # head starts as a previous/next-token reader; electra.positional_prior_): leaves the unigram plateau at
    # once on small budgets. Initialization only: the exported model is a plain ELECTRA.
    init: Literal["normal", "positional"] = "normal"
    init_scale: float = 2.0  # query/key gain on the position dims (sharpness of the neighbour attention)
    init_shifts: list[int] = field(default_factory=lambda: [1, -1, 2, -2])  # offsets the heads attend to
    init_pos_dims: int = 32  # embedding dims that carry the sinusoidal positions (< hidden and embedding size)


@dataclass
class GeneratorConfig:
    """The generator (objective electra only). ``size`` scales the discriminator's hidden size, FFN size and
    heads, as the official ``generator_hidden_size`` does (paper: 1/4 for small, 1/3 for base); explicit
    fields override it. Depth defaults to the discriminator's."""

    size: float = 0.25
    hidden_size: int | None = None
    intermediate_size: int | None = None
    num_heads: int | None = None
    num_layers: int | None = None


@dataclass
class PretrainConfig:
    """One pretraining run. Defaults: ELECTRA-Small's recipe (paper, Table 6) except the budget."""

    # --- inputs and outputs
    corpus: list[str] = field(default_factory=list)  # .txt (one text a line) or .csv/.tsv (text_column)
    text_column: str | None = None  # csv/tsv column with the text (None: the tokenizer's guess)
    out: str = ""  # run directory: metrics.jsonl, checkpoints/, discriminator/, generator/, curves.png
    tokenizer: str | None = None  # a trained tokenizer dir; None: train one on the corpus into out/tokenizer
    vocab_size: int = 32000  # only when training the tokenizer here
    tokenizer_model: str = "wordpiece"  # only when training it here: wordpiece | characters (see TokenizerConfig)
    cache_dir: str | None = None  # packed-data cache (default $KOELECTRA_CACHE or ~/.cache/koelectra-kit)
    num_workers: int | None = None  # tokenization processes (None: all cores)

    # --- objective
    objective: Literal["electra", "mlm"] = "electra"  # mlm: the same encoder trained BERT-style, no generator
    seq_len: int = 128  # packed sequence length in tokens ([CLS] and [SEP]s included)
    mask_prob: float = 0.15  # fraction of each sequence's (non-special) tokens that are masked
    mask_token_prob: float | None = None  # masked -> [MASK]; None: 0.85 (electra, official code), 0.8 (mlm, BERT)
    random_token_prob: float | None = None  # masked -> random token; None: 0 (electra), 0.1 (mlm); rest unchanged
    model: ModelConfig = field(default_factory=ModelConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    disc_weight: float = 50.0  # lambda: loss = gen MLM + lambda * disc BCE (paper: 50)
    disc_weight_start: float | None = None  # lambda at step 0 when warming lambda up (None: no lambda warm-up)
    disc_weight_warmup_steps: int = 0  # steps to move lambda linearly from disc_weight_start to disc_weight
    temperature: float = 1.0  # generator sampling temperature (>1: more varied replacements)

    # --- optimisation
    batch_size: int = 128  # sequences per optimizer step, all ranks and accumulation micro-steps together
    grad_accum: int = 1  # micro-batches per optimizer step on each rank (micro = batch / (ranks x accum))
    lr: float = 5e-4  # peak learning rate
    # Shape after warm-up, over the budget (max_steps and/or max_minutes): linear decay (paper), cosine,
    # one_cycle (triangular: ramps up from min_lr_ratio x lr, back down to it at the end), constant.
    schedule: Literal["linear", "cosine", "one_cycle", "constant"] = "linear"
    warmup_steps: int = 10000  # linear warm-up in optimizer steps (paper: 10k); wins over warmup_fraction
    warmup_fraction: float = 0.0  # ... or as a fraction of the budget (used when warmup_steps is 0)
    min_lr_ratio: float = 0.0  # lr at the end of the budget, as a fraction of the peak
    weight_decay: float = 0.01  # AdamW; never on LayerNorm weights and biases
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1.0e-6
    max_grad_norm: float = 1.0  # gradient clipping (0: off)
    # Budget: stop at max_steps or after max_minutes of training (not counting data preparation), whichever
    # comes first; 0 = no limit of that kind. The schedule runs on the budget's elapsed fraction (max of the
    # step fraction and the time fraction), so a time budget needs no step estimate.
    max_steps: int = 1000000
    max_minutes: float = 0.0
    shuffle: bool = True  # shuffle packed sequences each epoch (deterministic from seed + epoch)
    seed: int = 42

    # --- engine
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 where fast, fp16+scaling on old GPUs
    compile: bool = False  # torch.compile the model (minutes of compiling; measure before relying on it)
    threads: int = 0  # torch CPU threads (0: torch's default = cores); 1 is faster when the CPU is shared
    fast_cpu_kernels: bool = True  # cheaper dropout masks / attention on CPU (same maths; see electra.py)

    # --- logging and checkpoints
    log_every: int = 100  # steps between metrics rows (metrics.jsonl) and log lines
    save_every: int = 1000  # steps between checkpoints (0: only at the end)
    save_every_minutes: float = 0.0  # ... or minutes between checkpoints (0: off)
    keep_checkpoints: int = 2  # newest checkpoints kept in out/checkpoints
    resume: bool | str = False  # true: continue from out's latest checkpoint; or a checkpoint dir
    overwrite: bool = False  # start over in an out dir that has a previous run's checkpoints
    progress: bool = True  # progress bar (stderr)
    plot: bool = True  # write out/curves.png at the end
    # "Learning?" check: after this many tokens, warn when the generator's masked-token accuracy is within
    # plateau_gen_margin of the unigram baseline (always predicting the most frequent target) or the
    # discriminator's AUC on replaced tokens is below plateau_auc (0 tokens: off).
    plateau_check_tokens: int = 5000000
    plateau_gen_margin: float = 0.02
    plateau_auc: float = 0.6
    ddp_timeout_minutes: float = 60.0  # how long ranks wait for each other (rank 0 builds the data cache)

    def validate(self) -> None:
        m = self.model
        if not self.corpus:
            raise ConfigError("corpus is empty: pass corpus=FILE (or a list: corpus=[a.txt,b.csv])")
        if not self.out:
            raise ConfigError("out is not set: pass out=DIR for the run's outputs")
        if self.tokenizer_model not in ("wordpiece", "characters"):
            raise ConfigError(f"tokenizer_model must be wordpiece or characters, got {self.tokenizer_model!r} (train "
                              "other tokenizers with `koelectra-kit tokenizer train` and pass tokenizer=DIR)")
        if not 0.0 < self.mask_prob < 1.0:
            raise ConfigError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.seq_len < 8:
            raise ConfigError(f"seq_len must be at least 8, got {self.seq_len}")
        if self.seq_len > m.max_position_embeddings:
            raise ConfigError(f"seq_len {self.seq_len} exceeds model.max_position_embeddings "
                              f"{m.max_position_embeddings}; raise the latter or shorten the former")
        if m.hidden_size % m.num_heads:
            raise ConfigError(f"model.hidden_size {m.hidden_size} is not a multiple of model.num_heads {m.num_heads}")
        if m.init == "positional":
            from .electra import generator_shape

            # The generator reads a subset of the position dims when it is narrower (positional_prior_).
            sizes = [m.hidden_size, m.embedding_size]
            if m.init_pos_dims < 2 or m.init_pos_dims % 2 or m.init_pos_dims >= min(sizes):
                raise ConfigError(f"model.init_pos_dims {m.init_pos_dims} must be even, >= 2 and below the "
                                  f"hidden and embedding sizes {sorted(set(sizes))}; lower it")
            if self.objective == "electra" and generator_shape(m, self.generator)["hidden_size"] < 4:
                raise ConfigError("the positional prior needs a generator at least 4 wide; raise generator.size")
            if not m.init_shifts:
                raise ConfigError("model.init_shifts is empty: give the offsets heads attend to, e.g. [1,-1]")
        for name, p in (("model.hidden_dropout", m.hidden_dropout), ("model.attention_dropout", m.attention_dropout)):
            if not 0.0 <= p < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {p}")
        if self.max_steps <= 0 and self.max_minutes <= 0:
            raise ConfigError("no budget: set max_steps and/or max_minutes")
        if self.batch_size < 1 or self.grad_accum < 1 or self.batch_size % self.grad_accum:
            raise ConfigError(f"batch_size {self.batch_size} must be a positive multiple of grad_accum {self.grad_accum}")
        if not 0.0 <= self.warmup_fraction < 1.0:
            raise ConfigError(f"warmup_fraction must be in [0, 1), got {self.warmup_fraction}")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be positive, got {self.temperature}")
        if self.log_every < 1:
            raise ConfigError("log_every must be at least 1")
        probs = self.mask_probs()
        if min(probs) < 0 or sum(probs) > 1.0 + 1e-9:
            raise ConfigError("mask_token_prob and random_token_prob must be >= 0 and sum to at most 1")

    def mask_probs(self) -> tuple[float, float]:
        electra = self.objective == "electra"
        mask = self.mask_token_prob if self.mask_token_prob is not None else (0.85 if electra else 0.8)
        rand = self.random_token_prob if self.random_token_prob is not None else (0.0 if electra else 0.1)
        return mask, rand


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


# ---------------------------------------------------------------------------------------------
# 2. Data: tokenizer, packed-sequence cache, row order
# ---------------------------------------------------------------------------------------------


def check_corpus(paths: list[str]) -> list[Path]:
    out = []
    for p in paths:
        path = Path(p)
        if not path.exists():
            raise InputError(f"corpus file not found: {path}")
        if path.is_dir():
            raise InputError(f"corpus {path} is a directory; pass the files (corpus=[a.txt,b.txt])")
        if path.stat().st_size == 0:
            raise InputError(f"corpus file {path} is empty")
        out.append(path)
    return out


def prepare_tokenizer(cfg: PretrainConfig, out: Path, dist_ctx):
    """The given tokenizer, or one trained on the corpus into ``out/tokenizer`` (reused by a rerun/resume)."""
    from .tokenizer import KoTokenizer, TokenizerConfig, train_tokenizer

    if cfg.tokenizer:
        if not Path(cfg.tokenizer).is_dir():
            raise InputError(f"tokenizer dir not found: {cfg.tokenizer} (train one with `koelectra-kit tokenizer`)")
        return KoTokenizer.from_pretrained(cfg.tokenizer)
    tok_dir = out / "tokenizer"
    if not (tok_dir / "tokenizer.json").exists():
        if dist_ctx.is_main:
            kind = "character" if cfg.tokenizer_model == "characters" else f"{cfg.vocab_size}-token"
            log(f"training a {kind} tokenizer on the corpus into {tok_dir} (no tokenizer= given)")
            kwargs = {"text_column": cfg.text_column} if cfg.text_column else {}
            train_tokenizer(TokenizerConfig(input=list(cfg.corpus), out=str(tok_dir), vocab_size=cfg.vocab_size,
                                            model=cfg.tokenizer_model, progress=cfg.progress, **kwargs))
        dist_ctx.barrier()
    return KoTokenizer.from_pretrained(tok_dir)


def corpus_fingerprint(paths: list[Path], text_column: str | None) -> str:
    """Content hash (not path/mtime): the same text under another name reuses the cache; an edited file
    does not. Streams the files (blake2b, ~1 GB/s)."""
    h = hashlib.blake2b(digest_size=16)
    h.update(f"text_column={text_column}\0".encode())
    for p in paths:
        h.update(p.suffix.lower().encode() + b"\0")
        with open(p, "rb") as f:
            while block := f.read(1 << 22):
                h.update(block)
        h.update(b"\0\0")
    return h.hexdigest()


def pack_sequences(texts: Iterator[list[int]], seq_len: int, cls_id: int, sep_id: int,
                   stats: dict) -> Iterator[list[int]]:
    """``[CLS] t1 [SEP] t2 [SEP] ...`` cut into rows of exactly ``seq_len`` ids; a text longer than the room
    left continues in the next row (after that row's [CLS]). No compute goes to padding: only the very last
    row may be short (the caller pads it). Texts are the tokenizer's id lists without special tokens."""
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


PACK_FORMAT = 1  # bump when packing changes, so old caches are not reused


def default_cache_dir() -> Path:
    return Path(os.environ.get("KOELECTRA_CACHE") or Path.home() / ".cache" / "koelectra-kit")


def build_packed_cache(cfg: PretrainConfig, tok, tok_fp: str, corpus: list[Path], cache_root: Path) -> Path:
    """Tokenize the corpus once (all cores, the tokenizer's own cached pre-split) and write the packed rows to
    ``cache_root/packed/<key>/rows.arrow`` (an Arrow IPC stream of fixed-size lists, written in blocks: RAM
    stays flat however big the corpus). The key is (corpus content, tokenizer, seq_len); a later run with the
    same three reuses the file. Returns the cache dir (with meta.json)."""
    import pyarrow as pa

    key_src = f"{corpus_fingerprint(corpus, cfg.text_column)}|{tok_fp}|{cfg.seq_len}|{PACK_FORMAT}"
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    cache = cache_root / "packed" / key
    if (cache / "meta.json").exists():
        return cache
    L = cfg.seq_len
    dtype = np.uint16 if tok.vocab_size <= 65535 else np.int32
    block_rows = max(1, (4 << 20) // (L * np.dtype(dtype).itemsize))  # ~4 MB per Arrow record batch
    schema = pa.schema([pa.field("input_ids", pa.list_(pa.from_numpy_dtype(dtype), L))])
    stats = {"texts": 0}
    n_rows = n_tokens = last_len = 0
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
        with pa.OSFile(str(tmp / "rows.arrow"), "wb") as sink, pa.ipc.new_stream(sink, schema) as writer:
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
                "block_rows": block_rows, "dtype": np.dtype(dtype).name, "vocab_size": tok.vocab_size,
                "tokenizer_fingerprint": tok_fp, "corpus": [str(p) for p in corpus], "format": PACK_FORMAT,
                "build_seconds": round(time.time() - t0, 1)}
        write_json_atomic(tmp / "meta.json", meta)
        try:
            os.replace(tmp, cache)
        except OSError:  # another process published the same cache meanwhile: use theirs
            if not (cache / "meta.json").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return cache


class PackedRows:
    """The packed cache, memory-mapped: rows are numpy views into the file's pages (the OS pages them in and
    out), so resident memory does not grow with the corpus."""

    def __init__(self, cache: Path):
        import pyarrow as pa

        self.meta = json.loads((cache / "meta.json").read_text())
        self.n = self.meta["rows"]
        self.seq_len = self.meta["seq_len"]
        self._mmap = pa.memory_map(str(cache / "rows.arrow"), "r")
        table = pa.ipc.open_stream(self._mmap).read_all()  # zero-copy: buffers point into the mapping
        self._blocks = [c.values.to_numpy(zero_copy_only=True).reshape(-1, self.seq_len)
                        for c in table.column("input_ids").chunks]
        self._block_rows = self.meta["block_rows"]

    def take(self, rows: np.ndarray) -> np.ndarray:
        """[len(rows), L] int64 ids of the given row numbers."""
        b = self._block_rows
        return np.stack([self._blocks[r // b][r % b] for r in rows]).astype(np.int64)

    def real_tokens(self, rows: np.ndarray) -> int:
        """Non-pad tokens in these rows, without reading them: only the last row is short."""
        short = int(np.count_nonzero(rows == self.n - 1))
        return len(rows) * self.seq_len - short * (self.seq_len - self.meta["last_row_len"])


class RowOrder:
    """Row number at each position of the training stream: epoch e = position // N visits the rows in a
    permutation drawn from (seed, e). A batch may straddle two epochs. The data position saved in checkpoints
    is one integer (rows consumed so far, all ranks together)."""

    def __init__(self, n_rows: int, seed: int, shuffle: bool):
        self.n, self.seed, self.shuffle = n_rows, seed, shuffle
        self._perm: dict[int, np.ndarray] = {}

    def _epoch(self, e: int) -> np.ndarray:
        if e not in self._perm:
            self._perm = {k: v for k, v in self._perm.items() if k >= e - 1}  # keep at most two epochs in RAM
            perm = np.random.default_rng([self.seed, e]).permutation(self.n) if self.shuffle else np.arange(self.n)
            self._perm[e] = perm.astype(np.uint32 if self.n < 2**32 else np.int64)
        return self._perm[e]

    def rows(self, start: int, count: int) -> np.ndarray:
        pos = np.arange(start, start + count)
        out = np.empty(count, dtype=np.int64)
        for e in np.unique(pos // self.n):
            sel = (pos // self.n) == e
            out[sel] = self._epoch(int(e))[pos[sel] % self.n]
        return out


# ---------------------------------------------------------------------------------------------
# 3. Schedules (the model, masking and loss are in electra.py)
# ---------------------------------------------------------------------------------------------


def budget_progress(cfg: PretrainConfig, step: int, elapsed_s: float) -> float:
    """Fraction of the budget used: the larger of the step fraction and the wall-clock fraction."""
    p = 0.0
    if cfg.max_steps > 0:
        p = max(p, step / cfg.max_steps)
    if cfg.max_minutes > 0:
        p = max(p, elapsed_s / (cfg.max_minutes * 60))
    return min(p, 1.0)


def lr_factor(cfg: PretrainConfig, step: int, progress: float, next_progress: float, warm_end: float | None) -> float:
    """Multiplier of the peak lr for optimizer step ``step`` (0-based), at budget ``progress`` before it and
    ``next_progress`` after it. Warm-up: linear to the peak over ``warmup_steps`` steps (or the first
    ``warmup_fraction`` of the budget); then the schedule's shape over the rest of the budget, from
    ``warm_end`` (the progress at which warm-up ended) to 1."""
    floor = cfg.min_lr_ratio
    start = floor if cfg.schedule == "one_cycle" else 0.0
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return start + (1 - start) * (step + 1) / cfg.warmup_steps
    if cfg.warmup_steps <= 0 and cfg.warmup_fraction > 0 and progress < cfg.warmup_fraction:
        return start + (1 - start) * min(1.0, next_progress / cfg.warmup_fraction)
    if cfg.schedule == "constant":
        return 1.0
    w = warm_end if warm_end is not None else 0.0
    q = min(1.0, max(0.0, (progress - w) / max(1e-12, 1.0 - w)))
    if cfg.schedule == "cosine":
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * q))
    return 1.0 - (1.0 - floor) * q  # linear, one_cycle


def disc_weight_at(cfg: PretrainConfig, step: int) -> float:
    if cfg.disc_weight_start is None or cfg.disc_weight_warmup_steps <= 0:
        return cfg.disc_weight
    f = min(1.0, step / cfg.disc_weight_warmup_steps)
    return cfg.disc_weight_start + (cfg.disc_weight - cfg.disc_weight_start) * f


# ---------------------------------------------------------------------------------------------
# 4. Checkpoints
# ---------------------------------------------------------------------------------------------
# out/checkpoints/step-00001000/{model.safetensors, optimizer.pt, state.pt, meta.json}, published by renaming
# a finished temp dir, then out/checkpoints/latest.json (atomic) points at it. A crash, a kill or a full disk
# at any moment leaves the previous checkpoint and pointer intact. Tensors: safetensors; optimizer, RNG and
# loop state: torch.save of plain tensors/numbers, loaded back with weights_only=True (no pickled code).

CKPT_FORMAT = 1


def rng_state(mask_rng) -> dict:
    import torch

    version, mt, gauss = random.getstate()
    np_state = np.random.get_state()
    state = {"python": [version, list(mt), gauss], "numpy_keys": torch.from_numpy(np_state[1].astype(np.int64)),
             "numpy_rest": [np_state[0], int(np_state[2]), int(np_state[3]), float(np_state[4])],
             "torch": torch.get_rng_state(), "mask": mask_rng.get_state()}
    if torch.cuda.is_available() and torch.cuda.is_initialized():
        state["cuda"] = torch.cuda.get_rng_state()
    return state


def set_rng_state(state: dict, mask_rng) -> None:
    import torch

    version, mt, gauss = state["python"]
    random.setstate((version, tuple(mt), gauss))
    name, pos, has_gauss, cached = state["numpy_rest"]
    np.random.set_state((name, state["numpy_keys"].numpy().astype(np.uint32), pos, has_gauss, cached))
    torch.set_rng_state(state["torch"])
    mask_rng.set_state(state["mask"])
    if "cuda" in state and torch.cuda.is_available():
        torch.cuda.set_rng_state(state["cuda"])


def save_checkpoint(out: Path, model, optimizer, scaler, state: dict, meta: dict, keep: int) -> Path:
    """Write a complete checkpoint dir, then point ``latest.json`` at it; prune older ones beyond ``keep``.
    An OSError (disk full, permissions) removes the partial dir and raises a KitError: the previous
    checkpoint and pointer are untouched."""
    import torch
    from safetensors.torch import save_model

    root = out / "checkpoints"
    name = f"step-{state['step']:08d}"
    final = root / name
    tmp = root / f".tmp-{name}-{os.getpid()}"
    try:
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir(parents=True)
        with atomic_path(tmp / "model.safetensors") as p:
            save_model(model, str(p))  # shared tensors (embeddings, tied LM head) stored once
        with atomic_path(tmp / "optimizer.pt") as p:
            torch.save({"optimizer": optimizer.state_dict(),
                        "scaler": scaler.state_dict() if scaler is not None else None}, p)
        with atomic_path(tmp / "state.pt") as p:
            torch.save(state, p)
        files = {f.name: f.stat().st_size for f in tmp.iterdir()}
        write_json_atomic(tmp / "meta.json", {**meta, "step": state["step"], "files": files, "format": CKPT_FORMAT})
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        write_json_atomic(root / "latest.json", {"checkpoint": name, "step": state["step"]})
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        prev = latest_checkpoint(out)
        kept = f"the previous checkpoint {prev} is intact" if prev else "no earlier checkpoint exists"
        raise KitError(f"could not write the step-{state['step']} checkpoint in {root} "
                       f"({e.strerror or e}); {kept}; free disk space, then rerun with resume=true") from None
    olds = sorted(p for p in root.glob("step-*") if p.is_dir() and p.name != name)
    for old in olds[:max(0, len(olds) - max(keep, 1) + 1)]:
        shutil.rmtree(old, ignore_errors=True)
    return final


def latest_checkpoint(out: Path) -> Path | None:
    pointer = out / "checkpoints" / "latest.json"
    if not pointer.exists():
        return None
    try:
        path = out / "checkpoints" / json.loads(pointer.read_text())["checkpoint"]
    except (ValueError, KeyError) as e:
        raise InputError(f"{pointer} is damaged ({e}); pass resume=<a checkpoint dir> in {pointer.parent}") from None
    return path if path.is_dir() else None


def resolve_resume(cfg: PretrainConfig, out: Path) -> Path | None:
    if cfg.resume is False or cfg.resume in ("", "false", "False"):
        return None
    if cfg.resume is True or cfg.resume in ("true", "True"):
        ckpt = latest_checkpoint(out)
        if ckpt is None:
            raise InputError(f"resume=true but {out} has no checkpoint to resume from; drop resume to start fresh")
        return ckpt
    p = Path(cfg.resume)
    if (p / "meta.json").exists():
        return p
    if (p / "checkpoints" / "latest.json").exists():
        return latest_checkpoint(p)
    raise InputError(f"resume={p}: not a checkpoint dir (no meta.json) nor a run dir with checkpoints/latest.json")


def read_checkpoint(ckpt: Path, model, optimizer, scaler, vocab_size: int, tok_fp: str, cfg: PretrainConfig) -> dict:
    """Load everything back into the given objects; returns the loop state. Every failure is one line naming
    the checkpoint and what to do."""
    import torch
    from safetensors.torch import load_model

    def damaged(what) -> InputError:
        return InputError(f"checkpoint {ckpt} is damaged ({what}); resume from an earlier one "
                          f"(resume=<dir under {ckpt.parent}>) or start over with overwrite=true")

    try:
        meta = json.loads((ckpt / "meta.json").read_text())
    except (OSError, ValueError) as e:
        raise damaged(f"meta.json: {e}") from None
    for name, size in meta.get("files", {}).items():
        f = ckpt / name
        if not f.exists() or f.stat().st_size != size:
            have = f.stat().st_size if f.exists() else "missing"
            raise damaged(f"{name} is {have} bytes, expected {size}: truncated")
    if meta.get("vocab_size") != vocab_size or meta.get("tokenizer_fingerprint") != tok_fp:
        raise InputError(f"checkpoint {ckpt} was trained with another tokenizer (vocab {meta.get('vocab_size')}, "
                         f"fingerprint {meta.get('tokenizer_fingerprint')}) than this run's (vocab {vocab_size}, "
                         f"fingerprint {tok_fp}); pass the run's own tokenizer= or start over")
    saved = meta.get("config", {})
    for key in ("objective", "model", "generator", "seq_len"):
        if key in saved and saved[key] != to_dict(cfg)[key]:
            raise ConfigError(f"checkpoint {ckpt} has {key}={saved[key]!r} but this run asks for "
                              f"{to_dict(cfg)[key]!r}; the model shape can't change on resume")
    try:
        missing, unexpected = load_model(model, str(ckpt / "model.safetensors"), strict=False)
    except Exception as e:  # noqa: BLE001 - safetensors raises its own error types for a bad header/size
        raise damaged(f"model.safetensors: {str(e).splitlines()[0]}") from None
    if unexpected or missing:
        raise damaged(f"model.safetensors does not match the model (missing {missing[:3]}, unexpected {unexpected[:3]})")
    try:
        opt = torch.load(ckpt / "optimizer.pt", map_location="cpu", weights_only=True)
        state = torch.load(ckpt / "state.pt", map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - truncated zip, unpickling error
        raise damaged(str(e).splitlines()[0] if str(e) else type(e).__name__) from None
    optimizer.load_state_dict(opt["optimizer"])
    if scaler is not None and opt.get("scaler"):
        scaler.load_state_dict(opt["scaler"])
    return state


# ---------------------------------------------------------------------------------------------
# 5. Export
# ---------------------------------------------------------------------------------------------


def export_models(model, tok, out: Path) -> dict[str, Path]:
    """``out/discriminator``: the encoder (``ElectraForPreTraining``; for mlm the ``ElectraModel`` of the masked
    LM) + tokenizer, loadable by ``AutoModel`` / ``ElectraForSequenceClassification``. ``out/generator``:
    ``ElectraForMaskedLM`` + tokenizer (fill-mask demos). Each dir is written beside and swapped in whole."""
    encoder = model.discriminator if model.discriminator is not None else model.encoder()
    written = {}
    for name, m in (("discriminator", encoder), ("generator", model.generator)):
        final = out / name
        tmp = out / f".tmp-{name}-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        impl = m.config._attn_implementation
        m.config._attn_implementation = "sdpa"  # our CPU attention is a training-time detail (not saved anyway)
        try:
            with _quiet_transformers():
                m.save_pretrained(tmp, safe_serialization=True)
            tok.save(tmp)
            old = out / f".old-{name}-{os.getpid()}"
            if final.exists():
                os.replace(final, old)
            os.replace(tmp, final)
            shutil.rmtree(old, ignore_errors=True)
        except OSError as e:
            raise KitError(f"could not write {final} ({e.strerror or e}); the checkpoints in {out / 'checkpoints'} "
                           "are intact: free disk space and rerun with resume=true to export") from None
        finally:
            m.config._attn_implementation = impl
            shutil.rmtree(tmp, ignore_errors=True)
        written[name] = final
    return written


@contextlib.contextmanager
def _quiet_transformers():
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()


# ---------------------------------------------------------------------------------------------
# 6. Plot
# ---------------------------------------------------------------------------------------------


def read_metrics(path: Path) -> list[dict]:
    if not path.exists():
        return []
    rows = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            try:
                rows.append(json.loads(line))
            except ValueError:
                continue  # a line cut by a kill: skip it
    return rows


def plot_curves(run_dir: str | Path, dest: str | Path | None = None) -> Path:
    """``run_dir/curves.png`` from ``run_dir/metrics.jsonl``: losses, generator accuracy against the unigram
    baseline, discriminator AUC/precision/recall, replaced fraction, lr and lambda, tokens/s; x = tokens seen."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run_dir = Path(run_dir)
    rows = read_metrics(run_dir / "metrics.jsonl")
    if not rows:
        raise InputError(f"{run_dir / 'metrics.jsonl'} has no metrics to plot (is {run_dir} a pretraining run dir?)")
    x = [r["tokens"] / 1e6 for r in rows]

    def series(key):
        return [r.get(key) if r.get(key) is not None else float("nan") for r in rows]

    fig, axes = plt.subplots(2, 3, figsize=(15, 8))
    panels = [
        ("losses", [("gen_loss", "generator MLM"), ("disc_loss", "discriminator BCE")]),
        ("generator masked-token accuracy", [("gen_acc", "generator"), ("gen_unigram_acc", "unigram baseline")]),
        ("discriminator on replaced tokens", [("disc_auc", "AUC"), ("disc_precision", "precision"),
                                              ("disc_recall", "recall"), ("disc_acc", "accuracy")]),
        ("replaced fraction of real tokens", [("replaced_frac", "replaced")]),
        ("schedule", [("lr", "lr")]),
        ("throughput", [("tokens_per_s", "tokens/s")]),
    ]
    for ax, (title, keys) in zip(axes.flat, panels):
        for key, label in keys:
            ys = series(key)
            if not all(math.isnan(y) for y in ys):
                ax.plot(x, ys, label=label, linestyle="--" if "baseline" in label else "-")
        if title == "schedule" and any(r.get("disc_weight") is not None for r in rows):
            ax2 = ax.twinx()
            ax2.plot(x, series("disc_weight"), color="tab:orange", label="lambda")
            ax2.set_ylabel("lambda")
        ax.set_title(title)
        ax.set_xlabel("tokens seen (M)")
        ax.grid(alpha=0.3)
        if len(keys) > 1 and ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=8)
        elif not ax.lines:  # objective=mlm: no discriminator to draw
            ax.text(0.5, 0.5, "not logged in this run", ha="center", va="center", transform=ax.transAxes)
    fig.suptitle(f"pretraining {run_dir.name}: step {rows[-1]['step']}, {rows[-1]['tokens'] / 1e6:.2f}M tokens")
    fig.tight_layout()
    dest = Path(dest) if dest else run_dir / "curves.png"
    with atomic_path(dest, suffix=".png") as tmp:
        fig.savefig(tmp, format="png", dpi=90)
    plt.close(fig)
    return dest


# ---------------------------------------------------------------------------------------------
# 7. The training loop
# ---------------------------------------------------------------------------------------------


class DistContext:
    """torchrun's environment (RANK/WORLD_SIZE/LOCAL_RANK) -> process group; a single process otherwise."""

    def __init__(self, device_name: str, timeout_minutes: float):
        import datetime

        import torch
        import torch.distributed as dist

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.is_main = self.rank == 0
        from .utils import resolve_device

        device = resolve_device(device_name)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", self.local_rank if self.world > 1 else torch.cuda.current_device())
        if device.type == "cuda":
            torch.cuda.set_device(device)
        self.device = device
        self.enabled = self.world > 1
        if self.enabled and not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(backend, timeout=datetime.timedelta(minutes=timeout_minutes))

    def barrier(self):
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def all_reduce_sum(self, t):
        if self.enabled:
            import torch.distributed as dist

            dist.all_reduce(t)
        return t

    def broadcast_float(self, value: float) -> float:
        if not self.enabled:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.broadcast(t, 0)
        return float(t.item())

    def gather(self, obj) -> list:
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def close(self):
        if self.enabled:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def param_digest(model) -> str:
    """sha256 of every parameter's bytes: equal across DDP ranks iff their weights are bit-identical."""
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]


def pretrain(cfg: PretrainConfig, on_step: Callable[[int, dict | None], None] | None = None) -> dict:
    """Run (or resume) pretraining; returns the summary (also written to ``out/summary.json``).

    ``on_step(step, metrics_row_or_None)`` is called after every optimizer step (tests use it to stop a run
    mid-way, as a kill would)."""
    import torch

    from . import electra
    from .utils import autocast_dtype, set_seed

    dist_ctx = DistContext(cfg.device, cfg.ddp_timeout_minutes)
    try:
        return _pretrain(cfg, dist_ctx, on_step, torch, electra, autocast_dtype, set_seed)
    finally:
        dist_ctx.close()


def _pretrain(cfg, dist_ctx, on_step, torch, electra, autocast_dtype, set_seed) -> dict:
    out = Path(cfg.out)
    device, rank, world, main = dist_ctx.device, dist_ctx.rank, dist_ctx.world, dist_ctx.is_main
    if cfg.threads > 0:
        torch.set_num_threads(cfg.threads)
    amp_dtype = autocast_dtype(device, cfg.precision)
    if amp_dtype == torch.float16 and device.type != "cuda":
        raise ConfigError("precision=fp16 needs a CUDA GPU; on CPU use bf16 (or auto)")
    micro_bs, rem = divmod(cfg.batch_size, world * cfg.grad_accum)
    if rem or micro_bs < 1:
        raise ConfigError(f"batch_size {cfg.batch_size} must be a multiple of ranks x grad_accum "
                          f"({world} x {cfg.grad_accum})")

    # -- resume or fresh start: decide before touching anything in out/
    ckpt = resolve_resume(cfg, out)
    if ckpt is None and main and latest_checkpoint(out) is not None:
        if not cfg.overwrite:
            raise ConfigError(f"{out} already holds a run's checkpoints: pass resume=true to continue it, "
                              "overwrite=true to start over, or another out=")
        shutil.rmtree(out / "checkpoints", ignore_errors=True)
        (out / "metrics.jsonl").unlink(missing_ok=True)
    dist_ctx.barrier()
    if main:
        out.mkdir(parents=True, exist_ok=True)
        log("resolved config:\n  " + dump_yaml(cfg).rstrip().replace("\n", "\n  "))
        write_text_atomic(out / "config.yaml", dump_yaml(cfg))

    # -- data: tokenizer, packed cache (rank 0 builds it, the others wait and map it)
    corpus = check_corpus(cfg.corpus)
    tok = prepare_tokenizer(cfg, out, dist_ctx)
    tok_fp = tokenizer_fingerprint(tok)
    cache_root = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    if main:
        cache = build_packed_cache(cfg, tok, tok_fp, corpus, cache_root)
    dist_ctx.barrier()
    if not main:
        cache = build_packed_cache(cfg, tok, tok_fp, corpus, cache_root)  # finds rank 0's cache
    data = PackedRows(cache)
    real = data.meta["tokens"] - data.n  # minus one [CLS] per row: the text tokens (+[SEP]s)
    if real < 2 * cfg.seq_len:
        raise InputError(f"corpus too small: {data.meta['texts']} texts give {data.meta['tokens']} tokens, less "
                         f"than two sequences of {cfg.seq_len}; add text (or lower seq_len)")
    if main:
        log(f"data: {data.meta['texts']:,} texts -> {data.n:,} sequences of {cfg.seq_len} tokens "
            f"({data.meta['tokens']:,} tokens) in {cache}")
    order = RowOrder(data.n, cfg.seed, cfg.shuffle)

    # -- model, optimizer
    set_seed(cfg.seed)  # identical initialisation on every rank
    special = sorted(set(tok.all_special_ids))
    if cfg.fast_cpu_kernels:
        electra.register_cpu_sdpa()
    model = electra.build_pretrain_model(
        tok.vocab_size, tok.pad_token_id, special, cfg.model, cfg.generator, cfg.objective,
        cfg.model.max_position_embeddings, cfg.temperature,
        attn_implementation=electra.CPU_SDPA if cfg.fast_cpu_kernels else "sdpa")
    if cfg.fast_cpu_kernels:
        electra.use_fast_dropout(model)
    model.to(device)
    optimizer = electra.build_optimizer(model, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2),
                                        cfg.adam_eps, device.type)
    scaler = torch.amp.GradScaler("cuda") if amp_dtype == torch.float16 else None
    # Dropout draws from torch's global generator; masking and sampling from their own (per rank: different
    # masks on every rank, reproducible from the seed).
    torch.manual_seed(cfg.seed * 1000 + 1 + rank)
    mask_rng = torch.Generator(device=device)
    mask_rng.manual_seed(cfg.seed * 1000 + 500 + rank)
    special_t = torch.tensor(special, dtype=torch.long, device=device)
    mask_prob_mask, mask_prob_random = cfg.mask_probs()

    window: dict = {}  # metric sums since the last metrics row (device tensors: no per-step host sync)
    state = {"step": 0, "data_pos": 0, "tokens": 0, "elapsed": 0.0, "warm_end": None, "plateau_warned": False,
             "unigram": torch.zeros(tok.vocab_size, dtype=torch.long)}
    if ckpt is not None:
        loaded = read_checkpoint(ckpt, model, optimizer, scaler, tok.vocab_size, tok_fp, cfg)
        rng_states = loaded.pop("rng")
        if len(rng_states) == world:
            set_rng_state(rng_states[rank], mask_rng)
        else:
            # Another number of ranks: each rank's RNG streams can't be continued; reseed from (seed, step).
            torch.manual_seed(cfg.seed * 1000 + 1 + rank + 7919 * loaded["step"])
            mask_rng.manual_seed(cfg.seed * 1000 + 500 + rank + 7919 * loaded["step"])
            if main:
                log(f"note: checkpoint was written by {len(rng_states)} rank(s), this run has {world}: data order "
                    "continues exactly, dropout/masking randomness does not")
        window = {k: v.to(device) for k, v in loaded.pop("window").items()}
        state.update(loaded)
        if main:
            log(f"resumed from {ckpt} at step {state['step']} ({state['tokens']:,} tokens)")
            kept = [r for r in read_metrics(out / "metrics.jsonl") if r["step"] <= state["step"]]
            write_text_atomic(out / "metrics.jsonl", "".join(json.dumps(r) + "\n" for r in kept))
    unigram = state["unigram"].to(device)

    wrapped = None
    if dist_ctx.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP

        wrapped = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)
    if cfg.compile:
        wrapped = torch.compile(wrapped if wrapped is not None else model)

    n_params = sum(p.numel() for p in model.parameters())
    enc_params = sum(p.numel() for p in model.encoder().parameters())
    if main:
        gen_shape = electra.generator_shape(cfg.model, cfg.generator) if cfg.objective == "electra" else None
        log(f"model: {cfg.objective}, encoder {enc_params / 1e6:.2f}M parameters, {n_params / 1e6:.2f}M trained"
            + (f" (generator hidden {gen_shape['hidden_size']}, {gen_shape['num_heads']} heads, FFN "
               f"{gen_shape['intermediate_size']}, {gen_shape['num_layers']} layers)" if gen_shape else "")
            + f"; {device}, {str(amp_dtype).replace('torch.', '') if amp_dtype else 'fp32'}, {world} rank(s), "
            f"batch {cfg.batch_size} = {world} x {cfg.grad_accum} x {micro_bs}, {torch.get_num_threads()} threads")

    def micro_batches(data_pos: int) -> tuple[list, int]:
        """This rank's micro-batches of the global batch at stream position ``data_pos`` (the global batch is
        split into accum x ranks slices; rank r takes slice a * ranks + r of accumulation step a) and the
        global batch's real-token count."""
        rows_all = order.rows(data_pos, cfg.batch_size)
        out_mb = []
        for a in range(cfg.grad_accum):
            s = (a * world + rank) * micro_bs
            rows = rows_all[s:s + micro_bs]
            ids_np = data.take(rows)
            ids = torch.from_numpy(ids_np).to(device, non_blocking=True)
            has_pad = bool((rows == data.n - 1).any()) and data.meta["last_row_len"] < data.seq_len
            attn = (ids != tok.pad_token_id).long() if has_pad else None  # None: SDPA needs no mask
            out_mb.append(electra.mask_batch(ids, attn, special_t, tok.mask_token_id, tok.vocab_size, cfg.mask_prob,
                                             mask_prob_mask, mask_prob_random, mask_rng, data.real_tokens(rows)))
        return out_mb, data.real_tokens(rows_all)

    def metrics_row(step: int, lr: float, lam: float, last_stats: dict, grad_norm, elapsed: float,
                    window_s: float, window_tokens: int) -> dict:
        w = {k: v.detach().double() for k, v in window.items()}
        keys = sorted(w)
        flat = dist_ctx.all_reduce_sum(torch.stack([w[k] for k in keys]))
        w = dict(zip(keys, flat.tolist()))
        n_micro = max(1.0, w.get("n_micro", 1.0))
        uni = dist_ctx.all_reduce_sum(unigram.clone())

        def ratio(a, b):
            return (w[a] / w[b]) if w.get(b) else None

        row = {"step": step, "tokens": state["tokens"], "epoch": round(state["data_pos"] / data.n, 4),
               "elapsed_s": round(elapsed, 2), "loss": w["loss"] / max(1.0, w["n_steps"]),
               "gen_loss": w["gen_loss"] / n_micro, "gen_acc": ratio("gen_correct", "n_masked"),
               "gen_unigram_acc": float(uni.max() / uni.sum().clamp(min=1)),
               "lr": lr, "tokens_per_s": round(window_tokens / max(window_s, 1e-9), 1),
               "grad_norm": float(grad_norm)}
        if cfg.objective == "electra":
            row.update({"disc_loss": w["disc_loss"] / n_micro, "disc_weight": lam,
                        "disc_acc": ratio("disc_correct", "n_real"), "disc_precision": ratio("true_pos", "pred_pos"),
                        "disc_recall": ratio("true_pos", "n_replaced"), "replaced_frac": ratio("n_replaced", "n_real"),
                        "disc_auc": None})
            real_mask = last_stats["real"].bool()
            auc = electra.replaced_auc(last_stats["d_logits"][real_mask], last_stats["labels"][real_mask])
            row["disc_auc"] = None if math.isnan(auc) else auc
        on_plateau = row["gen_acc"] is not None and row["gen_acc"] < row["gen_unigram_acc"] + cfg.plateau_gen_margin
        if cfg.objective == "electra" and row["disc_auc"] is not None:
            on_plateau = on_plateau or row["disc_auc"] < cfg.plateau_auc
        row["on_plateau"] = bool(on_plateau)
        return {k: (round(v, 6) if isinstance(v, float) else v) for k, v in row.items()}

    def checkpoint(step: int) -> None:
        rng_all = dist_ctx.gather(rng_state(mask_rng))
        if main:
            st = {"step": step, "data_pos": state["data_pos"], "tokens": state["tokens"], "elapsed": state["elapsed"],
                  "warm_end": state["warm_end"], "plateau_warned": state["plateau_warned"], "unigram": unigram.cpu(),
                  "rng": rng_all, "window": {k: v.detach().cpu() for k, v in window.items()}}
            meta = {"vocab_size": tok.vocab_size, "tokenizer_fingerprint": tok_fp, "config": to_dict(cfg),
                    "tokens": state["tokens"], "world_size": world}
            save_checkpoint(out, model, optimizer, scaler, st, meta, cfg.keep_checkpoints)
        dist_ctx.barrier()  # a failed save raised on rank 0; the others stop at the next collective

    # -- the loop
    from tqdm.auto import tqdm

    bar = tqdm(total=cfg.max_steps if cfg.max_steps > 0 else None, initial=state["step"], unit="step",
               desc="pretraining", disable=not (cfg.progress and main), dynamic_ncols=True)
    metrics_f = open(out / "metrics.jsonl", "a", encoding="utf-8") if main else None
    model.train()
    step = state["step"]
    t_start = time.perf_counter() - state["elapsed"]
    t_window, tokens_window = time.perf_counter(), 0
    last_save_t = time.perf_counter()
    step_s = 0.0  # duration of the last step (time-budget warm-up looks one step ahead)
    saved_at = step if ckpt is not None else -1
    last_row = None
    try:
        while True:
            elapsed = dist_ctx.broadcast_float(time.perf_counter() - t_start) if cfg.max_minutes > 0 else \
                time.perf_counter() - t_start
            progress = budget_progress(cfg, step, elapsed)
            if progress >= 1.0:
                break
            next_progress = budget_progress(cfg, step + 1, elapsed + step_s)
            if state["warm_end"] is None and (
                    (cfg.warmup_steps > 0 and step >= cfg.warmup_steps) or
                    (cfg.warmup_steps <= 0 and progress >= cfg.warmup_fraction)):
                state["warm_end"] = progress  # the decay runs from here to the end of the budget
            lr = cfg.lr * lr_factor(cfg, step, progress, next_progress, state["warm_end"])
            lam = disc_weight_at(cfg, step)
            t0 = time.perf_counter()
            mbs, batch_tokens = micro_batches(state["data_pos"])
            last_stats, sums, grad_norm = electra.train_step(
                model, optimizer, mbs, disc_weight=lam, lr=lr, amp_dtype=amp_dtype, device_type=device.type,
                scaler=scaler, max_grad_norm=cfg.max_grad_norm, rng=mask_rng, wrapped=wrapped)
            step += 1
            state["step"] = step
            state["data_pos"] += cfg.batch_size
            state["tokens"] += batch_tokens
            tokens_window += batch_tokens
            for k, v in sums.items():
                window[k] = window[k] + v.detach() if k in window else v.detach()
            window["n_micro"] = window.get("n_micro", torch.zeros((), device=device)) + len(mbs)
            window["n_steps"] = window.get("n_steps", torch.zeros((), device=device)) + 1
            unigram += torch.bincount(last_stats["targets"], minlength=tok.vocab_size)
            state["elapsed"] = time.perf_counter() - t_start
            step_s = time.perf_counter() - t0
            bar.update(1)

            row = None
            if step % cfg.log_every == 0:
                now = time.perf_counter()
                row = metrics_row(step, lr, lam, last_stats, grad_norm, state["elapsed"], now - t_window,
                                  tokens_window)
                window.clear()
                t_window, tokens_window = now, 0
                if main:
                    metrics_f.write(json.dumps(row) + "\n")
                    metrics_f.flush()
                    bar.set_postfix_str(_postfix(row, cfg, state["elapsed"]), refresh=False)
                    if not cfg.progress:
                        log(_log_line(row))
                    if (cfg.plateau_check_tokens > 0 and not state["plateau_warned"] and row["on_plateau"]
                            and state["tokens"] >= cfg.plateau_check_tokens):
                        state["plateau_warned"] = True
                        bar.write(_plateau_warning(row, cfg), file=sys.stderr)
                last_row = row
            due = cfg.save_every > 0 and step % cfg.save_every == 0
            if cfg.save_every_minutes > 0:
                since = dist_ctx.broadcast_float(time.perf_counter() - last_save_t)
                due = due or since >= cfg.save_every_minutes * 60
            if due:
                checkpoint(step)
                saved_at, last_save_t = step, time.perf_counter()
            if on_step is not None:
                on_step(step, row)
    finally:
        bar.close()
        if metrics_f:
            metrics_f.close()

    # -- the end: final checkpoint, rank agreement, export, plot, summary
    if saved_at != step:
        checkpoint(step)
    digests = dist_ctx.gather(param_digest(model))
    summary = {"steps": step, "tokens": state["tokens"], "elapsed_s": round(state["elapsed"], 1),
               "tokens_per_s": round(state["tokens"] / max(state["elapsed"], 1e-9), 1), "world_size": world,
               "rank_param_digests": digests, "ranks_in_sync": len(set(digests)) == 1, "final": last_row,
               "encoder_parameters": enc_params, "data": {k: data.meta[k] for k in ("texts", "rows", "tokens")}}
    if main:
        if not summary["ranks_in_sync"]:
            log(f"warning: DDP ranks ended with different weights ({digests}); this is a bug, please report it")
        exported = export_models(model, tok, out)
        summary["exported"] = {k: str(v) for k, v in exported.items()}
        if cfg.plot and read_metrics(out / "metrics.jsonl"):
            summary["curves"] = str(plot_curves(out))
        write_json_atomic(out / "summary.json", summary)
        log(f"done: {step} steps, {state['tokens']:,} tokens in {state['elapsed'] / 60:.1f} min "
            f"({summary['tokens_per_s']:,.0f} tokens/s); encoder in {exported['discriminator']}")
    dist_ctx.barrier()
    return summary


def _postfix(row: dict, cfg: PretrainConfig, elapsed: float) -> str:
    eta = ""
    if cfg.max_minutes > 0:
        eta = f" budget left {max(0.0, cfg.max_minutes - elapsed / 60):.1f}min"
    s = f"{row['tokens_per_s']:,.0f} tok/s gen {row['gen_loss']:.3f}"
    if row.get("disc_loss") is not None:
        s += f" disc {row['disc_loss']:.3f}"
    return s + eta


def _log_line(row: dict) -> str:
    fmt = lambda v, f: "-" if v is None else format(v, f)  # noqa: E731
    s = (f"step {row['step']} | {row['tokens'] / 1e6:.2f}M tokens | gen {row['gen_loss']:.3f} "
         f"acc {fmt(row['gen_acc'], '.3f')} (unigram {row['gen_unigram_acc']:.3f})")
    if "disc_loss" in row:
        s += f" | disc {row['disc_loss']:.4f} auc {fmt(row['disc_auc'], '.3f')} replaced {fmt(row['replaced_frac'], '.3f')}"
    return s + f" | lr {row['lr']:.2e} | {row['tokens_per_s']:,.0f} tok/s"


def _plateau_warning(row: dict, cfg: PretrainConfig) -> str:
    disc = f", discriminator AUC {row['disc_auc']:.3f}" if row.get("disc_auc") is not None else ""
    return (f"learning? after {row['tokens']:,} tokens the generator's masked-token accuracy is {row['gen_acc']:.3f} "
            f"(predicting the most frequent token scores {row['gen_unigram_acc']:.3f}){disc}: the run is still on "
            "the plateau where the generator predicts token frequencies; consider a higher lr, a shorter warm-up, "
            "no dropout or a smaller model (see configs/pretrain/)")
