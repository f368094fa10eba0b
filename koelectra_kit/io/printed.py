"""Label names (any user's: Korean, long, with commas) as the toolkit prints them for people.

- Tables are padded by the columns a terminal gives each character, not by ``len``: a Hangul syllable (and any East
  Asian wide or fullwidth character) takes two columns, a combining mark none. ``f"{lab:<12}"`` padded '기쁨' as if
  it were two columns wide, so the numbers after a Korean label stood two columns right of an English one's.
- Lists of labels are comma-separated, so a label that holds a comma ("웃김, 재미있음") is quoted: it read as two.

    lines.append(f"  {pad(label, width)}{count:>10,}")   # width: max(display_width(lab) for lab in labels)
    print("labels: " + label_list(labels))               # 기쁨, "웃김, 재미있음", 슬픔
"""
from __future__ import annotations

import json
import unicodedata


def _columns(c: str) -> int:
    if unicodedata.category(c) in ("Mn", "Me") or "\u1160" <= c <= "\u11ff":
        return 0  # a combining mark; a decomposed (NFD, as a Mac writes) syllable's vowel and final jamo join its first
    return 2 if unicodedata.east_asian_width(c) in "WF" else 1


def display_width(text: str) -> int:
    """Terminal columns of ``text``: 2 for an East Asian wide or fullwidth character (a Hangul syllable, a leading
    jamo), 0 for a combining mark, 1 for anything else."""
    return sum(_columns(c) for c in str(text))


def pad(text: str, width: int, right: bool = False) -> str:
    """``text`` filled with spaces to ``width`` columns (on the left with ``right``: right-aligned); never cut."""
    fill = " " * max(width - display_width(text), 0)
    return fill + str(text) if right else str(text) + fill


def quoted(label: str) -> str:
    """``label`` as an item of a comma-separated list: as it is, or in double quotes (JSON's escapes) when it holds a
    comma or a quote, is empty, or starts or ends with a space, so the list reads back one way."""
    text = str(label)
    if not text or text != text.strip() or any(c in text for c in ",\"'"):
        return json.dumps(text, ensure_ascii=False)
    return text


def label_list(labels) -> str:
    """``labels`` comma-separated, each ``quoted``: ``기쁨, "웃김, 재미있음", 슬픔``."""
    return ", ".join(quoted(lab) for lab in labels)
