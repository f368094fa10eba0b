"""Which values are review text: ``is_blank`` (empty to a reader, invisible characters included), ``looks_like_text``
(not a number, date, time, fraction or id), and the check that a column picked as the text column holds text
(``check_text_column``; ``checked_texts`` for a stream's head). Every reader decides with these: training drops
blank texts, ``label`` flags them ``empty``, and a rating or id column named as the text is refused."""
from __future__ import annotations

import re
from itertools import islice

from ..errors import InputError


_NUMBER = re.compile(r"[+-]?(\d+([.,]\d*)?|[.,]\d+)(e[+-]?\d+)?", re.IGNORECASE)
# What a column of records holds besides review text: dates (2024-01-02, 2024.1.2, 2024년 1월 2일, with a time or
# not), times, fractions (5/5), UUIDs and ids (letters and digits with a digit, no space: a1b2c3, ORD-1042).
# A review is never only one of these (a review of "10" or "5/5" alone exists, hence the share below, not "any").
_NOT_TEXT = re.compile(r"""\s*(?:
    [+-]?(?:\d[\d,]*(?:\.\d*)?|\.\d+)(?:e[+-]?\d+)?%?
  | \d{2,4}\s*[-./년]\s*\d{1,2}\s*[-./월]\s*\d{1,4}\s*일?\.?(?:\s*[T ]?\s*\d{1,2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?
  | \d{1,2}:\d{2}(?::\d{2})?
  | \d+\s*/\s*\d+
  | (?=[a-z_-]*\d)[a-z0-9_-]{3,}
)\s*""", re.IGNORECASE | re.VERBOSE)
TEXT_SHARE = 0.1  # a column where under 10% of the non-empty values could be a review is not the review column
EMPTY_SHARE = 0.9  # nor one that is empty in 90% of its rows (from 20 rows on)


# What an empty text is made of: whitespace, and the characters that show nothing yet are no whitespace to
# str.strip(): zero-width space, non-joiner and joiner, directional marks, word joiner and invisible operators, BOM,
# soft hyphen (what a copy from a web page leaves in an empty cell). A text of only these was trained on as a text
# and labelled as one (the tokenizer's normalizer removes them: the model saw an empty string).
_BLANK = re.compile(r"[\s\u00ad\u200b-\u200f\u2060-\u2064\ufeff]*")


def is_blank(text: str) -> bool:
    """Whether ``text`` is empty to a reader: nothing in it but whitespace and invisible characters (``_BLANK``);
    the one definition training (dropped as empty texts) and labelling (status ``empty``) share."""
    return _BLANK.fullmatch(text) is not None


def looks_like_text(value) -> bool:
    """Whether ``value`` could be a review: not empty and not a number, date, time, fraction or id."""
    text = "" if value is None else str(value).strip()
    return not is_blank(text) and _NOT_TEXT.fullmatch(text) is None


def typed_not_text(value) -> bool:
    """Whether ``value``'s type says it is no text, whatever it prints as: a date, time, duration or true/false (a
    DataFrame's, a Parquet file's or a JSON line's typed value; a CSV's cells are all strings)."""
    import datetime

    if isinstance(value, (bool, datetime.date, datetime.time, datetime.timedelta)):  # pandas' Timestamp, Timedelta too
        return True
    kind = type(value)  # numpy's and pandas' own, by name (numpy 1 calls its bool bool_, numpy 2 bool)
    return (kind.__module__ == "numpy" and kind.__name__ in ("bool", "bool_", "datetime64", "timedelta64")) or \
        kind.__name__ == "Period"


class MostlyEmptyColumn(InputError):
    """A text column refused as empty in ``EMPTY_SHARE`` of its first rows: the one refusal a user may overrule
    (``label --allow-mostly-empty``, the app's "label it anyway"), since such an export exists."""


def checked_texts(texts, column, columns, path, sample: int = 1000):
    """``texts`` streamed, after ``check_text_column`` on the first ``sample`` of them: a corpus table's text column
    (pretraining, a tokenizer) picked by mistake (text_column=id) was trained on as digits, exit 0."""
    texts = iter(texts)
    head = list(islice(texts, sample))
    check_text_column(head, column, columns, path)
    yield from head
    yield from texts


def check_text_column(values, column, columns, path, empty: bool = False) -> None:
    """A text column that holds no review text is a rating, date or id column picked by mistake
    (text_column=rating, or a file with no text column at all): each value would be labelled, or trained on, as a
    review, exit 0. Refused when at least three values are filled and under ``TEXT_SHARE`` of them could be text,
    or when every filled value is typed as no text (``typed_not_text``: a bool column was labelled as the words
    "True" and "False", two dates and a gap as two reviews); with ``empty`` (labelling), also when ``EMPTY_SHARE`` of
    20 or more rows are empty. ``values``: the column's values, or its first chunk when streaming."""
    filled = numbers = texts = typed = rows = 0
    for v in values:
        rows += 1
        text = "" if v is None else str(v).strip()
        if is_blank(text) or type(v).__name__ in ("NaTType", "NAType"):  # (pandas' missing date and value)
            continue
        filled += 1
        if typed_not_text(v):
            typed += 1
        elif _NUMBER.fullmatch(text):
            numbers += 1
        elif looks_like_text(text):
            texts += 1
    others = ", ".join(str(c) for c in columns if c != column)
    if (filled >= 3 and texts <= TEXT_SHARE * filled) or (filled and typed == filled):
        what = "only numbers" if numbers == filled else "dates, times or true/false values" if typed == filled else \
            "numbers, dates or ids"
        raise InputError(f"{path}: column {column!r} holds {what} ({filled:,} values, {texts:,} that read as text), "
                         f"not review text; name the text column (other columns: {others or 'none'})")
    if empty and rows >= 20 and rows - filled >= EMPTY_SHARE * rows:
        raise MostlyEmptyColumn(f"{path}: column {column!r} is empty in {rows - filled:,} of its first {rows:,} rows, "
                                f"not a review column; name the text column (other columns: {others or 'none'}), or "
                                "--allow-mostly-empty if it is the review column")


check_not_numbers = check_text_column  # its name before it refused dates, ids and empty columns too (issue 41)
