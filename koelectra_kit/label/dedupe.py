"""Never analyse the same text twice. Review files repeat themselves (in a crawl of Korean app-store reviews a
quarter of the texts are exact repeats: "굿", "좋아요", "최고"), and the classifier is a pure function of the
normalized text: the tokenizer normalizes first and every id after that (Kiwi pre-split, WordPiece) depends on
the normalized text only. So rows whose normalized texts are equal get one prediction, computed once, saving
both Kiwi and inference:

- within a chunk, each distinct normalized text is predicted once and its row of probabilities copied;
- across chunks (and across the files of one run), a bounded LRU of recent predictions answers repeats
  without predicting at all.

The labels and probabilities are the ones the model gives that text; the output is the same as without
deduplication (tested).
"""
from __future__ import annotations

from collections import OrderedDict

import numpy as np

# Rows the cross-chunk cache remembers: ~100 bytes of arrays + the key each, so ~30 MB at most for short texts.
CACHE_ROWS = 100_000
# Longer texts are deduplicated within a chunk but never kept across chunks: long reviews hardly ever repeat,
# and 100k of them as keys would cost hundreds of MB (memory must stay flat however big the file).
CACHE_MAX_CHARS = 200


class PredictionCache:
    """An LRU of normalized text -> (probabilities row, truncated flag), plus the count of rows it saved.
    ``max_rows=0`` keeps nothing across chunks (within-chunk deduplication only)."""

    def __init__(self, max_rows: int = CACHE_ROWS):
        self.max_rows = max_rows
        self.entries: OrderedDict[str, tuple[np.ndarray, bool]] = OrderedDict()
        self.reused = 0  # rows whose prediction was copied from an identical text's (in the chunk or cached)
        self.hits = 0  # of those, rows answered from an earlier chunk

    def get(self, key: str):
        hit = self.entries.get(key)
        if hit is not None:
            self.entries.move_to_end(key)
        return hit

    def put(self, key: str, probs: np.ndarray, truncated: bool) -> None:
        if self.max_rows <= 0 or len(key) > CACHE_MAX_CHARS:
            return
        self.entries[key] = (probs.copy(), bool(truncated))  # a copy: the chunk's array is not kept alive
        self.entries.move_to_end(key)
        if len(self.entries) > self.max_rows:
            self.entries.popitem(last=False)


def _normalizer(clf):
    """The classifier tokenizer's own normalization, or None for a tokenizer without one."""
    tok = getattr(clf, "tok", None)
    return tok.normalize if tok is not None and hasattr(tok, "normalize") else None


def predict_once(clf, texts: list[str], batch_size: int | None, cache: PredictionCache | None):
    """(probs [n, k], truncated [n]) for ``texts``, in order, each distinct normalized text predicted at most
    once (none of them when ``cache`` is None: then every text is predicted, the old way)."""
    if cache is None:
        pred = clf.predict(texts, batch_size=batch_size)
        return pred.probs, list(pred.truncated)
    normalize = _normalizer(clf)
    keyed = normalize is not None  # the keys are the tokenizer's input, normalized: predict them as they are
    normalize = normalize or (lambda t: t)
    n, k = len(texts), len(clf.labels)
    probs = np.zeros((n, k), dtype=np.float32)
    truncated = [False] * n
    first: dict[str, int] = {}  # normalized text -> its position among the texts to predict
    new_texts, new_keys, pending = [], [], []  # pending: (row, position among the new texts)
    alike = clf.tok.normalized_reads_alike if keyed and hasattr(clf.tok, "normalized_reads_alike") else None
    raw = []  # (row, text): texts whose normalized key would read otherwise ("[MA\u200bSK]"): predicted as given
    for i, text in enumerate(texts):
        key = normalize(text)
        if alike is not None and not alike(text, key):
            raw.append((i, text))
            continue
        hit = cache.get(key)
        if hit is not None:
            probs[i], truncated[i] = hit
            cache.reused += 1
            cache.hits += 1
            continue
        j = first.get(key)
        if j is None:
            j = first[key] = len(new_texts)
            new_texts.append(key if keyed else text)
            new_keys.append(key)
        else:
            cache.reused += 1
        pending.append((i, j))
    if new_texts:
        pred = clf.predict(new_texts, batch_size=batch_size, normalized=keyed)
        rows, cols = zip(*pending)
        probs[list(rows)] = pred.probs[list(cols)]
        for i, j in pending:
            truncated[i] = bool(pred.truncated[j])
        for j, key in enumerate(new_keys):
            cache.put(key, pred.probs[j], pred.truncated[j])
    if raw:
        pred = clf.predict([t for _, t in raw], batch_size=batch_size)
        for j, (i, _) in enumerate(raw):
            probs[i], truncated[i] = pred.probs[j], bool(pred.truncated[j])
    return probs, truncated
