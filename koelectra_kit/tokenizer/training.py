"""Training a subword model on the pre-split corpus: WordPiece (Hugging Face ``tokenizers``, ``WhitespaceSplit``
since the input is already split and BERT's pre-tokenizer would cut the "##"), sentencepiece unigram (identity
normalization, byte fallback) converted to a ``tokenizers`` Unigram model, or a WordPiece vocabulary of
characters only. A Kiwi pre-split WordPiece vocabulary also gets the fallback's tokens (conjoining jamo and
bytes, see ``fallback``), so no character is lost to [UNK]."""
from __future__ import annotations

import os
import sys
import time
import warnings
from collections import Counter
from pathlib import Path

from .. import runtime
from ..errors import InputError
from ..io.fileio import check_input_file, staged_dir
from ..io.scope import entry_scope
from ..io.output import check_out_dir
from .normalize import PLACEHOLDERS
from .cache import presplit_file
from .config import KIWI_PRESPLITS, SETTINGS_FILE, SPECIAL_TOKENS, WORD_CACHE, TokenizerConfig
from . import wordlist
from .core import KoTokenizer
from .fallback import BYTE_TOKENS, NAME as FALLBACK, fallback_tokens


def train_tokenizer(cfg: TokenizerConfig | dict, shown_as: str | Path | None = None) -> KoTokenizer:
    """Pre-split the corpus (cached), train the subword model on it, save to ``cfg.out``; returns the tokenizer.
    ``cfg``: a TokenizerConfig or a dict of its keys, validated as ``load_config`` validates. ``shown_as``: the
    folder the log names (``prepare`` trains into a staging folder renamed later)."""
    from ..config import checked

    cfg = checked(cfg, TokenizerConfig, "train_tokenizer")
    with entry_scope():
        return _train(cfg, shown_as)


def _train(cfg: TokenizerConfig, shown_as: str | Path | None) -> KoTokenizer:
    from tokenizers import AddedToken

    _check_out(Path(cfg.out), cfg.input)
    t0 = time.perf_counter()
    files = [presplit_file(p, text_column=cfg.text_column, normalize=cfg.normalize, presplit=cfg.presplit,
                           num_workers=cfg.num_workers, cache_dir=cfg.cache_dir, progress=cfg.progress,
                           max_lines=cfg.max_lines, word_cache=cfg.word_cache)
             for p in [check_input_file(x) for x in cfg.input]]
    backend = _train_unigram(files, cfg) if cfg.model == "unigram" else _train_wordpiece(files, cfg)
    placeholders = [ph for key, ph in PLACEHOLDERS.items() if getattr(cfg.normalize, key) == "placeholder"]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    if placeholders:
        backend.add_tokens([AddedToken(t, single_word=False, normalized=False) for t in placeholders])
    backend.post_processor = _post_processor(backend)
    tok = KoTokenizer(backend, normalize=cfg.normalize, presplit=cfg.presplit,
                      model="unigram" if cfg.model == "unigram" else "wordpiece",  # characters: WordPiece, no merges
                      fallback=FALLBACK if _with_fallback(cfg) else None,
                      word_cache=min(cfg.word_cache, WORD_CACHE))  # labelling's size, not the corpus's
    if cfg.model == "wordpiece" and tok.vocab_size < cfg.vocab_size:
        # WordPiece stops when the corpus has no more pairs to merge; the model's embedding table follows the
        # tokenizer, so nothing breaks, but the user asked for another size and should know
        warnings.warn(f"vocab_size={cfg.vocab_size}, but the corpus supports only {tok.vocab_size} tokens: the "
                      f"vocabulary has {tok.vocab_size} (a bigger corpus gives more)", stacklevel=2)
    replaced, kept = _earlier(Path(cfg.out), cfg.presplit)
    with staged_dir(cfg.out) as staging:  # the folder swapped in whole: a kill mid-save leaves the old one, not a mix
        tok.save(staging)
        if kept:
            wordlist.copy_into(cfg.out, staging)
    if replaced:
        runtime.warn(replaced)
    if cfg.progress:
        runtime.log(f"trained a {tok.vocab_size}-token {cfg.model} tokenizer (pre-split: {cfg.presplit}) in "
                    f"{time.perf_counter() - t0:.1f}s -> {shown_as or cfg.out}")
    return tok


TOKENIZER_FILES = ("tokenizer.json", "vocab.txt", SETTINGS_FILE)  # a folder with one is a tokenizer's, to replace


def _check_out(out: Path, inputs: list[str]) -> None:
    """Before any Kiwi work: ``out`` must be a folder (or not exist yet), not a model's folder, whose token ids
    the new vocabulary would silently replace, and new, empty or a tokenizer's, holding none of the ``inputs``."""
    from ..io.output import check_not_input

    if out.exists() and not out.is_dir():
        raise InputError(f"out={out} is a file; give a folder for the tokenizer")
    if (out / "config.json").is_file():
        raise InputError(f"out={out} holds a model (config.json): a new vocabulary there would replace the tokenizer "
                         "its weights were trained with; choose another folder")
    # a folder of other files (out=. or a documents folder) got five tokenizer files written among them
    check_out_dir(out, TOKENIZER_FILES, "a tokenizer folder (no tokenizer.json, vocab.txt or koelectra_tokenizer.json)",
                  staged=True)
    # the folder is replaced whole (staged_dir): a corpus kept in it (input=runs/tok/corpus.txt out=runs/tok) was
    # trained on, then deleted with the old tokenizer, exit 0
    check_not_input(out, {f"input[{i}]" if len(inputs) > 1 else "input": p for i, p in enumerate(inputs)})


def _earlier(out: Path, presplit: str) -> tuple[str | None, bool]:
    """(the note a retrain into ``out`` gives, whether the folder's word list is kept). A tokenizer there is replaced
    (as a model folder is, with a note); its word list (``tokenizer words``: Kiwi's cuts of a file's words, which
    depend on Kiwi alone, not on the vocabulary) is kept for a new ``kiwi_word`` tokenizer, which reads it, and goes
    with the old one otherwise. It went silently, and with it what lets a machine without Kiwi encode those files."""
    if not any((out / name).is_file() for name in TOKENIZER_FILES):
        return None, False
    words = out / wordlist.FILE
    if not words.is_file():
        return f"note: replaced the tokenizer that was in {out}", False
    if presplit == "kiwi_word":
        return (f"note: replaced the tokenizer that was in {out}; its word list {wordlist.FILE} is kept (Kiwi's cuts "
                "of words do not depend on the vocabulary)"), True
    return (f"note: replaced the tokenizer that was in {out}, and its word list {wordlist.FILE} (only a "
            f"presplit=kiwi_word tokenizer reads one; this one is presplit={presplit})"), False


def _train_wordpiece(files: list[Path], cfg: TokenizerConfig):
    """WordPiece (or, for model=characters, its alphabet and "##" forms alone) on the pre-split files."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    # max_input_chars_per_word: a longer word becomes one [UNK]; URLs and ㅋ-runs can be long.
    backend = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=200))
    backend.pre_tokenizer = (pre_tokenizers.WhitespaceSplit() if cfg.presplit in KIWI_PRESPLITS
                             else pre_tokenizers.BertPreTokenizer())
    backend.decoder = decoders.WordPiece(prefix="##", cleanup=False)
    chars = cfg.model == "characters"
    alphabet, kept, continuing = cfg.limit_alphabet, [], set()
    if not chars:
        alphabet, note, kept = alphabet_size(files, cfg.vocab_size, cfg.limit_alphabet, continuing=continuing)
        if cfg.progress:
            # what the saved tokenizer does, not what was asked: the fallback rides on the Kiwi pre-split's words
            # (presplit=none said "jamo or UTF-8 byte tokens" and saved a tokenizer that gives [UNK])
            rest = ("jamo or UTF-8 byte tokens (fallback=jamo_bytes)" if _with_fallback(cfg) else
                    f"[UNK]: fallback=jamo_bytes needs a Kiwi pre-split, not presplit={cfg.presplit}"
                    if cfg.fallback == FALLBACK and cfg.model != "unigram" else "[UNK]")
            runtime.log(f"{note} (the rest become {rest})")
    # characters: the trainer always keeps the alphabet and its "##" forms, whatever vocab_size says, so a
    # vocab_size of zero merges leaves exactly those. Subwords: the alphabet is ours (``kept``), since the
    # trainer cuts its own among equally frequent characters in hash order (other rare characters each run).
    # Subwords: the trainer numbers each "##" form as it first meets it in a hash map's order, and those numbers
    # break ties between equally frequent merges, so one corpus gave other merges run to run (huggingface/
    # tokenizers#1794; the quickstart twice: two vocabularies, two models). Given first, in code point order, as
    # special tokens (the one way to number them up front), they are numbered the same every run; they are plain
    # vocabulary again right after (``_only_specials``). Which ones: ``alphabet_size`` collects them.
    forms = ["##" + c for c in sorted(continuing & set(kept))]  # (empty for characters: no merges to tie)
    trainer = trainers.WordPieceTrainer(
        vocab_size=len(SPECIAL_TOKENS) if chars else cfg.vocab_size, min_frequency=cfg.min_frequency,
        special_tokens=[*SPECIAL_TOKENS, *forms], limit_alphabet=alphabet, initial_alphabet=kept,
        # (the Rust trainer's bars print blank lines where stderr is no terminal: a log, a pipe)
        continuing_subword_prefix="##", show_progress=cfg.progress and sys.stderr.isatty())
    backend.train([str(f) for f in files], trainer)
    if forms:
        backend = _only_specials(backend)
    _renumber(backend, *(_fallback_room(backend, merged=not chars) if _with_fallback(cfg) else ([], set())))
    vocab = [t for t in backend.get_vocab() if t not in SPECIAL_TOKENS]
    merged = sum(len(t.removeprefix("##")) > 1 and t not in BYTE_TOKENS for t in vocab)
    if not chars and merged < 0.1 * len(vocab):
        # a Python warning (not a log line): it is about the object returned, and callers may filter it
        warnings.warn(few_merges_warning(len(vocab) + len(SPECIAL_TOKENS), merged, alphabet, cfg.vocab_size,
                                         _with_fallback(cfg)), stacklevel=3)
    return backend


def few_merges_warning(size: int, merged: int, alphabet: int, asked: int, fallback: bool) -> str:
    """What to do about a WordPiece vocabulary of ``size`` tokens with only ``merged`` longer pieces. The alphabet,
    the "##" form of each character that continues a word, the fallback's tokens and the special tokens come first;
    merges get only what vocab_size leaves above them (none when it is below: the vocabulary is then bigger than
    asked). "Raise vocab_size or lower limit_alphabet" said neither by how much, nor that lowering limit_alphabet does
    nothing above the alphabet it kept, nor that a corpus with no more pairs to merge is the limit, not vocab_size."""
    base = size - merged  # everything but the longer pieces
    head = f"the {size}-token vocabulary is nearly all single characters ({merged} longer pieces)"
    if size > asked:  # vocab_size is a floor under the alphabet, not a cap: say by how much it was passed
        head += f", {size / asked:.1f}x the vocab_size={asked} asked for"
    if size < asked:  # the trainer ran out of pairs before vocab_size: a bigger size changes nothing
        return (f"{head}: the corpus has too few repeated character pairs for more (vocab_size={asked} is not what "
                "limits it); train on a bigger corpus")
    suggest = -(-2 * base // 1000) * 1000  # about half of it then longer pieces, rounded up to a thousand
    taken = "the ## forms, the fallback's tokens" if fallback else "the ## forms"
    advice = f"give vocab_size={suggest} or more (published Korean encoders use 30,000 or more)"
    if 4 * alphabet >= base:  # the alphabet and its ## forms are half of it or more: a smaller one leaves room too
        rest = "jamo or byte tokens" if fallback else "[UNK]"
        advice += f", or limit_alphabet below {alphabet} (the rarer characters then become {rest})"
    return (f"{head}: its {alphabet}-character alphabet, {taken} and the special tokens take {base}, and only "
            f"what vocab_size leaves above that becomes longer pieces; {advice}")


def _only_specials(backend):
    """``backend`` with SPECIAL_TOKENS as its only added tokens: the "##" forms given to the trainer as special
    tokens stay in the vocabulary as the trainer left them, as ordinary pieces (an added token is matched in the
    input before WordPiece runs, and a special one is dropped by decode)."""
    import json

    from tokenizers import Tokenizer

    state = json.loads(backend.to_str())
    state["added_tokens"] = [t for t in state["added_tokens"] if t["content"] in SPECIAL_TOKENS]
    return Tokenizer.from_str(json.dumps(state))


def _post_processor(tok):
    from tokenizers import processors

    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    return processors.TemplateProcessing(single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
                                         special_tokens=[("[CLS]", cls), ("[SEP]", sep)])


def _train_unigram(files: list[Path], cfg: TokenizerConfig):
    """sentencepiece unigram (identity normalization, byte fallback) -> a ``tokenizers`` Unigram model."""
    import tempfile

    import sentencepiece as spm
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    with tempfile.TemporaryDirectory() as d:
        try:
            _spm_train(spm, d, files, cfg)
        except RuntimeError as e:
            raise InputError(f"sentencepiece: {str(e).split('] ')[-1]}") from None
        sp = spm.SentencePieceProcessor(model_file=f"{d}/spm.model")
        vocab = [(sp.id_to_piece(i), sp.get_score(i)) for i in range(sp.get_piece_size())]
    tok = Tokenizer(models.Unigram(vocab, unk_id=1, byte_fallback=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    # (Fuse before Metaspace loses the spaces in tokenizers 0.23; Metaspace per token, then bytes, is right)
    tok.decoder = decoders.Sequence([decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True),
                                     decoders.ByteFallback(), decoders.Fuse()])
    return tok


def _spm_train(spm, d, files, cfg):
    # identity normalization: sentencepiece's default nmt_nfkc turns compatibility jamo ㅋ into ᄏ
    spm.SentencePieceTrainer.train(
        input=",".join(str(f) for f in files), model_prefix=f"{d}/spm", vocab_size=cfg.vocab_size,
        model_type="unigram", normalization_rule_name="identity", byte_fallback=True,
        character_coverage=0.9995, pad_id=0, unk_id=1, bos_id=2, eos_id=3,
        pad_piece="[PAD]", unk_piece="[UNK]", bos_piece="[CLS]", eos_piece="[SEP]",
        user_defined_symbols=["[MASK]"], input_sentence_size=2_000_000, shuffle_input_sentence=True,
        train_extremely_large_corpus=False, minloglevel=2, num_threads=os.cpu_count() or 1)


def _with_fallback(cfg: TokenizerConfig) -> bool:
    return cfg.fallback == FALLBACK and cfg.model != "unigram" and cfg.presplit in KIWI_PRESPLITS


def _fallback_room(backend, merged: bool) -> tuple[list[str], set[str]]:
    """The fallback's tokens the trained vocabulary lacks (all of them unless the corpus held conjoining jamo),
    and the merged pieces that make room for them: the last merges the trainer made (its rarest pairs), so a
    subword vocabulary keeps exactly vocab_size entries. A character vocabulary (no merges) grows instead."""
    vocab = backend.get_vocab()
    missing = [t for t in fallback_tokens() if t not in vocab]
    if not merged:
        return missing, set()
    merges = sorted((t for t in vocab if len(t.removeprefix("##")) > 1 and t not in SPECIAL_TOKENS), key=vocab.get)
    return missing, set(merges[max(0, len(merges) - len(missing)):])


def _renumber(backend, add: list[str] = (), drop: set[str] = frozenset()) -> None:
    """Fixed ids for a trained WordPiece vocabulary. The trainer breaks frequency ties in hash order, so two runs
    of one command numbered the same pieces differently (a model is tied to its ids) and, where merges tie at the
    vocab_size cut-off, could keep different ones. WordPiece's greedy longest match does not use the ids, so
    they get a fixed order: special tokens, single characters, "##" characters, longer pieces, each by length then
    code point. A character vocabulary is the same run to run; so is a subword one (a fixed alphabet: see
    ``alphabet_size``; tied merges: the "##" forms numbered up front in ``_train_wordpiece``)."""
    from tokenizers import models

    old = backend.model
    rest = sorted((t for t in [*backend.get_vocab(), *add] if t not in SPECIAL_TOKENS and t not in drop),
                  key=lambda t: (len(t.removeprefix("##")) > 1, t.startswith("##"), len(t), t))
    backend.model = models.WordPiece({t: i for i, t in enumerate([*SPECIAL_TOKENS, *rest])}, unk_token=old.unk_token,
                                     continuing_subword_prefix=old.continuing_subword_prefix,
                                     max_input_chars_per_word=old.max_input_chars_per_word)


def alphabet_size(files: list[Path], vocab_size: int, limit: int, coverage: float = 0.9995,
                  continuing: set | None = None) -> tuple[int, str, list[str]]:
    """How many characters WordPiece may keep as its alphabet, a line saying what that means, and which ones.

    WordPiece starts its vocabulary with the alphabet plus a "##" form of every character that continues a piece;
    only what is left of vocab_size becomes merged pieces. A Korean comment corpus has ~4,600 distinct characters,
    so with the whole alphabet an 8k vocabulary holds single characters and nothing else (no merge ever runs).
    The alphabet therefore gets at most a quarter of the vocabulary, or, when more is needed to cover 99.95% of
    the corpus's characters (small corpora, where rare characters are a large share), that many; characters
    outside it become [UNK] (WordPiece has no byte fallback). On the 30-minute pretraining corpus an 8k vocabulary
    keeps 1,998 characters, which cover all but 0.04% of its characters; a 32k one keeps them all.

    Which ones: the most frequent as the trainer counts them ("#" also once per character of each "##" mark),
    ties broken by code point, so the same corpus always gives the same alphabet (the trainer's own cut breaks
    ties in hash order).

    ``continuing``, if given, gets the characters that continue a word of the files (the trainer makes a "##" form
    of each), in the same pass."""
    counts: Counter = Counter()
    marks = 0
    for f in files:  # pre-split text: pieces joined by spaces, "##" before the pieces that continue a word
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                marks += line.count(" ##") + line.startswith("##")
                counts.update(line.replace(" ##", " ").removeprefix("##").replace(" ", "").rstrip("\n"))
                if continuing is not None:
                    continuing.update("".join(w[1:] for w in line.split()))
    total = sum(counts.values()) or 1
    freqs = sorted(counts.values(), reverse=True)
    needed, seen = 0, 0
    while needed < len(freqs) and seen < coverage * total:
        seen += freqs[needed]
        needed += 1
    keep = min(limit, len(freqs), max((vocab_size - len(SPECIAL_TOKENS)) // 4, needed))
    covered = sum(freqs[:keep]) / total
    if marks:
        counts["#"] += 2 * marks
    kept = sorted(counts, key=lambda c: (-counts[c], c))[:keep]
    return keep, (f"alphabet: {keep:,} of {len(freqs):,} distinct characters, covering {covered:.4%} of the "
                  f"corpus's characters"), kept
