"""The Korean tokenizer pipeline: normalize -> Kiwi morpheme pre-split -> WordPiece (or unigram).

    koelectra-kit tokenizer train --config configs/tokenizer/default.yaml input=corpus.txt out=runs/tok
    tok = KoTokenizer.from_pretrained("runs/tok"); tok.encode_batch(["재밌었는데 ㅋㅋ"], max_length=128)

Pre-split. Kiwi cuts the normalized text into morphemes with character offsets. Contractions overlap
(봤 = 보 + 었 both span one syllable) and are merged into one surface piece, so no character is lost or
rewritten; a merged piece spanning a space (multi-word names) is cut at the space. A piece that does not begin
a space-separated word is written with the WordPiece continuation mark: "영화는 봤는데" -> 영화 ##는 봤 ##는데.
The same "##" then means "glued to the previous token" for morphemes and for subwords alike, so the standard
WordPiece decoder restores the original spacing and a plain ``tokenizers``/``transformers`` user of our
tokenizer.json gets the same ids from the pre-split string.

Subwords. Hugging Face ``tokenizers`` WordPiece trained on the pre-split corpus (``WhitespaceSplit``: the input
is already split; BERT's pre-tokenizer would cut the "##"), or sentencepiece unigram (identity normalization,
byte fallback) converted to a ``tokenizers`` Unigram model, or either with ``presplit: none``.

Corpora. ``iter_corpus_ids`` streams any corpus through Kiwi with all cores and caches the pre-split text
(one line per text, pieces joined by spaces) under a key of (file content, normalization, Kiwi versions); the
second pass over the same corpus (tokenizer training, then pretraining) reads the cache and does no Kiwi work.
"""
from __future__ import annotations

import hashlib
import json
import os
import time
import warnings
from collections import deque
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Literal

from .config import from_dict, to_dict
from .errors import ConfigError, InputError
from .normalize import PLACEHOLDERS, NormalizeConfig, Normalizer
from .utils import atomic_path, write_json_atomic

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4, in this order
SETTINGS_FILE = "koelectra_tokenizer.json"
FORMAT = 1


@dataclass
class TokenizerConfig:
    """One tokenizer training run (``koelectra-kit tokenizer train``)."""

    input: list[str] = field(default_factory=list)  # corpus files: .txt (a text a line), .csv/.tsv/.jsonl
    out: str = ""  # directory the tokenizer is saved to
    text_column: str | None = None  # csv/tsv/jsonl column with the text (None: guess)
    vocab_size: int = 32000
    # unigram: sentencepiece (byte fallback). characters: a WordPiece vocabulary of the alphabet and its "##"
    # forms only (no merged pieces; vocab_size unused): the cpu-30min preset's, which learns fastest on 2 cores
    model: Literal["wordpiece", "unigram", "characters"] = "wordpiece"
    presplit: Literal["kiwi", "none"] = "kiwi"  # none: subwords straight on the normalized text
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    min_frequency: int = 2  # WordPiece: pairs seen fewer times are not merged
    # WordPiece has no byte fallback: every character outside its alphabet becomes [UNK]. An upper bound: the
    # alphabet also gets at most a quarter of vocab_size unless more is needed to cover 99.95% of the corpus's
    # characters (see alphabet_size; a comment corpus has ~3-5k distinct characters, most of them rare).
    limit_alphabet: int = 8000
    max_lines: int = 0  # train on the first N texts of the corpus only (0: all)
    num_workers: int | None = None  # Kiwi threads (None: all cores)
    cache_dir: str | None = None  # pre-split cache (default $KOELECTRA_CACHE or ~/.cache/koelectra-kit)
    progress: bool = True

    def validate(self) -> None:
        if not self.input:
            raise ConfigError("input is empty: pass input=FILE (or a list: input=[a.txt,b.txt])")
        if not self.out:
            raise ConfigError("out is not set: pass out=DIR")
        if self.vocab_size < len(SPECIAL_TOKENS) + 50:
            raise ConfigError(f"vocab_size {self.vocab_size} is too small (at least {len(SPECIAL_TOKENS) + 50})")
        if self.model == "unigram" and self.presplit == "kiwi":
            raise ConfigError("model=unigram works on the plain text: set presplit=none (Kiwi pre-split "
                              "pieces are for WordPiece)")


@dataclass
class Encoding:
    ids: list[int]
    offsets: list[tuple[int, int]]  # into the text as given; (0, 0) for special tokens
    truncated: bool = False
    tokens: list[str] = field(default_factory=list)


# ---------------------------------------------------------------------------------------------
# 1. Kiwi pre-split
# ---------------------------------------------------------------------------------------------

_KIWI: dict = {}


def kiwi_instance(num_workers: int | None = None):
    """One shared Kiwi per worker count (loading the model takes ~2 s and ~0.5 GB). num_workers None: all cores,
    or OMP_NUM_THREADS when set."""
    if num_workers is None:
        # OMP_NUM_THREADS is how a user (or a job runner packing jobs onto cores) caps a process's threads
        env = os.environ.get("OMP_NUM_THREADS", "")
        num_workers = int(env) if env.isdigit() and int(env) > 0 else (os.cpu_count() or 1)
    if num_workers not in _KIWI:
        import warnings as _w

        from kiwipiepy import Kiwi

        with _w.catch_warnings():
            _w.simplefilter("ignore", DeprecationWarning)
            _KIWI[num_workers] = Kiwi(num_workers=num_workers)  # 1: one worker thread (0 could not stream)
    return _KIWI[num_workers]


def kiwi_versions() -> dict:
    import kiwipiepy

    try:
        import kiwipiepy_model

        model = kiwipiepy_model.__version__
    except Exception:  # noqa: BLE001 - a custom model path has no package version
        model = None
    return {"kiwipiepy": kiwipiepy.__version__, "kiwipiepy_model": model}


def pieces_from_tokens(text: str, tokens) -> list[tuple[int, int]]:
    """Surface pieces (start, end) covering every non-space character of ``text`` once, from Kiwi tokens.

    Overlapping tokens (contractions: 보+었 -> 봤; Z_CODA: 닼 -> 다 + ᆿ) merge into one piece; zero-length tokens
    (an inferred copula) vanish; characters no token covers become pieces of their own; a piece that spans a
    space is cut there."""
    spans: list[list[int]] = []
    for t in tokens:
        s, e = t.start, t.end
        if e <= s:
            continue
        if spans and s < spans[-1][1]:
            if e > spans[-1][1]:
                spans[-1][1] = e
        else:
            spans.append([s, e])
    out: list[tuple[int, int]] = []
    pos = 0
    n = len(text)

    def emit(a: int, b: int) -> None:  # cut [a, b) at spaces, keep the non-space runs
        i = a
        while i < b:
            while i < b and text[i].isspace():
                i += 1
            j = i
            while j < b and not text[j].isspace():
                j += 1
            if j > i:
                out.append((i, j))
            i = j

    for s, e in spans:
        if s > pos:
            emit(pos, s)  # characters Kiwi skipped
        emit(max(s, pos), e)
        pos = max(pos, e)
    if pos < n:
        emit(pos, n)
    return out


def mark_pieces(text: str, spans: list[tuple[int, int]]) -> list[str]:
    """Piece strings with "##" on the pieces that continue a space-separated word."""
    return [text[s:e] if s == 0 or text[s - 1] == " " else "##" + text[s:e] for s, e in spans]


def _protect_placeholders(text: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """Placeholders ([URL], [EMAIL], [USER]) stay one piece (Kiwi would cut them into '[', 'URL', ']')."""
    found = []
    for ph in PLACEHOLDERS.values():
        i = text.find(ph)
        while i >= 0:
            found.append((i, i + len(ph)))
            i = text.find(ph, i + len(ph))
    if not found:
        return spans
    kept = [sp for sp in spans if not any(a <= sp[0] < b for a, b in found)]
    return sorted(kept + found)


@contextmanager
def _serial_tokenizers():
    """tokenizers' encode_batch on the calling thread only (it reads TOKENIZERS_PARALLELISM on every call).
    Inside the Kiwi pipeline, rayon's threads fight Kiwi's workers for the cores: benchmarks/bench_tokenizer.py
    went from 0.67x Kiwi's own throughput on 2 cores to 0.72-0.81x. Process-wide, so restored right after."""
    old = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = old


def presplit_texts(normalized: Iterable[str], num_workers: int | None = None) -> Iterator[list[tuple[int, int]]]:
    """Pre-split spans for each (already normalized) text, streaming, Kiwi's worker threads busy meanwhile."""
    kiwi = kiwi_instance(num_workers)
    queue: deque = deque()

    def feed():
        for t in normalized:
            queue.append(t)
            yield t

    for tokens in kiwi.tokenize(feed()):
        text = queue.popleft()
        spans = pieces_from_tokens(text, tokens)
        if "[" in text:
            spans = _protect_placeholders(text, spans)
        yield spans


# ---------------------------------------------------------------------------------------------
# 2. Corpus pass with a pre-split cache
# ---------------------------------------------------------------------------------------------


def default_cache_dir() -> Path:
    return Path(os.environ.get("KOELECTRA_CACHE", Path.home() / ".cache" / "koelectra-kit"))


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def presplit_file(path: str | Path, *, text_column: str | None, normalize: NormalizeConfig, presplit: str,
                  num_workers: int | None = None, cache_dir: str | Path | None = None, progress: bool = False,
                  max_lines: int = 0) -> Path:
    """The corpus file as pre-split text (one line per non-empty text, pieces joined by spaces), from the cache
    when this file and these settings were seen before. Written atomically, so a killed pass leaves no cache."""
    from .corpus import iter_texts

    path = Path(path)
    key_src = json.dumps({"file": _file_digest(path), "column": text_column, "normalize": to_dict(normalize),
                          "presplit": presplit, "kiwi": kiwi_versions() if presplit == "kiwi" else None,
                          "max_lines": max_lines, "format": FORMAT}, sort_keys=True)
    key = hashlib.sha256(key_src.encode()).hexdigest()[:20]
    root = Path(cache_dir) if cache_dir else default_cache_dir()
    target = root / "presplit" / f"{path.stem[:40]}-{key}.txt"
    if target.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    norm = Normalizer(normalize)
    stats = {"texts": 0, "empty": 0}
    size = path.stat().st_size
    from tqdm.auto import tqdm

    bar = tqdm(total=size, unit="B", unit_scale=True, desc=f"pre-splitting {path.name}", disable=not progress,
               leave=False)

    def texts():
        done = 0
        for raw in iter_texts(path, text_column):
            bar.update(len(raw.encode("utf-8", "replace")) + 1)
            t = norm(raw)
            if not t:
                stats["empty"] += 1
                continue
            yield t
            done += 1
            if max_lines and done >= max_lines:
                return

    t0 = time.perf_counter()
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        if presplit == "kiwi":
            queue: deque = deque()

            def feed():
                for t in texts():
                    queue.append(t)
                    yield t

            kiwi = kiwi_instance(num_workers)
            for tokens in kiwi.tokenize(feed()):
                text = queue.popleft()
                spans = pieces_from_tokens(text, tokens)
                if "[" in text:
                    spans = _protect_placeholders(text, spans)
                f.write(" ".join(mark_pieces(text, spans)))
                f.write("\n")
                stats["texts"] += 1
        else:
            for t in texts():
                f.write(t)
                f.write("\n")
                stats["texts"] += 1
    bar.close()
    if stats["texts"] == 0:
        target.unlink(missing_ok=True)
        raise InputError(f"{path}: no text in it ({stats['empty']} empty lines)")
    if progress:
        print(f"pre-split {path.name}: {stats['texts']:,} texts ({stats['empty']:,} empty skipped) in "
              f"{time.perf_counter() - t0:.1f}s -> {target}", flush=True)
    return target


# ---------------------------------------------------------------------------------------------
# 3. Training
# ---------------------------------------------------------------------------------------------


def _build_backend(model: str, presplit: str):
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers

    if model == "wordpiece":
        # max_input_chars_per_word: a longer word becomes one [UNK]; URLs and ㅋ-runs can be long.
        tok = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=200))
        tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit() if presplit == "kiwi" else pre_tokenizers.BertPreTokenizer()
        tok.decoder = decoders.WordPiece(prefix="##", cleanup=False)
        return tok
    raise ValueError(model)


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
    spm.SentencePieceTrainer.train(
        input=",".join(str(f) for f in files), model_prefix=f"{d}/spm", vocab_size=cfg.vocab_size,
        model_type="unigram", normalization_rule_name="identity", byte_fallback=True,
        character_coverage=0.9995, pad_id=0, unk_id=1, bos_id=2, eos_id=3,
        pad_piece="[PAD]", unk_piece="[UNK]", bos_piece="[CLS]", eos_piece="[SEP]",
        user_defined_symbols=["[MASK]"], input_sentence_size=2_000_000, shuffle_input_sentence=True,
        train_extremely_large_corpus=False, minloglevel=2, num_threads=os.cpu_count() or 1)


def train_tokenizer(cfg: TokenizerConfig) -> "KoTokenizer":
    """Pre-split the corpus (cached), train the subword model on it, save to ``cfg.out``; returns the tokenizer."""
    from tokenizers import AddedToken, trainers

    cfg.validate()
    t0 = time.perf_counter()
    files = [presplit_file(p, text_column=cfg.text_column, normalize=cfg.normalize, presplit=cfg.presplit,
                           num_workers=cfg.num_workers, cache_dir=cfg.cache_dir, progress=cfg.progress,
                           max_lines=cfg.max_lines) for p in _check_inputs(cfg.input)]
    if cfg.model == "unigram":
        backend = _train_unigram(files, cfg)
    else:
        backend = _build_backend("wordpiece", cfg.presplit)
        chars = cfg.model == "characters"
        alphabet, kept = cfg.limit_alphabet, []
        if not chars:
            alphabet, note, kept = alphabet_size(files, cfg.vocab_size, cfg.limit_alphabet)
            if cfg.progress:
                print(note, flush=True)
        # characters: the trainer always keeps the alphabet and its "##" forms, whatever vocab_size says, so a
        # vocab_size of zero merges leaves exactly those. Subwords: the alphabet is ours (``kept``), since the
        # trainer cuts its own among equally frequent characters in hash order (other rare characters each run).
        trainer = trainers.WordPieceTrainer(
            vocab_size=len(SPECIAL_TOKENS) if chars else cfg.vocab_size, min_frequency=cfg.min_frequency,
            special_tokens=SPECIAL_TOKENS, limit_alphabet=alphabet, initial_alphabet=kept,
            continuing_subword_prefix="##", show_progress=cfg.progress)
        backend.train([str(f) for f in files], trainer)
        _renumber(backend)
        vocab = [t for t in backend.get_vocab() if t not in SPECIAL_TOKENS]
        merged = sum(len(t.removeprefix("##")) > 1 for t in vocab)
        if not chars and merged < 0.1 * len(vocab):
            warnings.warn(f"the {len(vocab) + len(SPECIAL_TOKENS)}-token vocabulary is nearly all single characters "
                          f"({merged} longer pieces): raise vocab_size or lower limit_alphabet", stacklevel=2)
    placeholders = [ph for key, ph in PLACEHOLDERS.items() if getattr(cfg.normalize, key) == "placeholder"]
    backend.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in SPECIAL_TOKENS])
    if placeholders:
        backend.add_tokens([AddedToken(t, single_word=False, normalized=False) for t in placeholders])
    backend.post_processor = _post_processor(backend)
    tok = KoTokenizer(backend, normalize=cfg.normalize, presplit=cfg.presplit,
                      model="unigram" if cfg.model == "unigram" else "wordpiece")  # characters: WordPiece, no merges
    tok.save(cfg.out)
    if cfg.progress:
        print(f"trained a {tok.vocab_size}-token {cfg.model} tokenizer (pre-split: {cfg.presplit}) in "
              f"{time.perf_counter() - t0:.1f}s -> {cfg.out}", flush=True)
    return tok


def _renumber(backend) -> None:
    """Fixed ids for a trained WordPiece vocabulary. The trainer breaks frequency ties in hash order, so two runs
    of one command numbered the same pieces differently (a model is tied to its ids) and, where merges tie at the
    vocab_size cut-off, could keep different ones. WordPiece's greedy longest match does not use the ids, so
    they get a fixed order: special tokens, single characters, "##" characters, longer pieces, each by length then
    code point. A character vocabulary is now the same run to run; a subword one has a fixed alphabet (see
    ``alphabet_size``) but can still differ in tied merges (the trainer numbers "##" forms in hash order)."""
    from tokenizers import models

    old = backend.model
    rest = sorted((t for t in backend.get_vocab() if t not in SPECIAL_TOKENS),
                  key=lambda t: (len(t.removeprefix("##")) > 1, t.startswith("##"), len(t), t))
    backend.model = models.WordPiece({t: i for i, t in enumerate([*SPECIAL_TOKENS, *rest])}, unk_token=old.unk_token,
                                     continuing_subword_prefix=old.continuing_subword_prefix,
                                     max_input_chars_per_word=old.max_input_chars_per_word)


def alphabet_size(files: list[Path], vocab_size: int, limit: int,
                  coverage: float = 0.9995) -> tuple[int, str, list[str]]:
    """How many characters WordPiece may keep as its alphabet, a line saying what that means, and which ones.

    WordPiece starts its vocabulary with the alphabet plus a "##" form of every character that continues a piece;
    only what is left of vocab_size becomes merged pieces. A Korean comment corpus has ~4,600 distinct characters,
    so with the whole alphabet an 8k vocabulary holds single characters and nothing else (no merge ever runs).
    The alphabet therefore gets at most a quarter of the vocabulary, or, when more is needed to cover 99.95% of
    the corpus's characters (small corpora, where rare characters are a large share), that many; characters
    outside it become [UNK] (WordPiece has no byte fallback). On ../shared/data/pretrain an 8k vocabulary keeps
    1,998 characters, which cover all but 0.04% of its characters; a 32k one keeps them all.

    Which ones: the most frequent as the trainer counts them ("#" also once per character of each "##" mark),
    ties broken by code point, so the same corpus always gives the same alphabet (the trainer's own cut breaks
    ties in hash order)."""
    from collections import Counter

    counts: Counter = Counter()
    marks = 0
    for f in files:  # pre-split text: pieces joined by spaces, "##" before the pieces that continue a word
        with open(f, encoding="utf-8") as fh:
            for line in fh:
                marks += line.count(" ##") + line.startswith("##")
                counts.update(line.replace(" ##", " ").removeprefix("##").replace(" ", "").rstrip("\n"))
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
                  f"corpus's characters (the rest become [UNK])"), kept


def tokenizer_fingerprint(tok) -> str:
    """Hash of the tokenizer's saved files (vocabulary, normalization and pre-split settings, Kiwi versions): a
    checkpoint or data cache made with another tokenizer must not be reused. Remembered on the object, since a
    loaded tokenizer does not change (a fine-tune keys both its train and dev token caches with it)."""
    import tempfile

    fp = getattr(tok, "fingerprint", None)
    if isinstance(fp, str) and fp:
        return fp
    h = hashlib.sha256()
    with tempfile.TemporaryDirectory() as d:
        tok.save(d)
        for f in sorted(Path(d).rglob("*")):
            if f.is_file():
                h.update(f.relative_to(d).as_posix().encode() + b"\0" + f.read_bytes())
    fp = h.hexdigest()[:16]
    try:
        tok.fingerprint = fp
    except AttributeError:  # an object that takes no new attributes: recomputed next time
        pass
    return fp


def _check_inputs(paths: list[str]) -> list[Path]:
    out = []
    for p in paths:
        path = Path(p)
        if not path.is_file():
            raise InputError(f"corpus file not found: {p}")
        if path.stat().st_size == 0:
            raise InputError(f"corpus file is empty: {p}")
        out.append(path)
    return out


# ---------------------------------------------------------------------------------------------
# 4. The tokenizer object every later stage uses
# ---------------------------------------------------------------------------------------------


class KoTokenizer:
    """normalize -> pre-split -> subwords, with ids, attention masks and offsets into the text as given.

    Later stages use only this interface (``encode_batch``, ``iter_corpus_ids``, the special ids, ``save``),
    so a plain Hugging Face tokenizer directory (e.g. a downloaded KcELECTRA) works through it too: then the
    HF tokenizer does all the work and there is no Kiwi step."""

    def __init__(self, backend, *, normalize: NormalizeConfig | None = None, presplit: str = "kiwi",
                 model: str = "wordpiece", hf_tokenizer=None, num_workers: int | None = None):
        self.backend = backend  # tokenizers.Tokenizer
        self.normalize_cfg = normalize
        self.presplit = presplit
        self.model = model
        self.hf = hf_tokenizer  # set for a foreign HF tokenizer dir (its own normalization / special tokens)
        self.num_workers = num_workers
        self._norm = Normalizer(normalize) if normalize is not None else None
        self.backend.no_truncation()
        self.backend.no_padding()
        if hf_tokenizer is not None:
            ids = {k: getattr(hf_tokenizer, f"{k}_token_id") for k in ("pad", "unk", "cls", "sep", "mask")}
            if ids["cls"] is None:  # e.g. RoBERTa-style <s> </s>
                ids["cls"], ids["sep"] = hf_tokenizer.bos_token_id, hf_tokenizer.eos_token_id
            self._special = ids
            self.all_special_ids = sorted({i for i in hf_tokenizer.all_special_ids if i is not None})
        else:
            self._special = {k: backend.token_to_id(f"[{k.upper()}]") for k in ("pad", "unk", "cls", "sep", "mask")}
            self.all_special_ids = sorted(backend.token_to_id(t) for t in SPECIAL_TOKENS)
        self._alphabet, self._max_word = self._character_alphabet()

    def _character_alphabet(self) -> tuple[frozenset | None, int]:
        """For a character vocabulary (no merged pieces) with Kiwi pre-split: its characters that may start a
        word (c) and those that may continue one (##c). WordPiece then emits one token per character whatever
        the pre-split, so Kiwi's split cannot change the ids of a text made of those characters alone (see
        ``_word_pieces``)."""
        if self.hf is not None or self.presplit != "kiwi" or type(self.backend.model).__name__ != "WordPiece" \
                or self.backend.normalizer is not None:
            return None, 0
        vocab = set(self.backend.get_vocab()) - set(SPECIAL_TOKENS)
        if any(len(t[2:] if t.startswith("##") else t) != 1 for t in vocab):
            return None, 0
        plain = frozenset(t for t in vocab if len(t) == 1)
        glued = frozenset(t[2:] for t in vocab if len(t) == 3)
        return (plain, glued), self.backend.model.max_input_chars_per_word

    # -- ids
    vocab_size = property(lambda self: self.backend.get_vocab_size(with_added_tokens=True))
    pad_token_id = property(lambda self: self._special["pad"])
    unk_token_id = property(lambda self: self._special["unk"])
    cls_token_id = property(lambda self: self._special["cls"])
    sep_token_id = property(lambda self: self._special["sep"])
    mask_token_id = property(lambda self: self._special["mask"])

    def __repr__(self) -> str:
        return f"KoTokenizer(vocab_size={self.vocab_size}, model={self.model}, presplit={self.presplit})"

    # -- text -> pieces
    def normalize(self, text: str) -> str:
        return self._norm(text) if self._norm is not None else text

    def presplit_text(self, text: str) -> list[str]:
        """The pre-split pieces of one text, as the subword model sees them ("##" = glued to the previous)."""
        return self._pieces([self.normalize(text)])[0]

    def _pieces(self, normalized: list[str]) -> list[list[str]]:
        if self.presplit != "kiwi":
            return [[t] if t else [] for t in normalized]
        pieces = [self._word_pieces(t) for t in normalized]
        rest = [i for i, p in enumerate(pieces) if p is None]  # all of them unless a character vocabulary
        if rest:  # (no Kiwi call at all otherwise: the first one loads its model, ~2 s)
            for i, sp in zip(rest, self._spans((normalized[i] for i in rest), len(rest))):
                pieces[i] = mark_pieces(normalized[i], sp)
        return pieces

    def _word_pieces(self, text: str) -> list[str] | None:
        """The space-separated words of ``text`` as pieces, where that gives exactly the ids Kiwi's pieces
        would: a character vocabulary that has each word's first character and the "##" form of the others (a
        character without its form turns its whole piece into [UNK], so Kiwi's piece boundaries would matter),
        only " " as whitespace (a word after a tab or newline is glued, "##"), no "[" (placeholders are kept
        whole), no "#" (a word that starts with "##" reads as a glued piece to WordPiece), no word long enough
        to hit WordPiece's length limit. None otherwise: Kiwi splits the text.
        Skipping Kiwi, the slowest step by far (~4k reviews/s on 2 cores), makes encoding several times faster;
        test_tokenizer checks the ids match."""
        if self._alphabet is None or "[" in text or "#" in text:
            return None
        if not text:
            return []
        plain, glued = self._alphabet
        words = text.split(" ")
        for w in words:
            # "" = a leading/trailing/double space (not what the normalizer emits): let Kiwi see it
            if not w or len(w) > self._max_word - 2 or w[0] not in plain or not glued.issuperset(w[1:]):
                return None
        return words

    def _spans(self, normalized: Iterable[str], n: int) -> Iterator[list[tuple[int, int]]]:
        """Kiwi spans per text, streaming; a batch too small to feed several workers runs on one."""
        return presplit_texts(normalized, self.num_workers if n > 64 else 1)

    def presplit_batch(self, texts: list[str]) -> list[str]:
        """Pre-split strings (pieces joined by spaces): what ``tokenizer.json`` alone expects as input."""
        return [" ".join(p) for p in self._pieces([self.normalize(t) for t in texts])]

    # -- encoding
    def encode(self, text: str, max_length: int | None = None, truncation: bool = True,
               add_special_tokens: bool = True) -> Encoding:
        enc = self.encode_batch([text], max_length=max_length, truncation=truncation,
                                add_special_tokens=add_special_tokens, return_tokens=True)
        return Encoding(enc["input_ids"][0], enc["offsets"][0], enc["truncated"][0], enc["tokens"][0])

    def _encodings(self, texts: list[str], with_map: bool, sub: int = 256):
        """(tokenizers Encoding, normalized text, pre-split pieces or None, normalization map or None) per text,
        in order. With Kiwi, texts are normalized as Kiwi pulls them and the subword/offset work runs on
        sub-batches as Kiwi's results stream in, so the Python work overlaps Kiwi's worker threads instead of
        leaving cores idle before and after each batch."""
        if self.hf is not None:
            def norm(t):
                return t, None
        elif with_map:
            def norm(t):
                m = self._norm.with_map(t)
                return m[0], m
        else:
            def norm(t):
                return self._norm(t), None
        if self.presplit != "kiwi" or self.hf is not None:
            normed = [norm(t) for t in texts]
            encs = self.backend.encode_batch([x for x, _ in normed], add_special_tokens=False)
            for enc, (x, m) in zip(encs, normed):
                yield enc, x, None, m
            return
        if self._alphabet is not None:  # a character vocabulary: Kiwi only for the texts that need it
            normed = [norm(t) for t in texts]
            pieces = self._pieces([x for x, _ in normed])
            encs = self.backend.encode_batch(pieces, is_pretokenized=True, add_special_tokens=False)
            for enc, (x, m), p in zip(encs, normed, pieces):
                yield enc, x, p, m
            return
        normed: list = []

        def feed():
            for t in texts:
                normed.append(norm(t))
                yield normed[-1][0]

        done, buf = 0, []

        def flush():
            with _serial_tokenizers():  # Kiwi's workers hold the cores: rayon threads would only fight them
                encs = self.backend.encode_batch(buf, is_pretokenized=True, add_special_tokens=False)
            for j, enc in enumerate(encs):
                x, m = normed[done + j]
                yield enc, x, buf[j], m

        for spans in self._spans(feed(), len(texts)):
            buf.append(mark_pieces(normed[done + len(buf)][0], spans))
            if len(buf) >= sub:
                yield from flush()
                done, buf = done + len(buf), []
        if buf:
            yield from flush()

    def encode_batch(self, texts: list[str], max_length: int | None = None, padding: bool | str = False,
                     truncation: bool = True, add_special_tokens: bool = True, return_tensors: str | None = None,
                     return_offsets: bool = True, return_tokens: bool = False) -> dict:
        """ids, attention_mask, offsets (character spans into each text as given; (0, 0) for special tokens)
        and a truncated flag per text. padding: False | True/"longest" | "max_length"."""
        texts = ["" if t is None else str(t) for t in texts]
        budget = None
        if max_length is not None and truncation:
            budget = max_length - (2 if add_special_tokens else 0)
            if budget < 1:
                raise ConfigError(f"max_length {max_length} leaves no room for text tokens")
        out_ids, out_offsets, out_trunc, out_tokens = [], [], [], []
        for enc, normalized, pieces, norm_map in self._encodings(texts, return_offsets):
            ids = enc.ids
            trunc = budget is not None and len(ids) > budget
            n = budget if trunc else len(ids)
            ids = ids[:n]
            offs = self._offsets(enc, n, normalized, pieces, norm_map) if return_offsets else []
            toks = enc.tokens[:n] if return_tokens else []
            if add_special_tokens:
                ids = [self.cls_token_id] + ids + [self.sep_token_id]
                offs = [(0, 0)] + offs + [(0, 0)] if return_offsets else offs
                toks = ["[CLS]"] + toks + ["[SEP]"] if return_tokens else toks
            out_ids.append(ids)
            out_offsets.append(offs)
            out_trunc.append(trunc)
            out_tokens.append(toks)
        result = {"input_ids": out_ids, "offsets": out_offsets, "truncated": out_trunc}
        if return_tokens:
            result["tokens"] = out_tokens
        longest = max((len(x) for x in out_ids), default=0)
        target = max_length if padding == "max_length" and max_length else (longest if padding else None)
        if target is not None:
            result["attention_mask"] = [[1] * len(x) + [0] * (target - len(x)) for x in out_ids]
            result["input_ids"] = [x + [self.pad_token_id] * (target - len(x)) for x in out_ids]
        else:
            result["attention_mask"] = [[1] * len(x) for x in out_ids]
        if return_tensors == "pt":
            import torch

            if target is None and len({len(x) for x in result["input_ids"]}) > 1:
                raise ConfigError("return_tensors='pt' needs padding=True (texts have different lengths)")
            result["input_ids"] = torch.tensor(result["input_ids"], dtype=torch.long)
            result["attention_mask"] = torch.tensor(result["attention_mask"], dtype=torch.long)
        return result

    def _offsets(self, enc, n: int, normalized: str, pieces: list[str] | None, norm_map) -> list[tuple[int, int]]:
        """Token spans in the normalized text, then mapped to the text as given."""
        offsets = enc.offsets  # a property that converts the whole list from Rust: read it once
        if pieces is not None:
            # is_pretokenized: offsets are relative to each piece (its "##" included): shift by the piece's
            # start in the normalized text, found by walking the pieces in order.
            starts, marks, pos = [], [], 0
            for p in pieces:
                m = 2 if p[:2] == "##" else 0
                pos = normalized.find(p[m:], pos)
                starts.append(pos)
                marks.append(m)
                pos += len(p) - m
            spans = []
            for w, (a, b) in zip(enc.word_ids[:n], offsets[:n]):
                m, base = marks[w], starts[w]
                spans.append((base + (a - m if a > m else 0), base + (b - m if b > m else 0)))
        else:
            spans = [tuple(o) for o in offsets[:n]]
        if norm_map is None:
            return spans
        _, st, en = norm_map
        return [(st[a], en[b - 1]) if b > a else (st[a] if a < len(st) else (en[-1] if en else 0),) * 2
                for a, b in spans]

    def decode(self, ids, skip_special_tokens: bool = True) -> str:
        """Ids -> the normalized text (spacing restored from the "##" marks)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if skip_special_tokens:
            special = set(self.all_special_ids) - {self.unk_token_id}
            ids = [i for i in ids if i not in special]
        return self.backend.decode(ids, skip_special_tokens=False)

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return [self.backend.id_to_token(int(i)) for i in ids]

    # -- corpora
    def iter_corpus_ids(self, paths, text_column: str | None = None, num_workers: int | None = None,
                        cache_dir: str | None = None, progress: bool = False, chunk: int = 4096) -> Iterator[list[int]]:
        """Token ids (no special tokens) of every non-empty text of the corpus files, in order, streaming.
        Kiwi runs once per (file, settings): the pre-split text is cached (see ``presplit_file``), and so are the
        ids for this tokenizer (``_cached_ids``): a second pass reads them memory-mapped."""
        if isinstance(paths, (str, Path)):
            paths = [paths]
        for p in _check_inputs([str(x) for x in paths]):
            if self.hf is not None:
                from .corpus import iter_texts

                lines = iter_texts(p, text_column)
            else:
                cached = presplit_file(p, text_column=text_column, normalize=self.normalize_cfg,
                                       presplit=self.presplit, num_workers=num_workers or self.num_workers,
                                       cache_dir=cache_dir, progress=progress)
                yield from self._cached_ids(cached, chunk)
                continue
            yield from self._encode_lines(lines, chunk)

    def _encode_lines(self, lines: Iterable[str], chunk: int) -> Iterator[list[int]]:
        buf: list[str] = []
        for line in lines:
            buf.append(line)
            if len(buf) >= chunk:
                yield from (e.ids for e in self.backend.encode_batch(buf, add_special_tokens=False))
                buf = []
        if buf:
            yield from (e.ids for e in self.backend.encode_batch(buf, add_special_tokens=False))

    def _cached_ids(self, presplit_path: Path, chunk: int) -> Iterator[list[int]]:
        """Ids of a pre-split cache file, themselves cached beside it (keyed by this tokenizer's exact
        model): a third pass does neither Kiwi nor WordPiece work, only a memory-mapped read. Raw int32
        ids + int64 text offsets (no pickle); written to temporary files, renamed once complete."""
        import numpy as np

        key = hashlib.sha256((presplit_path.name + self.backend.to_str()).encode()).hexdigest()[:20]
        root = presplit_path.parent.parent / "ids"
        ids_path, idx_path = root / f"{presplit_path.stem}-{key}.ids", root / f"{presplit_path.stem}-{key}.idx"
        if ids_path.exists() and idx_path.exists():
            ids = np.memmap(ids_path, dtype=np.int32, mode="r") if ids_path.stat().st_size else np.zeros(0, np.int32)
            idx = np.fromfile(idx_path, dtype=np.int64)
            for a, b in zip(idx[:-1].tolist(), idx[1:].tolist()):
                yield ids[a:b].tolist()
            return
        root.mkdir(parents=True, exist_ok=True)
        tmp_ids, tmp_idx = ids_path.with_suffix(f".ids.tmp{os.getpid()}"), idx_path.with_suffix(f".idx.tmp{os.getpid()}")
        done = False
        try:
            with open(tmp_ids, "wb") as fi, open(tmp_idx, "wb") as fx:
                total, offsets = 0, [0]
                lines = (line.rstrip("\n") for line in open(presplit_path, encoding="utf-8"))
                for ids in self._encode_lines(lines, chunk):
                    np.asarray(ids, dtype=np.int32).tofile(fi)
                    total += len(ids)
                    offsets.append(total)
                    if len(offsets) >= 65536:
                        np.asarray(offsets[:-1], dtype=np.int64).tofile(fx)
                        offsets = offsets[-1:]
                    yield ids
                np.asarray(offsets, dtype=np.int64).tofile(fx)
            done = True
        finally:
            if done:
                os.replace(tmp_ids, ids_path)
                os.replace(tmp_idx, idx_path)
            else:  # the caller stopped early or failed: no half-written cache
                tmp_ids.unlink(missing_ok=True)
                tmp_idx.unlink(missing_ok=True)

    # -- save / load
    def save(self, directory: str | Path) -> Path:
        """tokenizer.json (+ vocab.txt for WordPiece), tokenizer_config.json, special_tokens_map.json for
        transformers, and koelectra_tokenizer.json with the normalization and pre-split settings and the Kiwi
        versions. Other files in the directory (a model's) are kept."""
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        if self.hf is not None:
            self.hf.save_pretrained(str(d))
            return d
        with atomic_path(d / "tokenizer.json") as tmp:
            self.backend.save(str(tmp))
        if self.model == "wordpiece":
            vocab = self.backend.get_vocab(with_added_tokens=True)
            with atomic_path(d / "vocab.txt") as tmp:
                Path(tmp).write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])),
                                     encoding="utf-8")
        specials = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                    "mask_token": "[MASK]"}
        write_json_atomic(d / "special_tokens_map.json", specials)
        write_json_atomic(d / "tokenizer_config.json", {
            "tokenizer_class": "PreTrainedTokenizerFast", **specials, "model_max_length": 512,
            "clean_up_tokenization_spaces": False,
            "koelectra_note": "tokenizer.json expects Kiwi-pre-split text (KoTokenizer.presplit_batch); "
                              "load with koelectra_kit.tokenizer.KoTokenizer.from_pretrained for raw text"})
        write_json_atomic(d / SETTINGS_FILE, {
            "format": FORMAT, "model": self.model, "presplit": self.presplit,
            "normalize": to_dict(self.normalize_cfg), **({"kiwi": kiwi_versions()} if self.presplit == "kiwi" else {})})
        return d

    @classmethod
    def from_pretrained(cls, name_or_dir: str | Path, num_workers: int | None = None) -> "KoTokenizer":
        """A directory saved by ``save`` (or any model dir carrying one), a plain Hugging Face tokenizer
        directory, or a hub model id (downloads with transformers on a machine with internet)."""
        from tokenizers import Tokenizer

        d = Path(name_or_dir)
        settings_path = d / SETTINGS_FILE
        if settings_path.is_file():
            try:
                s = json.loads(settings_path.read_text(encoding="utf-8"))
                backend = Tokenizer.from_file(str(d / "tokenizer.json"))
            except (OSError, ValueError, Exception) as e:  # noqa: BLE001 - corrupt files: one clear message
                raise InputError(f"cannot read the tokenizer in {d}: {e}") from None
            if s.get("presplit") == "kiwi":
                saved, now = s.get("kiwi", {}), kiwi_versions()
                if saved != now:
                    warnings.warn(f"tokenizer in {d} was made with {saved}, this machine has {now}: Kiwi may split "
                                  "some texts differently, changing token ids; install the saved versions for "
                                  "identical results", stacklevel=2)
            norm = from_dict(NormalizeConfig, s.get("normalize", {}))
            return cls(backend, normalize=norm, presplit=s.get("presplit", "kiwi"), model=s.get("model", "wordpiece"),
                       num_workers=num_workers)
        if d.is_dir() and not (d / "tokenizer.json").exists() and not (d / "vocab.txt").exists() \
                and not (d / "tokenizer_config.json").exists():
            raise InputError(f"no tokenizer in {d}: expected {SETTINGS_FILE} + tokenizer.json (saved by "
                             "koelectra-kit) or a Hugging Face tokenizer")
        if not d.exists() and (str(name_or_dir).startswith((".", "/")) or str(name_or_dir).count("/") > 1):
            raise InputError(f"tokenizer directory not found: {name_or_dir}")
        from transformers import AutoTokenizer

        try:
            hf = AutoTokenizer.from_pretrained(str(name_or_dir), use_fast=True)
        except (OSError, ValueError) as e:
            raise InputError(f"cannot load a tokenizer from {name_or_dir}: {str(e).splitlines()[0]}") from None
        if not getattr(hf, "is_fast", False):
            raise InputError(f"{name_or_dir}: only fast (tokenizer.json) Hugging Face tokenizers are supported")
        return cls(hf.backend_tokenizer, normalize=None, presplit="none", model="hf", hf_tokenizer=hf)


__all__ = ["TokenizerConfig", "KoTokenizer", "Encoding", "train_tokenizer", "presplit_file", "pieces_from_tokens",
           "mark_pieces", "SPECIAL_TOKENS"]
