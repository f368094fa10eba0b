"""A tokenizer folder's own word list (``presplit: kiwi_word``): Kiwi's cuts of the words of named files, made where
Kiwi is installed, so that those files encode exactly where it is not.

    koelectra-kit tokenizer words tokenizer=runs/tok input=[train.tsv,dev.tsv] text_column=document
    ->  runs/tok/kiwi_words.tsv     line 1 the Kiwi versions, then word<TAB>cut,cut a line (wordfile.py's format)

Why: a GPU machine often has no kiwipiepy (its 76 MB model is an sdist; the device lease carries at most 64 MiB),
and a locked-down labelling server may have none either. ``prepare`` already lets pretraining run there from packed
ids; fine-tuning and labelling read text. A ``kiwi_word`` tokenizer cuts each whitespace-separated word on its own
(wordsplit.py), so the cuts of a file's words are all Kiwi contributes to its ids: with them in the folder, those
texts encode with no Kiwi call, and the ids are the ones Kiwi would give (tests/test_wordlist.py compares them).

- Exact: the cuts are ``wordsplit.word_cuts`` of Kiwi's tokens, made only when this machine's Kiwi is the one the
  tokenizer was saved with (another model build may cut some words differently).
- Looked up first, before the process's word cache and Kiwi; a word it lacks goes to Kiwi as before, and where
  kiwipiepy is not installed the run stops with one line naming such a word and the command that adds it.
- It travels with the tokenizer: ``save`` copies it into the folder saved to (a fine-tuned model's), so the model
  labels those files on a machine without Kiwi too. No id depends on it, so it is not part of the fingerprint.
- ~20 bytes a word: nsmc3's 160,000 reviews have 367,000 distinct words, ~8 MB.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Iterable

from ..errors import InputError
from . import wordfile
from .kiwi import KiwiMissing

FILE = "kiwi_words.tsv"
HEADER = "#kiwi_words\t"  # line 1: the Kiwi versions that cut the words, as JSON (a word has no tab, nor do cuts)
# and "format", wordfile.FORMAT: how word_cuts cut them (a list from before the key was written is format 1)
_LOADED: dict[Path, tuple[tuple[int, int], dict]] = {}  # path -> ((size, mtime_ns), words): one parse a process


class ListUnusable(InputError):
    """A word list that cannot be read, or that another Kiwi made: where it is read, one line saying to make it
    again; ``tokenizer words`` (``add_words``) is that remedy, so it makes the list afresh there (``reason``)."""

    def __init__(self, reason: str, folder):
        self.reason = reason
        super().__init__(f"{reason}; make it again with `koelectra-kit tokenizer words tokenizer={folder} input=FILE`")


def load(folder: str | Path | None, saved_kiwi: dict | None = None) -> dict[str, tuple[int, ...]]:
    """The word list in ``folder`` (empty if none), made by the Kiwi ``saved_kiwi`` (the tokenizer's). A list that
    cannot be read, or that another Kiwi made, is the user's file, not a cache: one line saying so, rather than Kiwi
    (or its absence) deciding silently what happens."""
    if folder is None:
        return {}
    path = Path(folder) / FILE
    try:
        st = path.stat()
    except OSError:
        return {}
    key = (st.st_size, st.st_mtime_ns)
    hit = _LOADED.get(path)
    if hit is None or hit[0] != key:
        try:
            head, _, body = path.read_text(encoding="utf-8").partition("\n")
            if not head.startswith(HEADER):
                raise ValueError(f"line 1 is not {HEADER.strip()} and the Kiwi versions")
            made_by = json.loads(head[len(HEADER):])
            if not isinstance(made_by, dict):
                raise ValueError("line 1's Kiwi versions are not a JSON object")
            hit = key, (made_by, dict(wordfile.parse(body)))
        except (OSError, UnicodeDecodeError, ValueError) as e:
            raise ListUnusable(f"cannot read the word list {path}: {e}", folder) from None
        _LOADED[path] = hit
    made_by, words = hit[1]
    made_by = dict(made_by)
    cut_format = made_by.pop("format", 1)
    if cut_format != wordfile.FORMAT:  # made before word_cuts changed: cuts this code no longer makes
        raise ListUnusable(f"the word list {path} holds cuts of format {cut_format}, this koelectra-kit makes "
                           f"format {wordfile.FORMAT}", folder)
    if saved_kiwi and made_by != saved_kiwi:
        raise ListUnusable(f"the word list {path} was made with Kiwi {made_by}, its tokenizer with {saved_kiwi}",
                           folder)
    return words


def write(folder: str | Path, words: dict[str, tuple[int, ...]], made_by: dict) -> Path:
    """``words`` as the folder's list, sorted (the same words give the same bytes), written whole or not at all."""
    from ..io.fileio import atomic_path

    path = Path(folder) / FILE
    with atomic_path(path) as tmp:
        with open(tmp, "w", encoding="utf-8", newline="\n") as f:
            f.write(HEADER + json.dumps({**made_by, "format": wordfile.FORMAT}, sort_keys=True) + "\n")
            f.writelines(f"{w}\t{','.join(map(str, words[w]))}\n" for w in sorted(words))
    return path


def copy_into(source: str | Path | None, target: Path) -> None:
    """A tokenizer saved from ``source`` into ``target`` (a model folder) takes its word list along; one saved
    without a list leaves none behind (a list in ``target`` was the previous tokenizer's)."""
    if source is not None and Path(source).resolve() == target.resolve():
        return
    from ..io.fileio import atomic_path

    src = Path(source) / FILE if source is not None else None
    if src is not None and src.is_file():
        with atomic_path(target / FILE) as tmp:
            tmp.write_bytes(src.read_bytes())
    else:
        (target / FILE).unlink(missing_ok=True)


def missing_error(folder: str | Path | None, missing: list[str]) -> KiwiMissing:
    """What to say when words need Kiwi and kiwipiepy is not installed."""
    example = ", ".join(repr(w) for w in missing[:3])
    how = (f"`koelectra-kit tokenizer words tokenizer={folder if folder is not None else 'DIR'} input=FILE` on a "
           "machine that has it")
    if folder is not None and (Path(folder) / FILE).is_file():
        n = f"{len(missing):,} word is" if len(missing) == 1 else f"{len(missing):,} words are"
        return KiwiMissing(f"kiwipiepy is not installed here and {n} not in the tokenizer's word list "
                          f"{Path(folder) / FILE} (e.g. {example}): pip install kiwipiepy, or add the file's words "
                          f"with {how}")
    return KiwiMissing(f"kiwipiepy is not installed here, and this tokenizer cuts words with Kiwi (presplit kiwi_word; "
                      f"e.g. {example}): pip install kiwipiepy, or give the tokenizer the words of the files it will "
                      f"read with {how}")


def add_words(tok, texts: Iterable[str], num_workers: int | None = None, progress: bool = False,
              batch: int = 20_000) -> tuple[int, int]:
    """Kiwi's cuts of every word of ``texts`` (normalized as ``tok`` does) the folder's list lacks, added to it.
    Returns (words added, words in the list)."""
    from . import kiwi, wordsplit

    folder = Path(tok.source)
    made_by = check_kiwi(tok)
    replace = False
    try:
        words = dict(load(folder, made_by))
    except ListUnusable as e:  # the remedy its error names is this command: it cannot refuse for the same reason
        from ..runtime import warn

        warn(f"warning: {e.reason}: it is made again from the files named now (words only other files had are "
             "dropped)")
        words, replace = {}, True
    new: dict[str, None] = {}
    for text in texts:
        for w in tok.presplit_words(text):
            if w not in words:
                new[w] = None
    todo = list(new)
    bar = None
    if progress and todo:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(todo), unit="word", desc="Kiwi", mininterval=1.0)
    for start in range(0, len(todo), batch):
        chunk = todo[start:start + batch]
        words.update(zip(chunk, wordsplit.analyse(chunk, num_workers or kiwi.resolve_workers(None))))
        if bar is not None:
            bar.update(len(chunk))
    if bar is not None:
        bar.close()
    if todo or replace or not (folder / FILE).is_file():
        # Another run on this folder (the dev file's words added beside the train file's) may have written the list
        # since it was read above: its words are merged in, not overwritten with this run's older copy (the lost
        # words would only show on the machine without Kiwi). Cuts depend on the word alone, so any copy is right.
        try:
            words = {**load(folder, made_by), **words}
        except ListUnusable:  # the unusable list this run replaces (warned above), or one damaged meanwhile
            pass
        write(folder, words, made_by)
    return len(todo), len(words)


def check_kiwi(tok) -> dict:
    """A word list is for a saved ``kiwi_word`` tokenizer, made with the Kiwi it was saved with (returned)."""
    from .kiwi import kiwi_versions

    if tok.source is None or tok.hf is not None:
        raise InputError("a word list belongs in a tokenizer folder saved by koelectra-kit (tokenizer=DIR)")
    if tok.presplit != "kiwi_word":
        why = ("it analyses whole texts, not words: train one with presplit=kiwi_word" if tok.presplit == "kiwi"
               else "it never calls Kiwi")
        raise InputError(f"the tokenizer in {tok.source} has presplit {tok.presplit}, which a word list cannot "
                         f"serve: {why}")
    now = kiwi_versions()
    if tok.saved_kiwi and tok.saved_kiwi != now:
        raise InputError(f"the tokenizer in {tok.source} was saved with Kiwi {tok.saved_kiwi}, this machine has "
                         f"{now}: words cut here could differ from the ones its ids were made with; install "
                         "the saved versions to make its word list")
    return now
