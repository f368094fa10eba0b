"""Normalization of noisy comment text: each rule, the pitfalls (NFKC/lowercasing), and the offset map."""
import unicodedata

import pytest

from koelectra_kit.tokenizer.normalize import NormalizeConfig, Normalizer, normalize

CASES = [
    ("ㅋㅋㅋㅋㅋㅋ 진짜 웃기다", "ㅋㅋ 진짜 웃기다"),
    ("뺨치는걸로는 약하지!!!!!!! 학교폭력을", "뺨치는걸로는 약하지!! 학교폭력을"),
    (".. 고구마......", ".. 고구마.."),
    ("ㅠㅠㅠㅠ 하하하하하", "ㅠㅠ 하하"),
    ("1000000원 zzz www", "1000000원 zzz www"),  # digits and ASCII letters are never collapsed
    ("  연장하나요?\t\n내용이   한달내내  ", "연장하나요? 내용이 한달내내"),
    ("zero\u200bwidth\x00 ctrl\ufeff", "zerowidth ctrl"),
    ("\u1100\u1161\u11a8 composed", "각 composed"),  # decomposed jamo -> one syllable (NFC)
]


@pytest.mark.parametrize("text,expected", CASES)
def test_default_rules(text, expected):
    assert normalize(text) == expected


def test_hangul_compatibility_jamo_survive():
    # NFKC would turn ㅋ (U+314B) into the conjoining ᄏ (U+110F); lowercasing must not decompose syllables.
    out = normalize("ㅋㅋ ㅎㅎ 좋아요 ABC")
    assert out == "ㅋㅋ ㅎㅎ 좋아요 ABC"
    assert unicodedata.normalize("NFKC", "ㅋ") != "ㅋ"  # the pitfall is real


def test_repeat_limit_configurable():
    assert Normalizer(NormalizeConfig(repeat_limit=3))("ㅋㅋㅋㅋㅋ!!!!!") == "ㅋㅋㅋ!!!"
    assert Normalizer(NormalizeConfig(repeat_limit=0))("ㅋㅋㅋㅋㅋ") == "ㅋㅋㅋㅋㅋ"


def test_urls_emails_mentions_modes():
    text = "링크 https://news.naver.com/a?b=1 문의 kim@example.co.kr @hong_gd 님"
    assert Normalizer()(text) == text
    ph = NormalizeConfig(urls="placeholder", emails="placeholder", mentions="placeholder")
    assert Normalizer(ph)(text) == "링크 [URL] 문의 [EMAIL] [USER] 님"
    rm = NormalizeConfig(urls="remove", emails="remove", mentions="remove")
    assert Normalizer(rm)(text) == "링크 문의 님"


def test_emoji_keep_or_remove():
    text = "최고예요😍😍 👍🏻 굿"
    assert Normalizer()(text) == "최고예요😍😍 👍🏻 굿"
    assert Normalizer(NormalizeConfig(emoji="remove"))(text) == "최고예요 굿"


@pytest.mark.parametrize("cfg", [NormalizeConfig(), NormalizeConfig(urls="placeholder", emoji="remove", repeat_limit=1),
                                 NormalizeConfig(remove_control=False), NormalizeConfig(collapse_whitespace=False)])
def test_map_agrees_with_fast_path_and_points_into_input(cfg):
    spaces = "".join(chr(c) for c in range(0x3001) if chr(c).isspace())  # NBSP, NEL, U+2028, ideographic space...
    texts = [t for t, _ in CASES] + ["보세요 https://x.com ㅋㅋㅋㅋ 😀😀 끝", "", "   ", spaces,
                                     f"{spaces}좋{spaces[::2]}아요\u00a0 {spaces[1::2]}ㅋ ㅋ{spaces}"]
    norm = Normalizer(cfg)
    for text in texts:
        out, starts, ends = norm.with_map(text)
        assert out == norm(text)
        assert len(starts) == len(ends) == len(out)
        for ch, a, b in zip(out, starts, ends):
            assert 0 <= a < b <= len(text)
            if ch != " " and unicodedata.normalize("NFC", text[a:b]) == text[a:b] and len(text[a:b]) == 1 \
                    and out.count("[") == 0:
                assert text[a:b] == ch


def test_deterministic_and_idempotent():
    text = "저거 인간되긴 틀렸다 ㅋㅋㅋㅋ!!!!!  소리보소~~~~"
    once = normalize(text)
    assert normalize(once) == once == normalize(text)
