"""Which reviews to label next (``koelectra-kit suggest``): the rows of an unlabelled pool the current classifier is
least sure about, each once, none already labelled, with the model's guess beside it.

    koelectra-kit suggest model=runs/sentiment pool=reviews.csv out=next.csv n=100 labelled=labels.csv
    picked = suggest_rows(Classifier.load("runs/sentiment"), texts, n=100)   # picked.indices, picked.scores

**Margin by default.** Uncertainty sampling asks for the rows nearest the decision boundary. ``margin`` (the top-1
minus the top-2 probability; smallest first) measures exactly that: how close the model is to answering otherwise.
``entropy`` (largest first) spreads its attention over every class, so in a 3-class problem a row split between
the two likely classes scores lower than one with some mass on an implausible third; it ranks a 0.45/0.45/0.10
row below a 0.40/0.30/0.30 one, although only the first is a coin toss between two answers. Margin is the usual
choice for multi-class uncertainty sampling (Settles' survey calls it "margin sampling"; Schröder et al. 2022 found
it, as "breaking ties", the most reliable uncertainty strategy for fine-tuned transformers), and with two classes
the two orders are the same. ``random`` is the baseline a simulation compares against (seeded, reproducible).

**Never the same text twice.** Rows whose texts are equal after the tokenizer-independent normalization
(``normalize.normalize``: NFC, ㅋㅋㅋㅋ -> ㅋㅋ, whitespace collapsed) are one candidate, its first row in the pool
(the output says how many rows share it: ``copies``); a row whose normalized text appears in a ``labelled`` file is
skipped. Near-duplicates: walking the order, a row is passed over when its character 3-grams (spaces removed, since
Korean spacing varies from writer to writer) have a Jaccard similarity of at least ``dedupe_threshold`` with a row
already picked; a prefix filter compares it only with picked rows that can reach the threshold, so N in the
thousands costs little. Near-duplicates of labelled texts are not looked for: only exact (normalized) matches.

The output (``out``, written whole or not at all): ``rank`` (1 = label first), ``row`` (0-based position among the
pool's rows, malformed lines counted as rows as ``label`` writes them: the key to join it back), the pool's
columns, then the model's ``label``, ``confidence``, ``prob_<label>``, ``margin``, ``entropy`` and ``copies``
(prefixed ``suggest_`` when the pool has a column of one of those names).
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from ..classify.predictions import check_classifier, predict_args
from ..errors import ConfigError, InputError
from ..label.human import match_key

STRATEGIES = ("margin", "entropy", "random")
SHINGLE = 3  # characters per shingle in the near-duplicate test


# -- the scores ---------------------------------------------------------------------------------------------------


def margins(probs: np.ndarray) -> np.ndarray:
    """Top-1 minus top-2 probability per row [n]; small = unsure between two labels."""
    probs = np.asarray(probs, dtype=np.float64)
    if probs.shape[1] < 2:
        return np.ones(len(probs))
    top2 = np.partition(probs, -2, axis=1)[:, -2:]
    return top2[:, 1] - top2[:, 0]


def entropies(probs: np.ndarray) -> np.ndarray:
    """Entropy of each row's distribution in nats [n]; large = unsure."""
    probs = np.clip(np.asarray(probs, dtype=np.float64), 1e-12, 1.0)
    return -(probs * np.log(probs)).sum(axis=1)


# -- duplicates ---------------------------------------------------------------------------------------------------


# What makes two rows the same text: the tokenizer-independent normalization ("" for a missing text); the same key
# puts the analyst's labels over the model's in labelled files (label/human.py)
text_key = match_key


def shingles(key: str) -> frozenset:
    """Character 3-grams of a normalized text, spaces removed; a text shorter than 3 characters is its own."""
    s = key.replace(" ", "")
    return frozenset(s[i:i + SHINGLE] for i in range(len(s) - SHINGLE + 1)) or frozenset([s])


def jaccard(a: frozenset, b: frozenset) -> float:
    inter = len(a & b)
    return inter / (len(a) + len(b) - inter) if a or b else 1.0


class NearDuplicates:
    """The shingle sets of the rows picked so far; ``near(s)``: whether one has Jaccard >= ``threshold`` with ``s``.

    Prefix filter (as in set-similarity joins): if J(a, b) >= t then |a & b| >= t * max(|a|, |b|), and two sets
    sharing that many members share one among the first |x| - ceil(t |x|) + 1 members of each, in any fixed order
    (sorted here). So each picked set is indexed by its prefix only, and a new set is compared exactly with the
    picked sets its own prefix meets: the same answer as comparing with all of them (tested), in a fraction of
    the time."""

    def __init__(self, threshold: float):
        self.threshold = threshold
        self.sets: list[frozenset] = []
        self.index: dict[str, list[int]] = defaultdict(list)

    def _prefix(self, s: frozenset) -> list[str]:
        # the epsilon keeps 0.7 * 10 from rounding up to 8 (a shorter prefix would miss pairs)
        return sorted(s)[:len(s) - math.ceil(self.threshold * len(s) - 1e-9) + 1]

    def near(self, s: frozenset) -> bool:
        seen = set()
        for g in self._prefix(s):
            for j in self.index.get(g, ()):
                if j not in seen:
                    seen.add(j)
                    if jaccard(s, self.sets[j]) >= self.threshold - 1e-12:
                        return True
        return False

    def add(self, s: frozenset) -> None:
        self.sets.append(s)
        for g in self._prefix(s):
            self.index[g].append(len(self.sets) - 1)


# -- choosing the rows --------------------------------------------------------------------------------------------


@dataclass
class Suggestions:
    """The rows to label next, in the order to label them."""

    indices: np.ndarray  # positions in the texts given [m], m <= n
    scores: np.ndarray  # the strategy's score per row [m]: the margin (margin, random) or the entropy (entropy)
    probs: np.ndarray  # the model's probabilities [m, k], columns in ``labels`` order
    labels: list[str]
    strategy: str
    copies: np.ndarray  # rows among the texts with the same normalized text (1 = no repeat) [m]
    skipped: dict = field(default_factory=dict)  # empty, labelled, duplicate, near_duplicate: rows passed over

    @property
    def guesses(self) -> list[str]:
        return [self.labels[i] for i in self.probs.argmax(axis=1)] if len(self.probs) else []


def check_options(n: int, strategy: str, threshold: float) -> None:
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"n={n!r}: ask for at least 1 row")
    if strategy not in STRATEGIES:
        raise ConfigError(f"strategy={strategy!r}: use one of {', '.join(STRATEGIES)}")
    if not 0 < threshold <= 1:
        raise ConfigError(f"dedupe_threshold={threshold}: a Jaccard similarity in (0, 1] (1: only rows with the "
                          "same 3-grams count as near-duplicates)")


def suggest_rows(clf, texts: list, n: int, strategy: str = "margin", *, exclude: Iterable = (),
                 threshold: float = 0.7, seed: int = 0, batch_size: int = 128) -> Suggestions:
    """The ``n`` rows of ``texts`` to label next, least confident first (``strategy``: margin | entropy | random).
    ``exclude``: texts already labelled (compared after normalization); ``threshold``: the 3-gram Jaccard at which
    a row is a near-duplicate of one already picked. ``clf``: anything with ``labels`` and ``predict`` (a
    ``Classifier.load`` result). Empty texts (None, "") are never picked; only the candidates are predicted, and
    for ``random`` only the rows picked."""
    check_options(n, strategy, threshold)
    check_classifier(clf, "clf")
    # what every classifier's predict takes (one column of texts, a batch size of at least 1), checked before any work
    texts = predict_args(texts, batch_size)
    keys = [text_key(t) for t in texts]
    if isinstance(exclude, (str, bytes)) or hasattr(exclude, "columns"):  # its characters / column names were excluded
        raise InputError(f"exclude: a list of texts (or a set) to leave out, not {type(exclude).__name__}")
    excluded = {text_key(t) for t in exclude}  # a set is fine here: no order is answered in
    skipped = Counter(empty=0, labelled=0, duplicate=0, near_duplicate=0)
    first: dict[str, int] = {}  # normalized text -> its candidate row
    copies: Counter = Counter()
    for i, key in enumerate(keys):
        if not key:
            skipped["empty"] += 1
        elif key in excluded:
            skipped["labelled"] += 1
        elif key in first:
            skipped["duplicate"] += 1
            copies[first[key]] += 1
        else:
            first[key] = i
            copies[i] = 1
    candidates = np.fromiter(first.values(), dtype=np.int64, count=len(first))

    def predict(rows: np.ndarray) -> np.ndarray:
        if not len(rows):
            return np.zeros((0, len(clf.labels)))
        return np.asarray(clf.predict([texts[i] for i in rows], batch_size=batch_size).probs, dtype=np.float64)

    if strategy == "random":
        order = candidates[np.random.default_rng(seed).permutation(len(candidates))]
        chosen = _walk(order, keys, n, threshold, skipped)
        indices, probs = order[chosen], predict(order[chosen])
        scores = margins(probs)
    else:
        all_probs = predict(candidates)
        score = margins(all_probs) if strategy == "margin" else -entropies(all_probs)
        rank = np.argsort(score, kind="stable")  # least confident first; ties in pool order
        chosen = _walk(candidates[rank], keys, n, threshold, skipped)
        indices, probs = candidates[rank][chosen], all_probs[rank][chosen]
        scores = margins(probs) if strategy == "margin" else entropies(probs)
    return Suggestions(indices=indices, scores=scores, probs=probs, labels=list(clf.labels), strategy=strategy,
                       copies=np.array([copies[i] for i in indices], dtype=np.int64), skipped=dict(skipped))


def _walk(order: np.ndarray, keys: list[str], n: int, threshold: float, skipped: Counter) -> np.ndarray:
    """Positions in ``order`` of the first ``n`` rows that are no near-duplicate of a row taken before them."""
    taken, near = [], NearDuplicates(threshold)
    for pos, i in enumerate(order):
        s = shingles(keys[i])
        if near.near(s):
            skipped["near_duplicate"] += 1
            continue
        near.add(s)
        taken.append(pos)
        if len(taken) == n:
            break
    return np.array(taken, dtype=np.int64)
