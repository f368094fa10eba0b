"""Corpus readers: formats, encodings, bad bytes, the public-corpus registry."""
import pytest

from koelectra_kit.corpus import CORPORA, iter_corpus, iter_texts
from koelectra_kit.errors import InputError


def test_txt_utf8_bom_and_cp949(tmp_path):
    lines = ["첫 번째 댓글 ㅋㅋ", "", "두 번째"]
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8-sig")
    (tmp_path / "b.txt").write_bytes(("\r\n".join(lines) + "\r\n").encode("cp949"))
    assert list(iter_texts(tmp_path / "a.txt")) == lines
    assert list(iter_texts(tmp_path / "b.txt")) == lines


def test_csv_quoted_newlines_and_column_guess(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text('id,review\n1,"좋아요, 정말"\n2,"여러 줄\n리뷰"\n3,\n', encoding="utf-8")
    assert list(iter_texts(p)) == ["좋아요, 정말", "여러 줄\n리뷰", ""]
    with pytest.raises(InputError, match=r"no column 'text'.*\['id', 'review'\]"):
        list(iter_texts(p, "text"))


def test_tsv_is_unquoted_like_nsmc(tmp_path):
    p = tmp_path / "n.tsv"
    p.write_text('id\tdocument\tlabel\n1\t"따옴표"로 시작\t1\n', encoding="utf-8")
    assert list(iter_texts(p)) == ['"따옴표"로 시작']


def test_jsonl(tmp_path):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "하나"}\n\n{"text": null}\n{"text": "셋"}\n', encoding="utf-8")
    assert list(iter_texts(p)) == ["하나", "", "셋"]
    p.write_text('{"text": "하나"}\nnot json\n', encoding="utf-8")
    with pytest.raises(InputError, match=":2: not a JSON object"):
        list(iter_texts(p))


def test_invalid_bytes_are_replaced_and_counted(tmp_path, capsys):
    p = tmp_path / "bad.txt"
    p.write_bytes("정상\n".encode() + b"\xff\xfe\xfd broken\n" + "끝\n".encode())
    out = list(iter_texts(p))
    assert out[0] == "정상" and out[2] == "끝" and "\ufffd" in out[1]
    assert "1 line(s) had bytes invalid" in capsys.readouterr().err


def test_registry_entries_are_complete():
    assert {"nsmc", "kcbert-comments", "korean-hate-speech", "k-mhas", "apeach"} <= set(CORPORA)
    for name, info in CORPORA.items():
        assert info["url"].startswith("https://") and info["license"] and info["format"], name


def test_reads_local_nsmc_style_copy(tmp_path):
    p = tmp_path / "ratings_train.txt"
    p.write_text("id\tdocument\tlabel\n1\t재밌다\t1\n2\t별로\t0\n", encoding="utf-8")
    assert list(iter_corpus("nsmc", p)) == ["재밌다", "별로"]
    with pytest.raises(InputError, match="download nsmc from https://github.com/e9t/nsmc"):
        list(iter_corpus("nsmc", tmp_path / "missing.txt"))


def test_reads_shared_data(shared_data):
    texts = iter_texts(shared_data / "nsmc3" / "dev.tsv", "document")
    first = [next(texts) for _ in range(100)]
    assert all(isinstance(t, str) for t in first) and sum(bool(t) for t in first) > 90
