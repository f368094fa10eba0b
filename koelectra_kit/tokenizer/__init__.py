"""The Korean tokenizer pipeline: normalize -> Kiwi morpheme pre-split -> WordPiece (or unigram).

    koelectra-kit tokenizer train --config configs/tokenizer/default.yaml input=corpus.txt out=runs/tok
    tok = KoTokenizer.from_pretrained("runs/tok"); tok.encode_batch(["재밌었는데 ㅋㅋ"], max_length=128)

One module per step, the way huggingface/tokenizers splits normalizers / pre_tokenizers / models / trainers:

- ``koelectra_kit.tokenizer.normalize``: noisy-comment normalization with a map back to the text as given;
- ``kiwi``: the pre-split ("영화는 봤는데" -> 영화 ##는 봤 ##는데), Kiwi instances and versions;
- ``wordsplit``: the word-level pre-split (``presplit: kiwi_word``) and its per-process word cache;
- ``wordfile``: that cache kept in the cache folder from one process to the next;
- ``wordlist``: a tokenizer folder's own list of words' cuts, so named files encode where Kiwi is not installed;
- ``specials``: special-token strings in a text ([MASK], [SEP], ...) kept whole, as transformers keeps them;
- ``core``: ``KoTokenizer``, the object every later stage uses (encode, offsets, decode);
- ``fallback``: characters outside a WordPiece alphabet as conjoining jamo or UTF-8 bytes, never [UNK];
- ``training``: ``train_tokenizer`` (WordPiece, sentencepiece unigram, or characters);
- ``cache``: corpus passes that run Kiwi once (the pre-split text, built in resumable pieces on every core, and
  the ids, cached on disk);
- ``saving``: the saved files, ``from_pretrained``'s reading of them, and their fingerprint;
- ``unknown``: the one warning when much of a run's text is [UNK] (a lowercasing published folder, named);
- ``config``: ``TokenizerConfig`` and ``Encoding``.
"""
from ..io.fileio import cache_dir as default_cache_dir  # the older name of the one cache-dir rule
from .cache import presplit_file
from .config import FORMAT, PRESPLITS, SETTINGS_FILE, SPECIAL_TOKENS, Encoding, TokenizerConfig
from .core import KoTokenizer, iter_corpus_ids
from .kiwi import (kiwi_instance, kiwi_versions, mark_pieces, pieces_from_tokens, presplit_pairs, presplit_texts,
                   serial_tokenizers)
from .saving import tokenizer_fingerprint
from .training import alphabet_size, train_tokenizer

__all__ = ["FORMAT", "PRESPLITS", "SETTINGS_FILE", "SPECIAL_TOKENS", "Encoding", "KoTokenizer", "TokenizerConfig",
           "alphabet_size", "default_cache_dir", "iter_corpus_ids", "kiwi_instance", "kiwi_versions", "mark_pieces",
           "pieces_from_tokens", "presplit_file", "presplit_pairs", "presplit_texts", "serial_tokenizers",
           "tokenizer_fingerprint", "train_tokenizer"]
