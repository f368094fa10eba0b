"""Corpus readers and a registry of well-known public Korean corpora.

``iter_texts(path, text_column)`` streams the texts of one file without holding it in memory:
- ``.txt``: one text per line (the format for pretraining corpora; blank lines are skipped downstream);
- ``.csv`` / ``.tsv`` / ``.jsonl`` / ``.parquet``: a text column (given, or the first of ``tables.TEXT_COLUMNS``),
  read as a stream of records by ``tables.read_records`` (``.tsv`` files of NLP corpora are unquoted, NSMC: tabs
  split fields and quotes are text). A malformed record is skipped and counted, not fatal.
Encodings: UTF-8, UTF-8 with BOM, cp949/EUC-KR, UTF-16/32 with BOM (detected, see ``tables.detect_encoding``). A
file that is none of them, a crawl with some broken bytes, is read as UTF-8: a line with invalid bytes is decoded with U+FFFD
replacement characters and counted, so one bad byte in a 50 MB crawl neither stops the run nor hides. Both counts
are reported in one warning once the file has been read.

``CORPORA`` lists public corpora by name with their canonical URL, license and format; ``iter_corpus(name,
path)`` reads a local copy (downloads cannot happen on machines without internet; fetch the file first).
"""
from __future__ import annotations

import re
from pathlib import Path
from typing import Iterator

from .. import runtime
from . import hfdata
from ..errors import InputError
from .textcheck import checked_texts
from .tables import (TEXT_COLUMNS, detect_encoding, is_wide, pick_column, read_records, refuse_other_separator,
                     refuse_workbook, table_separator_fix)

# suffix -> tables format; any other file is plain text, one text a line
TABLE_FORMATS = {".csv": "csv", ".tsv": "tsv", ".jsonl": "jsonl", ".json": "jsonl", ".parquet": "parquet"}

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


# Leading bytes of the compressed files a corpus comes in: read as text, one is a few lines of U+FFFD (an error that
# blamed the encoding), or for a stored zip its members' text with the archive's headers trained on as text.
# (bzip2's "BZh9" is text: its block or end-of-stream mark after it tells it from a line that starts so)
ARCHIVES = ((rb"\x1f\x8b", "gzip", "gunzip -k"), (rb"PK\x03\x04", "zip", "unzip"),
            (rb"BZh[1-9](?:1AY&SY|\x17rE8P\x90)", "bzip2", "bunzip2 -k"), (rb"\xfd7zXZ\x00", "xz", "unxz -k"),
            (rb"\x28\xb5\x2f\xfd", "zstd", "unzstd"), (rb"7z\xbc\xaf\x27\x1c", "7z", "7z x"))


def _new_stats() -> dict:
    return {"bad": 0, "first_bad": None, "malformed": 0, "first_malformed": None, "cr": 0, "first_cr": None}


def _wrong_encoding(path: Path, encoding: str, bad: int, lines: int) -> InputError:
    # (no encoding= hint: no command that reads a corpus has that key; the readable encodings are detected)
    return InputError(f"{path}: {bad} of the first {lines} lines are not valid {encoding}; a corpus is read as "
                      "UTF-8, cp949/EUC-KR or UTF-16/32 with a BOM: convert it to UTF-8 (e.g. iconv -f ENCODING "
                      "-t UTF-8)")


def refuse_archive(path: Path) -> None:
    """A compressed file is not read through: a one-line error saying how to decompress it."""
    with open(path, "rb") as f:
        head = f.read(16)
    for magic, kind, tool in ARCHIVES:
        if re.match(magic, head):
            raise InputError(f"{path} is a {kind} archive, not text: decompress it first ({tool} {path.name}) and "
                             "give the file(s) inside")


def _decoded_lines(path: Path, encoding: str, stats: dict) -> Iterator[str]:
    """The file's lines (split at newlines only, ends dropped), each decoded alone so a bad byte costs its line."""
    if is_wide(encoding):  # a newline byte is half a character there: split the decoded text instead
        with open(path, encoding=encoding, errors="replace", newline="\n") as f:
            for line in f:
                yield line.rstrip("\r\n")
        return
    lineno = 0
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
                    raise _wrong_encoding(path, encoding, stats["bad"], lineno)
            yield line.rstrip("\r\n")
    if stats["bad"] * 2 > lineno:  # a short file (a binary one) ends before the check above can tell
        raise _wrong_encoding(path, encoding, stats["bad"], lineno)


def _file_encoding(path: Path, encoding: str | None) -> tuple[str, bool]:
    """(codec, whether every byte decodes in it)."""
    try:
        return detect_encoding(path, encoding), True
    except InputError:
        # Neither clean UTF-8 nor cp949: a crawl with some broken bytes. Read it as UTF-8; the broken lines
        # get U+FFFD and are counted (warning at the end) rather than stopping a long corpus pass.
        return "utf-8", False


def iter_texts(path: str | Path, text_column: str | int | None = None, encoding: str | None = None,
               said: list | None = None) -> Iterator[str]:
    """Every text of the file, in order (empty ones included: callers count and skip them). A dataset (``hf:...``,
    a ``save_to_disk`` or Parquet folder) is read by ``hfdata``, streamed, with the same column rule. ``said``:
    the warning about the file (skipped records, bad bytes) is appended there too, at the end."""
    if hfdata.is_dataset_source(path):
        yield from hfdata.iter_texts(path, text_column)
        return
    path = Path(path)
    if not path.is_file():
        raise InputError(f"corpus file not found: {path}")
    refuse_workbook(path)
    refuse_archive(path)
    fmt = TABLE_FORMATS.get(path.suffix.lower())
    if fmt is not None:
        yield from _read_table(path, fmt, encoding, text_column, said)
        return
    enc, _ = _file_encoding(path, encoding)
    stats = _new_stats()
    lines = _decoded_lines(path, "utf-8" if enc == "utf-8-sig" else enc, stats)
    for lineno, line in enumerate(lines, 1):
        if "\r" in line:
            # Lines are split at newlines only (a CR inside a text is whitespace to the normalizer): a file with
            # classic Mac line ends (CR only) is one text, and the user is told so (_report).
            stats["cr"] += 1
            stats["first_cr"] = stats["first_cr"] or lineno
        yield line.lstrip("\ufeff") if lineno == 1 else line  # (utf-8-sig is read as utf-8 line by line: drop the BOM)
    _report(path, enc, stats, said)


def _read_table(path: Path, fmt: str, encoding: str | None, text_column, said: list | None = None) -> Iterator[str]:
    stats = _new_stats()
    enc, clean = (None, True) if fmt == "parquet" else _file_encoding(path, encoding)
    if not clean:
        for _ in _decoded_lines(path, enc, stats):  # count the broken lines (or stop on a wrong encoding)
            pass
    yield from _table_texts(path, fmt, enc, text_column, stats, "strict" if clean else "replace")
    _report(path, enc, stats, said)


def _table_texts(path: Path, fmt: str, enc: str | None, text_column, stats: dict, errors: str) -> Iterator[str]:
    columns, records = read_records(path, fmt, enc, None, errors=errors)
    # a tab-separated file named .csv read as one column whose name holds the others: "no column 'document';
    # columns present: id<TAB>...<TAB>document" named the column it said was missing (a corpus has no format key)
    refuse_other_separator(path, fmt, [str(c) for c in columns], fix=lambda other: table_separator_fix(other, None))
    if isinstance(text_column, int):
        idx = text_column
    else:
        names = [str(c).strip() for c in columns]
        name = pick_column(names, text_column, TEXT_COLUMNS, path)
        if name is None:
            raise InputError(f"{path}: no text column among {names}; pass text_column=NAME")
        if names.count(name) > 1:  # the first was read alone, exit 0, as label and suggest refuse
            raise InputError(f"{path}: {names.count(name)} columns are named {name!r}; rename them so the text "
                             "column is unambiguous")
        idx = names.index(name)
    texts = _column_texts(records, idx, stats)
    yield from texts if isinstance(text_column, int) else checked_texts(texts, name, names, path)


def _column_texts(records, idx: int, stats: dict) -> Iterator[str]:
    for rec in records:
        if rec.error:
            stats["malformed"] += 1
            if stats["first_malformed"] is None:
                stats["first_malformed"] = rec.line
            continue
        value = rec.fields[idx] if idx < len(rec.fields) else ""
        yield "" if value is None else str(value)


def _report(path: Path, enc: str | None, stats: dict, said: list | None = None) -> None:
    """One warning line for what reading ``path`` skipped or changed; also appended to ``said`` (a cache of what
    was read keeps it, to say it again when it is used instead of the file)."""
    notes = []
    if stats["bad"]:
        notes.append(f"{stats['bad']} line(s) had bytes invalid in {enc} (first: line {stats['first_bad']}); "
                     "decoded with U+FFFD replacement characters")
    if stats["cr"]:
        notes.append(f"{stats['cr']} line(s) hold carriage returns (first: line {stats['first_cr']}): texts are split "
                     "at newlines (\\n) only, so CR line ends (classic Mac) leave several texts on one line; convert "
                     "them (e.g. tr '\\r' '\\n') if they end texts")
    if stats["malformed"]:
        notes.append(f"{stats['malformed']} malformed record(s) skipped (first: line {stats['first_malformed']})")
    if notes:
        runtime.warn(f"warning: {path}: {'; '.join(notes)}")
        if said is not None:
            said.append(f"warning: {path}: {'; '.join(notes)}")


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
        yield from _read_table(path, "tsv", None, info["text_column"])
        return
    yield from iter_texts(path, info["text_column"])
