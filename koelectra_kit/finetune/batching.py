"""Which rows go into each training batch. Padding is per batch (``classifier.collate``), so batches of
similar length waste little compute on [PAD]."""
from __future__ import annotations

import numpy as np


def length_grouped_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                           mega: int = 50) -> list[np.ndarray]:
    """Shuffle, cut into mega-batches of ``mega * batch_size``, sort each by length, slice batches,
    shuffle the batch order. Batches hold similar lengths (little padding) while every epoch still
    sees a fresh random mix, as in HF's LengthGroupedSampler. The longest batch goes first so an
    out-of-memory error shows on step 1, not an hour in."""
    perm = rng.permutation(len(lengths))
    batches = []
    for start in range(0, len(perm), batch_size * mega):
        chunk = perm[start:start + batch_size * mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    batches = [batches[i] for i in rng.permutation(len(batches))]
    longest = int(np.argmax([lengths[b].max() for b in batches]))
    batches[0], batches[longest] = batches[longest], batches[0]
    return batches


def shuffled_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    perm = rng.permutation(n)
    return [perm[i:i + batch_size] for i in range(0, n, batch_size)]
