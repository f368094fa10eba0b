"""The transfer set: unlabelled texts from any text files, table columns or datasets (``hf:...``, a ``save_to_disk``
or Parquet folder; ``corpus.iter_texts``, the one reader), empty lines and repeats dropped, texts that appear in the
``exclude`` files (or the dev split) dropped by normalized exact match, then an optional seeded subset. Every drop
is counted in the report."""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..io.corpus import iter_texts
from ..errors import InputError
from ..io.hfdata import check_input
from ..tokenizer.normalize import normalize


@dataclass
class TransferSet:
    texts: list[str]
    report: dict


def match_key(text: str) -> str:
    """What two texts must share to count as the same input: the toolkit's normalization (NFC, controls out,
    repeated ㅋㅋㅋㅋ cut, whitespace collapsed), so a copy that differs only in spacing is still caught."""
    return normalize(text)


def read_texts(path: str, text_column: str | None, what: str) -> list[str]:
    """The non-empty texts of one file or dataset (stripped), or a one-line error for a missing/empty/textless one."""
    p = check_input(path)
    try:
        texts = [t.strip() for t in iter_texts(p, text_column)]
    except UnicodeDecodeError as e:
        raise InputError(f"{what} {p}: bytes that are not valid text ({e.reason}); convert it to UTF-8") from None
    texts = [t for t in texts if t]
    if not texts:
        raise InputError(f"{what} {p}: no text in it (empty lines only, or the wrong text column?)")
    return texts


def exclusion_keys(files: list[str], extra_texts: list[str]) -> set[str]:
    """The normalized texts of the ``exclude`` files (their text column guessed as any table's) and ``extra``."""
    keys = {match_key(t) for t in extra_texts}
    for f in files:
        keys.update(match_key(t) for t in read_texts(f, None, "exclude file"))
    return keys


def write_without(files: list, exclude: set[str], out) -> int:
    """The non-empty lines of the text ``files`` into ``out`` (stripped, one a line), but those whose normalized
    text is in ``exclude`` (``exclusion_keys``): a pretraining corpus kept clear of an evaluation set. Returns how
    many lines were left out."""
    dropped = 0
    with open(out, "w", encoding="utf-8") as f:
        for path in files:
            with open(path, encoding="utf-8") as src:
                for line in src:
                    text = line.strip()
                    if not text:
                        continue
                    if match_key(text) in exclude:
                        dropped += 1
                    else:
                        f.write(text + "\n")
    return dropped


def load_transfer(files: list[str], text_column: str | None, exclude: set[str], max_texts: int | None,
                  seed: int) -> TransferSet:
    """The transfer texts in file order, each once; ``exclude``: normalized texts to leave out."""
    report: dict = {"files": {}, "read": 0}
    seen: set[str] = set()
    texts: list[str] = []
    repeated = excluded = 0
    for f in files:
        got = read_texts(f, text_column, "transfer file")
        report["files"][str(f)] = len(got)
        report["read"] += len(got)
        for t in got:
            key = match_key(t)
            if key in exclude:
                excluded += 1
            elif key in seen:
                repeated += 1
            else:
                seen.add(key)
                texts.append(t)
    report["excluded"] = excluded
    report["repeated"] = repeated
    if not texts:
        raise InputError(f"transfer {', '.join(map(str, files))}: no texts left after dropping {excluded} excluded "
                         f"and {repeated} repeated ones")
    if max_texts is not None and len(texts) > max_texts:
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), max_texts, replace=False))
        report["subsample"] = f"{max_texts} of {len(texts)} texts (seed {seed})"
        texts = [texts[i] for i in keep]
    report["kept"] = len(texts)
    return TransferSet(texts, report)


def format_transfer_report(rep: dict) -> str:
    files = ", ".join(f"{f} ({n:,})" for f, n in rep["files"].items())
    line = (f"transfer: {rep['kept']:,} texts kept of {rep['read']:,} read from {files}; dropped {rep['excluded']:,} "
            f"found in exclude/dev, {rep['repeated']:,} repeats")
    return line + (f"; subsample {rep['subsample']}" if rep.get("subsample") else "")
