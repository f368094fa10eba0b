"""The tokenizer pipeline on real noisy text: pre-split pieces, offsets, decode, save/load, the CLI, bad input."""
import json
import os
import warnings

import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.tokenizer import KoTokenizer, TokenizerConfig, kiwi, kiwi_instance, mark_pieces, \
    pieces_from_tokens, train_tokenizer
from koelectra_kit.tokenizer.fallback import BYTE_TOKENS, jamo
from koelectra_kit.tokenizer.config import SPECIAL_TOKENS

NOISY = [
    "영화는 봤는데 진짜 닼ㅋㅋㅋㅋ 재밌었다!!!!  😀",
    "저거 인간되긴 틀렸다 꼬장 뺨한대 맞고 아버지한테 말하는 소리보소~전혀 자신의 잘못을 모르는 철면피다",
    "연장하나요?내용이 한달내내 지겹네요.빨리 끝내세요진도가안나가요",
    "청아엄마, 준휘엄마.... 시네마 천국 최고",
    "abc DEF 123", "😀😀😀", "",
]


def _pieces(text):
    spans = pieces_from_tokens(text, kiwi_instance(1).tokenize(text))
    return mark_pieces(text, spans)


def test_contractions_are_merged_not_rewritten():
    # 봤 = 보 + 었 (overlapping spans), 닼 = 다 + ᆿ (Z_CODA): one surface piece each, text unchanged
    assert _pieces("봤는데") == ["봤", "##는데"]
    assert _pieces("닼ㅋㅋ")[0] == "닼"
    assert "".join(p.removeprefix("##") for p in _pieces("재밌었다")) == "재밌었다"


def test_multiword_piece_is_cut_at_the_space():
    assert _pieces("시네마 천국") == ["시네마", "천국"]


def test_pieces_cover_every_character():
    for text in NOISY[:5]:
        text = " ".join(text.split())
        spans = pieces_from_tokens(text, kiwi_instance(1).tokenize(text))
        covered = "".join(text[a:b] for a, b in spans)
        assert covered == text.replace(" ", "")


def test_spacing_restored_by_decode(sample_tokenizer):
    tok = sample_tokenizer
    for text in NOISY:
        ids = tok.encode(text).ids
        # 😀 and 닼 are outside the 2,000-token vocabulary: the fallback keeps them (bytes, jamo), no [UNK]
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == tok.normalize(text)


def source_holds(token: str, src: str) -> bool:
    """Whether the characters a token's offsets point at are the ones it stands for: its text, or, for the
    fallback's tokens, the one syllable a jamo came from or the one character a byte came from."""
    body = token.removeprefix("##")
    if body.startswith("<0x") and len(body) == 6:
        return len(src) == 1 and int(body[3:5], 16) in src.encode()
    if len(body) == 1 and "\u1100" <= body <= "\u11ff" and len(src) == 1 and "가" <= src <= "힣":
        return body in jamo(src)
    return src == body


def test_offsets_point_at_source_characters(sample_tokenizer):
    tok = sample_tokenizer
    enc = tok.encode_batch(NOISY, return_tokens=True)
    for text, offs, toks, ids in zip(NOISY, enc["offsets"], enc["tokens"], enc["input_ids"]):
        assert offs[0] == (0, 0) and offs[-1] == (0, 0)
        for (a, b), t, i in zip(offs[1:-1], toks[1:-1], ids[1:-1]):
            assert 0 <= a < b <= len(text)
            if i == tok.unk_token_id:
                continue
            # the source holds the token's characters; a collapsed run (ㅋㅋㅋㅋ -> ㅋㅋ) maps to its first chars
            assert source_holds(t, text[a:b]), (text, t, text[a:b])


def test_padding_truncation_and_tensors(sample_tokenizer):
    tok = sample_tokenizer
    enc = tok.encode_batch(NOISY, max_length=8, padding=True, return_tensors="pt")
    assert tuple(enc["input_ids"].shape) == (len(NOISY), 8)
    assert enc["truncated"][1] and not enc["truncated"][-1]
    assert enc["input_ids"][-1].tolist()[:2] == [tok.cls_token_id, tok.sep_token_id]
    assert enc["attention_mask"][-1].tolist() == [1, 1] + [0] * 6
    assert (enc["input_ids"][:, -1] != tok.pad_token_id).sum() >= 1
    fixed = tok.encode_batch(["짧다"], max_length=16, padding="max_length")
    assert len(fixed["input_ids"][0]) == 16


def test_numpy_tensors_and_option_spellings(sample_tokenizer):
    """return_tensors="np" returned plain lists and a misspelt padding padded to the longest, both silently."""
    import numpy as np

    from koelectra_kit.errors import ConfigError

    tok = sample_tokenizer
    enc = tok.encode_batch(NOISY, max_length=8, padding=True, return_tensors="np")
    want = tok.encode_batch(NOISY, max_length=8, padding=True, return_tensors="pt")
    assert isinstance(enc["input_ids"], np.ndarray) and enc["input_ids"].dtype == np.int64
    assert enc["input_ids"].tolist() == want["input_ids"].tolist()
    assert enc["attention_mask"].tolist() == want["attention_mask"].tolist()
    assert tok.encode_batch([], padding=True, return_tensors="np")["input_ids"].shape == (0, 0)
    assert tok.encode_batch(["영화", "재밌었는데 ㅋㅋ"], padding="do_not_pad")["input_ids"] == \
        tok.encode_batch(["영화", "재밌었는데 ㅋㅋ"])["input_ids"]
    for bad in ({"padding": "max_len", "max_length": 8}, {"return_tensors": "tf"}, {"padding": "max_length"}):
        with pytest.raises(ConfigError):
            tok.encode_batch(["영화"], **bad)


def test_special_ids_and_vocab(sample_tokenizer):
    tok = sample_tokenizer
    assert [tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id] == [0, 1, 2, 3, 4]
    assert tok.vocab_size == 2000
    assert tok.all_special_ids == [0, 1, 2, 3, 4]


def test_save_load_roundtrip_and_transformers(sample_tokenizer, tmp_path):
    from transformers import PreTrainedTokenizerFast

    tok = sample_tokenizer
    d = tok.save(tmp_path / "model")
    (tmp_path / "model" / "config.json").write_text("{}")  # a model's files stay
    tok.save(d)
    assert (d / "config.json").exists()
    again = KoTokenizer.from_pretrained(d)
    assert again.encode_batch(NOISY)["input_ids"] == tok.encode_batch(NOISY)["input_ids"]
    # tokenizer.json alone (plain transformers), fed the pre-split string, gives the same ids, the fallback's
    # jamo and byte tokens included (NOISY[0] holds 닼 and 😀, outside this vocabulary)
    hf = PreTrainedTokenizerFast(tokenizer_file=str(d / "tokenizer.json"))
    pre = tok.presplit_batch(NOISY[:4])
    assert "<0xF0>" in pre[0] and "\u1103" in pre[0]
    assert hf(pre)["input_ids"] == tok.encode_batch(NOISY[:4])["input_ids"]
    settings = json.loads((d / "koelectra_tokenizer.json").read_text())
    # kiwi_word: the default for new tokenizers since docs/RESULTS.md §6
    assert settings["presplit"] == "kiwi_word" and settings["kiwi"]["kiwipiepy"] and settings["fallback"] == "jamo_bytes"
    assert again.fallback == "jamo_bytes"


def test_version_mismatch_warns(sample_tokenizer, tmp_path):
    d = sample_tokenizer.save(tmp_path / "t")
    s = json.loads((d / "koelectra_tokenizer.json").read_text())
    s["kiwi"]["kiwipiepy_model"] = "0.0.1"
    (d / "koelectra_tokenizer.json").write_text(json.dumps(s))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        tok = KoTokenizer.from_pretrained(d)  # compared where Kiwi first runs, not here: a run that never calls Kiwi
    with pytest.warns(UserWarning, match="may split") as seen:  # (a token cache) needs no kiwipiepy (issue 39)
        tok.encode_batch(["영화 재밌었는데 ㅋㅋ", "배송이 느려요"])
        tok.encode_batch(["또 봐요"])
    assert len(seen) == 1 and "0.0.1" in str(seen[0].message)


def test_plain_hf_tokenizer_dir_works(sample_tokenizer, tmp_path):
    """A foreign Hugging Face tokenizer dir (e.g. a downloaded KcELECTRA) loads without Kiwi settings."""
    from transformers import PreTrainedTokenizerFast

    hf = PreTrainedTokenizerFast(tokenizer_file=str(sample_tokenizer.save(tmp_path / "a") / "tokenizer.json"),
                                 pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]",
                                 mask_token="[MASK]")
    hf.save_pretrained(tmp_path / "hf")
    tok = KoTokenizer.from_pretrained(tmp_path / "hf")
    assert tok.presplit == "none" and tok.cls_token_id == 2
    enc = tok.encode_batch(["영화 ##는 좋다"], max_length=16)
    assert enc["input_ids"][0][0] == 2 and enc["input_ids"][0][-1] == 3


def test_iter_corpus_ids_cached_second_pass(sample_dir, sample_tokenizer, tmp_path):
    import time

    tok = sample_tokenizer
    t0 = time.perf_counter()
    first = list(tok.iter_corpus_ids([sample_dir / "comments.txt"], cache_dir=str(tmp_path)))
    t1 = time.perf_counter()
    second = list(tok.iter_corpus_ids([sample_dir / "comments.txt"], cache_dir=str(tmp_path)))
    assert first == second and len(first) == 400
    assert len(list((tmp_path / "presplit").iterdir())) == 1
    # the cached pass does no Kiwi work: make loading Kiwi fail and read again
    with pytest.MonkeyPatch.context() as mp:
        def no_kiwi(num_workers=None):
            raise AssertionError("Kiwi was loaded on a cached pass")

        mp.setattr(kiwi, "kiwi_instance", no_kiwi)
        assert list(tok.iter_corpus_ids([sample_dir / "comments.txt"], cache_dir=str(tmp_path))) == first
    assert t1 > t0
    # the ids are cached too (memory-mapped on later passes), and match a fresh encoding
    assert len([p for p in (tmp_path / "ids").iterdir() if p.suffix == ".ids"]) == 1
    assert first[:50] == [tok.encode(t, add_special_tokens=False).ids
                          for t in (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
                          if tok.normalize(t)][:50]


def test_iter_corpus_ids_abandoned_pass_leaves_no_id_cache(sample_dir, sample_tokenizer, tmp_path):
    it = sample_tokenizer.iter_corpus_ids([sample_dir / "comments.txt"], cache_dir=str(tmp_path))
    next(it)
    it.close()  # a consumer that stops early (or dies) must not leave a truncated id cache behind
    assert not list((tmp_path / "ids").iterdir())
    assert len(list(sample_tokenizer.iter_corpus_ids([sample_dir / "comments.txt"], cache_dir=str(tmp_path)))) == 400


def test_sentencepiece_unigram_and_plain_modes(sample_dir, tmp_path):
    for model, presplit in (("unigram", "none"), ("wordpiece", "none")):
        tok = train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(tmp_path / model),
                                              vocab_size=1500, model=model, presplit=presplit, progress=False,
                                              cache_dir=str(tmp_path / "c")))
        text = "ㅋㅋ 이 영화 진짜 재밌네요 😀 ☃"
        ids = tok.encode(text).ids
        assert ids[0] == tok.cls_token_id and len(ids) > 4
        assert not tok.needs_kiwi(tok.normalize(text))  # presplit=none: no Kiwi step at all
        if model == "unigram":  # byte fallback: nothing is [UNK], and decode is exact
            assert tok.unk_token_id not in ids
            assert tok.decode(ids) == tok.normalize(text)
        again = KoTokenizer.from_pretrained(tmp_path / model)
        assert again.encode(text).ids == ids


def test_small_vocabulary_keeps_room_for_merged_pieces(tmp_path):
    """A corpus with many rare characters (like Korean comments: ~4,600 distinct, most of them rare) and a small
    vocabulary: the whole alphabet plus its "##" forms would fill it and leave single characters only. The
    alphabet is cut to the frequent characters, so frequent words become pieces of their own."""
    import random

    rng = random.Random(0)
    common = [chr(0xAC00 + 7 * i) for i in range(60)]  # 60 frequent syllables
    rare = [chr(0xAC00 + 7 * 60 + i) for i in range(300)]  # 300 syllables seen once each
    words = ["".join(rng.choice(common) for _ in range(rng.randint(2, 4))) for _ in range(200)]
    lines = [" ".join(rng.choices(words, k=5)) for _ in range(50_000)] + rare
    path = tmp_path / "zipf.txt"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    tok = train_tokenizer(TokenizerConfig(input=[str(path)], out=str(tmp_path / "t"), vocab_size=500, presplit="none",
                                          progress=False, cache_dir=str(tmp_path / "c")))
    vocab = [t.removeprefix("##") for t in tok.backend.get_vocab() if not t.startswith("[")]
    assert sum(len(t) > 1 for t in vocab) > 0.3 * len(vocab)  # with the whole alphabet: 0
    assert len(tok.encode(words[0]).ids) == 3  # [CLS] word [SEP]: a frequent word is one piece
    # the price: characters outside the alphabet are [UNK]. The alphabet keeps (500 - 5) // 4 = 123 characters: the
    # 60 frequent ones and 63 of the rare ones (which 63: the trainer breaks the tie among count-1 characters
    # in hash order, so the test counts them instead of naming one)
    assert sum(tok.unk_token_id in tok.encode(c).ids for c in rare) == 300 - 63


@pytest.mark.parametrize("presplit", ["kiwi", "none"])
def test_retraining_a_subword_vocabulary_keeps_the_same_alphabet(sample_dir, tmp_path, presplit):
    """The alphabet cut falls among equally rare characters (the bundled comments: most characters are seen
    once); the trainer broke those ties in hash order, so two runs of one command knew different characters. The
    alphabet is now chosen by us (count, then code point) and handed to the trainer. Merges tied in count were
    chosen by the numbers the trainer gave "##" forms in hash order (huggingface/tokenizers#1794: the quickstart run
    twice trained two vocabularies); numbered up front now, the whole vocabulary is the same run to run."""
    from collections import Counter

    corpus = sample_dir / "comments.txt"

    def alphabet(name):
        tok = train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(tmp_path / name), vocab_size=3000,
                                              presplit=presplit, progress=False, cache_dir=str(tmp_path / "cache")))
        return tok, {t for t in tok.backend.get_vocab() if len(t) == 1}

    tok, first = alphabet("a")
    assert [t["content"] for t in json.loads(tok.backend.to_str())["added_tokens"]] == SPECIAL_TOKENS
    counts = Counter(c for line in corpus.read_text(encoding="utf-8").splitlines()
                     for c in tok.normalize(line) if not c.isspace() and c != "#")
    kept, dropped = [counts[c] for c in counts if c in first], [counts[c] for c in counts if c not in first]
    assert dropped and min(kept) == max(dropped)  # the cut falls inside a tie: the case that varied
    assert all(alphabet(name)[1] == first for name in ("b", "c", "d"))
    saved = (tmp_path / "a" / "tokenizer.json").read_bytes()
    assert all((tmp_path / name / "tokenizer.json").read_bytes() == saved for name in ("b", "c", "d"))


def test_characters_model_is_every_character_and_nothing_else(sample_dir, tmp_path):
    corpus = sample_dir / "comments.txt"
    tok = train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(tmp_path / "t"), model="characters",
                                          progress=False, cache_dir=str(tmp_path / "c")))
    vocab = [t for t in tok.backend.get_vocab() if not t.startswith("[") and t not in BYTE_TOKENS]
    assert vocab and all(len(t.removeprefix("##")) == 1 for t in vocab)  # (and the fallback's byte tokens)
    text = corpus.read_text(encoding="utf-8").splitlines()[0]
    ids = KoTokenizer.from_pretrained(tmp_path / "t").encode(text).ids
    assert tok.unk_token_id not in ids  # every character of the corpus is in the vocabulary
    assert len(ids) - 2 == sum(not c.isspace() for c in tok.normalize(text))  # one token per character


def test_character_vocabulary_skips_kiwi_and_gets_the_same_ids(sample_dir, tmp_path, monkeypatch):
    """With a character vocabulary WordPiece emits one token per character whatever the pre-split, so texts made
    of known characters are encoded without Kiwi; texts where Kiwi's pieces matter (an unknown character makes
    its whole piece [UNK], placeholders, "#", a word past WordPiece's length limit) still go to
    Kiwi. Ids, tokens, offsets and truncation must be exactly the all-Kiwi results."""
    import csv

    with open(sample_dir / "reviews_labelled.csv", encoding="utf-8") as f:
        reviews = [r["review"] for r in csv.DictReader(f)]
    comments = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n".join(comments + [r.replace("\n", " ") for r in reviews]), encoding="utf-8")
    # the whole-text mode, whose Kiwi calls all go through kiwi.presplit_texts (counted below)
    tok = train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(tmp_path / "t"), model="characters",
                                          presplit="kiwi", progress=False, cache_dir=str(tmp_path / "c")))
    reloaded = KoTokenizer.from_pretrained(tmp_path / "t")
    long_word = ("".join(comments[0].split()) * 20)[:240]  # past WordPiece's 200-character limit
    edge = ["", "  ", "a\tb c", "앞  뒤", " 앞뒤", "[URL] 좋아요 [USER]", "모르는글자齾가 있음", long_word + " 끝",
            "ㅋ" * 250, "##좋아 a##b #태그 ###", *NOISY]
    texts = reviews + comments + edge
    kiwi_saw = []
    real = kiwi.presplit_texts

    def counting(normalized, num_workers=None):
        normalized = list(normalized)
        kiwi_saw.extend(normalized)
        return real(normalized, num_workers)

    monkeypatch.setattr(kiwi, "presplit_texts", counting)
    fast = tok.encode_batch(texts, max_length=64, return_tokens=True)
    # what needs_kiwi says is what went to Kiwi, and the reloaded tokenizer says the same
    normalized = [tok.normalize(t) for t in texts]
    assert kiwi_saw == [t for t in normalized if tok.needs_kiwi(t)]
    assert [reloaded.needs_kiwi(t) for t in normalized] == [tok.needs_kiwi(t) for t in normalized]
    # most texts skip Kiwi; the edge cases that need it do not
    assert len(kiwi_saw) < 0.2 * len(texts)
    assert len(tok.normalize(long_word)) > 200
    for t in ("모르는글자齾가 있음", long_word + " 끝", "##좋아 a##b #태그 ###"):
        assert tok.normalize(t) in kiwi_saw
    assert any("[URL]" in t for t in kiwi_saw)
    # ids alone (what label asks for): dictionary lookups per character (tokenizer.charids) where needs_kiwi
    # would skip Kiwi, WordPiece for the rest
    ids_only = tok.encode_batch(texts, max_length=64, return_offsets=False)
    # texts the labeller normalized already (its deduplication keys) give the same ids without a second pass
    prenormed = tok.encode_batch(normalized, max_length=64, return_offsets=False, normalized=True)
    assert prenormed["input_ids"] == ids_only["input_ids"]
    monkeypatch.setattr(tok, "needs_kiwi", lambda text: True)  # every text through Kiwi
    slow = tok.encode_batch(texts, max_length=64, return_tokens=True)
    assert len(kiwi_saw) > len(texts)
    for key in ("input_ids", "tokens", "offsets", "truncated", "attention_mask"):
        assert fast[key] == slow[key], key
    for key in ("input_ids", "truncated", "attention_mask"):
        assert ids_only[key] == slow[key], key
    # 齾 is outside the alphabet: its UTF-8 bytes, the rest of its piece kept (was: the whole piece one [UNK])
    ids = fast["input_ids"][texts.index("모르는글자齾가 있음")]
    assert tok.unk_token_id not in ids and tok.decode(ids) == "모르는글자齾가 있음"


def test_subword_vocabulary_always_uses_kiwi(sample_tokenizer):
    assert sample_tokenizer.needs_kiwi("영화 최고") and sample_tokenizer.needs_kiwi("")


def test_normalized_input_skips_the_second_normalization(sample_tokenizer, monkeypatch):
    """``normalized=True`` (the labeller's deduplication keys) gives the ids of the raw texts, without calling the
    normalizer again; the noisy texts are ones normalization changes, so skipping it on raw text would differ."""
    tok = sample_tokenizer
    raw = [*NOISY, "좋아요", ""]
    keys = [tok.normalize(t) for t in raw]
    assert sum(k != t for k, t in zip(keys, raw)) >= 3
    want = tok.encode_batch(raw, max_length=64, return_offsets=False)
    calls = []
    monkeypatch.setattr(type(tok._norm), "__call__", lambda self, t: calls.append(t) or t)
    got = tok.encode_batch(keys, max_length=64, return_offsets=False, normalized=True)
    assert got["input_ids"] == want["input_ids"] and calls == []


def test_retraining_gives_the_same_ids(sample_dir, tmp_path):
    """The WordPiece trainer breaks frequency ties in hash order: without the renumbering, two runs of one command
    numbered a character vocabulary's entries differently (a trained model is tied to its ids)."""
    def vocab(name):
        return train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(tmp_path / name),
                                               model="characters", progress=False,
                                               cache_dir=str(tmp_path / "cache"))).backend.get_vocab()

    first = vocab("a")
    assert all(vocab(name) == first for name in ("b", "c"))
    assert [t for t, _ in sorted(first.items(), key=lambda kv: kv[1])][:5] == ["[PAD]", "[UNK]", "[CLS]", "[SEP]",
                                                                              "[MASK]"]


def test_a_save_that_fails_midway_leaves_the_earlier_tokenizer_whole(sample_dir, tmp_path, monkeypatch):
    """The files were written one by one into out=: a save cut after tokenizer.json (a kill, a full disk) left the
    new tokenizer.json beside the old vocab.txt and settings, a folder of two runs. Now the folder is swapped whole."""
    from koelectra_kit.tokenizer import saving

    def train(model):
        return train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(tmp_path / "tok"),
                                               model=model, vocab_size=2000, progress=False,
                                               cache_dir=str(tmp_path / "c")))

    train("characters")
    before = {f.name: f.read_bytes() for f in (tmp_path / "tok").iterdir()}
    real = saving.write_json_atomic

    def disk_full(path, *a, **k):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(saving, "write_json_atomic", disk_full)  # after tokenizer.json and vocab.txt are written
    with pytest.raises(OSError):
        train("wordpiece")  # another vocabulary: its tokenizer.json and vocab.txt differ
    monkeypatch.setattr(saving, "write_json_atomic", real)
    assert {f.name: f.read_bytes() for f in (tmp_path / "tok").iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c", "tok"]  # no staging folder left either


def test_character_only_vocabulary_warns(sample_dir, tmp_path):
    # 821 distinct characters, most seen once: keeping 99.95% of them fills a 1,000-token vocabulary
    with pytest.warns(UserWarning, match="nearly all single characters"):
        train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(tmp_path / "t"),
                                        vocab_size=1000, presplit="none", progress=False, cache_dir=str(tmp_path / "c")))


def test_vocabulary_smaller_than_asked_is_a_warning_line(sample_dir, tmp_path, capsys):
    # the 400-comment sample supports about 2,000 WordPiece tokens: asking for 100,000 got 2,0xx with no word
    rc = main(["tokenizer", "train", f"input={sample_dir / 'comments.txt'}", f"out={tmp_path / 't'}",
               f"cache_dir={tmp_path / 'c'}", "vocab_size=100000", "progress=false"])
    size = len(json.loads((tmp_path / "t" / "tokenizer.json").read_text())["model"]["vocab"])
    assert rc == 0 and size < 100000
    assert f"warning: vocab_size=100000, but the corpus supports only {size} tokens" in capsys.readouterr().err


def test_cli_train_and_encode(sample_dir, tmp_path, capsys):
    out = tmp_path / "tok"
    rc = main(["tokenizer", "train", "--config", "configs/tokenizer/tiny.yaml", f"input={sample_dir / 'comments.txt'}",
               f"out={out}", f"cache_dir={tmp_path / 'c'}", "vocab_size=500", "progress=false"])
    assert rc == 0 and (out / "tokenizer.json").exists()
    rc = main(["tokenizer", "encode", "--tokenizer", str(out), "--json", "봤는데 ㅋㅋㅋ"])
    assert rc == 0
    row = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert row["normalized"] == "봤는데 ㅋㅋ" and row["decoded"].replace("[UNK]", "") != ""


@pytest.mark.parametrize("content,expect", [
    (None, "not found"), (b"", "empty"), (b"\n\n   \n", "no text"),
])
def test_bad_corpus_files(tmp_path, content, expect, capsys):
    path = tmp_path / "c.txt"
    if content is not None:
        path.write_bytes(content)
    rc = main(["tokenizer", "train", f"input={path}", f"out={tmp_path / 'o'}", f"cache_dir={tmp_path / 'c'}",
               "vocab_size=100", "progress=false"])
    assert rc == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and expect in err and "Traceback" not in err


def test_odd_lines_do_not_break_training(tmp_path):
    """Invalid UTF-8 bytes, a 1 MB line, emoji-only and Latin-only lines: counted or tokenized, no hang."""
    path = tmp_path / "odd.txt"
    lines = ["정상적인 댓글입니다 ㅋㅋ".encode(), b"\xff\xfe broken \xc3 bytes", ("가나다라마바사 " * 75000).encode(),
             "😀😀😀".encode(), b"only latin text here", "또 다른 댓글 ㅎㅎ".encode()] * 3
    path.write_bytes(b"\n".join(lines) + b"\n")
    tok = train_tokenizer(TokenizerConfig(input=[str(path)], out=str(tmp_path / "t"), vocab_size=200,
                                          progress=False, cache_dir=str(tmp_path / "c")))
    ids = list(tok.iter_corpus_ids([path], cache_dir=str(tmp_path / "c")))
    assert len(ids) == len(lines)
    assert max(len(x) for x in ids) > 10000  # the long line was tokenized, not dropped
    enc = tok.encode_batch(["😀😀😀", "", "only latin"], max_length=32)
    assert [len(x) for x in enc["input_ids"]][1] == 2


def test_missing_tokenizer_dir_is_a_clear_error(tmp_path):
    with pytest.raises(InputError, match="no tokenizer"):
        KoTokenizer.from_pretrained(tmp_path)


@pytest.mark.parametrize("before", [None, "true"])
def test_kiwi_pipeline_restores_tokenizers_parallelism(sample_tokenizer, monkeypatch, before):
    # the pipeline turns rayon off around its sub-batch encodes; the user's setting must come back unchanged
    if before is None:
        monkeypatch.delenv("TOKENIZERS_PARALLELISM", raising=False)
    else:
        monkeypatch.setenv("TOKENIZERS_PARALLELISM", before)
    enc = sample_tokenizer.encode_batch(["배송 빠르고 좋아요 ㅋㅋ"] * 300)
    assert len(enc["input_ids"]) == 300
    assert os.environ.get("TOKENIZERS_PARALLELISM") == before
