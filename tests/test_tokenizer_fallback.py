"""Characters outside a WordPiece alphabet: a Hangul syllable as its conjoining jamo, anything else as its UTF-8
bytes. Decode is exact, offsets point at the right characters, and folders saved before the fallback load and
encode as they did."""
import json
import sys
import unicodedata
from pathlib import Path

import pytest

from koelectra_kit.errors import ConfigError
from koelectra_kit.tokenizer import KoTokenizer, TokenizerConfig, train_tokenizer
from koelectra_kit.tokenizer.fallback import JAMO, fallback_tokens, jamo, recompose

GOLDEN = Path(__file__).resolve().parent / "golden"
# one-off syllables and rare hanja of noisy comments, outside the 2,000-token sample vocabulary
EXAMPLES = ["해리와샐리가 좋았다", "뽱터졌음 진싲 웃긷 볾", "內面의 衝動 😀 최고", "진짜ㅝ 웃김＇"]
UNSEEN = "샐뽱싲긷볾內面衝動😀ㅝ＇"


@pytest.fixture()
def tok(sample_tokenizer_dir):
    """A fresh copy of the session's sample tokenizer (tests switch its fallback off)."""
    return KoTokenizer.from_pretrained(sample_tokenizer_dir)


def test_examples_round_trip_and_lose_nothing(tok):
    vocab = tok.backend.get_vocab()
    # so the fallback is what is tested: none has the form it needs here (샐 begins a word in the sample, never
    # continues one: "##샐" is missing; the others are missing in both forms)
    assert not any("##" + c in vocab for c in UNSEEN) and not any(c in vocab for c in UNSEEN.replace("샐", ""))
    for text in EXAMPLES:
        ids = tok.encode(text).ids
        assert tok.unk_token_id not in ids
        assert tok.decode(ids) == tok.normalize(text)
    tok.fallback = None  # WordPiece's own way, as before: the piece holding 샐 is one [UNK]
    decoded = tok.decode(tok.encode(EXAMPLES[0]).ids)
    assert "[UNK]" in decoded and "샐리가" not in decoded


def test_jamo_tokens_stand_for_their_syllable_and_neighbours_are_kept(tok):
    enc = tok.encode("해리와샐리가")
    tokens, offsets = enc.tokens[1:-1], enc.offsets[1:-1]
    at_syllable = [t for t, o in zip(tokens, offsets) if o == (3, 4)]
    assert at_syllable == ["##ᄉ", "##ᅢ", "##ᆯ"]  # 샐 continues the word: "##" forms, in order
    rest = [("해리와샐리가"[a:b], t.removeprefix("##")) for t, (a, b) in zip(tokens, offsets) if (a, b) != (3, 4)]
    assert "".join(src for src, _ in rest) == "해리와리가" and all(src == t for src, t in rest)


def test_jamo_offsets_cover_their_syllable_in_the_text_as_given(tok):
    # decomposed input (NFD 샐 = 3 jamo), a zero-width space and leading spaces: the normalizer composes and drops
    # them, and the jamo tokens of the composed 샐 still point at exactly its three characters as given
    text = "  해리와" + unicodedata.normalize("NFD", "샐") + "리가\u200b 좋아"
    assert tok.normalize(text) == "해리와샐리가 좋아"
    enc = tok.encode(text)
    spans = {o for t, o in zip(enc.tokens, enc.offsets) if t.removeprefix("##") in JAMO}
    assert spans == {(5, 8)} and unicodedata.normalize("NFC", text[5:8]) == "샐"
    assert tok.decode(enc.ids) == "해리와샐리가 좋아"


def test_byte_tokens_cover_exactly_one_character(tok):
    text = "內面의 衝動 😀 최고"
    enc = tok.encode(text)
    byte_tokens = [(t, o) for t, o in zip(enc.tokens, enc.offsets) if t.removeprefix("##").startswith("<0x")]
    assert len(byte_tokens) == sum(len(c.encode()) for c in "內面衝動😀")
    for t, (a, b) in byte_tokens:
        assert b - a == 1 and int(t.removeprefix("##")[3:5], 16) in text[a].encode()
    # the Hangul beside the hanja are their own tokens, not swallowed
    assert ("의", (2, 3)) in [(t.removeprefix("##"), o) for t, o in zip(enc.tokens, enc.offsets)]
    # a word-initial character's first byte is a plain token (the decoder puts the space before it)
    assert [t for t, _ in byte_tokens][:2] == ["<0xE5>", "##<0x85>"]


def test_text_cannot_spell_a_byte_token(tok):
    text = "a<0xE5>b 모<0x85>"
    enc = tok.encode(text)
    assert not any(t.removeprefix("##").startswith("<0x") for t in enc.tokens)
    assert tok.decode(enc.ids) == text


def test_bytes_cut_by_truncation_decode_to_a_replacement_character(tok):
    ids = tok.encode("內面 좋다", max_length=4).ids  # [CLS] <0xE5> ##<0x85> [SEP]: 內 cut in the middle
    assert tok.decode(ids) == "\ufffd"


def test_word_past_wordpiece_length_limit_is_cut_not_unk(tok):
    text = "ab" * 150 + " 끝"  # one 300-character piece: WordPiece makes any word over 200 one [UNK]
    ids = tok.encode(text).ids
    assert tok.unk_token_id not in ids and tok.decode(ids) == text
    tok.fallback = None
    assert tok.encode(text).ids.count(tok.unk_token_id) == 1


def test_training_adds_every_jamo_and_keeps_vocab_size(sample_tokenizer, tmp_path):
    vocab = sample_tokenizer.backend.get_vocab()
    assert len(JAMO) == 67 and all(t in vocab for t in fallback_tokens())
    assert all(j in vocab and "##" + j in vocab for j in JAMO)
    assert sample_tokenizer.vocab_size == 2000  # merges made room for them
    d = sample_tokenizer.save(tmp_path / "t")
    assert json.loads((d / "koelectra_tokenizer.json").read_text())["fallback"] == "jamo_bytes"
    assert KoTokenizer.from_pretrained(d).fallback == "jamo_bytes"


def test_fallback_none_trains_and_saves_the_old_way(sample_dir, kiwi_cache, tmp_path):
    tok = train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(tmp_path / "t"),
                                          vocab_size=2000, fallback="none", cache_dir=str(kiwi_cache),
                                          progress=False))
    assert tok.fallback is None and "##<0x85>" not in tok.backend.get_vocab()
    assert "fallback" not in json.loads((tmp_path / "t" / "koelectra_tokenizer.json").read_text())
    assert tok.unk_token_id in tok.encode(EXAMPLES[0]).ids
    with pytest.raises(ConfigError, match="lacks"):
        tok.fallback = "jamo_bytes"


def test_without_a_kiwi_presplit_training_says_the_rest_is_unk_as_it_is(sample_dir, tmp_path, capfd):
    """presplit=none trained with the default fallback=jamo_bytes said "the rest become jamo or UTF-8 byte tokens"
    and saved a tokenizer that turns 샐 (and its whole word) into [UNK]: the line now says what the tokenizer does."""
    tok = train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(tmp_path / "t"),
                                          vocab_size=2000, presplit="none"))
    said = next(line for line in capfd.readouterr().err.splitlines() if "the rest become" in line)
    assert tok.fallback is None and tok.unk_token_id in tok.encode(EXAMPLES[0]).ids
    assert "the rest become [UNK]: fallback=jamo_bytes needs a Kiwi pre-split" in said and "jamo or" not in said


def test_old_folder_loads_and_encodes_exactly_as_before(sample_dir, tmp_path):
    """tests/golden/tok_wordpiece was saved before the fallback: no field, no jamo, the old ids and offsets
    (tests/test_golden.py checks them all on 10,000 real texts; here the bundled edge cases)."""
    sys.path.insert(0, str(GOLDEN))
    import golden_common as gc

    folder = GOLDEN / "tok_wordpiece"
    settings = json.loads((folder / "koelectra_tokenizer.json").read_text())
    assert "fallback" not in settings
    tok = KoTokenizer.from_pretrained(folder)
    assert tok.fallback is None
    texts = gc.sample_texts(sample_dir)
    want = [json.loads(line) for line in (GOLDEN / "tok_wordpiece.sample.jsonl").read_text().splitlines()]
    assert gc.encode_rows(folder, texts[-40:]) == want[-40:]
    # an unknown character still costs its whole piece, as it did
    assert tok.encode("內面").ids == [tok.cls_token_id, tok.unk_token_id, tok.sep_token_id]
    # saved again, its settings file is unchanged (so is its fingerprint: checkpoints and caches stay valid)
    again = json.loads((tok.save(tmp_path / "again") / "koelectra_tokenizer.json").read_text())
    assert again == settings


def test_recompose_inverts_the_split_and_leaves_other_jamo_alone():
    syllables = [chr(c) for c in range(0xAC00, 0xD7A4)]
    assert all(recompose(jamo(s)) == s == unicodedata.normalize("NFC", jamo(s)) for s in syllables)
    nfc_with_jamo = "ᄏᄏ 가ᅡ ㅋㅋ ᆫ"  # NFC text can hold lone conjoining jamo: not from the fallback, kept
    assert unicodedata.is_normalized("NFC", nfc_with_jamo) and recompose(nfc_with_jamo) == nfc_with_jamo


def test_corpus_ids_use_the_fallback_and_their_own_cache(sample_tokenizer_dir, tmp_path):
    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(EXAMPLES) + "\n", encoding="utf-8")
    tok = KoTokenizer.from_pretrained(sample_tokenizer_dir)
    ids = list(tok.iter_corpus_ids([corpus], cache_dir=str(tmp_path / "cache")))
    assert ids == [tok.encode(t, add_special_tokens=False).ids for t in EXAMPLES]
    assert list(tok.iter_corpus_ids([corpus], cache_dir=str(tmp_path / "cache"))) == ids  # the cached pass
    tok.fallback = None
    old = list(tok.iter_corpus_ids([corpus], cache_dir=str(tmp_path / "cache")))
    assert old != ids and any(tok.unk_token_id in x for x in old)
    assert len(list((tmp_path / "cache" / "ids").glob("*.ids"))) == 2


def test_real_texts_round_trip_exactly(shared_data, sample_tokenizer_dir):
    """3,000 nsmc3 dev reviews through the 2,000-token sample vocabulary (trained on 400 comments: most reviews
    hold a character it lacks): every one decodes to its normalized form, no [UNK], offsets inside the text."""
    with open(shared_data / "nsmc3" / "dev.tsv", encoding="utf-8") as f:
        next(f)
        texts = [line.rstrip("\n").split("\t")[4] for _, line in zip(range(3000), f)]
    tok = KoTokenizer.from_pretrained(sample_tokenizer_dir)
    enc = tok.encode_batch(texts)
    assert all(tok.decode(ids) == tok.normalize(t) for ids, t in zip(enc["input_ids"], texts))
    assert not any(tok.unk_token_id in ids for ids in enc["input_ids"])
    assert all(0 <= a < b <= len(t) for offs, t in zip(enc["offsets"], texts) for a, b in offs[1:-1])
    tok.fallback = None
    old = tok.encode_batch(texts, return_offsets=False)["input_ids"]
    assert sum(tok.decode(ids) != tok.normalize(t) for ids, t in zip(old, texts)) > 0.3 * len(texts)
