"""Special-token strings in text ([MASK], [SEP], [CLS], [PAD], [UNK]) stay whole, as transformers' BERT tokenizers
keep them (added tokens are split off before normalization and pre-tokenization): the text between them is
normalized and pre-split as texts of their own, and each special string becomes its id. Every path: encode,
encode_batch (ids only, or already normalized), presplit_batch + tokenizer.json, the transformers class and
``pipeline("fill-mask")``, and the pretraining corpus. A text without a special string keeps the ids it had
(pinned below: computed with the code before the change)."""
from __future__ import annotations

import hashlib
import re
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from koelectra_kit.tokenizer import KoTokenizer

GOLDEN = Path(__file__).resolve().parent / "golden"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
SPECIAL_RE = "|".join(map(re.escape, SPECIALS))

# noisy texts without a special-token string (brackets, lower-case and cut-off look-alikes, placeholders, "#")
NOISY = [
    "배송 빠르고 좋아요ㅋㅋㅋㅋㅋ!!!!!",
    "영화는 봤는데 ㅠㅠㅠ 별로... 해리와샐리가 낫다 😂😂👍",
    "[mask] 소문자는 특수 토큰이 아니다 [Mask] [MASK [SEP",
    "대괄호 [[ ]] [URL] [ 참고 ] 링크 https://example.com/a?b=[1]",
    "#해시태그 ##두개 @user1 메일 a.b@c.com 綠林 ；＇ ↖ ㅝ",
    "  공백\t\t탭\n줄바꿈   여러개  ",
    "MASK SEP CLS 이런 단어는 그냥 단어 [CLS-like] [PAD ]",
    "",
    "ㅋ",
    "정말 재밌었어요 강추합니다 " * 3,
]
# sha1(ids, presplit_batch line)[:12] per text, and sha1(all offsets)[:12], made by the code before special
# tokens were kept whole (encode_batch(NOISY, max_length=64))
PINNED = {
    "kiwi": (["ecf4a6cb7bb4", "9eebda9e5700", "5f13f50638d9", "a7964bbd3439", "0a94aeb211e1", "2358c3a3d441",
            "9734ce34acd5", "1bc71f8904e9", "3298b4d54adf", "376effc409f6"], "b2e8eb7f1826"),
    "characters": (["74dc597c3fde", "76fb45406458", "2e518129c278", "1ba18d9c25ba", "eeb08ccd89da", "5920a789bc56",
                  "4e6f41b40693", "1bc71f8904e9", "3298b4d54adf", "261756b8f233"], "e7f07cfed7ea"),
    "kiwi_word": (["ecf4a6cb7bb4", "9eebda9e5700", "5f13f50638d9", "a7964bbd3439", "0a94aeb211e1", "2358c3a3d441",
                 "9734ce34acd5", "1bc71f8904e9", "3298b4d54adf", "376effc409f6"], "b2e8eb7f1826"),
    "none": (["fdb037424ef7", "a1e1eb3469f3", "09032f36d62d", "667904dcdaea", "742d50a7a00a", "11be566d9c84",
            "8f1c32130bae", "1bc71f8904e9", "3298b4d54adf", "ed89f270ea54"], "289195f2741b"),
}
TEXTS = ["영화 [MASK] 재밌다", "영화[MASK]재밌다ㅋㅋㅋ", "[CLS] 안녕 [SEP] 하세요[SEP]", "[MASK]", "[PAD][UNK] 끝 [MASK]!!",
         "이거 [MASK]]] 진짜 [[MASK] 😂"]


def _variant(tmp_path_factory, name: str, presplit: str | None) -> Path:
    """A copy of a golden tokenizer, its pre-split mode set to ``presplit`` (None: as saved, kiwi)."""
    d = tmp_path_factory.mktemp(f"{name}-{presplit}") / "tok"
    shutil.copytree(GOLDEN / name, d)
    if presplit is not None:
        s = json.loads((d / "koelectra_tokenizer.json").read_text(encoding="utf-8"))
        s["presplit"] = presplit
        (d / "koelectra_tokenizer.json").write_text(json.dumps(s), encoding="utf-8")
    return d


@pytest.fixture(scope="module")
def dirs(tmp_path_factory, sample_tokenizer_dir) -> dict[str, Path]:
    """kiwi (whole-text Kiwi, streamed), characters (the CharIds shortcut), kiwi_word, none (no pre-split), and
    the sample tokenizer (kiwi_word with the jamo/bytes fallback)."""
    return {"kiwi": _variant(tmp_path_factory, "tok_wordpiece", None),
            "characters": _variant(tmp_path_factory, "tok_characters", None),
            "kiwi_word": _variant(tmp_path_factory, "tok_wordpiece", "kiwi_word"),
            "none": _variant(tmp_path_factory, "tok_wordpiece", "none"),
            "fallback": sample_tokenizer_dir}


def _row_digest(ids: list[int], line: str) -> str:
    return hashlib.sha1(json.dumps([ids, line], ensure_ascii=False).encode()).hexdigest()[:12]


def _pinned(tok: KoTokenizer) -> tuple[list[str], str]:
    enc = tok.encode_batch(NOISY, max_length=64)
    lines = tok.presplit_batch(NOISY)
    return ([_row_digest(ids, line) for ids, line in zip(enc["input_ids"], lines)],
            hashlib.sha1(json.dumps(enc["offsets"]).encode()).hexdigest()[:12])


@pytest.mark.parametrize("kind", sorted(PINNED))
def test_texts_without_special_tokens_keep_their_ids(dirs, kind):
    assert _pinned(KoTokenizer.from_pretrained(dirs[kind])) == PINNED[kind]


def _expected(tok: KoTokenizer, text: str) -> tuple[list[int], list[str], list[tuple[int, int]]]:
    """transformers' rule: the text split at its special strings, each part encoded as a text of its own, each
    special string its id (offsets: its span in the text)."""
    ids, tokens, offsets, pos = [], [], [], 0
    for m in [*re.finditer(SPECIAL_RE, text), None]:
        end = m.start() if m else len(text)
        part = tok.encode(text[pos:end], add_special_tokens=False)
        ids += part.ids
        tokens += part.tokens
        offsets += [(a + pos, b + pos) for a, b in part.offsets]
        if m is None:
            return ids, tokens, offsets
        ids.append(tok.backend.token_to_id(m.group()))
        tokens.append(m.group())
        offsets.append(m.span())
        pos = m.end()


@pytest.mark.parametrize("kind", ["kiwi", "characters", "kiwi_word", "none", "fallback"])
def test_special_tokens_in_text_stay_whole_on_every_path(dirs, kind):
    tok = KoTokenizer.from_pretrained(dirs[kind])
    enc = tok.encode_batch(TEXTS, return_tokens=True)
    for i, text in enumerate(TEXTS):
        ids, tokens, offsets = _expected(tok, text)
        assert enc["input_ids"][i] == [tok.cls_token_id, *ids, tok.sep_token_id], text
        assert enc["tokens"][i] == ["[CLS]", *tokens, "[SEP]"], text
        assert enc["offsets"][i] == [(0, 0), *offsets, (0, 0)], text
        line = tok.presplit_batch([text])[0]  # what tokenizer.json alone is fed
        assert tok.backend.encode(line, add_special_tokens=False).ids == ids, (text, line)
        assert [p for p in line.split(" ") if p in SPECIALS] == re.findall(SPECIAL_RE, text), line
    # ids alone (the labeller's path: a character vocabulary skips WordPiece), and texts normalized beforehand (its
    # de-duplication keys)
    assert tok.encode_batch(TEXTS, return_offsets=False)["input_ids"] == enc["input_ids"]
    normalized = [tok.normalize(t) for t in TEXTS]
    assert tok.encode_batch(normalized, normalized=True)["input_ids"] == enc["input_ids"]
    assert normalized[1].startswith("영화 [MASK] ")
    cut = tok.encode("[MASK] " * 10 + "영화", max_length=5)
    assert cut.ids == [tok.cls_token_id] + [tok.mask_token_id] * 3 + [tok.sep_token_id] and cut.truncated


@pytest.mark.parametrize("kind", ["kiwi", "characters", "kiwi_word", "none", "fallback"])
def test_corpus_lines_pack_special_strings_as_their_ids(dirs, kind, tmp_path):
    """Pretraining follows transformers (split_special_tokens=False): a corpus line's "[SEP]" is the [SEP] id, and
    the line has the ids ``encode`` gives, on the first pass (Kiwi) and the second (the cached pre-split and ids)."""
    tok = KoTokenizer.from_pretrained(dirs[kind])
    lines = TEXTS + [t for t in NOISY if t.strip() and "\n" not in t]
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("".join(t + "\n" for t in lines), encoding="utf-8")
    want = [_expected(tok, t)[0] for t in lines]
    assert want == [tok.encode(t, add_special_tokens=False).ids for t in lines]
    for _ in range(2):
        assert list(tok.iter_corpus_ids(corpus, cache_dir=str(tmp_path / "cache"))) == want


def test_transformers_class_and_the_fill_mask_pipeline(dirs, tmp_path):
    from transformers import AutoTokenizer, ElectraConfig, ElectraForMaskedLM, pipeline

    folder = tmp_path / "generator"
    shutil.copytree(dirs["fallback"], folder)
    ko = KoTokenizer.from_pretrained(folder)
    ElectraForMaskedLM(ElectraConfig(vocab_size=ko.vocab_size, hidden_size=16, embedding_size=16, num_hidden_layers=1,
                                     num_attention_heads=1, intermediate_size=32)).save_pretrained(folder)
    hf = AutoTokenizer.from_pretrained(folder)
    for text in TEXTS:
        assert hf(text)["input_ids"] == ko.encode(text).ids, text
        assert hf.encode(text) == ko.encode(text).ids
        assert hf.tokenize(text) == ko.encode(text, add_special_tokens=False).tokens
    enc = hf("영화[MASK]재밌다", "[SEP] 둘째", return_special_tokens_mask=True, return_offsets_mapping=True)
    i = enc["input_ids"].index(ko.mask_token_id)
    # as transformers' BERT tokenizers: a special string in the text is no added [CLS]/[SEP] (mask 0), and its
    # offsets are its span in the text
    assert enc["special_tokens_mask"][i] == 0 and enc["offset_mapping"][i] == (2, 8)
    fill = pipeline("fill-mask", model=str(folder), device=-1)
    assert len(fill("영화 [MASK] 재밌다")) == 5
    assert [len(r) for r in fill("[MASK] 영화 [MASK]")] == [5, 5]


def test_label_predicts_a_text_whose_normalization_writes_a_special_string_as_given(tiny_classifier):
    """`label` predicts each distinct normalized text once, encoding the key as normalized text; "[MA\\u200bSK]"
    normalizes to "[MASK]", which the key's encoding read as the [MASK] id where the text as given (finetune,
    evaluate, transformers' order: special strings found before normalizing) is plain characters."""
    from koelectra_kit.label.dedupe import PredictionCache, predict_once

    tok = tiny_classifier.tok
    texts = ["[MA\u200bSK] 좋아요", "좋아요 [MASK]", "별로예요"]
    assert tok.normalize(texts[0]).startswith("[MASK]")  # the case: normalization wrote the special string
    got, _ = predict_once(tiny_classifier, texts, 8, PredictionCache(100))
    want = tiny_classifier.predict(texts, batch_size=8).probs
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_placeholders_normalization_writes_read_the_same_on_both_paths_and_stay_deduplicated(tmp_path):
    """A tokenizer trained with urls=placeholder: normalization writes [URL], an added token, which the text as
    given and its normalized key both encode as its id; label keeps deduplicating such texts."""
    from koelectra_kit.config import load_config
    from koelectra_kit.tokenizer import KoTokenizer, training
    from koelectra_kit.tokenizer.config import TokenizerConfig

    corpus = tmp_path / "c.txt"
    corpus.write_text("\n".join(["배송 빠르고 좋아요 http://shop.kr/a", "별로예요 www.x.com", "그냥 그래요"] * 30),
                      encoding="utf-8")
    cfg = load_config(TokenizerConfig, None, [f"input=[{corpus}]", f"out={tmp_path / 'tok'}", "vocab_size=300",
                                              "normalize.urls=placeholder", "presplit=none"])
    training.train_tokenizer(cfg)
    tok = KoTokenizer.from_pretrained(tmp_path / "tok")
    texts = ["여기 봐 http://x.com/a 좋아요", "[URL] 좋아요", "좋아요[URL]"]
    raw = tok.encode_batch(texts)["input_ids"]
    keyed = tok.encode_batch([tok.normalize(t) for t in texts], normalized=True)["input_ids"]
    assert [list(x) for x in raw] == [list(x) for x in keyed]
    assert tok.backend.token_to_id("[URL]") in list(raw[0])
    assert all(tok.normalized_reads_alike(t, tok.normalize(t)) for t in texts)
    assert not tok.normalized_reads_alike("[MA\u200bSK]", "[MASK]")
