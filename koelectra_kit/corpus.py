"""Corpus readers and a registry of well-known public Korean corpora.

``iter_texts(path, text_column)`` streams the texts of one file without holding it in memory:
- ``.txt``: one text per line (the format for pretraining corpora; blank lines are skipped downstream);
- ``.csv`` / ``.tsv``: a text column (given, or the first of the usual names), read in chunks; ``.tsv`` files of
  NLP corpora are unquoted (NSMC), so tabs split fields and quotes are text;
- ``.jsonl``: one object per line with a text field.
Encodings: UTF-8, UTF-8 with BOM, cp949/EUC-KR (detected, see ``tables.detect_encoding``). A line with bytes
that are invalid in the detected encoding is decoded with U+FFFD replacement characters and counted, so one
bad byte in a 50 MB crawl neither stops the run nor hides: the count is printed at the end of the file.

``CORPORA`` lists public corpora by name with their canonical URL, license and format; ``iter_corpus(name,
path)`` reads a local copy (downloads cannot happen on machines without internet; fetch the file first).
"""
from __future__ import annotations

import csv
import json
import sys
from pathlib import Path
from typing import Iterator

from .errors import InputError
from .tables import detect_encoding

TEXT_COLUMNS = ("text", "document", "review", "comment", "comments", "content", "sentence", "contents", "body",
                "리뷰", "내용", "댓글", "문장")

# name -> where to get it, license, format, and how to read a local copy.
CORPORA: dict[str, dict] = {
    "nsmc": {
        "what": "Naver movie reviews, 200k, binary sentiment (ratings 1-4 negative, 9-10 positive)",
        "url": "https://github.com/e9t/nsmc", "files": ["ratings_train.txt", "ratings_test.txt"],
        "license": "CC0 1.0", "format": "tsv", "text_column": "document", "label_column": "label",
    },
    "kcbert-comments": {
        "what": "Naver news comments 2019-2020 used to pretrain KcBERT/KcELECTRA (~12 GB raw, one comment a line)",
        "url": "https://www.kaggle.com/datasets/junbumlee/kcbert-pretraining-corpus-korean-news-comments",
        "license": "see the dataset page (not verified here)", "format": "txt", "text_column": None,
    },
    "korean-hate-speech": {
        "what": "Entertainment news comments with hate/bias labels (8k) and 2M unlabeled comments",
        "url": "https://github.com/kocohub/korean-hate-speech", "license": "CC BY-SA 4.0", "format": "tsv",
        "text_column": "comments", "label_column": "hate",
    },
    "k-mhas": {
        "what": "Korean multi-label hate speech (109k news comments)", "url": "https://github.com/adlnlp/K-MHaS",
        "license": "CC BY-SA 4.0", "format": "tsv", "text_column": "document", "label_column": "label",
    },
    "apeach": {
        "what": "Crowd-generated offensive/non-offensive Korean texts (APEACH)",
        "url": "https://github.com/jason9693/APEACH", "license": "CC BY-SA 4.0", "format": "csv",
        "text_column": "text", "label_column": "class",
    },
    "curse-detection": {
        "what": "Korean community comments with curse labels ('text|label' lines)",
        "url": "https://github.com/2runo/Curse-detection-data", "license": "MIT", "format": "txt",
        "text_column": None,
    },
    "naver-shopping-reviews": {
        "what": "200k Naver shopping reviews with 1-5 star ratings",
        "url": "https://github.com/bab2min/corpus/tree/master/sentiment", "license": "see repository",
        "format": "tsv-noheader", "text_column": 1, "rating_column": 0,
    },
}


def _decoded_lines(path: Path, encoding: str, stats: dict, keepends: bool = False) -> Iterator[str]:
    # csv.reader needs the line ends to keep a newline inside a quoted field; plain-text corpora drop them.
    end = "\n" if keepends else ""
    with open(path, "rb") as f:
        for lineno, raw in enumerate(f, 1):
            try:
                line = raw.decode(encoding)
            except UnicodeDecodeError:
                line = raw.decode(encoding, errors="replace")
                stats["bad"] += 1
                if stats["first_bad"] is None:
                    stats["first_bad"] = lineno
                if stats["bad"] >= 20 and stats["bad"] * 2 > lineno:
                    # Most lines broken is not a crawl with a few bad bytes but a wrong encoding (or a binary
                    # file): training on U+FFFD soup would waste the run.
                    raise InputError(f"{path}: {stats['bad']} of the first {lineno} lines are not valid {encoding}; "
                                     f"pass the file's encoding (e.g. encoding=cp949) or convert it to UTF-8")
            yield line.rstrip("\r\n") + end


def iter_texts(path: str | Path, text_column: str | int | None = None, encoding: str | None = None) -> Iterator[str]:
    """Every text of the file, in order (empty ones included: callers count and skip them)."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"corpus file not found: {path}")
    try:
        enc = detect_encoding(path, encoding)
    except InputError:
        # Neither clean UTF-8 nor cp949: a crawl with some broken bytes. Read it as UTF-8; the broken lines
        # get U+FFFD and are counted (warning at the end) rather than stopping a long corpus pass.
        enc = "utf-8"
    if enc == "utf-8-sig":
        enc = "utf-8"  # the BOM is stripped below, line by line decoding would keep it
    stats = {"bad": 0, "first_bad": None}
    suffix = path.suffix.lower()
    lines = _decoded_lines(path, enc, stats, keepends=suffix == ".csv")
    first = True
    if suffix in (".csv", ".tsv"):
        yield from _iter_table(path, lines, "\t" if suffix == ".tsv" else ",", text_column)
    elif suffix in (".jsonl", ".json"):
        key = text_column
        for lineno, line in enumerate(lines, 1):
            if not line.strip():
                continue
            try:
                obj = json.loads(line.lstrip("\ufeff"))
            except json.JSONDecodeError as e:
                raise InputError(f"{path}:{lineno}: not a JSON object ({e.msg})") from None
            if key is None:
                key = next((c for c in TEXT_COLUMNS if c in obj), None)
                if key is None:
                    raise InputError(f"{path}: no text field among {sorted(obj)}; pass text_column=NAME")
            if key not in obj:
                raise InputError(f"{path}:{lineno}: no field {key!r} (fields: {sorted(obj)})")
            yield "" if obj[key] is None else str(obj[key])
    else:
        for line in lines:
            if first:
                line, first = line.lstrip("\ufeff"), False
            yield line
    if stats["bad"]:
        print(f"warning: {path}: {stats['bad']} line(s) had bytes invalid in {enc} (first: line "
              f"{stats['first_bad']}); decoded with U+FFFD replacement characters", file=sys.stderr)


def _iter_table(path: Path, lines: Iterator[str], sep: str, text_column) -> Iterator[str]:
    # TSV corpora are unquoted (a quote is text); CSV follows RFC 4180 (quoted fields may hold newlines).
    reader = csv.reader(lines, delimiter=sep, quoting=csv.QUOTE_NONE if sep == "\t" else csv.QUOTE_MINIMAL)
    try:
        header = next(reader)
    except StopIteration:
        raise InputError(f"{path}: empty file") from None
    header = [h.lstrip("\ufeff").strip() for h in header]
    if isinstance(text_column, int):
        idx = text_column
    elif text_column is None:
        idx = next((header.index(c) for c in TEXT_COLUMNS if c in header), None)
        if idx is None:
            raise InputError(f"{path}: no text column among {header}; pass text_column=NAME")
    else:
        if text_column not in header:
            raise InputError(f"{path}: no column {text_column!r}; columns present: {header}")
        idx = header.index(text_column)
    for row in reader:
        yield row[idx] if idx < len(row) else ""


def iter_corpus(name: str, path: str | Path) -> Iterator[str]:
    """Texts of a registered public corpus from a local copy (see ``CORPORA`` for where to get it)."""
    if name not in CORPORA:
        raise InputError(f"unknown corpus {name!r}; known: {', '.join(sorted(CORPORA))}")
    info = CORPORA[name]
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path} not found: download {name} from {info['url']} ({info['license']}) first")
    if info["format"] == "tsv-noheader":
        for line in iter_texts(path.with_suffix(".txt") if path.suffix == "" else path):
            parts = line.split("\t")
            yield parts[info["text_column"]] if len(parts) > info["text_column"] else ""
        return
    if name == "curse-detection":
        for line in iter_texts(path):
            yield line.rsplit("|", 1)[0]
        return
    if info["format"] == "tsv" and path.suffix.lower() == ".txt":  # NSMC ships tab-separated .txt files
        lines = _decoded_lines(path, detect_encoding(path), {"bad": 0, "first_bad": None})
        yield from _iter_table(path, lines, "\t", info["text_column"])
        return
    yield from iter_texts(path, info["text_column"])
