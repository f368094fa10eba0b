"""Prepared-data folders: prepare once, train anywhere. ``koelectra-kit prepare`` runs the CPU half of
pretraining (the tokenizer, Kiwi's pre-split, packing) and writes a folder that ``pretrain prepared=DIR`` trains
from on another machine, with neither the corpus text nor Kiwi there; as NVIDIA's ELECTRA splits
create_pretraining_data from run_pretraining.

DIR/
  tokenizer/      the tokenizer the ids were made with (the run exports it beside the encoder)
  rows.arrow      the packed rows ``[CLS] t1 [SEP] t2 [SEP] ...``, seq_len ids each (data.build_packed_cache's file)
  meta.json       rows, tokens, texts, seq_len, dtype, the tokenizer's fingerprint (data.PackedRows reads it)
  prepared.json   what made them: the corpus files and their content hash, the tokenizer's source, the settings,
                  the koelectra-kit version; ``format`` says which reader it needs
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from ..errors import InputError
from ..io.fileio import cache_dir, file_sha256, staged_dir, write_json_atomic
from ..io.output import check_not_input, check_out_dir
from ..runtime import log
from .config import PretrainConfig

FORMAT = 1
INFO_FILE = "prepared.json"
FILES = ("tokenizer", "rows.arrow", "meta.json", INFO_FILE)


@dataclass
class Prepared:
    """An opened prepared-data folder: its tokenizer, its packed rows and what made them."""

    path: Path
    tok: object  # KoTokenizer
    data: object  # data.PackedRows
    info: dict


def is_prepared(path: str | Path) -> bool:
    return (Path(path) / INFO_FILE).is_file()


def prepare(cfg: PretrainConfig) -> Path:
    """Tokenizer (given, the init checkpoint's, or trained on the corpus) and packed rows into ``cfg.out``.

    The packed rows are built in (or found in) the usual cache, then copied into the folder, which is published
    whole: a failed or killed prepare leaves no half folder, and an earlier folder at ``out`` stays as it was."""
    from ..io.hfdata import corpus_paths
    from ..tokenizer import tokenizer_fingerprint
    from .data import (PackedRows, build_packed_cache, check_corpus, checked_rows, corpus_fingerprint,
                       prepare_tokenizer, say_unknown)
    from .distributed import DistContext

    out = Path(cfg.out)
    check_prepare_out(out, cfg.overwrite)
    # out= is replaced whole: a corpus file kept in it (overwrite=true of an earlier folder) went with it
    check_not_input(out, {"corpus" if len(cfg.corpus) == 1 else f"corpus[{i}]": c for i, c in enumerate(cfg.corpus)})
    corpus = corpus_paths(check_corpus(cfg.corpus), cfg.text_column, cfg.cache_dir)
    t0 = time.time()
    with staged_dir(out) as stage:
        # a trained tokenizer goes straight into the folder; a given one (or init's) is saved there below
        tok = prepare_tokenizer(cfg, stage, DistContext("cpu", cfg.ddp_timeout_minutes), corpus,
                                shown_as=out / "tokenizer")
        if not (stage / "tokenizer" / "tokenizer.json").exists():
            tok.save(stage / "tokenizer")
        tok_fp = tokenizer_fingerprint(tok)
        cache = build_packed_cache(cfg, tok, tok_fp, corpus, cache_dir(cfg.cache_dir))
        checked_rows(PackedRows(cache), cache, main=False)  # here, not on the machine the folder is carried to
        # the big file linked (no second copy), its description copied: a meta.json linked too was rewritten with
        # the cache's by a `cp` over the folder's, and the cache then vouched for rows of another corpus
        _link_or_copy(cache / "rows.arrow", stage / "rows.arrow")
        shutil.copyfile(cache / "meta.json", stage / "meta.json")
        meta = json.loads((stage / "meta.json").read_text())
        from .. import __version__

        write_json_atomic(stage / INFO_FILE, {
            "format": FORMAT, "koelectra_kit": __version__, "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "corpus": [str(p) for p in corpus], "corpus_fingerprint": corpus_fingerprint(corpus, cfg.text_column),
            "text_column": cfg.text_column, "seq_len": cfg.seq_len, "tokenizer_fingerprint": tok_fp,
            "tokenizer_files": files_digest(stage / "tokenizer"),
            "tokenizer_source": cfg.init or cfg.tokenizer or "trained on the corpus",
            # continued pretraining: pretrain from here needs the same init= (check_init_vocab); as a full path, which
            # the machine the folder is carried to can tell apart from its own relative one
            "init": str(Path(cfg.init).resolve()) if cfg.init and Path(cfg.init).exists() else cfg.init,
            "tokenizer": {"model": tok.model, "presplit": tok.presplit, "vocab_size": tok.vocab_size},
            "rows": meta["rows"], "tokens": meta["tokens"], "texts": meta["texts"],
            # the ids' file as written: checked where the folder is trained from (a same-size edit trained silently)
            "rows_digest": meta.get("rows_digest") or file_sha256(stage / "rows.arrow")})
    log(f"prepared {meta['texts']:,} texts -> {meta['rows']:,} sequences of {cfg.seq_len} tokens "
        f"({meta['tokens']:,} tokens) in {out} ({time.time() - t0:.0f}s); train from it anywhere with "
        f"`koelectra-kit pretrain prepared={out} ...`")
    say_unknown(meta, tok)
    return out


def check_prepare_out(out: Path, overwrite: bool) -> None:
    """``out`` is new, empty, or (with overwrite=true) an earlier prepared folder: never another folder."""
    check_out_dir(out, (INFO_FILE,), f"a prepared-data folder (no {INFO_FILE})", staged=True)  # published whole
    if is_prepared(out) and not overwrite:
        raise InputError(f"out={out} already holds prepared data: pass overwrite=true to replace it, or another out=")


def files_digest(folder: Path) -> str:
    """sha256 of a folder's files (names and bytes): whether tokenizer/ is still the one the rows were made with. A
    word list added to it since (``tokenizer words``, for fine-tuning where Kiwi is not) is left out: no id depends
    on it."""
    from ..tokenizer.wordlist import FILE as WORD_LIST

    h = hashlib.sha256()
    # (hidden files left out: a .DS_Store a Mac or a zip tool adds to a carried folder is no change)
    for f in sorted(p for p in folder.rglob("*") if p.is_file() and p.name != WORD_LIST
                    and not any(part.startswith(".") for part in p.relative_to(folder).parts)):
        h.update(f.relative_to(folder).as_posix().encode() + b"\0" + f.read_bytes() + b"\0")
    return h.hexdigest()[:16]


def _link_or_copy(src: Path, dst: Path) -> None:
    """A hard link where the cache and the folder share a file system (no second copy of a big file)."""
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def open_prepared(path: str | Path) -> Prepared:
    """The folder checked file by file (one-line ``InputError`` for each way it can be incomplete or not match
    itself), its tokenizer loaded and its rows mapped. Kiwi is not needed: every text is already ids."""
    from ..tokenizer import KoTokenizer
    from .data import PackedRows

    d = Path(path)
    if not d.is_dir():
        raise InputError(f"prepared={path}: no such folder (make one with `koelectra-kit prepare`)")
    if not is_prepared(d):
        raise InputError(f"prepared={path} is not a prepared-data folder (no {INFO_FILE}); make one with "
                         "`koelectra-kit prepare corpus=... out=DIR`")
    missing = [f for f in FILES if not (d / f).exists()]
    if missing:
        raise InputError(f"prepared={path} is incomplete: {', '.join(missing)} missing; copy the whole folder")
    try:
        info = json.loads((d / INFO_FILE).read_text(encoding="utf-8"))
        meta = json.loads((d / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise InputError(f"prepared={path}: cannot read {INFO_FILE} / meta.json ({e}); prepare it again") from None
    if not isinstance(info, dict) or not isinstance(meta, dict):
        raise InputError(f"prepared={path}: {INFO_FILE} / meta.json are not mappings; prepare it again")
    if info.get("format") != FORMAT:
        raise InputError(f"prepared={path} has format {info.get('format')!r}; this koelectra-kit reads format "
                         f"{FORMAT}: prepare it again with this version")
    if files_digest(d / "tokenizer") != info.get("tokenizer_files"):
        raise InputError(f"prepared={path}: its tokenizer/ is not the one its rows were made with (its files "
                         "changed); copy the whole folder again")
    # what the run reads from meta.json besides the rows' shape (checked below): a KeyError or TypeError mid-run else
    if not isinstance(meta.get("tokenizer_fingerprint"), str) or not all(
            isinstance(meta.get(k), int) and not isinstance(meta.get(k), bool) for k in ("tokens", "texts")):
        raise InputError(f"prepared={path}: meta.json lacks the tokenizer's fingerprint or the token and text counts; "
                         "copy the whole folder again (or prepare it again)")
    tok = KoTokenizer.from_pretrained(d / "tokenizer")
    if meta.get("vocab_size", tok.vocab_size) != tok.vocab_size:
        # ids from a bigger vocabulary index past the embedding table: an IndexError at the first step
        raise InputError(f"prepared={path}: its rows were made with a {meta['vocab_size']}-token vocabulary, its "
                         f"tokenizer/ has {tok.vocab_size}: its files do not belong together; prepare it again")
    # The fingerprint the rows were made under, not one recomputed here: it hashes the Kiwi versions of the machine
    # that saves the tokenizer, and this one may have another Kiwi, or none (the ids are made already).
    tok.fingerprint = meta["tokenizer_fingerprint"]
    rows_size = (d / "rows.arrow").stat().st_size
    itemsize = 2 if meta.get("dtype") == "uint16" else 4
    if not isinstance(meta.get("rows"), int) or rows_size < meta["rows"] * meta.get("seq_len", 0) * itemsize:
        raise InputError(f"prepared={path}: rows.arrow holds {rows_size:,} bytes, fewer than meta.json's "
                         f"{meta.get('rows')} rows of {meta.get('seq_len')} tokens need (rows.arrow cut short, or "
                         "meta.json edited or from another folder); copy the whole folder again")
    if info.get("rows_digest") and file_sha256(d / "rows.arrow") != info["rows_digest"]:
        raise InputError(f"prepared={path}: rows.arrow is not the file `prepare` wrote (its content changed since: "
                         "written over, or damaged in a copy); copy the whole folder again (or prepare it again)")
    try:
        data = PackedRows(d)
    except Exception as e:  # noqa: BLE001 - a damaged Arrow file: one line, not pyarrow's traceback
        raise InputError(f"prepared={path}: cannot read rows.arrow ({str(e).splitlines()[0]}); copy the whole "
                         "folder again") from None
    # meta.json is what the rows are read by: one edited (rows 50, seq_len 32) trained on a part of the rows, or on
    # each row cut in two, exit 0. The Arrow file's own shape and prepared.json must agree with it.
    width, stored = data.seq_len, data.n
    said = {"meta.json": (meta.get("rows"), meta.get("seq_len")), "prepared.json": (info.get("rows", stored),
                                                                                   info.get("seq_len", width))}
    if any(shape != (stored, width) for shape in said.values()):
        raise InputError(f"prepared={path}: rows.arrow holds {stored:,} rows of {width} tokens, but "
                         + ", ".join(f"{name} says {rows:,} of {seq}" if isinstance(rows, int) else
                                     f"{name} says {rows} of {seq}" for name, (rows, seq) in said.items())
                         + ": its files do not belong together; copy the whole folder again (or prepare it again)")
    top = max(int(block.max()) for block in data.blocks) if not info.get("rows_digest") else 0
    if top >= tok.vocab_size:  # (a folder without a digest): an IndexError, or a device-side assert, mid-run
        raise InputError(f"prepared={path}: rows.arrow holds id {top}, past its tokenizer's {tok.vocab_size} tokens: "
                         "its rows are damaged or not this tokenizer's; copy the whole folder again (or prepare it "
                         "again)")
    return Prepared(d, tok, data, info)


def apply_prepared_shape(cfg: PretrainConfig, prepared: Prepared) -> list[str]:
    """The folder decides the sequence length (its rows are cut to it): ``cfg.seq_len`` becomes the folder's,
    with a notice when the config said otherwise, so a preset stays usable with any prepared folder. A
    ``text_column`` other than the one it was packed from is refused (it could change nothing)."""
    from ..errors import ConfigError

    made_from = prepared.info.get("text_column")
    if cfg.text_column is not None and cfg.text_column != made_from:
        # the texts are ids already: a text_column= that is not the folder's changed nothing, without a word
        raise ConfigError(f"text_column={cfg.text_column}: prepared={prepared.path} was packed from "
                          + (f"column '{made_from}'" if made_from else "the column guessed when it was prepared")
                          + "; drop text_column= (or prepare the folder again with it)")
    notes = []
    seq_len = prepared.data.seq_len
    if cfg.seq_len != seq_len:
        notes.append(f"note: seq_len={cfg.seq_len} replaced by {seq_len}, the length prepared={prepared.path} "
                     "was packed to")
        cfg.seq_len = seq_len
    if seq_len > cfg.model.max_position_embeddings:
        raise ConfigError(f"prepared={prepared.path} has sequences of {seq_len} tokens, more than "
                          f"model.max_position_embeddings {cfg.model.max_position_embeddings}; raise the latter")
    return notes


def check_init_vocab(cfg: PretrainConfig, prepared: Prepared) -> None:
    """Continued pretraining from a prepared folder: its ids must be the init checkpoint's vocabulary (prepare
    with the same init=, which packs with that checkpoint's tokenizer). A folder prepared with init= trained from
    random weights when pretrain was given no init= (ten GPU-minutes from scratch, no word): refused."""
    from .continued import init_tokenizer

    made_for = prepared.info.get("init")
    if not cfg.init:
        if made_for:
            # its tokenizer, where a folder of it is (a run's tokenizer/, an encoder folder's own files)
            tok = next((Path(made_for) / sub for sub in ("tokenizer", "discriminator")
                        if (Path(made_for) / sub / "tokenizer.json").is_file()), made_for)
            raise InputError(f"prepared={prepared.path} was made for continued pretraining from init={made_for}: "
                             f"pass init={made_for} (without it the run starts from random weights), or prepare "
                             f"with tokenizer={tok} to train from scratch with its vocabulary")
        return
    theirs = init_tokenizer(cfg)
    if theirs.backend.get_vocab() != prepared.tok.backend.get_vocab():
        raise InputError(f"prepared={prepared.path} was made with another vocabulary than init={cfg.init}'s "
                         f"({prepared.info.get('tokenizer_source')}); prepare it with init={cfg.init}")


def prepared_corpus(path: str | Path) -> list[str]:
    """The corpus files a prepared folder was made from, as its ``prepared.json`` records them ([] if unreadable)."""
    try:
        corpus = json.loads((Path(path) / INFO_FILE).read_text(encoding="utf-8")).get("corpus", [])
    except (OSError, ValueError, AttributeError):
        return []
    return [str(c) for c in corpus] if isinstance(corpus, list) else []
