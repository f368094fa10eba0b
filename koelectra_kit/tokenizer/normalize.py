"""Normalization for noisy Korean comment text, with a map back to the text as given.

Steps, in order: control and zero-width characters removed; Unicode NFC (never NFKC: it rewrites
compatibility jamo such as ㅋ U+314B, and lowercasing/accent stripping decomposes Hangul); URLs, e-mails and
@mentions kept, replaced by placeholders or removed; emoji kept or removed; runs of one repeated character
(ㅋㅋㅋㅋ, !!!!!, ㅠㅠㅠ, 하하하하) cut to ``repeat_limit`` (digits and ASCII letters never: 1000000, www);
whitespace runs collapsed to one space, ends stripped.

``normalize(text)`` is the fast path (regex passes only) for corpora; ``normalize_with_map(text)`` gives the same
string plus, for every output character, the span of the input it came from, so token offsets can point into
the text as the user gave it. Both share the passes below, so they cannot disagree.
"""
from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from typing import Literal

PLACEHOLDERS = {"urls": "[URL]", "emails": "[EMAIL]", "mentions": "[USER]"}


@dataclass
class NormalizeConfig:
    nfc: bool = True  # Unicode NFC (composes decomposed Hangul jamo; never NFKC)
    remove_control: bool = True  # C0/C1 controls, zero-width spaces/joiners, BOM, soft hyphen
    repeat_limit: int = 2  # longest run of one repeated character kept (ㅋㅋㅋㅋ -> ㅋㅋ); 0 = keep all
    urls: Literal["keep", "placeholder", "remove"] = "keep"  # placeholder: [URL]
    emails: Literal["keep", "placeholder", "remove"] = "keep"  # placeholder: [EMAIL]
    mentions: Literal["keep", "placeholder", "remove"] = "keep"  # @name; placeholder: [USER]
    emoji: Literal["keep", "remove"] = "keep"
    collapse_whitespace: bool = True  # any whitespace run (tabs, newlines, NBSP) -> one space; ends stripped

    def validate(self) -> None:
        from ..errors import ConfigError

        if self.repeat_limit < 0:
            raise ConfigError(f"normalize.repeat_limit must be >= 0, got {self.repeat_limit}")


_CONTROL = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u00ad\u200b-\u200f\u2028\u2029\u202a-\u202e"
                      "\u2060-\u2064\ufeff\ufff9-\ufffb]")
_URL = re.compile(r"(?:https?://|www\.)[^\s<>\"']+", re.IGNORECASE)
_EMAIL = re.compile(r"[\w.+-]+@[\w-]+(?:\.[\w-]+)+")
_MENTION = re.compile(r"(?<![\w@])@[\w.]{1,40}")
# Pictographs, dingbats, flags, skin tones, ZWJ/variation selectors that glue emoji sequences together.
_EMOJI = re.compile("[\U0001F000-\U0001FAFF\u2600-\u27BF\u2B00-\u2BFF\u2300-\u23FF\uFE0E\uFE0F\u200D"
                    "\U0001F1E6-\U0001F1FF\U0001F3FB-\U0001F3FF\u3030\u303D\u3297\u3299]+")
_WS = re.compile(r"\s+")


def _repeat_re(limit: int) -> re.Pattern:
    # One non-space, non-digit, non-ASCII-letter character repeated more than `limit` times.
    return re.compile(r"([^\s0-9A-Za-z])\1{%d,}" % limit)


class Normalizer:
    """Compiled passes for one NormalizeConfig. Each pass is (pattern, kind, replacement):
    kind "drop" removes the match, "replace" puts a fixed string spanning the whole match, "keep_n" keeps the
    match's first n characters (repeats), "space" puts one space (whitespace runs)."""

    def __init__(self, cfg: NormalizeConfig | None = None):
        self.cfg = cfg = cfg or NormalizeConfig()
        passes: list[tuple[re.Pattern, str, object]] = []
        if cfg.remove_control:
            passes.append((_CONTROL, "drop", None))
        self._pre = passes  # before NFC
        post: list[tuple[re.Pattern, str, object]] = []
        for key, pattern in (("urls", _URL), ("emails", _EMAIL), ("mentions", _MENTION)):
            mode = getattr(cfg, key)
            if mode != "keep":
                post.append((pattern, "drop" if mode == "remove" else "replace", PLACEHOLDERS[key]))
        if cfg.emoji == "remove":
            post.append((_EMOJI, "drop", None))
        if cfg.repeat_limit > 0:
            post.append((_repeat_re(cfg.repeat_limit), "keep_n", cfg.repeat_limit))
        if cfg.collapse_whitespace:
            post.append((_WS, "space", None))
        self._post = post

    # -- fast path: the string only
    def __call__(self, text: str) -> str:
        text = _SURROGATE.sub("\ufffd", text)
        for pattern, kind, arg in self._pre:
            text = pattern.sub("", text)
        if self.cfg.nfc and not unicodedata.is_normalized("NFC", text):
            text = unicodedata.normalize("NFC", text)
        for pattern, kind, arg in self._post:
            if kind == "drop":
                text = pattern.sub("", text)
            elif kind == "replace":
                text = pattern.sub(" " + arg + " " if self.cfg.collapse_whitespace else arg, text)
            elif kind == "keep_n":
                text = pattern.sub(lambda m: m.group(0)[:arg], text)
            else:  # (the last pass) whitespace runs to one space, ends stripped: as the pattern and strip() (both take
                # str.isspace's characters), in a third of the time
                text = " ".join(text.split())
        return text.strip() if self.cfg.collapse_whitespace else text

    # -- with a map: out char i came from input[starts[i]:ends[i]]
    def with_map(self, text: str) -> tuple[str, list[int], list[int]]:
        text = _SURROGATE.sub("\ufffd", text)  # one character for one: the maps stay as they are
        starts = list(range(len(text)))
        ends = list(range(1, len(text) + 1))
        for pattern, kind, arg in self._pre:
            text, starts, ends = _apply(pattern, kind, arg, text, starts, ends, self.cfg.collapse_whitespace)
        if self.cfg.nfc and not unicodedata.is_normalized("NFC", text):
            text, starts, ends = _nfc_with_map(text, starts, ends)
        for pattern, kind, arg in self._post:
            text, starts, ends = _apply(pattern, kind, arg, text, starts, ends, self.cfg.collapse_whitespace)
        if self.cfg.collapse_whitespace:
            lead = len(text) - len(text.lstrip())
            stripped = text.strip()
            starts, ends = starts[lead:lead + len(stripped)], ends[lead:lead + len(stripped)]
            text = stripped
        return text, starts, ends


def _apply(pattern, kind, arg, text, starts, ends, pad_placeholders):
    out, s_out, e_out = [], [], []
    pos = 0
    for m in pattern.finditer(text):
        a, b = m.span()
        out.append(text[pos:a])
        s_out.extend(starts[pos:a])
        e_out.extend(ends[pos:a])
        if kind == "keep_n":
            out.append(text[a:a + arg])
            s_out.extend(starts[a:a + arg])
            e_out.extend(ends[a:a + arg])
        elif kind in ("replace", "space"):
            rep = " " if kind == "space" else (" " + arg + " " if pad_placeholders else arg)
            out.append(rep)
            s_out.extend([starts[a]] * len(rep))
            e_out.extend([ends[b - 1]] * len(rep))
        pos = b
    if pos == 0 and not out:
        return text, starts, ends
    out.append(text[pos:])
    s_out.extend(starts[pos:])
    e_out.extend(ends[pos:])
    return "".join(out), s_out, e_out


# Where NFC may compose a character with the one before: combining marks (class != 0) and Hangul vowel and
# trailing jamo (class 0, composed by the Hangul algorithm)
_NO_BREAK = re.compile(r"[\u1160-\u11ff]")


def _nfc_with_map(text, starts, ends):
    """NFC per whitespace-separated chunk. A chunk whose length changes is cut where nothing composes across
    (before a character that is neither a combining mark nor a Hangul vowel/trailing jamo), so each composed
    character maps to exactly the characters it came from: decomposed 샐 inside "해리와샐리가" maps to its own
    three jamo, not to a proportional slice of the word. Should a cut ever change the result, the chunk maps
    proportionally as a whole."""
    out, s_out, e_out = [], [], []
    for m in re.finditer(r"\S+|\s+", text):
        a, b = m.span()
        chunk = m.group(0)
        new = unicodedata.normalize("NFC", chunk)
        out.append(new)
        if len(new) == len(chunk):
            s_out.extend(starts[a:b])
            e_out.extend(ends[a:b])
            continue
        cuts = [a] + [a + i for i in range(1, len(chunk)) if not unicodedata.combining(chunk[i])
                      and not _NO_BREAK.match(chunk[i])] + [b]
        parts = [(lo, hi, unicodedata.normalize("NFC", text[lo:hi])) for lo, hi in zip(cuts, cuts[1:])]
        if "".join(p for _, _, p in parts) != new:
            parts = [(a, b, new)]
        for lo, hi, part in parts:
            n, k = hi - lo, len(part)
            for j in range(k):  # proportional inside a part: exact for 2-3 jamo -> one syllable, or 1 -> 1
                i0, i1 = lo + (j * n) // k, lo + max((j * n) // k + 1, ((j + 1) * n) // k)
                s_out.append(starts[i0])
                e_out.append(ends[i1 - 1])
    return "".join(out), s_out, e_out


_DEFAULT = None


# A lone surrogate (half of a UTF-16 pair, "\ud800": what a bad decode or a JSON escape leaves in a Python str) is no
# character: the Rust tokenizer refused the text with a TypeError and the word cache could not be saved at exit.
# It becomes U+FFFD, one character for one.
_SURROGATE = re.compile("[\ud800-\udfff]")


def normalize(text: str, cfg: NormalizeConfig | None = None) -> str:
    """Normalize one text (``Normalizer(cfg)(text)``; the default config's normalizer is cached)."""
    global _DEFAULT
    if cfg is None:
        if _DEFAULT is None:
            _DEFAULT = Normalizer()
        return _DEFAULT(text)
    return Normalizer(cfg)(text)


def normalize_with_map(text: str, cfg: NormalizeConfig | None = None) -> tuple[str, list[int], list[int]]:
    return Normalizer(cfg).with_map(text)
