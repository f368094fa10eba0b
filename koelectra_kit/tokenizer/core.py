"""The tokenizer object every later stage uses: normalize -> pre-split -> subwords, with ids, attention masks
and offsets into the text as given.

    tok = KoTokenizer.from_pretrained("runs/tok"); tok.encode_batch(["재밌었는데 ㅋㅋ"], max_length=128)

The subword model is a Hugging Face ``tokenizers.Tokenizer`` fed the pre-split pieces
(``encode_batch(pieces, is_pretokenized=True)``: a custom Python pre-tokenizer could not be saved), so a plain
``tokenizers``/``transformers`` user of the saved tokenizer.json gets the same ids from the pre-split string.
"""
from __future__ import annotations

import warnings
from functools import partial
from pathlib import Path
from typing import Iterable, Iterator

from ..io.corpus import iter_texts
from ..errors import ConfigError
from ..io.fileio import check_input_file
from ..io.records import texts_of
from .normalize import PLACEHOLDERS, NormalizeConfig, Normalizer
from . import kiwi, saving, wordlist, wordsplit
from .cache import cached_ids, encode_lines, presplit_file
from .charids import CharIds
from .config import CORPUS_WORD_CACHE, KIWI_PRESPLITS, SPECIAL_TOKENS, WORD_CACHE, Encoding
from .fallback import BYTE_TOKENS, NAME as FALLBACK, Fallback
from .specials import SpecialStrings, joined, regroup


class KoTokenizer:
    """normalize -> pre-split -> subwords, with ids, attention masks and offsets into the text as given.

    Later stages use only this interface (``encode_batch``, ``iter_corpus_ids``, the special ids, ``save``),
    so a plain Hugging Face tokenizer directory (e.g. a downloaded KcELECTRA) works through it too: then the
    HF tokenizer does all the work and there is no Kiwi step."""

    def __init__(self, backend, *, normalize: NormalizeConfig | None = None, presplit: str = "kiwi",
                 model: str = "wordpiece", hf_tokenizer=None, num_workers: int | None = None,
                 fallback: str | None = None, word_cache: int = WORD_CACHE, saved_kiwi: dict | None = None,
                 source: str | None = None):
        self.backend = backend  # tokenizers.Tokenizer
        self.normalize_cfg = normalize
        self.presplit = presplit  # kiwi | kiwi_word | none (config.PRESPLITS)
        self.word_cache = word_cache  # kiwi_word: words this process's cache keeps (0: every word to Kiwi)
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
        # The added tokens' strings, kept whole in a text (specials.py). A foreign HF tokenizer's backend does that
        # itself: it is given the text as it is.
        added = {} if hf_tokenizer is not None else {
            t.content: i for i, t in backend.get_added_tokens_decoder().items()}
        self.specials, self._added_ids = SpecialStrings(added), added
        self._chars = self._character_ids()
        self.fallback = fallback
        # A loaded Kiwi tokenizer: the Kiwi versions it was saved with (from its folder, ``source``), compared with
        # this machine's by ``check_kiwi_versions`` before its first Kiwi call.
        self.saved_kiwi, self.source = saved_kiwi, source
        self._kiwi_unchecked = saved_kiwi is not None and presplit in KIWI_PRESPLITS

    def check_kiwi_versions(self) -> None:
        """Warn, once, when this machine's Kiwi is not the one the tokenizer was saved with (another Kiwi model
        build can split some texts differently). Called where Kiwi is about to run, not at load: a run whose texts
        never reach Kiwi (a token cache; a tokenizer without Kiwi pre-split) needs no kiwipiepy at all."""
        if not self._kiwi_unchecked:
            return
        now = kiwi.kiwi_versions()  # (KiwiMissing without kiwipiepy: checked again at the next Kiwi call)
        self._kiwi_unchecked = False
        if self.saved_kiwi != now:
            warnings.warn(f"tokenizer in {self.source} was made with {self.saved_kiwi}, this machine has {now}: Kiwi "
                          "may split some texts differently, changing token ids; install the saved versions for "
                          "identical results", stacklevel=2)

    def kiwi_record(self) -> dict:
        """The Kiwi versions ``save`` writes (Kiwi pre-split only): this machine's; where kiwipiepy is not installed
        (a GPU machine fed a token cache made elsewhere: Kiwi never runs there), those the tokenizer was saved with,
        so its files and fingerprint stay the ones of the machine whose Kiwi split the texts."""
        try:
            return kiwi.kiwi_versions()
        except ImportError:
            if self.saved_kiwi is None:
                raise
            return dict(self.saved_kiwi)

    @property
    def fallback(self) -> str | None:
        """How a character outside a WordPiece alphabet is encoded: "jamo_bytes" (a Hangul syllable as its jamo,
        anything else as its UTF-8 bytes; see ``tokenizer.fallback``) or None (its whole pre-split piece becomes
        one [UNK], as in tokenizers saved before the fallback existed). Settable, e.g. to measure the two."""
        return self._fallback

    @fallback.setter
    def fallback(self, value: str | None) -> None:
        value = None if value in (None, "none") else value
        self._fb = None
        if value is not None:
            if value != FALLBACK:
                raise ConfigError(f"unknown fallback {value!r} (known: {FALLBACK!r}, 'none')")
            if self.hf is not None or self.presplit not in KIWI_PRESPLITS \
                    or type(self.backend.model).__name__ != "WordPiece":
                raise ConfigError("the fallback is for Kiwi pre-split WordPiece vocabularies (unigram has its own "
                                  "byte fallback)")
            self._fb = Fallback(self.backend.get_vocab(), self.backend.model.max_input_chars_per_word)
        self._fallback = value

    def _character_ids(self) -> CharIds | None:
        """For a character vocabulary (no merged pieces) with Kiwi pre-split: its characters that may start a
        word (c) and those that may continue one (##c), as ``CharIds``. WordPiece then emits one token per
        character whatever the pre-split, so Kiwi's split cannot change the ids of a text made of those
        characters alone (see ``needs_kiwi``). None for any other tokenizer."""
        if self.hf is not None or self.presplit not in KIWI_PRESPLITS \
                or type(self.backend.model).__name__ != "WordPiece" or self.backend.normalizer is not None:
            return None
        vocab = self.backend.get_vocab()
        words = set(vocab) - set(SPECIAL_TOKENS) - BYTE_TOKENS  # (only the fallback's words)
        if any(len(t[2:] if t.startswith("##") else t) != 1 for t in words):
            return None
        return CharIds({t: vocab[t] for t in words}, self.backend.model.max_input_chars_per_word)

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
        """The text as the pre-split sees it. Special strings ([MASK], ...) are left as they are and the parts
        between them normalized each on its own, then joined by a space (by nothing when whitespace is kept as
        it is): ``encode_batch(..., normalized=True)`` of the result cuts it into the same parts again."""
        if self._norm is None:
            return text
        found = self.specials.find(text)
        if not found:
            return self._norm(text)
        first, *parts = map(self._norm, self.specials.split([text])[0])
        pieces = [first, *(x for m, part in zip(found, parts) for x in (m.group(), part))]
        return (" " if self.normalize_cfg.collapse_whitespace else "").join(x for x in pieces if x)

    def presplit_text(self, text: str) -> list[str]:
        """The pre-split pieces of one text, as the subword model sees them ("##" = glued to the previous; with
        the fallback, its rewrite of pieces holding characters outside the alphabet; a special string one piece)."""
        return self._presplit([text])[0]

    def presplit_batch(self, texts: list[str]) -> list[str]:
        """Pre-split strings (pieces joined by spaces): what ``tokenizer.json`` alone expects as input."""
        return [" ".join(p) for p in self._presplit(texts)]

    def _presplit(self, texts: list[str]) -> list[list[str]]:
        parts, found, _ = self.specials.split(texts)
        normalized = [self._norm(t) if self._norm is not None else t for t in parts]
        words = (self._words(x, p)[0] for x, p in zip(normalized, self._pieces(normalized)))
        return [joined(first, rest) for first, rest in regroup(words, found)]

    def normalized_reads_alike(self, text: str, normalized: str) -> bool:
        """Whether ``normalized`` (``normalize(text)``), encoded with ``normalized=True``, gives ``text``'s ids. Not
        when normalization wrote a special string the text did not hold ("[MA\u200bSK]" -> "[MASK]"): special
        strings are found in the text as given, before normalizing (as transformers finds added tokens), so the
        text reads plain characters there, its normalized form the [MASK] id. The placeholders normalization
        writes on purpose ([URL], [EMAIL], [USER]) read as their ids either way."""
        if not self.specials:
            return True
        written = set(PLACEHOLDERS.values())
        return ([m.group() for m in self.specials.find(normalized) if m.group() not in written]
                == [m.group() for m in self.specials.find(text) if m.group() not in written])

    def presplit_words(self, text: str) -> list[str]:
        """The words of ``text`` a ``kiwi_word`` pre-split looks up (its word list, its cache, Kiwi): those of the
        normalized parts between its special strings."""
        parts = self.specials.split([text])[0]
        return [w for part in parts for w in (self._norm(part) if self._norm is not None else part).split()]

    def presplit_line(self, line: str) -> str:
        """A line of a pre-split cache file (pieces joined by spaces) as the subword model is fed it."""
        return self._fb.rewrite_line(line) if self._fb is not None else line

    def needs_kiwi(self, text: str) -> bool:
        """Whether the (normalized) text needs Kiwi's pre-split. Not when there is no Kiwi step, nor, with a
        character vocabulary, for a text whose space-separated words give exactly the ids Kiwi's pieces would:
        the vocabulary has each word's first character and the "##" form of the others (a character without its
        form turns its whole piece into [UNK], so Kiwi's piece boundaries would matter), only " " separates words
        (a word after a tab or newline is glued, "##"), no "[" (placeholders are kept whole), no "#" (a word that
        starts with "##" reads as a glued piece to WordPiece), no word long enough to hit WordPiece's length
        limit. Skipping Kiwi, the slowest step by far (~4k reviews/s on 2 cores), makes encoding several times
        faster; test_tokenizer checks the ids match."""
        if self.presplit not in KIWI_PRESPLITS:
            return False
        # exactly the texts whose ids CharIds can give without WordPiece (one rule for both, in charids.py)
        return self._chars is None or self._chars.ids(text) is None

    def _pieces(self, normalized: list[str]) -> list[list[str]]:
        if self.presplit not in KIWI_PRESPLITS:
            return [[t] if t else [] for t in normalized]
        pieces = [None if self.needs_kiwi(t) else (t.split(" ") if t else []) for t in normalized]
        rest = [i for i, p in enumerate(pieces) if p is None]  # all of them unless a character vocabulary
        if rest and self.presplit == "kiwi_word":  # each word alone: the folder's word list, the cache, Kiwi
            for i, p in zip(rest, wordsplit.pieces([normalized[i] for i in rest], self.num_workers,
                                                   self.word_cache, wordlist.load(self.source, self.saved_kiwi),
                                                   self._before_kiwi)):
                pieces[i] = p
        elif rest:  # (no Kiwi call at all otherwise: the first one loads its model, ~2 s)
            for i, sp in zip(rest, self._spans((normalized[i] for i in rest), len(rest))):
                pieces[i] = kiwi.mark_pieces(normalized[i], sp)
        return pieces

    def _before_kiwi(self, words: list[str]) -> None:
        """Before Kiwi cuts ``words`` (none in the folder's word list): its versions checked; without kiwipiepy,
        one line naming such words and how to add them (``wordlist``)."""
        try:
            self.check_kiwi_versions()
            kiwi.require_kiwipiepy()
        except kiwi.KiwiMissing:
            raise wordlist.missing_error(self.source, words) from None

    def _words(self, normalized: str, pieces: list[str]):
        """The words WordPiece is fed for one text, and None, or, where the fallback rewrote them, for each word
        the span in the normalized text of each of its characters. One set operation for most texts."""
        if self._fb is None or not self._fb.needed(normalized):
            return pieces, None
        return self._fb.rewrite(pieces, normalized)

    def _spans(self, normalized: Iterable[str], n: int) -> Iterator[list[tuple[int, int]]]:
        """Kiwi spans per text, streaming; a batch too small to feed several workers runs on one."""
        self.check_kiwi_versions()
        return kiwi.presplit_texts(normalized, self.num_workers if n > 64 else 1)

    # -- encoding
    def encode(self, text: str, max_length: int | None = None, truncation: bool = True,
               add_special_tokens: bool = True) -> Encoding:
        enc = self.encode_batch([text], max_length=max_length, truncation=truncation,
                                add_special_tokens=add_special_tokens, return_tokens=True)
        return Encoding(enc["input_ids"][0], enc["offsets"][0], enc["truncated"][0], enc["tokens"][0])

    def _encodings(self, texts: list[str], with_map: bool, sub: int = 256, normalized: bool = False):
        """(tokenizers Encoding, normalized text, WordPiece's words or None, normalization map or None, the
        fallback's character spans or None) per text, in order. With Kiwi, texts are normalized as Kiwi pulls
        them and the subword/offset work runs on sub-batches as Kiwi's results stream in, so the Python work
        overlaps Kiwi's worker threads instead of leaving cores idle before and after each batch."""
        if self.hf is not None or normalized:  # nothing to normalize (or done already: no map, offsets are its own)
            def norm(t):
                return t, None
        elif with_map:
            def norm(t):
                m = self._norm.with_map(t)
                return m[0], m
        else:
            def norm(t):
                return self._norm(t), None
        if self.presplit not in KIWI_PRESPLITS or self.hf is not None:
            normed = [norm(t) for t in texts]
            encs = self.backend.encode_batch([x for x, _ in normed], add_special_tokens=False)
            for enc, (x, m) in zip(encs, normed):
                yield enc, x, None, m, None
            return
        if self._chars is not None or self.presplit == "kiwi_word":
            # a character vocabulary: Kiwi only for the texts that need it; kiwi_word: only for the words its cache
            # lacks, in one call. Kiwi is done before WordPiece starts, so WordPiece may use every core.
            normed = [norm(t) for t in texts]
            words = [self._words(x, p) for (x, _), p in zip(normed, self._pieces([x for x, _ in normed]))]
            encs = self.backend.encode_batch([w for w, _ in words], is_pretokenized=True, add_special_tokens=False)
            for enc, (x, m), (w, cm) in zip(encs, normed, words):
                yield enc, x, w, m, cm
            return
        normed: list = []

        def feed():
            for t in texts:
                normed.append(norm(t))
                yield normed[-1][0]

        done, buf, maps = 0, [], []

        def flush():
            with kiwi.serial_tokenizers():  # Kiwi's workers hold the cores: rayon threads would only fight them
                encs = self.backend.encode_batch(buf, is_pretokenized=True, add_special_tokens=False)
            for j, enc in enumerate(encs):
                x, m = normed[done + j]
                yield enc, x, buf[j], m, maps[j]

        for spans in self._spans(feed(), len(texts)):
            x = normed[done + len(buf)][0]
            words, cm = self._words(x, kiwi.mark_pieces(x, spans))
            buf.append(words)
            maps.append(cm)
            if len(buf) >= sub:
                yield from flush()
                done, buf, maps = done + len(buf), [], []
        if buf:
            yield from flush()

    def _encoded(self, texts: list[str], with_map: bool, ids_only: bool, normalized: bool = False):
        """``_encodings``, except that with a character vocabulary and only ids wanted, a text ``CharIds``
        covers comes back as its id list (the same ids, no WordPiece call) and only the rest are encoded."""
        if not ids_only or self._chars is None:
            yield from self._encodings(texts, with_map, normalized=normalized)
            return
        fast = [self._chars.ids(t if normalized else self.normalize(t)) for t in texts]
        rest = self._encodings([t for t, ids in zip(texts, fast) if ids is None], False, normalized=normalized)
        for ids in fast:
            yield next(rest) if ids is None else (ids, None, None, None, None)

    def encode_batch(self, texts: list[str], max_length: int | None = None, padding: bool | str = False,
                     truncation: bool = True, add_special_tokens: bool = True, return_tensors: str | None = None,
                     return_offsets: bool = True, return_tokens: bool = False,
                     return_attention_mask: bool = True, normalized: bool = False) -> dict:
        """ids, attention_mask, offsets (character spans into each text as given; (0, 0) for special tokens)
        and a truncated flag per text. padding: False | True/"longest" | "max_length". A caller that batches
        the ids itself (``Classifier.predict``) passes ``return_attention_mask=False``: without padding the mask
        is all ones, and building 10,000 lists of them cost as much as encoding the texts (profile of label).
        ``normalized``: the texts are already this tokenizer's ``normalize`` output (the labeller's deduplication
        normalizes each text for its key): not normalized a second time; offsets then index the texts as given."""
        texts = texts_of(texts)  # as a file's cells are read: NaN empty (it was the word "nan"), bytes as UTF-8
        _check_batch_options(padding, return_tensors, max_length)
        budget = None
        if max_length is not None and truncation:
            budget = max_length - (2 if add_special_tokens else 0)
            if budget < 1:
                raise ConfigError(f"max_length {max_length} leaves no room for text tokens")
        out_ids, out_offsets, out_trunc, out_tokens = [], [], [], []
        for ids, offs, toks, trunc in self._rows(texts, budget, return_offsets, return_tokens, normalized):
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
        pad = padding not in (False, "do_not_pad")
        target = max_length if padding == "max_length" else (longest if pad else None)
        if target is not None:
            result["attention_mask"] = [[1] * len(x) + [0] * (target - len(x)) for x in out_ids]
            result["input_ids"] = [x + [self.pad_token_id] * (target - len(x)) for x in out_ids]
        elif return_attention_mask or return_tensors == "pt":
            result["attention_mask"] = [[1] * len(x) for x in out_ids]
        if return_tensors is not None:
            if target is None and len({len(x) for x in result["input_ids"]}) > 1:
                raise ConfigError(f"return_tensors={return_tensors!r} needs padding=True "
                                  "(texts have different lengths)")
            if "attention_mask" not in result:  # asked for arrays without a mask: a mask of ones, as "pt" gives
                result["attention_mask"] = [[1] * len(x) for x in out_ids]
            if return_tensors == "pt":
                import torch

                as_array = partial(torch.tensor, dtype=torch.long)
            else:
                import numpy as np

                as_array = partial(np.asarray, dtype=np.int64)
            for key in ("input_ids", "attention_mask"):  # an empty batch is (0, 0), not 1-D (0,)
                result[key] = as_array(result[key]) if out_ids else as_array([]).reshape(0, 0)
        return result

    def _rows(self, texts: list[str], budget: int | None, with_offsets: bool, with_tokens: bool, normalized: bool):
        """(ids, offsets, tokens, truncated) per text, no [CLS]/[SEP], cut to ``budget`` tokens. A text with special
        strings is encoded as its parts (``specials.py``), each special string its id and its span."""
        ids_only = not (with_offsets or with_tokens)
        if not any(map(self.specials.find, texts)):  # nearly every batch: the texts as they are
            for item in self._encoded(texts, with_offsets, ids_only, normalized):
                yield self._row(item, budget, with_offsets, with_tokens)
            return
        trim = normalized and self._norm is not None and self.normalize_cfg.collapse_whitespace
        parts, found, spans = self.specials.split(texts, trim)
        encoded = self._encoded(parts, with_offsets, ids_only, normalized)
        for (first, rest), cuts in zip(regroup(encoded, found), spans):
            if not rest:  # a text without a special string is one part, itself
                yield self._row(first, budget, with_offsets, with_tokens)
                continue
            ids, offs, toks = [], [], []
            for (m, item), (start, _) in zip([(None, first), *rest], cuts):  # m: the special string before the part
                if m is not None:
                    ids.append(self._added_ids[m.group()])
                    offs.append(m.span())
                    toks.append(m.group())
                i, o, t, _ = self._row(item, None, with_offsets, with_tokens)
                ids += i
                offs += [(a + start, b + start) for a, b in o]
                toks += t
            trunc = budget is not None and len(ids) > budget
            n = budget if trunc else len(ids)
            yield ids[:n], offs[:n] if with_offsets else [], toks[:n] if with_tokens else [], trunc

    def _row(self, item, budget: int | None, with_offsets: bool, with_tokens: bool):
        """(ids, offsets, tokens, truncated) of one ``_encoded`` item, cut to ``budget`` before the offsets are
        computed (a long text's offsets past the cut cost as much as the rest of its encoding)."""
        enc, norm_text, pieces, norm_map, char_spans = item
        ids = enc if isinstance(enc, list) else enc.ids
        trunc = budget is not None and len(ids) > budget
        n = budget if trunc else len(ids)
        offs = self._offsets(enc, n, norm_text, pieces, norm_map, char_spans) if with_offsets else []
        return ids[:n], offs, enc.tokens[:n] if with_tokens else [], trunc

    def _offsets(self, enc, n: int, normalized: str, pieces: list[str] | None, norm_map,
                 char_spans=None) -> list[tuple[int, int]]:
        """Token spans in the normalized text, then mapped to the text as given."""
        offsets = enc.offsets  # a property that converts the whole list from Rust: read it once
        if char_spans is not None:  # the fallback's words: each kept piece's start, or each character's span
            spans = []
            for w, (a, b) in zip(enc.word_ids[:n], offsets[:n]):
                cs = char_spans[w]
                spans.append((cs[0] + max(a - cs[1], 0), cs[0] + max(b - cs[1], 0)) if type(cs) is tuple
                             else (cs[a][0], cs[b - 1][1]))
        elif pieces is not None:
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
        """Ids -> the normalized text (spacing restored from the "##" marks; with the fallback, byte tokens and jamo
        back to their characters)."""
        if hasattr(ids, "tolist"):
            ids = ids.tolist()
        if skip_special_tokens:
            special = set(self.all_special_ids) - {self.unk_token_id}
            ids = [i for i in ids if i not in special]
        if self._fb is not None:
            return self._fb.decode(self.backend, ids)
        return self.backend.decode(ids, skip_special_tokens=False)

    def convert_ids_to_tokens(self, ids) -> list[str]:
        return [self.backend.id_to_token(int(i)) for i in ids]

    # -- corpora
    def iter_corpus_ids(self, paths, text_column: str | None = None, num_workers: int | None = None,
                        cache_dir: str | None = None, progress: bool = False, chunk: int = 4096) -> Iterator[list[int]]:
        """Token ids (no special tokens) of every non-empty text of the corpus files, in order, streaming, with
        Kiwi's pre-split and the ids cached on disk (see ``iter_corpus_ids``)."""
        return iter_corpus_ids(self, paths, text_column=text_column, num_workers=num_workers, cache_dir=cache_dir,
                               progress=progress, chunk=chunk)

    # -- save / load
    def save(self, directory: str | Path) -> Path:
        """tokenizer.json (+ vocab.txt for WordPiece), tokenizer_config.json, special_tokens_map.json for
        transformers, and koelectra_tokenizer.json with the normalization and pre-split settings and the Kiwi
        versions. Other files in the directory (a model's) are kept."""
        return saving.save_tokenizer(self, directory)

    @classmethod
    def from_pretrained(cls, name_or_dir: str | Path, num_workers: int | None = None,
                        word_cache: int = WORD_CACHE) -> KoTokenizer:
        """A directory saved by ``save`` (or any model dir carrying one), a plain Hugging Face tokenizer
        directory, or a hub model id (downloads with transformers on a machine with internet). ``word_cache``: for
        a ``kiwi_word`` tokenizer, the words whose pieces this process keeps (a setting of the process, not of
        the saved tokenizer: the ids do not depend on it)."""
        return cls(**saving.load_tokenizer_parts(name_or_dir), num_workers=num_workers, word_cache=word_cache)


def iter_corpus_ids(tok: KoTokenizer, paths, text_column: str | None = None, num_workers: int | None = None,
                    cache_dir: str | None = None, progress: bool = False, chunk: int = 4096) -> Iterator[list[int]]:
    """Token ids (no special tokens) of every non-empty text of the corpus files, in order, streaming.
    Kiwi runs once per (file, settings): the pre-split text is cached (see ``cache.presplit_file``), and so are the
    ids for this tokenizer (``cache.cached_ids``): a second pass reads them memory-mapped. A foreign Hugging Face
    tokenizer encodes the texts as they are (it has its own normalization and no pre-split)."""
    if isinstance(paths, (str, Path)):
        paths = [paths]
    for p in [check_input_file(x) for x in paths]:
        if tok.hf is not None:
            yield from encode_lines(tok.backend, iter_texts(p, text_column), chunk)
            continue
        if tok.presplit in KIWI_PRESPLITS:
            tok.check_kiwi_versions()
        cached = presplit_file(p, text_column=text_column, normalize=tok.normalize_cfg, presplit=tok.presplit,
                               num_workers=num_workers or tok.num_workers, cache_dir=cache_dir, progress=progress,
                               word_cache=CORPUS_WORD_CACHE if tok.word_cache else 0,
                               specials=tok.specials.strings)
        yield from cached_ids(tok.backend, cached, chunk, tok.presplit_line if tok.fallback else None)


_PADDING = (False, True, "longest", "max_length", "do_not_pad")


def _check_batch_options(padding, return_tensors, max_length) -> None:
    """transformers' spellings, checked: a typo such as ``padding="max_len"`` was truthy and padded to the
    longest text, and ``return_tensors="np"`` returned plain lists, both without a word."""
    if not any(padding is p or (isinstance(p, str) and padding == p) for p in _PADDING):
        raise ConfigError(f"padding={padding!r}: use True/'longest', 'max_length' or False/'do_not_pad'")
    if return_tensors not in (None, "pt", "np"):
        raise ConfigError(f"return_tensors={return_tensors!r}: use 'pt' (torch), 'np' (numpy) or None (lists)")
    if padding == "max_length" and not max_length:
        raise ConfigError("padding='max_length' needs max_length=N")
