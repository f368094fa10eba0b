"""``label human_labels=FILE``: the analyst's own labels reach files labelled on the command line, as they reach
the app's downloads (label_source / model_label), from the app's LABELS.csv or any labelled table."""
from __future__ import annotations

import csv

import pandas as pd
import pytest

from koelectra_kit.errors import InputError
from koelectra_kit.label import label_file

pytestmark = pytest.mark.fast


def _read(path):
    return pd.read_csv(path, encoding="utf-8-sig", dtype=str, keep_default_na=False)


def _texts(sample_dir, n):
    return _read(sample_dir / "reviews_unlabelled.csv")["review"].tolist()[:n]


def _write(path, header, rows):
    with open(path, "w", encoding="utf-8-sig", newline="") as f:
        w = csv.writer(f)
        w.writerow(header)
        w.writerows(rows)
    return path


@pytest.fixture
def plain(tmp_path, tiny_classifier, sample_dir):
    """The model's own labels for the sample file (no labels file)."""
    out = tmp_path / "plain.csv"
    label_file(None, sample_dir / "reviews_unlabelled.csv", out, "review", classifier=tiny_classifier,
               progress=False)
    return _read(out)


def test_labels_log_wins_with_undo_and_skip(tmp_path, tiny_classifier, sample_dir, plain):
    t = _texts(sample_dir, 4)
    model = dict(zip(plain["review"], plain["label"]))
    flip = {lab: other for lab, other in zip(["negative", "neutral", "positive"], ["positive", "negative", "neutral"])}
    log = _write(tmp_path / "LABELS.csv", ["text", "label", "action", "row", "source", "answer_id", "undoes", "time"], [
        [t[0], flip[model[t[0]]], "answer", "1", "teach", "a1", "", ""],  # differs from the model: must win
        [t[1], "긍정", "answer", "2", "teach", "a2", "", ""],  # typed as finetune reads a label
        [t[2], "negative", "answer", "3", "teach", "a3", "", ""],
        ["", "", "undo", "", "teach", "u1", "a3", ""],  # retracts t[2]'s answer: the model's label stays
        [t[3], "", "skip", "4", "teach", "a4", "", ""],
    ])
    out = tmp_path / "o.csv"
    s = label_file(None, sample_dir / "reviews_unlabelled.csv", out, "review", classifier=tiny_classifier,
                   progress=False, human_labels=str(log), chunk_rows=7)
    got = _read(out)
    assert list(got.columns) == [*plain.columns, "label_source", "model_label"]
    assert got["model_label"].tolist() == plain["label"].tolist()  # the model's own, kept
    assert got["confidence"].tolist() == plain["confidence"].tolist()
    by_text = got.set_index("review")
    assert by_text.loc[t[0], "label"] == flip[model[t[0]]] and by_text.loc[t[0], "label_source"] == "human"
    assert by_text.loc[t[1], "label"] == "positive"
    for text in t[2:4]:
        assert by_text.loc[text, "label"] == model[text] and by_text.loc[text, "label_source"] == "model"
    human = got["label_source"] == "human"
    assert human.sum() == s.human == int(got["review"].isin(t[:2]).sum())
    assert set(got.loc[plain["label"] == "", "label_source"]) <= {""}  # a flagged row is labelled by no one
    assert s.per_label == got.loc[got["label"] != "", "label"].value_counts().to_dict()  # counts the final labels


def test_a_labelled_table_last_row_wins_and_conflicts_are_counted(tmp_path, tiny_classifier, sample_dir, capsys):
    from koelectra_kit.label import format_summary

    t = _texts(sample_dir, 3)
    table = _write(tmp_path / "mine.csv", ["document", "sentiment"], [
        [t[0], "pos"], [t[1], ""], [t[0], "neg"], [t[2], "중립"], ["", "positive"]])
    out = tmp_path / "o.tsv"
    s = label_file(None, sample_dir / "reviews_unlabelled.csv", out, "review", classifier=tiny_classifier,
                   progress=False, human_labels=str(table))
    got = pd.read_csv(out, sep="\t", dtype=str, keep_default_na=False)
    by_text = got.set_index("review")
    assert by_text.loc[t[0], "label"] == "negative"  # its last row
    assert by_text.loc[t[1], "label_source"] == "model"  # an empty label is no answer
    assert by_text.loc[t[2], "label"] == "neutral"
    assert s.human_conflicts == 1
    assert "1 text has two different labels" in format_summary(s)


def test_the_app_and_the_command_line_write_the_same_file(tmp_path, tiny_classifier, sample_dir, plain):
    from koelectra_kit.app.results import with_human_labels
    from koelectra_kit.label import output_columns
    from koelectra_kit.label.human import human_columns, keyed_labels

    t = _texts(sample_dir, 5)
    table = _write(tmp_path / "LABELS.csv", ["text", "label"], [[x, "neutral"] for x in t])
    cli = tmp_path / "cli.csv"
    label_file(None, sample_dir / "reviews_unlabelled.csv", cli, "review", classifier=tiny_classifier,
               progress=False, human_labels=str(table))
    columns = [c for c in plain.columns if c not in output_columns(["negative", "neutral", "positive"], []).values()]
    names = output_columns(["negative", "neutral", "positive"], columns) | human_columns(columns)
    app = tmp_path / "app.csv"
    plain.to_csv(tmp_path / "model.csv", index=False, encoding="utf-8-sig")
    with_human_labels(tmp_path / "model.csv", app, "review", names, keyed_labels((x, "neutral") for x in t)[0])
    pd.testing.assert_frame_equal(_read(cli), _read(app))


def test_an_input_with_a_label_source_column_gets_prefixed_columns(tmp_path, tiny_classifier):
    src = _write(tmp_path / "in.csv", ["review", "label_source"], [["좋아요 최고", "crawl"], ["별로예요", "crawl"]])
    table = _write(tmp_path / "h.csv", ["text", "label"], [["별로예요", "negative"]])
    out = tmp_path / "o.csv"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, human_labels=str(table))
    got = _read(out)
    assert got["label_source"].tolist() == ["crawl", "crawl"]  # the input's column, untouched
    assert got["pred_label_source"].tolist() == ["model", "human"]
    assert got["label"].tolist()[1] == "negative" and "pred_model_label" in got.columns


@pytest.mark.parametrize("content, message", [
    (None, "human_labels .*file not found"),
    ("", "human_labels .*file is empty"),
    ("text,label\n좋아요,great\n좋아요2,awful\n", "row 1: 'great'; row 2: 'awful'.*not one of the model's labels"),
    ("review,stars\n좋아요,5\n", "needs a text column .* and a label column"),
    ("text,label,action\n좋아요,great,answer\n", "line 2: label 'great'"),
])
def test_a_labels_file_it_cannot_use_is_one_error_and_no_output(tmp_path, tiny_classifier, sample_dir, content,
                                                                 message):
    path = tmp_path / "LABELS.csv"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    out = tmp_path / "o.csv"
    with pytest.raises(InputError, match=message):
        label_file(None, sample_dir / "reviews_unlabelled.csv", out, "review", classifier=tiny_classifier,
                   progress=False, human_labels=str(path))
    assert not out.exists() and not (tmp_path / "o.csv.partial").exists()


def test_resume_refuses_changed_labels_and_continues_with_the_same(tmp_path, tiny_classifier, sample_dir):
    t = _texts(sample_dir, 40)
    table = _write(tmp_path / "h.csv", ["text", "label"], [[t[0], "positive"], [t[35], "negative"]])
    src, out = sample_dir / "reviews_unlabelled.csv", tmp_path / "o.csv"

    def stop(n):
        if n == 2:
            raise KeyboardInterrupt

    opts = dict(classifier=tiny_classifier, progress=False, chunk_rows=10, human_labels=str(table))
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", _after_chunk=stop, **opts)
    _write(tmp_path / "h.csv", ["text", "label"], [[t[0], "neutral"], [t[35], "negative"]])
    with pytest.raises(InputError, match="other human labels"):
        label_file(None, src, out, "review", resume=True, **opts)
    _write(tmp_path / "h.csv", ["text", "label"], [[t[0], "positive"], [t[35], "negative"]])
    s = label_file(None, src, out, "review", resume=True, **opts)
    ref = tmp_path / "ref.csv"
    whole = label_file(None, src, ref, "review", **opts)
    pd.testing.assert_frame_equal(_read(out), _read(ref))
    assert s.human == whole.human == int(_read(ref)["review"].isin([t[0], t[35]]).sum())


def test_label_merge_refuses_shards_with_other_labels(tmp_path, tiny_classifier, sample_dir):
    from koelectra_kit.label import merge_shards

    t = _texts(sample_dir, 1)
    src, out = sample_dir / "reviews_unlabelled.csv", tmp_path / "o.csv"
    for k, label in ((1, "positive"), (2, "negative")):
        table = _write(tmp_path / f"h{k}.csv", ["text", "label"], [[t[0], label]])
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, shard=f"{k}/2",
                   human_labels=str(table))
    with pytest.raises(InputError, match="other human labels"):
        merge_shards(str(out))


def test_cli_error_line_and_summary(tmp_path, tiny_classifier_dir, sample_dir, capsys):
    from koelectra_kit.cli import main

    out = tmp_path / "o.csv"
    argv = ["label", "--model", str(tiny_classifier_dir), "--input", str(sample_dir / "reviews_unlabelled.csv"),
            "--output", str(out), "--no-progress", "--human-labels", str(tmp_path / "nope.csv")]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: human_labels") and "file not found" in err[0]
    t = _texts(sample_dir, 1)
    _write(tmp_path / "nope.csv", ["text", "label"], [[t[0], "부정"]])
    assert main(argv) == 0
    printed = capsys.readouterr().out
    assert " your label from " in printed and _read(out).set_index("review").loc[t[0], "label"] == "negative"


@pytest.mark.parametrize("tail", ["좋아요,posi", '"배송이 빨라요,\n그리고'], ids=["label cut", "text cut in a quote"])
def test_a_log_torn_mid_write_is_read_without_its_last_line_and_left_as_it_is(tmp_path, tiny_classifier_dir,
                                                                             sample_dir, capsys, tail):
    from koelectra_kit.cli import main

    t = _texts(sample_dir, 2)
    log = _write(tmp_path / "LABELS.csv", ["text", "label", "action", "row", "source", "answer_id", "undoes", "time"], [
        [t[0], "부정", "answer", "1", "teach", "a1", "", ""],
        [t[1], "neutral", "answer", "2", "teach", "a2", "", ""],
    ])
    data = log.read_bytes() + tail.encode()  # the app killed while it appended a third answer
    log.write_bytes(data)
    out = tmp_path / "o.csv"
    argv = ["label", "--model", str(tiny_classifier_dir), "--input", str(sample_dir / "reviews_unlabelled.csv"),
            "--output", str(out), "--no-progress", "--human-labels", str(log)]
    assert main(argv) == 0
    err = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert len(err) == 1 and "LABELS.csv: line 4 was cut off mid-write" in err[0] and "read without it" in err[0]
    got = _read(out).set_index("review")
    assert got.loc[t[0], "label"] == "negative" and got.loc[t[1], "label"] == "neutral"
    assert (got["label_source"] == "human").sum() == 2
    assert log.read_bytes() == data and not (tmp_path / "LABELS.csv.torn").exists()  # only read


def test_the_ray_labeller_applies_them_as_label_does(tmp_path, tiny_classifier_dir, sample_dir):
    """``RayLabeller`` is what each Ray actor runs on its batches (tests/test_ray.py runs it on Ray itself)."""
    from koelectra_kit.label.ray_adapter import RayLabeller

    src = sample_dir / "reviews_unlabelled.csv"
    t = _texts(sample_dir, 2)
    table = _write(tmp_path / "h.csv", ["text", "label"], [[t[0], "neutral"], [t[1], "positive"]])
    out = tmp_path / "o.csv"
    label_file(str(tiny_classifier_dir), src, out, "review", progress=False, human_labels=str(table),
               precision="fp32", device="cpu")
    batch = _read(src)
    got = RayLabeller(str(tiny_classifier_dir), precision="fp32", device="cpu", human_labels=str(table))(batch)
    want = _read(out)
    for col in ("label", "label_source", "model_label"):
        assert got[col].tolist() == want[col].tolist()


def test_an_excel_workbook_of_labels_and_a_file_that_is_not_text(tmp_path, tiny_classifier, sample_dir):
    pytest.importorskip("openpyxl")  # the xlsx extra (in dev)
    t = _texts(sample_dir, 2)
    book = tmp_path / "mine.xlsx"
    pd.DataFrame({"리뷰": t, "감성": ["부정", "긍정"]}).to_excel(book, index=False, engine="openpyxl")
    out = tmp_path / "o.csv"
    s = label_file(None, sample_dir / "reviews_unlabelled.csv", out, "review", classifier=tiny_classifier,
                   progress=False, human_labels=str(book))
    by_text = _read(out).set_index("review")
    assert by_text.loc[t[0], "label"] == "negative" and by_text.loc[t[1], "label"] == "positive"
    assert s.human == int(_read(out)["review"].isin(t).sum())
    log = tmp_path / "LABELS.xlsx"  # the app's log, opened in Excel and saved as a workbook
    pd.DataFrame({"text": [t[0], t[0]], "label": ["neutral", "positive"], "action": ["answer", "answer"]}).to_excel(
        log, index=False, engine="openpyxl")
    s = label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / "o3.csv", "review",
                   classifier=tiny_classifier, progress=False, human_labels=str(log))
    assert _read(tmp_path / "o3.csv").set_index("review").loc[t[0], "label"] == "positive"  # the latest answer
    junk = tmp_path / "junk.csv"
    junk.write_bytes(bytes(range(128, 256)) * 3)
    with pytest.raises(InputError, match=r"^human_labels .*junk.csv: not UTF-8 or cp949 text; save it as 'CSV "
                                         r"UTF-8'$"):
        label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / "o2.csv", "review",
                   classifier=tiny_classifier, progress=False, human_labels=str(junk))


def test_label_dataframe_takes_them_too(tmp_path, tiny_classifier, sample_dir):
    from koelectra_kit.label import label_dataframe

    t = _texts(sample_dir, 3)
    table = _write(tmp_path / "h.csv", ["text", "label"], [[t[0], "neutral"], [t[2], "negative"]])
    df = _read(sample_dir / "reviews_unlabelled.csv")
    got = label_dataframe(df, classifier=tiny_classifier, human_labels=str(table))
    cli = tmp_path / "o.csv"
    label_file(None, sample_dir / "reviews_unlabelled.csv", cli, "review", classifier=tiny_classifier, progress=False,
               human_labels=str(table))
    want = _read(cli)
    for col in ("label", "label_source", "model_label"):
        assert got[col].tolist() == want[col].tolist()


def test_a_labelled_output_gives_its_human_rows_and_a_models_output_is_refused(tmp_path, tiny_classifier,
                                                                                sample_dir, plain):
    """A file --human-labels wrote is a labels file (its human rows); a file label wrote without them is refused
    (every label in it is the model's: relabelling with it would mark the model's guesses as the analyst's)."""
    t = _texts(sample_dir, 2)
    first = tmp_path / "first.csv"
    label_file(None, sample_dir / "reviews_unlabelled.csv", first, "review", classifier=tiny_classifier,
               progress=False, human_labels=str(_write(tmp_path / "h.csv", ["text", "label"], [[t[0], "neutral"]])))
    again = tmp_path / "again.csv"
    s = label_file(None, sample_dir / "reviews_unlabelled.csv", again, "review", classifier=tiny_classifier,
                   progress=False, human_labels=str(first))
    got = _read(again)
    assert s.human == int((got["review"] == t[0]).sum()) and set(got.loc[got["review"] == t[0], "label"]) == {"neutral"}
    plain.to_csv(tmp_path / "model.csv", index=False)
    with pytest.raises(InputError, match="is a file `label` wrote .* its labels are a model's"):
        label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / "o.csv", "review",
                   classifier=tiny_classifier, progress=False, human_labels=str(tmp_path / "model.csv"))


def test_a_text_matches_as_teach_mode_and_suggest_tell_reviews_apart(tmp_path, tiny_classifier):
    """A labels file saved on a Mac holds decomposed Hangul (NFD), a spreadsheet pads spaces, a reviewer types
    ㅋㅋㅋㅋ for ㅋㅋ: the same review, as suggest (and teach mode's queue) count it: labelled once, never asked
    again, so the label reaches every such row."""
    import unicodedata

    from koelectra_kit.suggest import text_key

    rows = ["배송 빨라요  최고ㅋㅋ", "배송 빨라요 최고ㅋㅋㅋㅋ ", "배송이 빨라요"]
    src = _write(tmp_path / "in.csv", ["review"], [[r] for r in rows])
    nfd = unicodedata.normalize("NFD", " 배송 빨라요 최고ㅋㅋㅋ")
    assert nfd.strip() != rows[0]  # not equal as strings
    table = _write(tmp_path / "h.csv", ["text", "label"], [[nfd, "neutral"]])
    out = tmp_path / "o.csv"
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, human_labels=str(table))
    got = _read(out)["label_source"].tolist()
    assert got == ["human", "human", "model"] and s.human == 2
    assert got == ["human" if text_key(r) == text_key(nfd) else "model" for r in rows]  # suggest's "labelled"


def test_an_output_with_pred_columns_reads_back_by_its_own_label_column(tmp_path, tiny_classifier):
    """An input with a label column of its own gets pred_label, pred_status, ... while label_source stays unprefixed
    (each set of added columns is prefixed on its own): read back, the human rows' labels are pred_label's, never
    the input's own label column; and such an output written without human labels is refused."""
    src = _write(tmp_path / "in.csv", ["review", "label"], [["좋아요 최고", "old-a"], ["별로예요", "old-b"],
                                                           ["그저 그래요", "old-c"]])
    first = tmp_path / "first.csv"
    label_file(None, src, first, "review", classifier=tiny_classifier, progress=False,
               human_labels=str(_write(tmp_path / "h.csv", ["text", "label"], [["별로예요", "negative"]])))
    assert {"pred_label", "pred_status", "label_source"} <= set(_read(first).columns)
    again = tmp_path / "again.csv"
    s = label_file(None, src, again, "review", classifier=tiny_classifier, progress=False, human_labels=str(first))
    got = _read(again)
    assert got["label_source"].tolist() == ["model", "human", "model"] and s.human == 1
    assert got["pred_label"].tolist()[1] == "negative" and got["label"].tolist() == ["old-a", "old-b", "old-c"]
    plain = tmp_path / "plain.csv"
    label_file(None, src, plain, "review", classifier=tiny_classifier, progress=False)
    with pytest.raises(InputError, match="is a file `label` wrote"):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=tiny_classifier, progress=False,
                   human_labels=str(plain))


def test_two_spellings_in_the_log_take_the_latest_answer(tmp_path, tiny_classifier):
    import unicodedata

    nfd = unicodedata.normalize("NFD", "좋아요 최고")
    log = _write(tmp_path / "LABELS.csv", ["text", "label", "action", "answer_id"], [
        ["좋아요 최고", "positive", "answer", "a1"], [nfd, "negative", "answer", "a2"],
        ["좋아요 최고", "neutral", "answer", "a3"]])
    src = _write(tmp_path / "in.csv", ["review"], [["좋아요 최고"], [nfd]])
    out = tmp_path / "o.csv"
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, human_labels=str(log))
    assert _read(out)["label"].tolist() == ["neutral", "neutral"] and s.human_conflicts == 1


def test_texts_that_are_numbers_match_as_label_reads_them(tmp_path, tiny_classifier):
    """A Parquet labels file whose text column holds integers (ids used as texts, codes): read as label reads a
    cell, by its digits."""
    pd.DataFrame({"text": [1234, 5678], "label": ["positive", "negative"]}).to_parquet(tmp_path / "h.parquet")
    src = _write(tmp_path / "in.csv", ["review"], [["1234"], ["99"]])
    out = tmp_path / "o.csv"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False,
               human_labels=str(tmp_path / "h.parquet"))
    assert _read(out)["label_source"].tolist() == ["human", "model"]


def test_the_newest_labelled_set_and_its_own_source_column_are_read():
    """A file labelled again (pred2_* after pred_*): the analyst's labels are the newest set that carries them, and
    a label_source belongs to a run only when it follows that run's status column."""
    from koelectra_kit.io.labelcols import written_by_label

    first = ["review", "label", "pred_label", "pred_confidence", "pred_status", "label_source", "model_label"]
    plain = ["pred2_label", "pred2_confidence", "pred2_status"]
    assert written_by_label(first) == ("pred_label", "label_source")
    # run 2 without human labels: run 1's set still carries the analyst's answers
    assert written_by_label(first + plain) == ("pred_label", "label_source")
    assert written_by_label(first + plain + ["pred_label_source", "pred_model_label"]) == ("pred2_label",
                                                                                        "pred_label_source")
    assert written_by_label(["review", "label", "confidence", "status", *plain]) == ("pred2_label", None)
    assert written_by_label(["review", "label"]) is None


def test_a_bad_label_in_a_workbook_is_named_by_the_row_excel_shows(tmp_path, tiny_classifier, sample_dir):
    """Header in row 1, an empty row 3: the bad label is in Excel's row 4 (counted under the header, "row 2")."""
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    for r, row in ((1, ["text", "label"]), (2, ["좋아요", "positive"]), (4, ["별로", "great"])):
        for c, v in enumerate(row, 1):
            wb.active.cell(r, c, v)
    wb.save(tmp_path / "labels.xlsx")
    with pytest.raises(InputError, match=r"labels\.xlsx: row 4: 'great': not one of the model's labels"):
        label_file(None, sample_dir / "reviews_unlabelled.csv", tmp_path / "o.csv", "review",
                   classifier=tiny_classifier, progress=False, human_labels=str(tmp_path / "labels.xlsx"))
