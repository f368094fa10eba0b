"""Batch labelling: every row and column kept, encodings, empty/malformed rows, resume, atomic output, API."""
import json
import re

import numpy as np
import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.label import label_dataframe, label_file

OUT_COLS = ["label", "confidence", "prob_negative", "prob_neutral", "prob_positive", "status"]


def _read(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def test_sample_file_rows_columns_and_order(tmp_path, tiny_classifier, sample_dir):
    src = sample_dir / "reviews_unlabelled.csv"
    out = tmp_path / "out.csv"
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=7)
    got = _read(out)
    orig = pd.read_csv(src, dtype=str, keep_default_na=False)
    assert list(got.columns) == list(orig.columns) + OUT_COLS
    pd.testing.assert_frame_equal(got[list(orig.columns)], orig)  # input columns unchanged, same order
    assert s.rows == len(orig) == 60
    row5 = got[got["id"] == "5"].iloc[0]
    assert row5["status"] == "empty" and row5["label"] == ""
    assert got.loc[got["id"] == "9", "review"].iloc[0].count("\n") == 1  # quoted newline survived
    assert got.loc[got["id"] == "6", "status"].iloc[0] == "truncated"  # 616 chars > max_length 32
    ok = got[got["status"].isin(["ok", "truncated"])]
    probs = ok[["prob_negative", "prob_neutral", "prob_positive"]].astype(float).to_numpy()
    np.testing.assert_allclose(probs.sum(1), 1.0, atol=2e-3)
    assert (ok["label"] == np.array(["negative", "neutral", "positive"])[probs.argmax(1)]).all()
    assert out.read_bytes().startswith(b"\xef\xbb\xbf")  # BOM for Excel


def test_same_labels_as_predictor_whatever_the_chunking(tmp_path, tiny_classifier, sample_dir):
    src = sample_dir / "reviews_unlabelled.csv"
    a = label_file(None, src, tmp_path / "a.csv", "review", classifier=tiny_classifier, progress=False, chunk_rows=5)
    b = label_file(None, src, tmp_path / "b.csv", "review", classifier=tiny_classifier, progress=False, chunk_rows=1000)
    assert a.rows == b.rows
    assert _read(tmp_path / "a.csv")["label"].tolist() == _read(tmp_path / "b.csv")["label"].tolist()


@pytest.mark.parametrize("encoding", ["cp949", "utf-8-sig", "utf-8"])
def test_encodings_detected(tmp_path, tiny_classifier, encoding):
    src = tmp_path / "in.csv"
    src.write_bytes("번호,리뷰\n1,배송이 빨라요\n2,별로예요 ㅠㅠ\n".encode(encoding))
    label_file(None, src, tmp_path / "o.csv", "리뷰", classifier=tiny_classifier, progress=False)
    got = _read(tmp_path / "o.csv")
    assert got["리뷰"].tolist() == ["배송이 빨라요", "별로예요 ㅠㅠ"] and (got["status"] == "ok").all()


def test_malformed_lines_are_kept_flagged_with_line_numbers(tmp_path, tiny_classifier):
    src = tmp_path / "bad.csv"
    src.write_text('id,review,stars\n1,좋아요,5\n2,"안 닫힌 따옴표,4\n3,괜찮아요,3\n4,필드가,너무,많음\n'
                   '5,"여러\n줄",1\n6,,2\n', encoding="utf-8")
    s = label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False)
    got = _read(tmp_path / "o.csv")
    assert got["id"].tolist()[:1] == ["1"] and len(got) == 6 and s.rows == 6
    status = got["status"].tolist()
    assert status[1] == "error: malformed line 3: unbalanced quote"
    assert status[3] == "error: malformed line 5: 4 fields, expected 3"
    assert got["review"].tolist()[4] == "여러\n줄" and status[4] == "ok"
    assert status[5] == "empty" and status[0] == status[2] == "ok"
    assert any("line 3" in m for m in s.malformed)


def test_missing_column_lists_present_ones(tmp_path, tiny_classifier, sample_dir, capsys):
    out = tmp_path / "o.csv"
    rc = main(["label", "--model", "unused", "--input", str(sample_dir / "reviews_unlabelled.csv"),
               "--text-column", "text", "--output", str(out), "--no-progress"])
    assert rc == 2
    err = capsys.readouterr().err
    assert "no column 'text'" in err and "'review'" in err and not out.exists()


@pytest.mark.parametrize("sep, fix", [(";", "pass --sep ';'"), ("|", "pass --sep '|'"), ("\t", "pass --format tsv")])
def test_a_file_separated_by_another_character_says_so(tmp_path, tiny_classifier, capsys, sep, fix):
    """A semicolon-separated .csv read with commas is one column 'review;label': the error was "no column 'review';
    columns present: ['review;label']"."""
    src = tmp_path / "in.csv"
    src.write_text(f"id{sep}review\n1{sep}좋아요, 정말\n2{sep}별로\n", encoding="utf-8")
    out = tmp_path / "o.csv"
    rc = main(["label", "--model", "unused", "--input", str(src), "--output", str(out), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and not out.exists(), err
    assert "the header is one column" in err and f"not commas as csv is read; {fix}" in err
    if sep != "\t":
        s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, sep=sep)
        assert s.rows == 2 and _read(out)["review"].tolist() == ["좋아요, 정말", "별로"]


@pytest.mark.parametrize("text, fix", [("id,review\n1,좋아요\n", "drop --sep: the format's own separates them"),
                                       ("id\treview\n1\t좋아요\n", "pass --format tsv (or --sep '\\t')")])
def test_a_sep_given_that_is_not_the_files_says_how_to_read_it(tmp_path, capsys, text, fix):
    """`--sep ';'` on a comma file was told "pass --format csv", which it already was."""
    src = tmp_path / "in.csv"
    src.write_text(text, encoding="utf-8")
    rc = main(["label", "--model", "unused", "--input", str(src), "--output", str(tmp_path / "o.csv"), "--sep", ";",
               "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and err.strip().endswith(f"not semicolons as csv is read; {fix}"), err


def test_resume_after_kill_every_row_once(tmp_path, tiny_classifier, sample_dir):
    src = sample_dir / "reviews_unlabelled.csv"
    out = tmp_path / "o.csv"

    def die(n):
        if n == 3:
            raise KeyboardInterrupt  # a kill after the third chunk

    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=8,
                   _after_chunk=die)
    assert not out.exists()  # never a partial file at the final path
    partial = tmp_path / "o.csv.partial"
    state = json.loads((tmp_path / "o.csv.partial.json").read_text())
    assert state["rows_done"] == 24 and partial.exists()
    with open(partial, "a", encoding="utf-8") as f:  # a half-written chunk the kill left behind
        f.write("half,written,row\n")
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=8, resume=True)
    assert s.rows == 60 and s.new_rows == 36
    got = _read(out)
    full = label_file(None, src, tmp_path / "ref.csv", "review", classifier=tiny_classifier, progress=False)
    pd.testing.assert_frame_equal(got, _read(tmp_path / "ref.csv"))
    assert full.rows == 60 and not partial.exists()


def test_resume_refuses_another_input(tmp_path, tiny_classifier, sample_dir):
    from koelectra_kit.errors import InputError

    src = tmp_path / "in.csv"
    src.write_text("review\n" + "\n".join(f"리뷰 {i}" for i in range(30)) + "\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, chunk_rows=10,
                   _after_chunk=lambda n: (_ for _ in ()).throw(KeyboardInterrupt))
    src.write_text("review\n다른 파일\n", encoding="utf-8")
    with pytest.raises(InputError, match="another input"):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, resume=True)


def test_resume_refuses_another_output_encoding(tmp_path, tiny_classifier):
    """The bytes already written are in the first run's encoding: a resume in another would leave a file that no
    encoding reads whole (cp949 rows, then UTF-8 ones)."""
    from koelectra_kit.errors import InputError

    src = tmp_path / "in.csv"
    src.write_text("review\n" + "\n".join(f"리뷰 {i} 정말 좋아요" for i in range(30)) + "\n", encoding="utf-8")
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, chunk_rows=10,
                   output_encoding="cp949", _after_chunk=lambda n: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(InputError, match="another output encoding"):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, resume=True)
    label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, resume=True,
               output_encoding="cp949")
    assert len(pd.read_csv(tmp_path / "o.csv", encoding="cp949", dtype=str)) == 30  # one encoding, every row


def test_resume_refuses_another_way_of_reading_the_input(tmp_path, tiny_classifier):
    """A .tsv resumed with --format csv --sep '\\t' was accepted: the first rows parsed as TSV, the rest as CSV (a
    quote starts a quoted cell there), and a row the first run would label came out flagged. The format, separator
    and encoding are the job's too; what a bad byte does is not (rows read whole under strict read the same under
    replace: the message of a run stopped by a bad byte says to go on with --encoding-errors replace and --resume,
    which was refused)."""
    from koelectra_kit.errors import InputError

    src = tmp_path / "in.tsv"
    src.write_text("review\n" + "\n".join(f'"{i}번" 정말 좋아요' for i in range(30)) + "\n", encoding="utf-8")
    label_file(None, src, tmp_path / "ref.csv", "review", classifier=tiny_classifier, progress=False)
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, chunk_rows=10,
                   _after_chunk=lambda n: (_ for _ in ()).throw(KeyboardInterrupt))
    with pytest.raises(InputError, match="another reading"):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False,
                   resume=True, fmt="csv", sep="\\t")
    s = label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False, resume=True,
                   encoding_errors="replace")
    assert s.rows == 30 and s.new_rows == 20
    assert (tmp_path / "o.csv").read_bytes() == (tmp_path / "ref.csv").read_bytes()


def test_a_labelled_file_labelled_again_keeps_the_first_models_columns(tmp_path, tiny_classifier):
    """Comparing two models the usual way, by labelling the first's output with the second: the second's columns
    are pred_*, then pred2_* when those are taken; no column of the input is ever written over."""
    src = tmp_path / "in.csv"
    pd.DataFrame({"review": ["정말 재밌어요", "최악이에요 돈 아까움", "그냥 그래요"],
                  "label": ["positive", "negative", "neutral"]}).to_csv(src, index=False)
    once, twice, thrice = tmp_path / "1.csv", tmp_path / "2.csv", tmp_path / "3.csv"
    label_file(None, src, once, "review", classifier=tiny_classifier, progress=False)
    label_file(None, once, twice, "review", classifier=tiny_classifier, progress=False)
    label_file(None, twice, thrice, "review", classifier=tiny_classifier, progress=False)
    first, got = _read(once), _read(thrice)
    pd.testing.assert_frame_equal(got[list(first.columns)], first)  # the first run's columns, untouched
    assert list(got.columns) == list(first.columns) + ["pred2_" + c for c in OUT_COLS] + ["pred3_" + c
                                                                                          for c in OUT_COLS]
    assert got["pred3_label"].tolist() == got["pred_label"].tolist()  # the same model labels alike


def test_a_text_of_only_invisible_characters_is_flagged_empty(tmp_path, tiny_classifier):
    """A zero-width space alone was labelled as a text (status ok, a label with a confidence); fine-tuning drops
    such a text as empty, and label flags it so (one definition: textcheck.is_blank)."""
    src = tmp_path / "in.csv"
    src.write_text("id,review\n1,좋아요\n2,\u200b\n3, \u200c\u200d\u2060 \n4,\ufeff\n5,별로\u200b\n", encoding="utf-8")
    label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False)
    got = _read(tmp_path / "o.csv")
    assert got["status"].tolist() == ["ok", "empty", "empty", "empty", "ok"]
    assert got["label"].tolist()[1:4] == ["", "", ""]


def test_failure_leaves_no_output(tmp_path, tiny_classifier, sample_dir, monkeypatch):
    import koelectra_kit.label.run as L

    def boom(*a, **k):
        raise RuntimeError("disk full")

    monkeypatch.setattr(L, "write_chunk", boom)
    with pytest.raises(RuntimeError):
        label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / "o.csv", "review",
                   classifier=tiny_classifier, progress=False)
    assert not (tmp_path / "o.csv").exists()


def test_tsv_jsonl_parquet_inputs(tmp_path, tiny_classifier):
    df = pd.DataFrame({"id": ["1", "2", "3"], "text": ["좋아요", "", '따옴표 "그대로"']})
    df.to_csv(tmp_path / "a.tsv", sep="\t", index=False)
    df.to_json(tmp_path / "a.jsonl", orient="records", lines=True, force_ascii=False)
    df.to_parquet(tmp_path / "a.parquet")
    for name in ("a.tsv", "a.jsonl", "a.parquet"):
        out = tmp_path / f"{name}.out.jsonl"
        label_file(None, tmp_path / name, out, "text", classifier=tiny_classifier, progress=False)
        got = pd.read_json(out, lines=True, dtype=False)
        assert got["id"].astype(str).tolist() == ["1", "2", "3"], name
        assert got["status"].tolist()[1] == "empty", name


def test_a_tsv_output_reads_back_as_written(tmp_path, tiny_classifier):
    """A TSV is written as every TSV is read here, with no quoting: a text with '"' comes back as it was (it came
    back with its quotes doubled), and a tab or line break inside a cell, which no unquoted TSV can hold, is written
    as a space and counted."""
    from koelectra_kit.label.summary import format_summary

    texts = ['영화 "기생충" 최고', '"그냥 그래요', "줄\n바뀜 좋아요", "탭\t있음\r\n별로"]
    src = tmp_path / "in.csv"
    pd.DataFrame({"id": ["1", "2", "3", "4"], "review": texts}).to_csv(src, index=False)
    out, again = tmp_path / "out.tsv", tmp_path / "again.tsv"
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    assert s.flattened == 2 and "2 cells held a tab or line break" in format_summary(s)
    got = pd.read_csv(out, sep="\t", quoting=3, dtype=str, keep_default_na=False)  # 3: csv.QUOTE_NONE
    assert got.review.tolist() == texts[:2] + ["줄 바뀜 좋아요", "탭 있음 별로"] and len(got) == 4
    label_file(None, out, again, "review", classifier=tiny_classifier, progress=False)
    back = pd.read_csv(again, sep="\t", quoting=3, dtype=str, keep_default_na=False)
    assert back.review.tolist() == got.review.tolist() and back.pred_label.tolist() == got.label.tolist()


def test_jsonl_columns_are_every_key_of_its_objects(tmp_path, tiny_classifier):
    """A key that first appears after line 1 is a column too: it was dropped (a reply), or a text column found only
    on line 2 was "no column"."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 0, "rating": 5}\n\n{"id": 1, "review": "정말 좋아요"}\nnot json\n'
                   '{"id": 2, "review": "별로예요", "reply": "사장님 답글"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    got = pd.read_json(out, lines=True, dtype=False)
    assert list(got.columns[:4]) == ["id", "rating", "review", "reply"] and s.rows == 4
    assert got.reply.tolist()[3] == "사장님 답글" and got.status.tolist()[0] == "empty"
    assert got.status.tolist()[2].startswith("error: malformed line 4")


def test_a_jsonl_output_keeps_its_values_as_read(tmp_path, tiny_classifier, tiny_classifier_dir, capsys):
    """JSONL was written with DataFrame.to_json, which keeps 10 significant digits of a float (0.12345678901234567
    came back 0.123456789) and ended in a traceback on a repeated CSV column name."""
    import datetime

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 12345678901234567890, "x": 0.12345678901234567, "ok": true, "tags": ["a", {"b": null}], '
                   '"review": "정말 좋아요"}\n{"id": 2, "x": 1e-30, "ok": null, "review": "별로"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    got = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    given = [json.loads(line) for line in src.read_text(encoding="utf-8").splitlines()]
    for g, o in zip(got, given):
        assert {k: g.get(k) for k in ("id", "x", "ok", "tags", "review")} == {k: o.get(k) for k in
                                                                             ("id", "x", "ok", "tags", "review")}
        assert isinstance(g["confidence"], float) and g["status"] == "ok"
    pd.DataFrame({"review": ["좋아요", "별로"], "t": [datetime.datetime(2024, 1, 2, 3, 4, 5), None]}).to_parquet(
        tmp_path / "p.parquet")
    label_file(None, tmp_path / "p.parquet", tmp_path / "p.jsonl", "review", classifier=tiny_classifier,
               progress=False)
    rows = [json.loads(line) for line in (tmp_path / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [r["t"] for r in rows] == ["2024-01-02T03:04:05", None]
    (tmp_path / "d.csv").write_text("id,review,id\n1,좋아요,3\n", encoding="utf-8")
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(tmp_path / "d.csv"), "--text-column",
               "review", "--output", str(tmp_path / "d.jsonl"), "--no-progress"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: ") and "'id' appears more than once" in err
    assert not (tmp_path / "d.jsonl").exists()


def test_a_jsonl_outputs_numbers_are_written_as_the_input_spelled_them(tmp_path, tiny_classifier):
    """A number past a float's range (1e400) was written back as Infinity, which strict JSON readers refuse, and
    1E2 as 100.0."""
    src = tmp_path / "in.jsonl"
    src.write_text('{"review": "정말 좋아요", "score": 1E2, "w": 1e400, "v": -1e400, "x": 0.10}\n'
                   '{"review": "별로", "score": 3, "w": 2.5e-7, "v": null, "x": 1.0}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    lines = out.read_text(encoding="utf-8").splitlines()
    assert lines[0].startswith('{"review": "정말 좋아요", "score": 1E2, "w": 1e400, "v": -1e400, "x": 0.10, "label": ')
    assert lines[1].startswith('{"review": "별로", "score": 3, "w": 2.5e-7, "v": null, "x": 1.0, "label": ')

    def strict(token):
        raise ValueError(f"not JSON: {token}")

    assert all(json.loads(line, parse_constant=strict)["status"] == "ok" for line in lines)
    # and into a CSV or TSV: "written back exactly as read" held for JSONL only (1E2 became 100.0, 1e400 inf)
    for ext in ("csv", "tsv"):
        label_file(None, src, tmp_path / f"out.{ext}", "review", classifier=tiny_classifier, progress=False)
        rows = pd.read_csv(tmp_path / f"out.{ext}", sep="," if ext == "csv" else "\t", dtype=str,
                           keep_default_na=False, encoding="utf-8-sig")
        assert rows[["score", "w", "v", "x"]].values.tolist() == [["1E2", "1e400", "-1e400", "0.10"],
                                                                  ["3", "2.5e-7", "", "1.0"]]


def test_a_jsonl_output_writes_an_unlabelled_rows_scores_as_null(tmp_path, tiny_classifier):
    """An empty or malformed row has no scores: its confidence and prob_ columns were the string "<NA>" in a JSONL
    output (pandas' missing value through json.dumps' default=str), a text where a number or null belongs."""
    src = tmp_path / "in.csv"
    src.write_text('id,review\n1,좋아요\n2,\n3,"a\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert [r["status"][:5] for r in rows] == ["ok", "empty", "error"]
    assert isinstance(rows[0]["confidence"], float)
    for r in rows[1:]:
        assert all(r[c] is None for c in OUT_COLS[1:-1]), r


def test_a_text_that_is_a_json_object_or_binary_is_flagged_and_utf8_bytes_are_read(tmp_path, tiny_classifier):
    """A JSONL text that is an object or an array, and a Parquet binary text that is not UTF-8, were labelled as their
    Python repr ("{'t': '별로예요'}", "b'\\xff\\xfe'"), status ok; UTF-8 bytes (Spark's strings in a binary column)
    were labelled as "b'\\xec\\xa2...'" rather than the review they hold."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "in.jsonl"
    src.write_text('{"id": 1, "review": "좋아요"}\n{"id": 2, "review": {"t": "별로예요"}}\n'
                   '{"id": 3, "review": ["별로", "예요"]}\n{"id": 4, "review": 10}\n', encoding="utf-8")
    label_file(None, src, tmp_path / "out.csv", "review", classifier=tiny_classifier, progress=False)
    got = _read(tmp_path / "out.csv")
    assert got["id"].tolist() == ["1", "2", "3", "4"]
    assert got["status"].tolist() == ["ok", "error: line 2: the text is a JSON object, not a string",
                                      "error: line 3: the text is a JSON array, not a string", "ok"]
    assert got["label"].tolist()[1:3] == ["", ""]
    pq.write_table(pa.table({"review": ["좋아요 최고".encode(), b"\xff\xfe", None]}), tmp_path / "b.parquet")
    label_file(None, tmp_path / "b.parquet", tmp_path / "b.csv", "review", classifier=tiny_classifier,
               progress=False)
    got = _read(tmp_path / "b.csv")
    assert got["status"].tolist() == ["ok", "error: line 3: the text is binary data, not UTF-8 text", "empty"]
    ref = label_dataframe(pd.DataFrame({"review": ["좋아요 최고"]}), text_column="review", classifier=tiny_classifier)
    assert got["label"][0] == ref["label"][0] and got["confidence"][0] == str(ref["confidence"][0])


@pytest.mark.parametrize("ext", [".csv", ".tsv"])
def test_nested_values_are_written_to_csv_and_tsv_as_their_json(tmp_path, tiny_classifier, ext):
    """A JSONL object or array, a Parquet list or struct, was written to a CSV or TSV as its Python repr
    ("{'a': 1, 'b': None}", "['x', 'y']"): not the value as read, and no JSON reader takes it back."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "in.jsonl"
    src.write_text('{"review": "좋아요", "meta": {"a": 1, "b": null, "c": true}, "tags": ["x", "별"]}\n'
                   '{"review": "별로", "meta": null, "tags": []}\n', encoding="utf-8")
    out = tmp_path / f"out{ext}"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    got = pd.read_csv(out, dtype=str, keep_default_na=False, encoding="utf-8-sig", sep="\t" if ext == ".tsv" else ",",
                      quoting=3 if ext == ".tsv" else 0)
    assert [json.loads(v) for v in got["meta"][:1]] == [{"a": 1, "b": None, "c": True}]
    assert got["meta"][1] == "" and [json.loads(v) for v in got["tags"]] == [["x", "별"], []]
    pq.write_table(pa.table({"review": ["좋아요"], "tags": [["a", "b"]], "s": [{"x": 1, "y": None}]}),
                   tmp_path / "p.parquet")
    label_file(None, tmp_path / "p.parquet", out, "review", classifier=tiny_classifier, progress=False,
               overwrite=True)
    got = pd.read_csv(out, dtype=str, keep_default_na=False, encoding="utf-8-sig", sep="\t" if ext == ".tsv" else ",",
                      quoting=3 if ext == ".tsv" else 0)
    assert json.loads(got["tags"][0]) == ["a", "b"] and json.loads(got["s"][0]) == {"x": 1, "y": None}


@pytest.mark.parametrize("ext", [".csv", ".tsv", ".jsonl"])
def test_a_binary_column_is_written_as_its_text_or_base64_not_its_python_repr(tmp_path, tiny_classifier, ext):
    """A Parquet binary column beside the reviews was written as b'\\xed\\x95\\x9c...' (its Python repr): Korean text
    hidden behind escapes and bytes no reader takes back. UTF-8 text is written as the text, other bytes (and bytes
    holding a control character) as base64: plus their base64."""
    import base64

    import pyarrow as pa
    import pyarrow.parquet as pq

    blobs = ["한글 제목".encode(), b"\x89PNG\xff\x00", b"\x00\x07", None]
    pq.write_table(pa.table({"review": ["좋아요", "별로", "그냥", "최고"], "blob": pa.array(blobs, pa.binary())}),
                   tmp_path / "in.parquet")
    out = tmp_path / f"out{ext}"
    label_file(None, tmp_path / "in.parquet", out, "review", classifier=tiny_classifier, progress=False)
    if ext == ".jsonl":
        cells = [json.loads(line)["blob"] for line in out.read_text(encoding="utf-8").splitlines()]
    else:
        cells = pd.read_csv(out, dtype=str, keep_default_na=False, encoding="utf-8-sig", quoting=3 if ext == ".tsv"
                            else 0, sep="\t" if ext == ".tsv" else ",")["blob"].tolist()
    assert cells[0] == "한글 제목" and cells[3] in ("", None)
    assert [base64.b64decode(c.removeprefix("base64:")) for c in cells[1:3]] == blobs[1:3]
    assert all(c.startswith("base64:") for c in cells[1:3]), cells


def test_python_api_and_column_clash(tiny_classifier):
    df = pd.DataFrame({"review": ["최고", None, "최악"], "label": ["x", "y", "z"]})
    out = label_dataframe(df, text_column="review", classifier=tiny_classifier)
    assert out["label"].tolist() == ["x", "y", "z"]  # the user's column is untouched
    assert out["pred_status"].tolist()[1] == "empty" and len(out) == 3


def test_cli_end_to_end_with_plot(tmp_path, tiny_classifier_dir, sample_dir, capsys):
    out = tmp_path / "o.csv"
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(sample_dir / "reviews_unlabelled.csv"),
               "--text-column", "review", "--output", str(out), "--plot", str(tmp_path / "d.png"), "--no-progress",
               "--precision", "fp32"])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "labelled 60 rows" in printed and "rows/s" in printed and "empty 1" in printed
    assert (tmp_path / "d.png").stat().st_size > 1000


@pytest.mark.parametrize("chunk_rows", [1000, 7])
def test_progress_bar_ends_at_the_rows_labelled(tmp_path, tiny_classifier, sample_dir, capsys, chunk_rows):
    """The bar counted whole chunks only: a file smaller than a chunk (the quickstart's 60 rows) ended at 0rows, a
    bigger one without its last, short chunk."""
    s = label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / "o.csv", "review",
                   classifier=tiny_classifier, progress=True, chunk_rows=chunk_rows)
    counts = [int(n) for n in re.findall(r"labelling: (\d+)rows", capsys.readouterr().err)]
    assert s.rows == 60 and counts and counts[-1] == s.rows, counts


def test_quantized_predictor_agrees(tiny_classifier_dir, sample_dir):
    from koelectra_kit.classify.classifier import Classifier

    texts = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].tolist()
    a = Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32").predict(texts)
    b = Classifier.load(tiny_classifier_dir, device="cpu", quantize=True).predict(texts)
    assert np.abs(a.probs - b.probs).max() < 0.05


def test_overlapped_and_sequential_tokenization_agree(tiny_classifier_dir, sample_dir):
    # CPU default is sequential; the overlapped (GPU default) path must give the same rows, in order, across groups
    from koelectra_kit.classify.classifier import Classifier

    texts = [l for l in (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines() if l.strip()][:150]
    clf = Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32")
    a = clf.predict(texts, group=32, overlap=False)
    b = clf.predict(texts, group=32, overlap=True)
    assert a.labels == b.labels and len(a.labels) == len(texts)
    np.testing.assert_allclose(a.probs, b.probs, atol=1e-6)
    assert a.truncated == b.truncated


def test_a_loaded_classifier_hashes_its_weights_once(tmp_path, tiny_classifier_dir, sample_dir, monkeypatch):
    """`label --resume` compares a digest of the weights. A classifier loaded once (the app, a process labelling
    many files, bench_label's in-process runs) hashed them again for every file: ~55 ms a file for a 12 x 256 model
    on this CPU, and on a GPU after copying each tensor back to the host. The digest itself is unchanged."""
    from koelectra_kit.classify.classifier import Classifier, model_digest

    clf = Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32")
    fresh = model_digest(Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32"))
    calls = []
    real = clf.model.state_dict
    monkeypatch.setattr(clf.model, "state_dict", lambda *a, **k: calls.append(1) or real(*a, **k))
    src = sample_dir / "reviews_unlabelled.csv"
    for name in ("a.csv", "b.csv"):
        label_file(None, src, tmp_path / name, "review", classifier=clf, progress=False)
    assert len(calls) == 1
    assert model_digest(clf) == fresh and len(calls) == 1
    assert _read(tmp_path / "a.csv")["label"].tolist() == _read(tmp_path / "b.csv")["label"].tolist()


def test_the_apps_file_jobs_hash_the_weights_once(tmp_path, tiny_classifier_dir, sample_dir, monkeypatch):
    """Each app file job labels with a SharedClassifier it pins (app/jobs.py), which forwards attribute reads to the
    classifier but not writes: a digest stored on what model_digest was handed stayed on that job's wrapper, and
    every uploaded file hashed the weights again."""
    from koelectra_kit.app.jobs import SharedClassifier
    from koelectra_kit.classify.classifier import Classifier, model_digest

    clf = Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32")
    fresh = model_digest(Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32"))
    calls = []
    real = clf.model.state_dict
    monkeypatch.setattr(clf.model, "state_dict", lambda *a, **k: calls.append(1) or real(*a, **k))
    shared = SharedClassifier(clf)
    for name in ("a.csv", "b.csv"):
        label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / name, "review", classifier=shared.pin(),
                   progress=False)
    assert len(calls) == 1 and model_digest(shared.pin()) == model_digest(clf) == fresh and len(calls) == 1


def test_blank_lines_above_the_header_are_skipped_and_lines_still_named_right(tmp_path, tiny_classifier):
    """A CSV with blank lines before its header read the first blank line as the header: "no column 'review';
    columns present: []". pandas skips them (so finetune read the same file); label does too, and a malformed row is
    still named by its line in an editor."""
    src = tmp_path / "in.csv"
    src.write_text("\n\n\nid,review\n1,좋아요\n2,\"별로\n에요\"\n3,a,b\n", encoding="utf-8")
    s = label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False)
    got = _read(tmp_path / "o.csv")
    assert s.rows == 3 and got["review"].tolist()[:2] == ["좋아요", "별로\n에요"]
    assert got["status"].tolist()[2] == "error: malformed line 8: 3 fields, expected 2"


def test_the_python_api_reads_texts_as_a_file_reads_cells(tiny_classifier):
    """From an audit of the Python API: pd.NA and float32 NaN were labelled as the texts "<NA>" and "nan" (status ok
    in label_dataframe); a lone surrogate crashed the tokenizer; batch_size=-1 gave every text the first label at
    uniform probabilities; predict("좋아요") scored three texts; a DataFrame with two columns of the text's name
    raised an AttributeError."""
    from koelectra_kit.errors import InputError

    empty = tiny_classifier.predict([""]).probs[0]
    got = tiny_classifier.predict([pd.NA, np.float32("nan"), pd.NaT, None]).probs
    assert np.allclose(got, empty)
    assert np.allclose(tiny_classifier.predict([b"\xec\xa2\x8b"]).probs, tiny_classifier.predict(["좋"]).probs)
    odd = tiny_classifier.predict(["a\ud800b"])  # a lone surrogate: U+FFFD, as a bad byte read with errors=replace
    assert np.allclose(odd.probs, tiny_classifier.predict(["a\ufffdb"]).probs)
    for bad in (-1, 0.5, True):
        with pytest.raises(InputError, match="a whole number of texts, at least 1"):
            tiny_classifier.predict(["좋아요"], batch_size=bad)
    with pytest.raises(InputError, match="put one text in a list"):
        tiny_classifier.predict("좋아요")
    df = pd.DataFrame({"review": pd.array(["좋아요", None, "별로"], dtype="string")})
    out = label_dataframe(df, classifier=tiny_classifier)
    assert out["status"].tolist() == ["ok", "empty", "ok"] and out["label"].iloc[1] == ""
    odd = label_dataframe(pd.DataFrame({"review": [{"t": "별로"}, ["별로"], b"\xff", "좋아요"]}),
                          classifier=tiny_classifier)  # each was status "empty", not saying why
    assert odd["status"].tolist()[:3] == ["error: the text is a JSON object, not a string",
                                          "error: the text is a JSON array, not a string",
                                          "error: the text is binary data, not UTF-8 text"]
    assert odd["status"].iloc[3] == "ok" and odd["label"].tolist()[:3] == ["", "", ""]
    with pytest.raises(InputError, match="column 'review' appears 2 times"):
        label_dataframe(pd.DataFrame([["좋아요", "x"]], columns=["review", "review"]), classifier=tiny_classifier)
    with pytest.raises(InputError, match="takes a pandas DataFrame, not list"):
        label_dataframe([{"review": "좋아요"}], classifier=tiny_classifier)


def test_python_api_refuses_what_the_command_line_refuses(tiny_classifier, tiny_classifier_dir):
    """The Python paths took what the command line refuses: precision="FP32", "float32" or "fp8" ran as auto (bf16
    where the CPU has it); model= beside classifier= was ignored; classifier="folder" was an AttributeError; a rating
    column named as the text was labelled, digits as reviews."""
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.errors import ConfigError, InputError

    df = pd.DataFrame({"review": ["좋아요 최고", "별로예요"], "rating": [10, 1]})
    for precision in ("FP32", "float32", "fp8"):
        with pytest.raises(ConfigError, match=rf"precision='{precision}': one of auto, fp32, bf16, fp16"):
            Classifier.load(tiny_classifier_dir, precision=precision)
        with pytest.raises(ConfigError, match="precision="):
            label_dataframe(df, model=str(tiny_classifier_dir), precision=precision)
    with pytest.raises(ConfigError, match="model= and classifier= both given"):
        label_dataframe(df, model=str(tiny_classifier_dir), classifier=tiny_classifier)
    with pytest.raises(ConfigError, match="precision: how to load model=; a classifier= given is loaded already"):
        label_dataframe(df, classifier=tiny_classifier, precision="fp16")
    with pytest.raises(ConfigError, match="give model="):
        label_dataframe(df)
    with pytest.raises(ConfigError, match="a loaded Classifier"):
        label_dataframe(df, classifier=str(tiny_classifier_dir))
    with pytest.raises(ConfigError, match="text_column=\\['review'\\]"):
        label_dataframe(df, classifier=tiny_classifier, text_column=["review"])
    numbers = pd.DataFrame({"review": [str(i) for i in range(30)]})
    with pytest.raises(InputError, match="holds only numbers"):
        label_dataframe(numbers, classifier=tiny_classifier)


def test_an_array_cell_holds_no_text_on_every_path(tmp_path, tiny_classifier):
    """pandas reads a Parquet list column as numpy arrays: label_dataframe labelled "['최고' '굿']" as a review, status
    ok, where label flags the same cell."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    src = tmp_path / "lists.parquet"
    pq.write_table(pa.table({"id": [1, 2, 3], "review": [["최고", "굿"], ["별로"], []]}), src)
    out = label_dataframe(pd.read_parquet(src), classifier=tiny_classifier)
    assert out["status"].tolist() == ["error: the text is a JSON array, not a string"] * 3
    assert out["label"].tolist() == [""] * 3


def test_without_a_text_column_an_nsmc_file_has_its_document_column_labelled(tmp_path, tiny_classifier, capsys):
    """label looked for `review` only, where finetune, evaluate and suggest take the first of the usual names: an
    NSMC file (id, document, label) was "no column 'review'". The default falls back to them, with a note."""
    src = tmp_path / "nsmc.tsv"
    src.write_text("id\tdocument\tlabel\n1\t정말 재밌어요\tpositive\n2\t별로였다\tnegative\n", encoding="utf-8")
    s = label_file(None, src, tmp_path / "o.csv", classifier=tiny_classifier, progress=False)
    assert s.rows == 2 and "has no column 'review': labelling its column 'document'" in capsys.readouterr().err
    out = pd.read_csv(tmp_path / "o.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    assert out["pred_status"].tolist() == ["ok", "ok"] and out["label"].tolist() == ["positive", "negative"]
    from koelectra_kit.errors import InputError

    for named in ("body", "review"):  # a column named is never replaced, review included
        with pytest.raises(InputError, match=f"no column '{named}'"):
            label_file(None, src, tmp_path / "o2.csv", named, classifier=tiny_classifier, progress=False)
    (tmp_path / "none.csv").write_text("id,note\n1,좋아요\n", encoding="utf-8")
    with pytest.raises(InputError, match=r"no text column among \['id', 'note'\] .*pass --text-column NAME"):
        label_file(None, tmp_path / "none.csv", tmp_path / "o3.csv", classifier=tiny_classifier, progress=False)
