"""Characters outside a WordPiece alphabet, without losing their piece to [UNK].

WordPiece turns a whole word into one [UNK] when a single character of it is outside the vocabulary:
"해리와샐리가" came back as "해리와 [UNK]가". With a 16k vocabulary trained on 14 MB of reviews and comments
(alphabet: all 3,308 characters seen), 36 of 10,000 nsmc3 dev reviews held a character it never saw: 24 a
Hangul syllable (뇾, 섦, 헠...), 12 something else (hanja 綠林 復讐, fullwidth ；＇, ↖ ⌒ Ⅰ, compatibility jamo ㅝ).
So both kinds need a fallback that keeps the text exact.

Only the words fed to WordPiece change, and only those with a character outside the alphabet (``needed`` checks
a whole text with one set operation; most texts stop there):

- a Hangul syllable the vocabulary lacks (in the form its position needs: "c" at the start of a word, "##c"
  after) becomes its conjoining jamo, inline (샐 -> ᄉ ᅢ ᆯ). Every new alphabet holds the 67 modern conjoining
  jamo and their "##" forms (``fallback_tokens``), so the syllable stays readable to the model, and decode
  recomposes it exactly: NFC text never holds a modern leading jamo before a vowel jamo, so every such pair
  in the decoded string came from the fallback;
- any other non-ASCII character becomes its UTF-8 bytes, tokens <0xNN> (as sentencepiece's byte fallback),
  each its own WordPiece word so no learned piece can take part of it. A lead byte has a "##" form and a plain
  one (word start, the decoder puts a space before it), a continuation byte only the "##" form: 166 tokens;
- printable ASCII is always in the alphabet too (a 16k vocabulary has it all anyway; a tiny one missed "<" or
  "E"), so only an ASCII control character (kept when normalize.remove_control is off) is left: a one-character
  [UNK], never its neighbours. "<" is always its own word, so no text can spell a byte token;
- a word longer than WordPiece's limit (``max_input_chars_per_word``) is cut into chunks instead of one [UNK].

Every fallback token's offsets cover exactly the character it came from (a jamo: its syllable).
"""
from __future__ import annotations

import re

NAME = "jamo_bytes"  # the value saved as "fallback" in koelectra_tokenizer.json
HANGUL_FIRST, HANGUL_LAST = 0xAC00, 0xD7A3
# modern conjoining jamo: leading U+1100-1112, vowels U+1161-1175, trailing U+11A8-11C2
JAMO = [chr(c) for c in (*range(0x1100, 0x1113), *range(0x1161, 0x1176), *range(0x11A8, 0x11C3))]
LEAD_BYTES, CONT_BYTES = range(0xC2, 0xF5), range(0x80, 0xC0)  # UTF-8 lead bytes of non-ASCII, continuations
_RECOMPOSE = re.compile("([\u1100-\u1112])([\u1161-\u1175])([\u11a8-\u11c2]?)")


def byte_token(b: int) -> str:
    return f"<0x{b:02X}>"


def fallback_tokens() -> list[str]:
    """The tokens a vocabulary needs for the fallback: jamo 2 x 67, bytes 2 x 51 + 64, printable ASCII 2 x 94
    (which a real vocabulary already holds)."""
    chars = [*JAMO, *map(chr, range(0x21, 0x7F))]
    return [*chars, *("##" + c for c in chars), *(byte_token(b) for b in LEAD_BYTES),
            *("##" + byte_token(b) for b in (*LEAD_BYTES, *CONT_BYTES))]


BYTE_TOKENS = frozenset(t for t in fallback_tokens() if len(t) > 3)


def jamo(ch: str) -> str:
    """A precomposed Hangul syllable as its leading, vowel and (when it has one) trailing conjoining jamo."""
    i = ord(ch) - HANGUL_FIRST
    return chr(0x1100 + i // 588) + chr(0x1161 + i % 588 // 28) + (chr(0x11A7 + i % 28) if i % 28 else "")


def _compose(m: re.Match) -> str:
    lead, vowel, tail = m.groups()
    return chr(HANGUL_FIRST + ((ord(lead) - 0x1100) * 21 + ord(vowel) - 0x1161) * 28
               + (ord(tail) - 0x11A7 if tail else 0))


def recompose(text: str) -> str:
    """Jamo runs the fallback wrote, back to their syllables (the inverse of ``jamo``; nothing else changes)."""
    return _RECOMPOSE.sub(_compose, text)


class Fallback:
    """The fallback for one WordPiece vocabulary: which characters it knows, how to rewrite the words of a text
    that holds others, and how to decode byte tokens."""

    def __init__(self, vocab: dict[str, int], max_word: int):
        missing = [t for t in fallback_tokens() if t not in vocab]
        if missing:
            from ..errors import ConfigError

            raise ConfigError(f"fallback {NAME!r} needs {len(missing)} tokens this vocabulary lacks (e.g. "
                              f"{missing[0]!r}): only vocabularies trained with it can use it")
        self.plain = frozenset(t for t in vocab if len(t) == 1)
        self.glued = frozenset(t[2:] for t in vocab if len(t) == 3 and t[:2] == "##")
        # a text made of these (and spaces) needs nothing: every character has both forms
        self.safe = frozenset((self.plain & self.glued) - {"<"}) | {" "}
        self.limit = max_word
        self.byte_of = {vocab[t]: int(t[-3:-1], 16) for t in BYTE_TOKENS}

    def needed(self, text: str) -> bool:
        """Whether any word of ``text`` (a normalized text, or a pre-split line) may need a rewrite."""
        room = self.limit - 2  # a "##" word's mark counts toward WordPiece's length limit
        return not self.safe.issuperset(text) or (len(text) > room and any(len(w) > room for w in text.split(" ")))

    def rewrite(self, pieces: list[str], normalized: str | None = None):
        """(words for WordPiece, and for each word where its characters are in ``normalized``: (start, length of
        its "##" mark) for a piece left as it is, else the span of each character; None when no text is given).
        Pieces are found in ``normalized`` by the same walk as ``KoTokenizer._offsets``."""
        words: list[str] = []
        spans: list[list[tuple[int, int]]] | None = [] if normalized is not None else None
        pos = 0
        for p in pieces:
            m = 2 if p[:2] == "##" else 0
            body = p[m:]
            if normalized is not None:
                pos = normalized.find(body, pos)
            self._piece(body, m == 2, pos, words, spans)
            pos += len(body)
        return words, spans

    def rewrite_line(self, line: str) -> str:
        """One line of a pre-split cache file (pieces joined by spaces), rewritten."""
        return " ".join(self.rewrite(line.split(" "))[0]) if line and self.needed(line) else line

    def _piece(self, body: str, marked: bool, pos: int, words: list, spans: list | None) -> None:
        plain, glued = self.plain, self.glued
        if not body:  # a piece that is only "##" (the text's own "##", read as a mark): as it always was
            words.append("##")
            if spans is not None:
                spans.append((pos, 2))
            return
        if "<" not in body and len(body) + 2 <= self.limit and body[0] in (glued if marked else plain) \
                and glued.issuperset(body[1:]):
            words.append("##" + body if marked else body)  # the usual case: the piece as it is
            if spans is not None:
                spans.append((pos, 2 * marked))
            return
        cur: list[str] = []  # the word being built: its characters ("##" mark included) and their spans
        cmap: list[tuple[int, int]] = []

        def flush():
            if cur:
                self._emit("".join(cur), cmap, words, spans)
                cur.clear()
                cmap.clear()

        for k, ch in enumerate(body):
            start = k == 0 and not marked  # the one position that needs the plain form
            span = (pos + k, pos + k + 1)
            known = ch != "<" and ch in (plain if start else glued)
            if known or HANGUL_FIRST <= ord(ch) <= HANGUL_LAST:
                if not cur and not start:
                    cur.append("##")
                    cmap += [span, span]
                part = ch if known else jamo(ch)
                cur.append(part)
                cmap += [span] * len(part)
                continue
            flush()
            if ch != "<" and ord(ch) > 0x7F and not 0xD800 <= ord(ch) <= 0xDFFF:  # (a lone surrogate has no UTF-8)
                for i, b in enumerate(ch.encode("utf-8")):
                    word = ("" if start and i == 0 else "##") + byte_token(b)
                    self._emit(word, [span] * len(word), words, spans)
            else:  # "<", or an ASCII character outside the alphabet: its own word ([UNK] when unknown)
                self._emit(ch if start else "##" + ch, [span] * (1 if start else 3), words, spans)
        flush()

    def _emit(self, word: str, cmap: list, words: list, spans: list | None) -> None:
        """Append one word, cut into chunks WordPiece's length limit accepts (each further chunk glued, "##")."""
        while len(word) > self.limit:
            words.append(word[:self.limit])
            if spans is not None:
                spans.append(cmap[:self.limit])
            word, cmap = "##" + word[self.limit:], cmap[self.limit:self.limit + 1] * 2 + cmap[self.limit:]
        words.append(word)
        if spans is not None:
            spans.append(list(cmap))

    def decode(self, backend, ids: list[int]) -> str:
        """Ids -> text: byte tokens back to their characters, jamo back to syllables. Without byte tokens the
        backend's decoder does the joining; with them, the same rule in Python (WordPiece's decoder: a token
        after the first is glued when it starts with "##", else a space goes before it)."""
        if self.byte_of.keys().isdisjoint(ids):
            return recompose(backend.decode(ids, skip_special_tokens=False))
        out: list[str] = []
        pending = bytearray()
        for i, t in enumerate(ids):
            tok = backend.id_to_token(t)
            glued = i > 0 and tok[:2] == "##"
            b = self.byte_of.get(t)
            if pending and (b is None or not glued):
                out.append(pending.decode("utf-8", "replace"))  # an invalid sequence (cut by truncation): U+FFFD
                pending.clear()
            if i and not glued:
                out.append(" ")
            if b is not None:
                pending.append(b)
            else:
                out.append(tok[2:] if glued else tok)
        if pending:
            out.append(pending.decode("utf-8", "replace"))
        return recompose("".join(out))
