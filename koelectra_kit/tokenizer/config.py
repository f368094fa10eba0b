"""What a tokenizer training run is configured with, and what encoding one text gives back."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import check_cores
from ..errors import ConfigError
from ..io.fileio import check_cache_dir, check_distinct_inputs, distinct_inputs
from .normalize import NormalizeConfig

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # ids 0-4, in this order
SETTINGS_FILE = "koelectra_tokenizer.json"
FORMAT = 1  # of SETTINGS_FILE and of the pre-split cache key: raise it when either changes meaning
# The pre-split modes a tokenizer folder may record ("presplit" in SETTINGS_FILE), and those that run Kiwi.
# kiwi: each text analysed whole (every tokenizer saved before kiwi_word). kiwi_word: each whitespace-separated word
# analysed on its own, so its pieces depend on the word alone and are cached (see wordsplit.py).
PRESPLITS = ("kiwi", "kiwi_word", "none")
KIWI_PRESPLITS = ("kiwi", "kiwi_word")
WORD_CACHE = 200_000  # default words the kiwi_word cache keeps per process (~175 B each, see wordsplit.py)
# ... and per process of a corpus pre-split (~175 MB each): a corpus keeps meeting new words, and a 200,000-word LRU
# thrashes there (30% of a 1 GB comment corpus's words missed it, against 12.5% with a million; docs/RESULTS.md §6).
CORPUS_WORD_CACHE = 1_000_000
# The largest vocabulary trained: the published tokenizers stop near 256k, and the trainers size their tables by
# vocab_size before reading the corpus (a typo of 1e9 aborted the process in tokenizers' Rust with its backtrace).
MAX_VOCAB_SIZE = 1_000_000


def check_vocab_size(vocab_size: int) -> None:
    """A ``ConfigError`` when ``vocab_size`` is less or more than any vocabulary this toolkit trains (said before the
    run logs "training a 5-token tokenizer")."""
    if vocab_size < len(SPECIAL_TOKENS) + 50:
        raise ConfigError(f"vocab_size {vocab_size} is too small (at least {len(SPECIAL_TOKENS) + 50})")
    if vocab_size > MAX_VOCAB_SIZE:
        raise ConfigError(f"vocab_size {vocab_size:,} is more than the {MAX_VOCAB_SIZE:,} a vocabulary may have "
                          "(Korean tokenizers have 30k-130k)")


def check_text_column(text_column: str | None, inputs: list[str] | None = None, key: str = "corpus") -> None:
    """``text_column=`` with nothing after it (an unset shell variable) is a ``ConfigError``: it read as "no column
    given", and the column was guessed without a word. Leaving the key out is what asks for the guess. Given for
    ``inputs`` that are all .txt files (one text a line, no columns), it chose nothing, and was recorded as if it had."""
    if text_column is not None and not text_column.strip():
        raise ConfigError("text_column is empty: name the column that holds the text (or leave the key out to use "
                          "the first of the usual names: review, text, document, ...)")
    if text_column is not None and inputs and all(str(p).lower().endswith(".txt") for p in inputs):
        raise ConfigError(f"text_column={text_column}: {key} is text files, one text a line with no columns to choose "
                          "from; drop text_column= (it names a column of a .csv, .tsv, .jsonl or .parquet corpus)")


@dataclass
class TokenizerConfig:
    """One tokenizer training run (``koelectra-kit tokenizer train``)."""

    STAGE: ClassVar[str] = "tokenizer"  # `--config tiny` looks for the shipped configs/tokenizer/tiny.yaml

    input: list[str] = field(default_factory=list)  # corpus files: .txt (a text a line), .csv/.tsv/.jsonl/.parquet
    out: str = ""  # directory the tokenizer is saved to
    text_column: str | None = None  # table column with the text (None: the first of tables.TEXT_COLUMNS)
    vocab_size: int = 32000
    # unigram: sentencepiece (byte fallback). characters: a WordPiece vocabulary of the alphabet and its "##"
    # forms only (no merged pieces; vocab_size unused): the cpu-30min preset's, which learns fastest on 2 cores
    model: Literal["wordpiece", "unigram", "characters"] = "wordpiece"
    # kiwi_word (the default since docs/RESULTS.md §6 measured it): each space-separated word analysed on its own,
    # memoized (fast on text that repeats its words; pieces can differ where Kiwi used a neighbouring word). kiwi:
    # Kiwi analyses each text whole (a folder without the key is this). none: subwords on the text
    presplit: Literal["kiwi", "kiwi_word", "none"] = "kiwi_word"
    normalize: NormalizeConfig = field(default_factory=NormalizeConfig)
    min_frequency: int = 2  # WordPiece: pairs seen fewer times are not merged
    # An upper bound: the alphabet also gets at most a quarter of vocab_size unless more is needed to cover 99.95%
    # of the corpus's characters (see alphabet_size; a comment corpus has ~3-5k distinct characters, most rare).
    limit_alphabet: int = 8000
    # Characters outside the alphabet (Kiwi pre-split WordPiece/characters; unigram has sentencepiece's byte
    # fallback). jamo_bytes: a Hangul syllable becomes its conjoining jamo, any other character its UTF-8 bytes,
    # so decode restores the text exactly (~300 vocabulary entries, taken from the rarest merges; see fallback.py).
    # none: WordPiece's own way, the whole pre-split piece holding the character becomes one [UNK].
    fallback: Literal["jamo_bytes", "none"] = "jamo_bytes"
    max_lines: int = 0  # train on the first N texts of the corpus only (0: all)
    num_workers: int | None = None  # Kiwi threads, and processes of the corpus pre-split (None: all cores)
    cache_dir: str | None = None  # pre-split cache folder (default $KOELECTRA_CACHE or ~/.cache/koelectra-kit)
    # kiwi_word: words whose pieces each process of the corpus pre-split keeps (LRU, ~175 MB a million; 0: no cache)
    word_cache: int = CORPUS_WORD_CACHE
    progress: bool = True

    def validate(self) -> None:
        if not self.input:
            raise ConfigError("input is empty: pass input=FILE (or a list: input=[a.txt,b.txt])")
        if not self.out:
            raise ConfigError("out is not set: pass out=DIR")
        check_distinct_inputs(self.input, "input")
        check_text_column(self.text_column)  # (against .txt inputs: cli/tokenizer.py, before datasets become files)
        check_cache_dir(self.cache_dir)  # before any Kiwi work: a file there failed as "Not a directory"
        check_vocab_size(self.vocab_size)
        if self.min_frequency < 0:
            raise ConfigError(f"min_frequency must be >= 0 (pairs seen fewer times are not merged), got {self.min_frequency}")
        if self.limit_alphabet < 1:
            raise ConfigError(f"limit_alphabet must be at least 1 (the most characters kept as the alphabet), got "
                              f"{self.limit_alphabet}")
        if self.max_lines < 0:
            raise ConfigError(f"max_lines must be >= 0 (0: the whole corpus; N: its first N texts), got {self.max_lines}")
        if self.num_workers is not None and self.num_workers < 1:
            raise ConfigError(f"num_workers must be at least 1 (or null: all cores), got {self.num_workers}")
        check_cores(self.num_workers, "num_workers")
        if self.word_cache < 0:
            raise ConfigError(f"word_cache must be >= 0 (0: no cache), got {self.word_cache}")
        if self.model == "unigram" and self.presplit in KIWI_PRESPLITS:
            raise ConfigError("model=unigram works on the plain text: set presplit=none (Kiwi pre-split "
                              "pieces are for WordPiece)")


@dataclass
class WordsConfig:
    """``koelectra-kit tokenizer words``: the words of files added to a tokenizer folder's word list (wordlist.py),
    so that they encode where Kiwi is not installed."""

    tokenizer: str = ""  # a tokenizer folder saved by koelectra-kit with presplit kiwi_word (or a model folder)
    input: list[str] = field(default_factory=list)  # the files to be fine-tuned on or labelled there: as `input=`
    text_column: str | None = None  # table column with the text (None: the first of tables.TEXT_COLUMNS)
    num_workers: int | None = None  # Kiwi threads (None: all cores)
    cache_dir: str | None = None  # the folder a dataset input (hf:..., a folder) is written to as text first
    progress: bool = True

    def validate(self) -> None:
        if not self.tokenizer:
            raise ConfigError("tokenizer is not set: pass tokenizer=DIR (a folder saved by koelectra-kit)")
        if not self.input:
            raise ConfigError("input is empty: pass input=FILE (or a list: input=[train.tsv,dev.tsv])")
        self.input = distinct_inputs(self.input)  # a word list is a set: a file named twice adds nothing twice
        check_text_column(self.text_column)
        check_cache_dir(self.cache_dir)
        if self.num_workers is not None and self.num_workers < 1:
            raise ConfigError(f"num_workers must be at least 1 (or null: all cores), got {self.num_workers}")
        check_cores(self.num_workers, "num_workers")


@dataclass
class Encoding:
    ids: list[int]
    offsets: list[tuple[int, int]]  # into the text as given; (0, 0) for special tokens
    truncated: bool = False
    tokens: list[str] = field(default_factory=list)
