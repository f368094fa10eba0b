"""Special-token strings in a text ("[MASK]", "[SEP]", ...) kept whole, as transformers' tokenizers keep them.

transformers and tokenizers split a text at the strings of its added tokens before normalizing and pre-tokenizing
it (``split_special_tokens=False``, their default): "영화[MASK]재밌다" is 영화 / [MASK] / 재밌다, each part encoded
as a text of its own, each special string its id. Our normalization and Kiwi pre-split ran on the whole text and
cut "[MASK]" into "[", "##MASK", "##]", so ``pipeline("fill-mask")`` found no mask token in its own input.

``SpecialStrings.split`` cuts texts into those parts; the tokenizer (``KoTokenizer.encode_batch``, its pre-split,
and the corpus pre-split of ``cache.PieceJob``) runs its usual steps on the parts, and ``regroup`` puts each
text's results back together around its special strings. A text without one is one part, the text itself: it
goes the way it always did, to the same ids (tests/test_tokenizer_special.py pins them).
"""
from __future__ import annotations

import re
from collections import deque
from typing import Iterable, Iterator, TypeVar

T = TypeVar("T")


class SpecialStrings:
    """The strings of a tokenizer's added tokens ([PAD] [UNK] [CLS] [SEP] [MASK] for every tokenizer this toolkit
    trains), found in texts the way tokenizers' added-vocabulary matcher finds them: leftmost, then longest."""

    def __init__(self, strings: Iterable[str]):
        # longest first: an alternation takes the first alternative that matches at a position
        self.strings = tuple(sorted({s for s in strings if s}, key=lambda s: (-len(s), s)))
        self._re = re.compile("|".join(map(re.escape, self.strings))) if self.strings else None
        firsts = {s[0] for s in self.strings}
        # the character all of them start with ("["): a text without it is passed by with one `in` (~50 ns)
        self._first = firsts.pop() if len(firsts) == 1 else None

    def __bool__(self) -> bool:
        return self._re is not None

    def find(self, text: str) -> list[re.Match]:
        """The special strings in ``text``, in order, not overlapping ([] for nearly every text)."""
        if self._re is None or (self._first is not None and self._first not in text):
            return []
        return list(self._re.finditer(text))

    def split(self, texts: list[str], trim: bool = False) -> tuple[list[str], list[list[re.Match]], list[list[tuple]]]:
        """(the parts of every text, in order; each text's special strings; each text's parts as (start, end) spans
        in it). A text with k special strings has k + 1 parts, some maybe empty; one without any is one part, the
        text as it is. ``trim``: parts without the spaces around them (texts normalized already, where the
        tokenizer's normalization would have stripped them)."""
        parts, found, spans = [], [], []
        for text in texts:
            f = self.find(text)
            cuts, start = [], 0
            for m in f:
                cuts.append(_trimmed(text, start, m.start()) if trim else (start, m.start()))
                start = m.end()
            cuts.append(_trimmed(text, start, len(text)) if trim and f else (start, len(text)))
            parts.extend(text[a:b] for a, b in cuts)
            found.append(f)
            spans.append(cuts)
        return parts, found, spans


def _trimmed(text: str, a: int, b: int) -> tuple[int, int]:
    while a < b and text[a].isspace():
        a += 1
    while b > a and text[b - 1].isspace():
        b -= 1
    return a, b


def regroup(results: Iterable[T], found) -> Iterator[tuple[T, list[tuple[re.Match, T]]]]:
    """Per text, its first part's result and, for each of its special strings, (the match, the next part's
    result): the parts' results (one per part, in order) put back together. ``found``: each text's matches, a
    list, or a deque that the producer of ``results`` appends to before it yields the text's parts (streaming)."""
    results = iter(results)
    found = found if isinstance(found, deque) else deque(found)
    for first in results:
        yield first, [(m, next(results)) for m in found.popleft()]


def joined(first: list[str], rest: list[tuple[re.Match, list[str]]]) -> list[str]:
    """One text's pre-split pieces: its parts' pieces, each special string a piece of its own between them."""
    out = list(first)
    for m, pieces in rest:
        out.append(m.group())
        out.extend(pieces)
    return out
