"""``koelectra-kit tokenizer train|words|encode``: build a Kiwi + WordPiece vocabulary, keep the cuts of files'
words with it, look at what it does."""
from __future__ import annotations

import argparse
import json

from . import add_config_args

TRAIN_EPILOG = """\
examples:
  koelectra-kit tokenizer train --config configs/tokenizer/default.yaml input=comments.txt out=runs/tok
  koelectra-kit tokenizer train input=[a.txt,b.csv] text_column=comment vocab_size=16000 out=runs/tok16k
  koelectra-kit tokenizer train input=a.txt presplit=none model=unigram out=runs/spm   # sentencepiece
  koelectra-kit tokenizer train input=hf:OWNER/NAME:train text_column=comment out=runs/tok   # a hub dataset

Writes OUT/: tokenizer.json (Hugging Face tokenizers; input = pre-split text), vocab.txt,
tokenizer_config.json, special_tokens_map.json, koelectra_tokenizer.json (normalization, pre-split,
Kiwi versions). The pre-split corpus is cached: a second pass over the same file does no Kiwi work."""


WORDS_EPILOG = """\
examples:
  koelectra-kit tokenizer words tokenizer=runs/tok input=[train.tsv,dev.tsv] text_column=document
  koelectra-kit tokenizer words tokenizer=data/corpus/tokenizer input=reviews.csv      # a prepared folder's

For a presplit=kiwi_word tokenizer: Kiwi's cuts of every word of the files, kept in DIR/kiwi_words.tsv, so
that those files fine-tune, evaluate and label with the ids Kiwi gives on a machine without kiwipiepy (a GPU
machine fed a prepared folder). Run it where the tokenizer's Kiwi is installed; a later run adds new words.
Models saved from the tokenizer carry the list. A text with a word not in it still needs Kiwi."""


def register(subparsers) -> None:
    p = subparsers.add_parser("tokenizer", help="train a tokenizer (Kiwi pre-split + WordPiece) or encode text",
                              description="Korean tokenizer pipeline: normalize -> Kiwi morpheme pre-split -> "
                                          "WordPiece (or sentencepiece unigram).")
    sub = p.add_subparsers(dest="action", metavar="{train,words,encode}")
    sub.required = True
    t = sub.add_parser("train", help="train a vocabulary on a corpus and save the tokenizer",
                       description="Train a tokenizer on corpus files and save it to out=DIR.",
                       epilog=TRAIN_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(t, None)
    t.set_defaults(func=run_train)
    w = sub.add_parser("words", help="keep Kiwi's cuts of files' words with the tokenizer (encode them without Kiwi)",
                       description="Add the words of files to a kiwi_word tokenizer's word list (kiwi_words.tsv), "
                                   "so those files encode on a machine without kiwipiepy.",
                       epilog=WORDS_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(w, None)
    w.set_defaults(func=run_words)
    e = sub.add_parser("encode", help="show pieces, ids, offsets and the decoded text",
                       description="Encode texts with a saved tokenizer and print what each stage did.")
    e.add_argument("--tokenizer", required=True, help="tokenizer dir (or a model dir that carries one)")
    e.add_argument("texts", nargs="*", help="texts to encode (default: read lines from stdin)")
    e.add_argument("--max-length", type=int, default=None, help="truncate to this many tokens (with [CLS]/[SEP])")
    e.add_argument("--json", action="store_true", help="one JSON object per text instead of a readable listing")
    e.set_defaults(func=run_encode)


def run_train(args) -> int:
    from ..config import load_config
    from ..io.hfdata import corpus_paths
    from ..tokenizer import TokenizerConfig, train_tokenizer
    from ..tokenizer.config import check_text_column

    cfg = load_config(TokenizerConfig, args.config, args.overrides)
    cfg.validate()  # before a dataset's texts are written out
    check_text_column(cfg.text_column, cfg.input, "input")  # the files as given (a dataset becomes a .txt below)
    # a dataset (hf:OWNER/NAME[:SPLIT], a save_to_disk or Parquet folder) becomes its texts' file in the cache
    cfg.input = [str(p) for p in corpus_paths(cfg.input, cfg.text_column, cfg.cache_dir)]
    train_tokenizer(cfg)
    return 0


def run_words(args) -> int:
    import tempfile
    from itertools import chain
    from pathlib import Path

    from ..config import load_config
    from ..io.corpus import iter_texts
    from ..io.hfdata import corpus_paths
    from ..io.workbook import WORKBOOK_SUFFIXES
    from ..tokenizer import KoTokenizer
    from ..tokenizer.config import WordsConfig
    from ..tokenizer.wordlist import FILE, add_words, check_kiwi

    cfg = load_config(WordsConfig, args.config, args.overrides)
    cfg.validate()
    tok = KoTokenizer.from_pretrained(cfg.tokenizer, num_workers=cfg.num_workers)
    check_kiwi(tok)  # before any file is read
    paths = corpus_paths(cfg.input, cfg.text_column, cfg.cache_dir)
    # iter_texts refuses workbooks, but `label` reads them: a workbook is converted here as `label` converts it, so
    # the list holds the words `label` of that file will look up. The copies live only as long as this block.
    with tempfile.TemporaryDirectory(prefix="koelectra-words-") as tmp:
        sheets = {p: _sheet_copy(p, Path(tmp) / f"{i}.csv", cfg.text_column) for i, p in enumerate(paths)
                  if p.suffix.lower() in WORKBOOK_SUFFIXES}  # all converted and checked before Kiwi's minutes
        added, total = add_words(tok, chain.from_iterable(iter_texts(sheets.get(p, p), cfg.text_column)
                                                          for p in paths), cfg.num_workers, cfg.progress)
    print(f"{added:,} words added; {total:,} in {tok.source}/{FILE}")
    return 0


def _sheet_copy(src, dst, text_column):
    """``src``'s first worksheet as the CSV ``dst``, by ``label``'s conversion (same call, same sheet, its errors),
    its text column checked at once: an error names the workbook, not the temporary copy, and says which other
    sheet holds the column (only the first is read)."""
    from ..errors import InputError
    from ..io.corpus import iter_texts
    from ..io.tables import TEXT_COLUMNS
    from ..io.workbook import other_sheets_hint, xlsx_to_csv

    xlsx_to_csv(src, dst, str(src))
    texts = iter_texts(dst, text_column)
    try:
        next(texts, None)  # the column rules run on the first rows
    except InputError as e:
        raise InputError(str(e).replace(str(dst), str(src))
                         + other_sheets_hint(src, [text_column] if text_column else TEXT_COLUMNS)) from None
    finally:
        texts.close()  # its open file, before the folder is removed
    return dst


def run_encode(args) -> int:
    import sys

    from ..tokenizer import KoTokenizer

    tok = KoTokenizer.from_pretrained(args.tokenizer)
    texts = _checked_texts(args.texts) if args.texts else _stdin_texts(sys.stdin)
    enc = tok.encode_batch(texts, max_length=args.max_length, return_tokens=True)
    for i, text in enumerate(texts):
        ids, offs, toks = enc["input_ids"][i], enc["offsets"][i], enc["tokens"][i]
        decoded = tok.decode(ids)
        if args.json:
            print(json.dumps({"text": text, "normalized": tok.normalize(text), "tokens": toks, "ids": ids,
                              "offsets": offs, "truncated": enc["truncated"][i], "decoded": decoded},
                             ensure_ascii=False))
            continue
        print(f"text       {text}")
        print(f"normalized {tok.normalize(text)}")
        print(f"tokens     {' '.join(toks)}")
        print(f"ids        {ids}")
        print(f"offsets    {' '.join(f'{a}:{b}={text[a:b]!r}' for a, b in offs[1:-1])}")
        print(f"decoded    {decoded}" + ("   (truncated)" if enc["truncated"][i] else ""))
        if i < len(texts) - 1:
            print()
    return 0


def _checked_texts(texts: list[str]) -> list[str]:
    """Command-line texts; bytes that are not UTF-8 reach Python as lone surrogates, which no tokenizer takes."""
    from ..errors import InputError

    for i, text in enumerate(texts, 1):
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise InputError(f"text {i} is not valid UTF-8 (a cp949 terminal?); pass UTF-8 text") from None
    return texts


def _stdin_texts(stdin) -> list[str]:
    """The lines of stdin decoded as UTF-8 (a BOM dropped); a line that is not UTF-8 is a one-line error naming it."""
    from ..errors import InputError

    buffer = getattr(stdin, "buffer", None)
    if buffer is None:  # a text stream without bytes under it (tests): already decoded
        return _checked_texts([line.rstrip("\r\n") for line in stdin])
    texts = []
    for lineno, raw in enumerate(buffer, 1):
        try:
            line = raw.decode("utf-8-sig" if lineno == 1 else "utf-8")
        except UnicodeDecodeError:
            raise InputError(f"stdin line {lineno} is not valid UTF-8 (cp949?); convert it, e.g. "
                             "iconv -f cp949 -t utf-8") from None
        texts.append(line.rstrip("\r\n"))
    return texts
