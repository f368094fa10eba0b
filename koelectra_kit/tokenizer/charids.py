"""Ids of a character vocabulary without the WordPiece call, for the texts where the two must agree.

With a character vocabulary (every entry one character, or "##" + one character) WordPiece emits, for a word
whose first character is an entry and whose others have "##" forms, exactly one token per character: the first
as itself, the rest glued. For such a text Kiwi's pre-split cannot change the ids, and the ids are two dictionary
lookups per character. ``KoTokenizer.needs_kiwi`` is "``CharIds.ids`` gives None": one rule decides both whether a
text skips Kiwi and whether it skips WordPiece. Skipping WordPiece saves handing every word to the Rust tokenizer
and building an ``Encoding`` per text, several times the cost of the lookups; that is what ``label`` spends on
tokenization with the default preset (bench_label). Only ids: a caller that wants offsets or tokens takes the
WordPiece path. tests/test_tokenizer.py checks the ids equal WordPiece's (after Kiwi) on real reviews and edge cases.
"""
from __future__ import annotations


class CharIds:
    def __init__(self, vocab: dict[str, int], max_word: int):
        self.plain = {t: i for t, i in vocab.items() if len(t) == 1}
        self.glued = {t[2:]: i for t, i in vocab.items() if len(t) == 3 and t.startswith("##")}
        self.limit = max_word - 2  # WordPiece's word-length limit, with margin

    def ids(self, text: str) -> list[int] | None:
        """The WordPiece ids of a normalized text, or None where Kiwi's pieces could change them: "[" anywhere
        (placeholders are kept whole), "#" (a word starting with "##" reads as a glued piece), an empty word
        (a leading, trailing or double space; a tab or newline is not a separator here), a word over the length
        limit, or a character without its entry (its whole piece would become [UNK] or fall back)."""
        if not text:
            return []
        if "[" in text or "#" in text:
            return None
        plain, glued, limit = self.plain, self.glued, self.limit
        out: list[int] = []
        for word in text.split(" "):
            if not word or len(word) > limit:
                return None
            first = plain.get(word[0])
            if first is None:
                return None
            out.append(first)
            for c in word[1:]:
                i = glued.get(c)
                if i is None:
                    return None
                out.append(i)
        return out
