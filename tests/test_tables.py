import pandas as pd
import pytest

from koelectra_kit.errors import InputError
from koelectra_kit.io.tables import detect_encoding, read_table, require_columns

ROWS = [("정말 재밌어요, 강추!", "positive"), ('그냥 "보통"', "neutral"), ("별로\n다신 안 봄", "negative")]


def _write(path, encoding, sep=","):
    pd.DataFrame(ROWS, columns=["review", "label"]).to_csv(path, index=False, sep=sep, encoding=encoding)


@pytest.mark.parametrize("encoding, expected", [("utf-8", "utf-8"), ("utf-8-sig", "utf-8-sig"),
                                                ("cp949", "cp949"), ("euc-kr", "cp949")])
def test_encodings_round_trip(tmp_path, encoding, expected):
    p = tmp_path / "r.csv"
    _write(p, encoding)
    assert detect_encoding(p) == expected
    df = read_table(p)
    assert list(df.columns) == ["review", "label"]  # a BOM must not leak into the first column name
    assert list(map(tuple, df.values)) == ROWS


def test_tsv_jsonl_parquet(tmp_path):
    df = pd.DataFrame(ROWS, columns=["review", "label"])
    df.to_json(tmp_path / "r.jsonl", orient="records", lines=True, force_ascii=False)
    df.to_parquet(tmp_path / "r.parquet")
    for name in ["r.jsonl", "r.parquet"]:
        assert list(map(tuple, read_table(tmp_path / name)[["review", "label"]].values)) == ROWS


def test_tsv_is_unquoted_and_quoted_tsv_reads_as_csv_with_a_tab(tmp_path):
    # NSMC-style TSV: one record a line, a quote is text (even an unbalanced one)
    (tmp_path / "r.tsv").write_text('review\tlabel\n그냥 "보통\tneutral\n"강추"\tpositive\n', encoding="utf-8")
    assert list(map(tuple, read_table(tmp_path / "r.tsv").values)) == [('그냥 "보통', "neutral"), ('"강추"', "positive")]
    # a spreadsheet's quoted TSV (fields with newlines): format csv with a tab separator
    _write(tmp_path / "q.tsv", "utf-8", sep="\t")
    assert list(map(tuple, read_table(tmp_path / "q.tsv", fmt="csv", sep="\t").values)) == ROWS


def test_bad_inputs(tmp_path):
    with pytest.raises(InputError, match="file not found"):
        read_table(tmp_path / "missing.csv")
    (tmp_path / "empty.csv").write_bytes(b"")
    with pytest.raises(InputError, match="empty"):
        read_table(tmp_path / "empty.csv")
    (tmp_path / "bin.csv").write_bytes(b"review\n\xff\xfe\xfa\xfb\x80\x81\n")
    with pytest.raises(InputError, match="not UTF-8 or cp949"):
        read_table(tmp_path / "bin.csv")
    (tmp_path / "x.gz").write_bytes(b"x")
    with pytest.raises(InputError, match="extension"):
        read_table(tmp_path / "x.gz")
    (tmp_path / "x.xlsx").write_bytes(b"x")
    with pytest.raises(InputError, match="Excel workbook.*CSV UTF-8"):
        read_table(tmp_path / "x.xlsx")


def test_require_columns_lists_present(tmp_path):
    p = tmp_path / "r.csv"
    _write(p, "utf-8")
    with pytest.raises(InputError, match="no column 'text'; columns present: review, label"):
        require_columns(read_table(p), ["text"], p)


@pytest.mark.parametrize("name, text", [
    ("first.csv", "review,label\n좋아요, 정말,positive\n별로,negative\n그냥,neutral\n"),
    ("first.tsv", "review\tlabel\n좋아요\t정말\tpositive\n별로\tnegative\n"),
    ("after_a_multiline_text.csv", 'review,label\n"여러 줄\n리뷰",neutral\n좋아요, 정말,positive\n별로,negative\n'),
])
def test_a_row_wider_than_the_header_is_an_error_naming_its_line(tmp_path, name, text):
    """Where the first row was the wide one, pandas took the first column as the index and moved every column one
    to the left (the labels read as the texts) without a word; a later wide row was already pandas' error."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    line = 4 if name.startswith("after") else 2
    fix = "a TSV has no quoting" if name.endswith(".tsv") else "a text holding ',' must be quoted"
    with pytest.raises(InputError) as e:
        read_table(tmp_path / name)
    assert str(e.value).startswith(f"{tmp_path / name}: could not parse as {name[-3:]}: ")
    assert (f"line {line} has 3 fields and the header 2" in str(e.value) or f"in line {line}, saw 3" in str(e.value))
    if line == 2:
        assert fix in str(e.value)


@pytest.mark.parametrize("encoding", ["utf-16", "utf-32"])
def test_a_bom_encoding_given_for_a_file_without_its_bom_is_an_error(tmp_path, encoding):
    """encoding=utf-16 on a UTF-8 file (Excel's "Unicode Text" guessed wrong): the codec raised a UnicodeError that is
    no decode error, and read_table's handler then failed on its own unset variable: a traceback."""
    p = tmp_path / "r.csv"
    _write(p, "utf-8")
    with pytest.raises(InputError, match=f"line 1 is not valid {encoding}"):
        read_table(p, encoding=encoding)


def test_jsonl_and_parquet_integers_with_a_missing_value_read_as_written(tmp_path):
    """pandas made an integer column with a missing value float (labels 1/0 read as '1.0'/'0.0', which labels=[0,1]
    no longer matched), and a Parquet Int64 column with a missing value failed with a TypeError (a traceback)."""
    (tmp_path / "r.jsonl").write_text('{"review": "좋아요", "label": 1}\n{"review": "별로"}\n'
                                      '{"review": "그냥", "label": 0}\n', encoding="utf-8")
    pd.DataFrame({"review": ["좋아요", "별로", "그냥"], "label": pd.array([1, None, 0], dtype="Int64")}).to_parquet(
        tmp_path / "r.parquet")
    for name in ("r.jsonl", "r.parquet"):
        df = read_table(tmp_path / name)
        assert [str(v) for v in df["label"]] == ["1", "", "0"], name
        assert list(df["review"]) == ["좋아요", "별로", "그냥"]


def test_a_malformed_jsonl_line_is_an_error_naming_it(tmp_path):
    (tmp_path / "r.jsonl").write_text('{"review": "좋아요", "label": 1}\n{"review": "별로", "label": 0\n',
                                      encoding="utf-8")
    with pytest.raises(InputError, match="r.jsonl: could not parse as jsonl: malformed line 2"):
        read_table(tmp_path / "r.jsonl")
    (tmp_path / "a.json").write_text('[{"review": "좋아요", "label": 1}]\n', encoding="utf-8")  # a JSON array, not lines
    with pytest.raises(InputError, match="line 1 is a JSON list, not an object"):
        read_table(tmp_path / "a.json")


def test_an_encoding_given_that_does_not_read_the_file_names_the_one_that_does(tmp_path):
    """The hint for encoding=cp949 on a UTF-8 file was "pass the file's encoding (e.g. encoding=cp949)"."""
    _write(tmp_path / "u.csv", "utf-8")
    with pytest.raises(InputError, match="not valid cp949.*but the file reads as UTF-8: leave the encoding out") as e:
        read_table(tmp_path / "u.csv", encoding="cp949")
    assert "e.g. encoding=cp949" not in str(e.value)
    _write(tmp_path / "k.csv", "cp949")
    with pytest.raises(InputError, match="not valid utf-8.*reads as cp949/EUC-KR: .* or give cp949"):
        read_table(tmp_path / "k.csv", encoding="utf-8")
    (tmp_path / "bin.csv").write_bytes(b"review\n\xff\xfe\xfa\xfb\x80\x81\n")  # no encoding reads it: the old hint
    with pytest.raises(InputError, match=r"not valid utf-8 \(byte 7\); pass the file's encoding"):
        read_table(tmp_path / "bin.csv", encoding="utf-8")


@pytest.mark.parametrize("name, text, needle", [
    ("semi.csv", "review;label\n좋아요;positive\n그냥, 뭐;neutral\n", "holding semicolons: the fields are separated "
     "by semicolons, not commas as csv is read; save it with commas"),
    ("pipe.csv", "review|label\n좋아요|positive\n", "holding pipes"),
    ("tab.csv", "review\tlabel\n좋아요\tpositive\n", "holding tabs: .* read it as TSV: format=tsv"),
    ("comma.tsv", "review,label\n좋아요,positive\n", "not tabs as tsv is read; read it as CSV: format=csv"),
])
def test_a_header_of_one_column_holding_another_separator_says_so(tmp_path, name, text, needle):
    """The error was pandas' "Expected 1 fields in line 3, saw 2" (a text with a comma), or a one-column table whose
    column 'review;label' no text column matched."""
    (tmp_path / name).write_text(text, encoding="utf-8")
    with pytest.raises(InputError, match=f"{name}: the header is one column, .*{needle}"):
        read_table(tmp_path / name)
    (tmp_path / "one.csv").write_text("review\n좋아요; 정말\n", encoding="utf-8")  # one column, a ';' in a text: fine
    assert read_table(tmp_path / "one.csv")["review"].tolist() == ["좋아요; 정말"]


@pytest.mark.parametrize("given", [None, "utf-8-sig"])
def test_a_bad_byte_after_a_utf8_bom_is_said_on_its_own_line(tmp_path, given):
    """utf-8-sig's decoder does not count the BOM's 3 bytes: the line named was the one above the bad byte's."""
    from koelectra_kit.errors import InputError
    from koelectra_kit.io.tables import detect_encoding

    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffreview\n좋아요\n".encode() + "별로\n".encode("cp949"))
    with pytest.raises(InputError, match="line 3 is not"):
        detect_encoding(path, given)


@pytest.mark.parametrize("sep", [",", "\t", ";", "|", " ", "\x1f"])
def test_records_read_as_the_csv_module_reads_them(sep):
    """The reader splits a line without a quote or a line break at the separator itself (no csv reader per line):
    random lines of separators, spaces, control characters (NUL, vertical tab, file separators, NEL, U+2028),
    quotes and line breaks read into the fields, or the error, the csv module gives each record."""
    import csv
    import random

    from koelectra_kit.io.records import _csv_records

    alphabet = ["a", "가", ",", "\t", ";", "|", " ", "\x00", "\x0b", "\x0c", "\x1c", "\x1e", "\x1f", "\x85", "\u2028",
                "\ufeff", "\\", "'", '"', "\r"]
    rng = random.Random(0)
    for _ in range(3000):
        line = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9)))
        if line.count('"') % 2 or line.endswith("\r"):  # a record of one line (its quotes balance)
            continue
        try:
            want, error = next(csv.reader([line], delimiter=sep, strict=True), []), None
        except csv.Error:
            want, error = None, True
        (rec,) = list(_csv_records(iter([line + "\n"]), sep, header_len=len(want) if want else 1, start_line=2))
        if error:
            assert rec.error and rec.raw == line, repr(line)
        else:
            assert rec.error is None and rec.fields == want, repr(line)
