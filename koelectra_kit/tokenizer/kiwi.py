"""Kiwi morpheme pre-split: normalized text -> surface pieces with character offsets.

Contractions overlap (봤 = 보 + 었 both span one syllable) and are merged into one surface piece, so no
character is lost or rewritten; a merged piece spanning a space (multi-word names) is cut at the space. A
piece that does not begin a space-separated word is written with the WordPiece continuation mark:
"영화는 봤는데" -> 영화 ##는 봤 ##는데. The same "##" then means "glued to the previous token" for morphemes
and for subwords alike, so the standard WordPiece decoder restores the original spacing.
"""
from __future__ import annotations

import os
import warnings
from collections import deque
from contextlib import contextmanager
from typing import Iterable, Iterator

from ..errors import InputError
from .normalize import PLACEHOLDERS

_KIWI: dict = {}  # worker count -> the loaded Kiwi
_INHERITED: list = []  # a forked child's copies of its parent's Kiwis: kept, never used, never freed


def _after_fork_in_child() -> None:
    """A forked child (a DataLoader or multiprocessing worker) has none of its parent's Kiwi worker threads: the
    inherited Kiwi would wait for them forever, and so would freeing it (its destructor joins them). The child
    loads its own on first use; the copies stay referenced (copy-on-write pages, no extra memory until written)."""
    _INHERITED.extend(_KIWI.values())
    _KIWI.clear()


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


class KiwiMissing(InputError, ImportError):
    """kiwipiepy is not installed (a GPU machine fed prepared data; a server): one ``error:`` line where a text
    needs Kiwi, not a traceback. An ImportError too, for callers that go on without Kiwi (``kiwi_record``)."""


def require_kiwipiepy():
    """The kiwipiepy module, or ``KiwiMissing``."""
    try:
        import kiwipiepy
    except ImportError:
        raise KiwiMissing("kiwipiepy is not installed here, and this tokenizer pre-splits text with Kiwi: pip "
                          "install kiwipiepy") from None
    return kiwipiepy


def resolve_workers(num_workers: int | None) -> int:
    """num_workers, or for None all cores, or OMP_NUM_THREADS when set."""
    if num_workers is None:
        # OMP_NUM_THREADS is how a user (or a job runner packing jobs onto cores) caps a process's threads
        env = os.environ.get("OMP_NUM_THREADS", "")
        num_workers = int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)
    return num_workers


def kiwi_instance(num_workers: int | None = None):
    """One shared Kiwi per worker count (loading the model takes ~2 s and ~0.5 GB). num_workers None: all cores,
    or OMP_NUM_THREADS when set."""
    num_workers = resolve_workers(num_workers)
    if num_workers not in _KIWI:
        Kiwi = require_kiwipiepy().Kiwi
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            _KIWI[num_workers] = Kiwi(num_workers=num_workers)  # 1: one worker thread (0 could not stream)
    return _KIWI[num_workers]


def loaded_kiwi(num_workers: int | None = None):
    """The shared Kiwi for ``num_workers`` if loaded, else any Kiwi this process has loaded, else a new one for
    ``num_workers``: a caller with a few words to analyse need not load a second model (~0.5 GB, ~2 s) for them."""
    for n in (num_workers, *_KIWI):
        if n in _KIWI:
            return _KIWI[n]
    return kiwi_instance(num_workers)


def kiwi_versions() -> dict:
    """Another Kiwi model build can split differently (changing token ids): saved with every tokenizer."""
    kiwipiepy = require_kiwipiepy()

    try:
        import kiwipiepy_model

        model = kiwipiepy_model.__version__
    except Exception:  # noqa: BLE001 - a custom model path has no package version
        model = None
    return {"kiwipiepy": kiwipiepy.__version__, "kiwipiepy_model": model}


def pieces_from_tokens(text: str, tokens) -> list[tuple[int, int]]:
    """Surface pieces (start, end) covering every non-space character of ``text`` once, from Kiwi tokens.

    Overlapping tokens (contractions: 보+었 -> 봤; Z_CODA: 닼 -> 다 + ᆿ) merge into one piece; zero-length tokens
    (an inferred copula) vanish; characters no token covers become pieces of their own; a piece that spans a
    space is cut there."""
    spans: list[list[int]] = []
    for t in tokens:
        s, e = t.start, t.end
        if e <= s:
            continue
        if spans and s < spans[-1][1]:
            if e > spans[-1][1]:
                spans[-1][1] = e
        else:
            spans.append([s, e])
    out: list[tuple[int, int]] = []
    pos = 0
    n = len(text)

    def emit(a: int, b: int) -> None:  # cut [a, b) at spaces, keep the non-space runs
        i = a
        while i < b:
            while i < b and text[i].isspace():
                i += 1
            j = i
            while j < b and not text[j].isspace():
                j += 1
            if j > i:
                out.append((i, j))
            i = j

    for s, e in spans:
        if s > pos:
            emit(pos, s)  # characters Kiwi skipped
        emit(max(s, pos), e)
        pos = max(pos, e)
    if pos < n:
        emit(pos, n)
    return out


def mark_pieces(text: str, spans: list[tuple[int, int]]) -> list[str]:
    """Piece strings with "##" on the pieces that continue a space-separated word."""
    return [text[s:e] if s == 0 or text[s - 1] == " " else "##" + text[s:e] for s, e in spans]


def protect_placeholders(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Placeholders ([URL], [EMAIL], [USER]) stay one piece (Kiwi would cut them into '[', 'URL', ']')."""
    found = []
    for ph in PLACEHOLDERS.values():
        i = text.find(ph)
        while i >= 0:
            found.append((i, i + len(ph)))
            i = text.find(ph, i + len(ph))
    if not found:
        return spans
    kept = [sp for sp in spans if not any(a <= sp[0] < b for a, b in found)]
    return sorted(kept + found)


def presplit_pairs(normalized: Iterable[str], num_workers: int | None = None, kiwi=None,
                   **tokenize_options) -> Iterator[tuple[str, list]]:
    """(text, pre-split spans) for each (already normalized) text, streaming, Kiwi's worker threads busy
    meanwhile. ``kiwi`` and ``tokenize_options`` (Kiwi.tokenize's): another Kiwi or its settings, for
    benchmarks/bench_kiwi.py; a tokenizer always uses the shared default."""
    kiwi = kiwi or kiwi_instance(num_workers)
    queue: deque = deque()

    def feed():  # Kiwi pulls texts from here; each result pairs with the oldest text still queued
        for t in normalized:
            queue.append(t)
            yield t

    for tokens in kiwi.tokenize(feed(), **tokenize_options):
        text = queue.popleft()
        spans = pieces_from_tokens(text, tokens)
        if "[" in text:
            spans = protect_placeholders(text, spans)
        yield text, spans


def presplit_texts(normalized: Iterable[str], num_workers: int | None = None) -> Iterator[list[tuple[int, int]]]:
    """Pre-split spans for each (already normalized) text, streaming (see ``presplit_pairs``)."""
    return (spans for _, spans in presplit_pairs(normalized, num_workers))


@contextmanager
def serial_tokenizers():
    """tokenizers' encode_batch on the calling thread only (it reads TOKENIZERS_PARALLELISM on every call).
    Inside the Kiwi pipeline, rayon's threads fight Kiwi's workers for the cores: benchmarks/bench_tokenizer.py
    went from 0.67x Kiwi's own throughput on 2 cores to 0.72-0.81x. Process-wide, so restored right after."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old
