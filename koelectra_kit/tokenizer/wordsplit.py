"""The word-level pre-split (``presplit: kiwi_word``): Kiwi analyses each whitespace-separated word on its own, so a
word's pieces depend on the word alone and a cache of them is exact.

    pieces(["영화는 봤는데"], num_workers=None, capacity=200_000)  ->  [["영화", "##는", "봤", "##는데"]]

Reviews repeat their words: in 300,000 NSMC reviews 27% of the 1.85M words are distinct and the 200,000 most
frequent cover 83% of the occurrences, while Kiwi analyses distinct single words ~6x faster than whole texts per
item (issue 31). So each process keeps one bounded LRU ``WordCache`` (normalized word -> where Kiwi cuts it), and a
batch's words missing from it go to Kiwi in one ``kiwi.tokenize(list)`` call, which keeps its worker threads busy.

The pieces of a word are the ``kiwi`` mode's pieces of the word as a text of its own (contractions merged, spans
cut at nothing since a word has no space, placeholders kept whole), as cut positions: piece i runs from its cut to
the next. "##" marks are the ``kiwi`` mode's: a piece not preceded by a space in the text carries one (a word's
first piece after a space or at the start does not). The cached and uncached paths share ``word_cuts``, so they
cannot disagree (tests/test_presplit_word.py checks the pieces on the sample corpus and hostile inputs).

Memory: an entry is the word (a str: 74 B + 2 B a Hangul character) and its cut tuple, one object shared between
equal cuts (``()`` for a one-piece word, the commonest; 100,000 nsmc3 words have 2,570 patterns), plus the ordered
dict's ~90 B: ~175 B measured with tracemalloc on 100,000 distinct nsmc3 words (5 characters on average), so ~35 MB
for the default 200,000 entries, per process.

Processes: the cache is module-level, one per process; a forked child (a worker of the corpus pre-split, a
DataLoader worker) keeps a copy of its parent's entries (exact, copy-on-write) and gets a fresh lock, since the
parent's may have been held by another thread at the fork.
"""
from __future__ import annotations

import os
import re
import threading
from collections import OrderedDict
from typing import Iterable

from . import kiwi, wordfile

_WORD = re.compile(r"\S+")  # \S is str.isspace's complement, the rule kiwi.pieces_from_tokens cuts pieces at
_SHARED_CUTS: dict[tuple, tuple] = {}  # one object per distinct cut tuple (a few thousand patterns)


def word_cuts(word: str, tokens) -> tuple[int, ...]:
    """Where the pieces of ``word`` after the first start, from Kiwi's tokens of the word alone."""
    spans = kiwi.pieces_from_tokens(word, tokens)
    if "[" in word:
        spans = kiwi.protect_placeholders(word, spans)
    cuts = tuple(s for s, _ in spans[1:])
    if len(_SHARED_CUTS) < 100_000:
        cuts = _SHARED_CUTS.setdefault(cuts, cuts)
    return cuts


class WordCache:
    """A bounded LRU of normalized word -> cut positions, safe to share between threads (the app and
    ``Classifier.predict`` encode on worker threads): one lock round per batch, not per word."""

    def __init__(self, capacity: int):
        self.capacity = capacity
        self.hits = self.misses = 0
        self.stored = 0  # entries ever stored (clear() keeps it): whether there is anything new to write back
        self._entries: OrderedDict[str, tuple[int, ...]] = OrderedDict()
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._entries)

    def lookup(self, words: Iterable[str], found: dict) -> list[str]:
        """Put the cached words into ``found`` (marking them recently used); return the others."""
        missing = []
        with self._lock:
            get, recent = self._entries.get, self._entries.move_to_end
            for w in words:
                cuts = get(w)
                if cuts is None:
                    missing.append(w)
                else:
                    recent(w)
                    found[w] = cuts
            self.hits += len(found)
            self.misses += len(missing)
        return missing

    def store(self, items: Iterable[tuple[str, tuple[int, ...]]]) -> None:
        with self._lock:
            entries = self._entries
            for w, cuts in items:
                entries[w] = cuts
                entries.move_to_end(w)
                self.stored += 1
            while len(entries) > self.capacity:
                entries.popitem(last=False)

    def items(self) -> list[tuple[str, tuple[int, ...]]]:
        """The entries, least recently used first."""
        with self._lock:
            return list(self._entries.items())

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self.hits = self.misses = 0

    def _after_fork_in_child(self) -> None:
        self._lock = threading.Lock()


_CACHE = WordCache(0)


def word_cache(capacity: int) -> WordCache:
    """This process's cache, grown to ``capacity`` words if it was smaller: tokenizers in one process share it
    (the pieces depend on the word alone), and it holds as many words as the largest of them asked for."""
    if capacity > _CACHE.capacity:
        _CACHE.capacity = capacity
    return _CACHE


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_CACHE._after_fork_in_child)


def analyse(words: list[str], num_workers: int | None) -> list[tuple[int, ...]]:
    """Kiwi's cuts of each word, in one batched call (its worker threads take the words in parallel); a handful of
    words go to whichever Kiwi is loaded already, or a one-thread one."""
    if not words:
        return []
    k = kiwi.kiwi_instance(num_workers) if len(words) > 64 else kiwi.loaded_kiwi(1)
    return [word_cuts(w, tokens) for w, tokens in zip(words, k.tokenize(words))]


def cuts_of(words: Iterable[str], num_workers: int | None, capacity: int, known: dict | None = None,
            before_kiwi=None) -> dict[str, tuple[int, ...]]:
    """word -> cuts for every word given: a tokenizer folder's word list's (``known``, wordlist.py), then the
    cache's, then Kiwi's for the rest; capacity 0: no cache. ``before_kiwi(words)`` is called before the cache or
    Kiwi is asked for any (the tokenizer checks its Kiwi there, or says which words need the Kiwi it lacks)."""
    distinct = dict.fromkeys(words)
    found: dict[str, tuple[int, ...]] = {}
    if known:
        rest = []
        for w in distinct:
            cuts = known.get(w)
            if cuts is None:
                rest.append(w)
            else:
                found[w] = cuts
        if not rest:
            return found
        distinct = dict.fromkeys(rest)
    if before_kiwi is not None and distinct:
        before_kiwi(list(distinct))
    if capacity <= 0:
        missing = list(distinct)
    else:
        cache = word_cache(capacity)
        wordfile.load_into(cache)  # once per process: the words earlier processes analysed
        hits: dict[str, tuple[int, ...]] = {}  # (its own dict: lookup counts what it puts there as hits)
        missing = cache.lookup(distinct, hits)
        found.update(hits)
    new = list(zip(missing, analyse(missing, num_workers)))
    found.update(new)
    if capacity > 0 and new:
        cache.store(new)
    return found


def text_pieces(text: str, found: dict[str, tuple[int, ...]]) -> list[str]:
    """The pieces of one normalized text from its words' cuts, "##" on those not preceded by a space."""
    out: list[str] = []
    for m in _WORD.finditer(text):
        w, s = m.group(), m.start()
        cuts = found[w]
        if not cuts:
            out.append(w if s == 0 or text[s - 1] == " " else "##" + w)
            continue
        out.append(w[:cuts[0]] if s == 0 or text[s - 1] == " " else "##" + w[:cuts[0]])
        for a, b in zip(cuts, cuts[1:]):
            out.append("##" + w[a:b])
        out.append("##" + w[cuts[-1]:])
    return out


def pieces(normalized: list[str], num_workers: int | None = None, capacity: int = 0, known: dict | None = None,
           before_kiwi=None) -> list[list[str]]:
    """The pieces of each (already normalized) text: every word's from the word list, the cache or one batched
    Kiwi call (see ``cuts_of``)."""
    found = cuts_of((w for t in normalized for w in t.split()), num_workers, capacity, known, before_kiwi)
    return [text_pieces(t, found) for t in normalized]
