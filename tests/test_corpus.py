"""Corpus readers: formats, encodings, bad bytes, the public-corpus registry."""
import pytest

from koelectra_kit.io.corpus import CORPORA, iter_corpus, iter_texts
from koelectra_kit.errors import InputError


def test_txt_utf8_bom_and_cp949(tmp_path):
    lines = ["첫 번째 댓글 ㅋㅋ", "", "두 번째"]
    (tmp_path / "a.txt").write_text("\n".join(lines) + "\n", encoding="utf-8-sig")
    (tmp_path / "b.txt").write_bytes(("\r\n".join(lines) + "\r\n").encode("cp949"))
    assert list(iter_texts(tmp_path / "a.txt")) == lines
    assert list(iter_texts(tmp_path / "b.txt")) == lines


def test_txt_utf16_and_utf32_with_bom(tmp_path):
    """A newline byte is half a character in UTF-16 (갊 is U+AC0A): lines come from the decoded text."""
    for enc in ("utf-16", "utf-32"):
        p = tmp_path / f"{enc}.txt"
        p.write_text("갊 좋아요\n둘째 줄\r\n\n셋째\n", encoding=enc)
        assert list(iter_texts(p)) == ["갊 좋아요", "둘째 줄", "", "셋째"]

def test_excel_workbook_is_not_read_as_lines(tmp_path):
    p = tmp_path / "comments.xlsx"
    p.write_bytes(b"PK\x03\x04" + bytes(range(256)))
    with pytest.raises(InputError, match="Excel workbook"):
        list(iter_texts(p))

def test_csv_quoted_newlines_and_column_guess(tmp_path):
    p = tmp_path / "r.csv"
    p.write_text('id,review\n1,"좋아요, 정말"\n2,"여러 줄\n리뷰"\n3,\n', encoding="utf-8")
    assert list(iter_texts(p)) == ["좋아요, 정말", "여러 줄\n리뷰", ""]
    with pytest.raises(InputError, match=r"no column 'text'; columns present: id, review"):
        list(iter_texts(p, "text"))


def test_two_text_columns_of_one_name_are_refused(tmp_path):
    """A header review,review trained the tokenizer (and pretraining) on the first column alone, exit 0, where label
    and suggest refuse the file."""
    p = tmp_path / "dup.csv"
    p.write_text("review,review\n좋아요,별로\n재밌어요,지루해요\n", encoding="utf-8")
    for column in (None, "review"):
        with pytest.raises(InputError, match="2 columns are named 'review'"):
            list(iter_texts(p, column))


def test_tsv_is_unquoted_like_nsmc(tmp_path):
    p = tmp_path / "n.tsv"
    p.write_text('id\tdocument\tlabel\n1\t"따옴표"로 시작\t1\n', encoding="utf-8")
    assert list(iter_texts(p)) == ['"따옴표"로 시작']


@pytest.fixture
def warnings_logged(monkeypatch):
    """What ``runtime.warn`` was called with (however logging is configured)."""
    from koelectra_kit import runtime

    seen: list[str] = []
    monkeypatch.setattr(runtime, "warn", seen.append)
    return seen


def test_jsonl(tmp_path, warnings_logged):
    p = tmp_path / "c.jsonl"
    p.write_text('{"text": "하나"}\n\n{"text": null}\n{"text": "셋"}\n', encoding="utf-8")
    assert list(iter_texts(p)) == ["하나", "", "셋"]
    assert not warnings_logged
    # a malformed line costs its record, counted in one warning at the end; a first line that is not JSON at
    # all means the file is not JSON lines
    p.write_text('{"text": "하나"}\nnot json\n{"text": "셋"}\n[1]\n', encoding="utf-8")
    assert list(iter_texts(p)) == ["하나", "셋"]
    assert len(warnings_logged) == 1 and "2 malformed record(s) skipped (first: line 2)" in warnings_logged[0]
    p.write_text('not json\n{"text": "하나"}\n', encoding="utf-8")
    with pytest.raises(InputError, match="line 1 is not JSON"):
        list(iter_texts(p))


def test_malformed_table_rows_are_skipped_and_counted(tmp_path, warnings_logged):
    p = tmp_path / "n.tsv"
    p.write_text("id\tdocument\tlabel\n1\t좋다\t1\n2\t탭이\t빠진\t줄\t0\n3\t끝\t0\n", encoding="utf-8")
    assert list(iter_texts(p)) == ["좋다", "끝"]
    assert warnings_logged == [f"warning: {p}: 1 malformed record(s) skipped (first: line 3)"]


def test_invalid_bytes_are_replaced_and_counted(tmp_path, warnings_logged):
    p = tmp_path / "bad.txt"
    p.write_bytes("정상\n".encode() + b"\xff\xfe\xfd broken\n" + "끝\n".encode())
    out = list(iter_texts(p))
    assert out[0] == "정상" and out[2] == "끝" and "\ufffd" in out[1]
    assert len(warnings_logged) == 1 and "1 line(s) had bytes invalid" in warnings_logged[0]
    # the same tolerance in a table: the broken line's record is read with U+FFFD, the others as they are
    t = tmp_path / "bad.csv"
    t.write_bytes("id,text\n1,정상\n".encode() + b"2,\xff broken\n" + "3,끝\n".encode())
    out = list(iter_texts(t))
    assert out[0] == "정상" and out[2] == "끝" and "\ufffd" in out[1]
    assert "1 line(s) had bytes invalid in utf-8 (first: line 3)" in warnings_logged[-1]


def test_mostly_broken_bytes_is_a_wrong_encoding(tmp_path):
    p = tmp_path / "latin1.csv"
    p.write_bytes(b"id,text\n" + b"".join(b"%d,caf\xe9 cr\xe8me\n" % i for i in range(40)))
    with pytest.raises(InputError, match="are not valid utf-8"):
        list(iter_texts(p))


def test_wrong_encoding_names_no_key_the_corpus_commands_lack(tmp_path):
    """The hint was "pass the file's encoding (e.g. encoding=cp949)": tokenizer train, prepare and pretrain have no
    such key (an unknown-key error when tried); the readable encodings are detected, anything else is converted."""
    p = tmp_path / "utf16-no-bom.txt"
    p.write_bytes("리뷰 하나\n".encode("utf-16-le") * 40)
    with pytest.raises(InputError, match="not valid utf-8") as e:
        list(iter_texts(p))
    assert "encoding=" not in str(e.value) and "convert it to UTF-8" in str(e.value)


@pytest.mark.parametrize("kind", ["gzip", "zip", "bzip2", "xz"])
def test_compressed_corpus_is_refused_with_how_to_decompress(tmp_path, kind):
    """A .gz was "not valid utf-8; pass encoding=..."; a stored .zip was trained on, its headers as text, with a
    warning about two broken lines. Both, and a cached pre-split of one, are refused naming the archive."""
    import bz2
    import gzip
    import lzma
    import zipfile

    from koelectra_kit.tokenizer.cache import presplit_file
    from koelectra_kit.tokenizer.normalize import NormalizeConfig

    text = "압축된 코퍼스 한 줄\n".encode() * 50
    p = tmp_path / f"corpus.{kind}"
    if kind == "zip":
        with zipfile.ZipFile(p, "w") as z:  # stored: the text readable inside
            z.writestr("corpus.txt", text)
    else:
        p.write_bytes({"gzip": gzip.compress, "bzip2": bz2.compress, "xz": lzma.compress}[kind](text))
    with pytest.raises(InputError, match=f"is a {kind} archive, not text: decompress it first"):
        list(iter_texts(p))
    with pytest.raises(InputError, match=f"is a {kind} archive"):
        presplit_file(p, text_column=None, normalize=NormalizeConfig(), presplit="none", cache_dir=tmp_path / "c")
    looks_like = tmp_path / "bzh.txt"  # text that starts like bzip2's magic is text
    looks_like.write_text("BZh9 로 시작하는 줄\n", encoding="utf-8")
    assert list(iter_texts(looks_like)) == ["BZh9 로 시작하는 줄"]


def test_carriage_returns_inside_lines_are_reported(tmp_path, warnings_logged):
    """Lines split at newlines only (by design): a file with classic Mac line ends (CR only) was one text, and a
    pretraining run said "1 texts" and nothing else."""
    p = tmp_path / "mac.txt"
    p.write_bytes("첫 댓글\r둘째 댓글\r셋째 댓글\r".encode())
    assert list(iter_texts(p)) == ["첫 댓글\r둘째 댓글\r셋째 댓글"]
    assert len(warnings_logged) == 1 and "1 line(s) hold carriage returns (first: line 1)" in warnings_logged[0]
    p.write_bytes("첫 댓글\r\n둘째 댓글\r\n".encode())  # CRLF ends are line ends: nothing to say
    assert list(iter_texts(p)) == ["첫 댓글", "둘째 댓글"] and len(warnings_logged) == 1


def test_parquet_through_the_one_table_reader(tmp_path):
    pd = pytest.importorskip("pandas")
    pytest.importorskip("pyarrow")
    p = tmp_path / "r.parquet"
    pd.DataFrame({"id": [1, 2], "Review": ["좋아요", None]}).to_parquet(p)
    assert list(iter_texts(p)) == ["좋아요", ""]  # the text column is found whatever its case


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


def test_a_corpus_text_column_of_numbers_or_ids_is_refused(tmp_path):
    """text_column=id (or a file whose first text-like column is a number) pretrained on digits, exit 0, and the
    only word was a warning to raise vocab_size: the table check label and finetune use, on the first texts."""
    import pandas as pd

    from koelectra_kit.io.corpus import iter_texts
    from koelectra_kit.io.hfdata import iter_texts as dataset_texts

    df = pd.DataFrame({"id": [str(1000 + i) for i in range(50)], "review": ["배송 빠르고 좋아요 ㅋㅋ"] * 50})
    df.to_csv(tmp_path / "c.csv", index=False)
    (tmp_path / "ds").mkdir()
    df.to_parquet(tmp_path / "ds" / "part-0.parquet")
    for texts in (lambda col: iter_texts(tmp_path / "c.csv", col), lambda col: dataset_texts(tmp_path / "ds", col)):
        with pytest.raises(InputError, match="column 'id' holds only numbers .* name the text column"):
            list(texts("id"))
        assert list(texts("review")) == ["배송 빠르고 좋아요 ㅋㅋ"] * 50  # the text column streams as before


def test_a_skipped_record_is_said_again_when_the_cached_presplit_is_used(tmp_path, capfd):
    """A malformed CSV record was skipped with a warning once, when the pre-split cache was made; every later run
    (a tokenizer retrained, `prepare` after `tokenizer train`) used the cache and said nothing of it."""
    from koelectra_kit.tokenizer.cache import presplit_file
    from koelectra_kit.tokenizer.normalize import NormalizeConfig

    rows = [f'{i},"댓글 {i}번 정말 재밌네요"' for i in range(30)]
    rows[9] = '9,"댓글 9번 "따옴표 문제'
    src = tmp_path / "stray.csv"
    src.write_text("id,comment\n" + "\n".join(rows) + "\n", encoding="utf-8")
    first = presplit_file(src, text_column=None, normalize=NormalizeConfig(), presplit="none", cache_dir=tmp_path / "c")
    assert "1 malformed record(s) skipped (first: line 11)" in capfd.readouterr().err
    again = presplit_file(src, text_column=None, normalize=NormalizeConfig(), presplit="none", cache_dir=tmp_path / "c")
    err = capfd.readouterr().err
    assert again == first and "1 malformed record(s) skipped (first: line 11) (as read when cached in" in err
    assert len(first.read_text(encoding="utf-8").splitlines()) == 29
