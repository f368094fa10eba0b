"""The bad-input matrix, second sweep: distill, evaluate, export, label-merge, tokenizer, quickstart and app inputs
that used to escape (a traceback, a silently wrong run, or a file lost) now give one ``error:`` line and exit 2,
with nothing written and every input left as it was."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.test_bad_input import assert_one_line_error, discriminator_dir, run_cli  # noqa: F401 (a fixture)

TINY_FT = Path(__file__).resolve().parent.parent / "configs" / "finetune" / "tiny.yaml"
TINY_PRE = TINY_FT.parent.parent / "pretrain" / "tiny.yaml"
BINARY = bytes(range(256)) * 8  # no run of text in it: a few "lines", each undecodable


def distill_argv(sample_dir, teacher, student, out, *overrides):
    return ["distill", f"teachers=[{teacher}]", f"transfer={sample_dir / 'reviews_unlabelled.csv'}",
            f"student={student}", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "progress=false",
            "max_length=32", *overrides]  # (the tiny students' positions: 64)


# ---------------------------------------------------------------------------------------------
# numbers that are not numbers: nan passed every range check and trained on NaN
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, needle", [
    (["distill", "temperature=nan"], "temperature"),
    (["distill", "alpha=inf"], "alpha"),
    (["distill", "teachers=[a,tfidf]", "teacher_weights=[.nan, 1]"], "teacher_weights[0]"),
    (["finetune", "--config", str(TINY_FT), "lr=nan"], "lr"),
    (["pretrain", "--config", str(TINY_PRE), "corpus=a.txt", "out=o", "max_minutes=nan", "--print-config"],
     "max_minutes"),
])
def test_non_finite_numbers_are_refused(capsys, argv, needle):
    rc, _, err = run_cli(capsys, *argv)
    assert_one_line_error(rc, err, needle, "finite")


# ---------------------------------------------------------------------------------------------
# distill
# ---------------------------------------------------------------------------------------------


def test_distill_refuses_a_discriminator_teacher(capsys, tmp_path, sample_dir, discriminator_dir,
                                                 tiny_classifier_dir):
    """Was "labels are not in the label set ['LABEL_0', 'LABEL_1']" (and with labels=[LABEL_0,LABEL_1], a student
    taught by a random head)."""
    out = tmp_path / "o"
    rc, _, err = run_cli(capsys, *distill_argv(sample_dir, discriminator_dir, tiny_classifier_dir, out))
    assert_one_line_error(rc, err, str(discriminator_dir), "no trained classification head")
    assert not out.exists()


def test_distill_one_teacher_spelled_two_ways(capsys, tmp_path, tiny_classifier_dir):
    rc, _, err = run_cli(capsys, "distill", f"teachers=[{tiny_classifier_dir},{tiny_classifier_dir}/]",
                         "transfer=t.txt", "student=s", "train=t.csv", f"out={tmp_path / 'o'}")
    assert_one_line_error(rc, err, "each teacher once")


@pytest.mark.parametrize("key", ["transfer", "exclude"])
def test_distill_binary_transfer_or_exclude_file(capsys, tmp_path, sample_dir, tiny_classifier_dir, key):
    """A short binary file was read as a few U+FFFD texts (a warning) and the student trained on them."""
    bad = tmp_path / "blob.txt"
    bad.write_bytes(BINARY)
    out = tmp_path / "o"
    argv = distill_argv(sample_dir, tiny_classifier_dir, tiny_classifier_dir, out)
    argv = [f"transfer={bad}" if a.startswith("transfer=") else a for a in argv] if key == "transfer" else \
        [*argv, f"exclude=[{bad}]"]
    rc, _, err = run_cli(capsys, *argv)
    assert rc == 2 and err.strip().splitlines()[-1].startswith(f"error: {bad}: "), err
    assert "not valid utf-8" in err and "Traceback" not in err
    assert not out.exists() and not out.with_name("o.work").exists()
    assert bad.read_bytes() == BINARY


def test_tokenizer_train_binary_input(capsys, tmp_path):
    bad = tmp_path / "blob.txt"
    bad.write_bytes(BINARY)
    rc, _, err = run_cli(capsys, "tokenizer", "train", f"input={bad}", f"out={tmp_path / 't'}", "presplit=none",
                         "progress=false")
    assert_one_line_error(rc, err, str(bad), "not valid utf-8")
    assert not (tmp_path / "t").exists()


def test_distill_keeps_a_foreign_work_folder(capsys, tmp_path, sample_dir, tiny_classifier_dir):
    """OUT.work is deleted when a run starts over: a folder of that name that isn't a run's was deleted with it."""
    out = tmp_path / "student"
    work = tmp_path / "student.work"
    work.mkdir()
    (work / "notes.txt").write_text("keep me", encoding="utf-8")
    rc, _, err = run_cli(capsys, *distill_argv(sample_dir, tiny_classifier_dir, tiny_classifier_dir, out))
    assert_one_line_error(rc, err, str(work), "not a distill run's work folder")
    assert (work / "notes.txt").read_text(encoding="utf-8") == "keep me" and not out.exists()


def test_distill_checks_the_student_before_the_teachers(capsys, tmp_path, sample_dir, tiny_classifier_dir):
    """Was "cannot load a tokenizer from ...: ... not a valid JSON file", after every teacher had labelled."""
    student = tmp_path / "student.txt"
    student.write_text("not a model", encoding="utf-8")
    rc, _, err = run_cli(capsys, *distill_argv(sample_dir, tiny_classifier_dir, student, tmp_path / "o"))
    assert_one_line_error(rc, err, f"student={student} is a file")
    assert "teacher" not in err


# ---------------------------------------------------------------------------------------------
# out= holding what the run reads
# ---------------------------------------------------------------------------------------------


@pytest.fixture
def old_output(tmp_path, sample_dir):
    """A previous output folder (eval.json: ours to replace) that also holds the run's data files."""
    out = tmp_path / "old"
    out.mkdir()
    (out / "eval.json").write_text("{}", encoding="utf-8")
    shutil.copy(sample_dir / "reviews_labelled.csv", out / "train.csv")
    shutil.copy(sample_dir / "reviews_unlabelled.csv", out / "transfer.csv")
    shutil.copy(sample_dir / "reviews_labelled.csv", out / "predictions.csv")
    return out


def _files(folder: Path) -> dict:
    return {p.name: p.read_bytes() for p in folder.iterdir()}


def test_finetune_and_distill_refuse_an_out_that_holds_their_data(capsys, old_output, sample_dir,
                                                                   tiny_classifier_dir):
    """out= is replaced whole at the end: the train and transfer files in it were deleted with it."""
    before = _files(old_output)
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={tiny_classifier_dir}",
                         f"train={old_output / 'train.csv'}", f"out={old_output}", "progress=false")
    assert_one_line_error(rc, err, f"train={old_output / 'train.csv'}", "would be replaced")
    rc, _, err = run_cli(capsys, "distill", f"teachers=[{tiny_classifier_dir}]",
                         f"transfer={old_output / 'transfer.csv'}", f"student={tiny_classifier_dir}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={old_output}", "progress=false")
    assert_one_line_error(rc, err, f"transfer[0]={old_output / 'transfer.csv'}")
    assert _files(old_output) == before


def test_evaluate_and_baseline_do_not_write_over_their_input(capsys, old_output, tiny_classifier_dir):
    before = _files(old_output)
    rc, _, err = run_cli(capsys, "evaluate", "--model", tiny_classifier_dir, "--data",
                         old_output / "predictions.csv", "--out", old_output)
    assert_one_line_error(rc, err, "data=", "predictions.csv")
    shutil.copy(old_output / "train.csv", old_output / "data_report.json")
    before["data_report.json"] = (old_output / "data_report.json").read_bytes()
    rc, _, err = run_cli(capsys, "baseline", "--train", old_output / "train.csv", "--out", old_output,
                         f"dev={old_output / 'data_report.json'}")
    assert_one_line_error(rc, err, "dev=", "data_report.json")
    assert _files(old_output) == before


# ---------------------------------------------------------------------------------------------
# export, label-merge, app, quickstart
# ---------------------------------------------------------------------------------------------


def test_export_refuses_a_folder_without_a_tokenizer(capsys, tmp_path, tiny_classifier_dir):
    """Was an .onnx nobody can run through the toolkit (Classifier.load and label need the folder's tokenizer)."""
    pytest.importorskip("onnxruntime")
    model = tmp_path / "clf"
    shutil.copytree(tiny_classifier_dir, model, ignore=shutil.ignore_patterns("*token*", "vocab.txt"))
    rc, _, err = run_cli(capsys, "export", "--model", model, "--onnx", "--out", tmp_path / "x")
    assert_one_line_error(rc, err, str(model), "no usable tokenizer")
    assert not (tmp_path / "x").exists()


def test_label_merge_into_a_folder(capsys, tmp_path):
    """With --overwrite it wrote OUTPUT.merging, then failed on the rename ("Is a directory") and left it there."""
    (tmp_path / "o.csv").mkdir()
    for k in (1, 2):
        (tmp_path / f"o.shard-{k}-of-2.csv").write_text(f"id,label\n{k},positive\n", encoding="utf-8")
    for flags in ([], ["--overwrite"]):
        rc, _, err = run_cli(capsys, "label-merge", tmp_path / "o.csv", *flags)
        assert_one_line_error(rc, err, "is a folder")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["o.csv", "o.shard-1-of-2.csv", "o.shard-2-of-2.csv"]


@pytest.mark.parametrize("size", ["0", "-5"])
def test_app_upload_size_below_one_byte_names_the_flag(capsys, tiny_classifier_dir, size):
    """Was "max_upload_bytes=-5242880 must be at least 1": a key the user never typed."""
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    rc, _, err = run_cli(capsys, "app", "--model", tiny_classifier_dir, "--max-upload-mb", size)
    assert_one_line_error(rc, err, f"--max-upload-mb {float(size)}")


def test_app_settings_batch_size_and_workdir(tmp_path):
    """Checked with the other options, before the model loads: a batch label refuses (an OOM kill mid-job), and a
    file as --workdir (was "File exists (PATH)")."""
    from koelectra_kit.app.settings import AppSettings
    from koelectra_kit.errors import ConfigError

    with pytest.raises(ConfigError, match="batch_size=100000"):
        AppSettings(model="m", batch_size=100000).validate()
    (tmp_path / "f").write_text("x", encoding="utf-8")
    with pytest.raises(ConfigError, match="workdir=.* is a file"):
        AppSettings(model="m", workdir=str(tmp_path / "f")).validate()


def test_quickstart_checks_the_labelled_file_before_the_first_step(capsys, tmp_path):
    """Labels outside the set were found by fine-tuning, after the tokenizer and pretraining had run."""
    labelled = tmp_path / "l.csv"
    labelled.write_text("review,label\n좋아요,good\n별로예요,bad\n", encoding="utf-8")
    out = tmp_path / "qs"
    rc, printed, err = run_cli(capsys, "quickstart", "--out", out, "--labelled", labelled)
    assert_one_line_error(rc, err, str(labelled), "'good'")
    assert not out.exists() and "===" not in printed


def test_encoding_advice_names_the_commands_own_options(capsys, tmp_path, tiny_classifier_dir):
    """A file in no encoding the readers know: finetune, evaluate and baseline name their encoding= key, not
    label's --encoding-errors (a flag they do not have)."""
    bad = tmp_path / "bad.csv"
    bad.write_bytes(b"text,label\n\xff\xfe\xfd,positive\n")
    for argv in (["finetune", f"model={tiny_classifier_dir}", f"train={bad}", "max_length=32", f"out={tmp_path}/o"],
                 ["evaluate", "--model", tiny_classifier_dir, "--data", bad],
                 ["baseline", "--train", bad]):
        rc, _, err = run_cli(capsys, *argv)
        assert_one_line_error(rc, err, "encoding=cp949")
        assert "--encoding" not in err, (argv, err)
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", bad, "--text-column", "text",
                         "--output", tmp_path / "l.csv")
    assert_one_line_error(rc, err, "--encoding-errors replace")


def test_a_wrong_encoding_given_for_a_utf8_file_says_it_reads_as_utf8(capsys, tmp_path, tiny_classifier_dir):
    """encoding=cp949 given for a UTF-8 file: the hint was "pass the file's encoding (e.g. encoding=cp949)", the very
    value given; the detection can tell the file is UTF-8, and the error says so."""
    good = tmp_path / "u.csv"
    good.write_text("review,label\n좋아요,positive\n별로예요,negative\n", encoding="utf-8")
    for argv in (["baseline", "--train", good, "encoding=cp949"],
                 ["evaluate", "--model", tiny_classifier_dir, "--data", good, "encoding=cp949"]):
        rc, _, err = run_cli(capsys, *argv)
        assert_one_line_error(rc, err, "line 2 is not valid cp949", "reads as UTF-8", "leave the encoding out")
        assert "e.g. encoding=cp949" not in err, (argv, err)


@pytest.mark.parametrize("encoding", ["latin-1", "cp1252"])
def test_a_single_byte_encoding_given_for_a_utf8_file_is_refused(capsys, tmp_path, tiny_classifier_dir, encoding):
    """Every byte decodes in latin-1: finetune trained on garbled Hangul (159 of 270 texts cut at max_length), and
    label labelled it, exit 0. A UTF-8 file with Korean in it is told apart (a cp949 text is next to never UTF-8)."""
    good = tmp_path / "u.csv"
    good.write_text("review,label\n좋아요,positive\n별로예요,negative\n", encoding="utf-8")
    for argv in (["baseline", "--train", good, f"encoding={encoding}"],
                 ["label", "--model", tiny_classifier_dir, "--input", good, "--output", tmp_path / "o.csv",
                  "--encoding", encoding]):
        rc, _, err = run_cli(capsys, *argv)
        assert_one_line_error(rc, err, f"encoding '{encoding}' given, but the file is UTF-8", "leave the encoding out")
    ascii_only = tmp_path / "a.csv"  # nothing to garble: as given
    ascii_only.write_text("review,label\ngood,positive\nbad,negative\n", encoding="utf-8")
    from koelectra_kit.io.tables import detect_encoding

    assert detect_encoding(ascii_only, encoding) == encoding
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.csv", "u.csv"]


def test_quickstart_refuses_an_undecodable_unlabelled_file_before_the_first_step(capsys, tmp_path):
    bad = tmp_path / "to_label.csv"
    bad.write_bytes(b"review\n\xff\xfe\xfd\n")
    rc, _, err = run_cli(capsys, "quickstart", "--unlabelled", bad, "--out", tmp_path / "qs")
    assert_one_line_error(rc, err, "label.encoding=cp949", "label.encoding_errors=replace")
    assert not (tmp_path / "qs").exists()  # was found at the label step, after tokenizer, pretraining, fine-tuning


def test_a_column_that_differs_in_spaces_or_case_is_suggested(capsys, tmp_path, tiny_classifier_dir):
    """An Excel header typed ' review ' looks like 'review' in every program but this message."""
    src = tmp_path / "in.csv"
    src.write_text("id, review \n1,좋아요\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--text-column", "review ")
    assert_one_line_error(rc, err, "no column 'review '", "did you mean ' review '?")
    # with no --text-column, the usual names are looked for as finetune and evaluate look (case and spaces aside)
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--no-progress")
    assert rc == 0 and "has no column 'review': labelling its column ' review '" in err, err
    (tmp_path / "o.csv").unlink()
    src.write_text("Review,label\n좋아요,positive\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "evaluate", "--model", tiny_classifier_dir, "--data", src, "--text-column", "review")
    assert_one_line_error(rc, err, "did you mean 'Review'?")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--text-column", "nope")
    assert_one_line_error(rc, err, "no column 'nope'")
    assert "did you mean" not in err and not (tmp_path / "o.csv").exists()


# ---------------------------------------------------------------------------------------------
# label: the chart and the text column (session 13)
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("plot, needle", [("in.csv", "ending in .png"), ("chart.txt", "ending in .png"),
                                          ("charts.png", "is a folder")])
def test_label_plot_path_is_checked_before_labelling(capsys, tmp_path, tiny_classifier_dir, plot, needle):
    """--plot in.csv replaced the input with a PNG after labelling it (exit 0); a folder failed after the whole
    file was labelled."""
    src = tmp_path / "in.csv"
    src.write_text("review\n좋아요\n별로\n", encoding="utf-8")
    (tmp_path / "charts.png").mkdir()
    before = src.read_bytes()
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--plot", tmp_path / plot, "--no-progress")
    assert_one_line_error(rc, err, needle)
    assert src.read_bytes() == before and not list(tmp_path.glob("*o.csv*"))


def test_a_column_of_numbers_is_not_review_text(capsys, tmp_path, tiny_classifier_dir):
    """--text-column rating labelled each rating as a review (exit 0, confident labels for "5" and "1"); evaluate
    (and finetune, baseline, distill: the same reader) scored them."""
    src = tmp_path / "in.csv"
    src.write_text("review,rating\n좋아요,5\n별로,1\n그냥,3.5\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--text-column", "rating", "--no-progress")
    assert_one_line_error(rc, err, "'rating' holds only numbers", "name the text column", "review")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]
    labelled = tmp_path / "labelled.csv"
    labelled.write_text("id,label\n1,positive\n2,negative\n3,positive\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "evaluate", "--model", tiny_classifier_dir, "--data", labelled, "--text-column", "id")
    assert_one_line_error(rc, err, "'id' holds only numbers")
    # a real text column with a few numbers among the reviews is labelled
    src.write_text("review\n10\n최고 10점\n9\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--no-progress")
    assert rc == 0, err


def test_a_column_of_dates_or_ids_or_mostly_empty_is_not_review_text(capsys, tmp_path, tiny_classifier_dir):
    """Issue 41: a file with only id,rating,date was labelled on `date` (60 dates, exit 0)."""
    src = tmp_path / "in.csv"
    out = tmp_path / "o.csv"
    src.write_text("id,rating,date\n" + "".join(f"A{i:03d},{i % 5},2024-01-{i % 28 + 1:02d}\n" for i in range(60)),
                   encoding="utf-8")
    for column, needle in (("date", "'date' holds numbers, dates or ids"), ("id", "'id' holds numbers, dates or ids")):
        rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output", out,
                             "--text-column", column, "--no-progress")
        assert_one_line_error(rc, err, needle, "name the text column", "rating")
    src.write_text("review,id\n" + "좋아요,1\n" + ",2\n" * 30, encoding="utf-8")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output", out,
                         "--no-progress")
    assert_one_line_error(rc, err, "'review' is empty in 30 of its first 31 rows", "--allow-mostly-empty")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # nothing written
    # the way past for an export where few rows carry a comment: labelled, the empty rows flagged
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output", out,
                         "--no-progress", "--allow-mostly-empty")
    assert rc == 0, err
    import pandas as pd
    got = pd.read_csv(out, keep_default_na=False)
    assert len(got) == 31 and (got["status"] == "empty").sum() == 30 and got["label"].iloc[0] != ""


def test_a_txt_file_is_one_review_per_line_with_no_header(capsys, tmp_path, tiny_classifier_dir):
    """Issue 41: a .txt of 40 reviews was read as a TSV with a header: 39 rows, the first review lost."""
    import pandas as pd

    src = tmp_path / "reviews.txt"
    src.write_text("\ufeff" + "".join(f"리뷰 {i}번 좋아요\n" for i in range(40)), encoding="utf-8")
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output",
                         tmp_path / "o.csv", "--no-progress")
    assert rc == 0, err
    got = pd.read_csv(tmp_path / "o.csv", encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert len(got) == 40 and got["text"].tolist() == [f"리뷰 {i}번 좋아요" for i in range(40)]
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", tmp_path / "o.csv", "--output",
                         tmp_path / "o.txt", "--text-column", "text", "--no-progress")
    assert_one_line_error(rc, err, "write .csv, .tsv or .jsonl")


@pytest.mark.parametrize("flags, needle", [
    ([], "every line holds 1 tab"),
    (["--text-column", "review"], "every line holds 1 tab"),
    (["--text-column", "nonsense"], "text column 'nonsense' names nothing"),
])
def test_a_table_saved_as_txt_is_refused_not_labelled_line_by_line(capsys, tmp_path, tiny_classifier_dir, flags,
                                                                   needle):
    """Excel's "Unicode Text" is a tab-separated table in a .txt (UTF-16): read as one review per line, its header
    was labelled as a review, its ids glued to each text, and --text-column was ignored. --format tsv reads it (an
    export without quoted cells), as --format csv --sep '\\t' does; --format txt labels each line as asked."""
    import pandas as pd

    src = tmp_path / "export.txt"
    src.write_text("id\treview\n101\t정말 재밌어요\n102\t최악이에요 돈 아까움\n", encoding="utf-16")
    out = tmp_path / "o.csv"
    base = ["label", "--model", tiny_classifier_dir, "--input", src, "--output", out, "--no-progress"]
    assert_one_line_error(*run_cli(capsys, *base, *flags)[::2], needle)
    assert not out.exists()
    assert run_cli(capsys, *base, "--format", "tsv", "--text-column", "review")[0] == 0
    assert pd.read_csv(out, encoding="utf-8-sig", dtype=str).review.tolist() == ["정말 재밌어요", "최악이에요 돈 아까움"]
    assert run_cli(capsys, *base, "--format", "txt", "--overwrite")[0] == 0
    assert len(pd.read_csv(out, encoding="utf-8-sig", dtype=str)) == 3


def test_an_excel_unicode_text_with_quoted_cells_is_refused_then_read_whole(capsys, tmp_path, tiny_classifier_dir):
    """Excel quotes a cell holding a line break, tab or quote: such a file's lines no longer all hold the header's
    tabs, so it was labelled line by line (the header a review, one review cut in two); and the advice, --format tsv,
    reads no quotes (a half review labelled ok, the other half a row of its own). Now refused while most lines hold
    the header's tabs, and the advice, --format csv --sep '\\t' (typed as is), reads the four rows whole."""
    import csv

    import pandas as pd

    src = tmp_path / "export.txt"
    rows = [["id", "review"], ["1", "첫줄 좋아요\n둘째줄 근데 배송이 최악"], ["2", '그는 "최고"라고 했다'],
            ["3", "정상 리뷰"], ["4", "탭\t포함"]]
    with open(src, "w", encoding="utf-16", newline="") as f:
        csv.writer(f, delimiter="\t", lineterminator="\r\n").writerows(rows)
    out = tmp_path / "o.csv"
    base = ["label", "--model", tiny_classifier_dir, "--input", src, "--output", out, "--no-progress"]
    rc, _, err = run_cli(capsys, *base)
    assert_one_line_error(rc, err, "4 of the first 6 lines hold 1 tab", "--format csv --sep '\\t'")
    assert not out.exists()
    assert run_cli(capsys, *base, "--format", "csv", "--sep", "\\t")[0] == 0
    got = pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert got.review.tolist() == [r[1] for r in rows[1:]] and set(got.status) == {"ok"}


@pytest.mark.parametrize("flags, needle", [
    (["--output-encoding", "rot13"], "output_encoding='rot13' is not an encoding of text files"),
    (["--output-encoding", "idna"], "output_encoding='idna' is not an encoding of text files"),
    (["--encoding", "hex"], "encoding='hex' is not an encoding of text files"),
    (["--device", "mps"], "device='mps': use auto, cpu, cuda or cuda:N"),
    (["--device", "meta"], "device='meta'"),
    (["--shard", "1/3", "--output-encoding", "utf-16-le"], "label-merge joins utf-8 or cp949 shards"),
])
def test_codecs_devices_and_shard_encodings_that_crashed_are_one_line(capsys, tmp_path, tiny_classifier_dir,
                                                                      sample_dir, flags, needle):
    """Each was a traceback (rot13: TypeError, and a 0-byte .partial left; mps: torch's RuntimeError; meta: a
    NotImplementedError hashing the weights) or, for utf-16-le shards, a merge that called them cut short."""
    out = tmp_path / "o.csv"
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input",
                         sample_dir / "reviews_unlabelled.csv", "--output", out, "--no-progress", *flags)
    assert_one_line_error(rc, err, needle)
    assert list(tmp_path.iterdir()) == []


def test_a_lone_surrogate_in_a_jsonl_is_one_line_or_u_fffd(capsys, tmp_path, tiny_classifier_dir, sample_tokenizer_dir):
    """"\\ud83d" alone (a tool cut an emoji in two) decodes to a str no encoder writes and the tokenizer refuses: a
    traceback mid-run (label, tokenizer words). Now one line naming the line, or with label's --encoding-errors
    replace, U+FFFD as for an undecodable byte (that row flagged, the others labelled)."""
    import json

    from koelectra_kit.cli import main

    data = tmp_path / "in.jsonl"
    data.write_text('{"review": "좋아요 \\ud83d 최고"}\n{"review": "별로 \\ud83d\\ude00"}\n', encoding="utf-8")
    out = tmp_path / "out.jsonl"
    label = ["label", "--model", str(tiny_classifier_dir), "--input", str(data), "--output", str(out), "--no-progress"]
    assert main(label) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {data}: line 1 holds '\\ud83d'") and err.count("\n") == 1, err
    assert not out.exists()
    assert main([*label, "--encoding-errors", "replace"]) == 0
    rows = [json.loads(line) for line in out.read_text(encoding="utf-8").splitlines()]
    assert rows[0]["review"] == "좋아요 \ufffd 최고" and rows[0]["status"].startswith("error: line 1")
    assert rows[1]["review"] == "별로 😀" and rows[1]["status"] == "ok"  # a whole pair is a character
    tok = shutil.copytree(sample_tokenizer_dir, tmp_path / "tok")
    capsys.readouterr()
    assert main(["tokenizer", "words", f"tokenizer={tok}", f"input={data}", "progress=false"]) == 2
    assert "line 1 holds '\\ud83d'" in capsys.readouterr().err


def test_evaluates_unknown_labels_are_mapped_onto_the_models_not_changed(capsys, tmp_path, tiny_classifier_dir):
    """evaluate has no labels= key (the model's labels are fixed): its unknown-label line said "change labels="."""
    from koelectra_kit.cli import main

    data = tmp_path / "test.csv"
    data.write_text("review,label\n좋아요,posi\n별로,negative\n", encoding="utf-8")
    assert main(["evaluate", "--model", str(tiny_classifier_dir), "--data", str(data)]) == 2
    err = capsys.readouterr().err
    assert "label_map={value: label} onto the model's labels" in err and "labels=" not in err.replace(
        "unknown_labels=", ""), err


def test_a_tfidf_folder_given_as_an_encoder_is_named_as_one(capsys, tmp_path, sample_dir):
    """Was "is not a model folder (no config.json)", for a folder that is the toolkit's own TF-IDF classifier."""
    from koelectra_kit.cli import main

    data = sample_dir / "reviews_labelled.csv"
    assert main(["baseline", f"train={data}", f"out={tmp_path / 'tfidf'}", "progress=false"]) == 0
    capsys.readouterr()
    rc = main(["finetune", "--config", "tiny", f"model={tmp_path / 'tfidf'}", f"train={data}",
               f"out={tmp_path / 'ft'}", "progress=false"])
    err = capsys.readouterr().err
    assert rc == 2 and "is a TF-IDF or ensemble classifier folder (classifier.json)" in err, err
    assert not (tmp_path / "ft").exists()


# ---------------------------------------------------------------------------------------------
# a model folder whose tokenizer has more tokens than the model's embedding (another tokenizer copied in)
# ---------------------------------------------------------------------------------------------


def test_a_tokenizer_larger_than_the_embedding_is_one_error_line(capsys, tmp_path, tiny_classifier_dir, sample_dir):
    """finetune model= such a folder was an IndexError traceback at the first step; label, one mid-file."""
    from transformers import AutoModelForSequenceClassification

    folder = tmp_path / "mixed"
    shutil.copytree(tiny_classifier_dir, folder)
    model = AutoModelForSequenceClassification.from_pretrained(folder)
    rows = model.get_input_embeddings().num_embeddings
    model.resize_token_embeddings(rows - 40)  # as if a larger vocabulary's tokenizer had been copied over
    model.save_pretrained(folder)
    needle = f"has {rows - 40:,} rows: not the vocabulary"
    capsys.readouterr()  # transformers' own progress lines above
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={folder}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'ft'}", "epochs=1")
    assert_one_line_error(rc, err, f"model={folder}: its tokenizer has", needle)
    rc, _, err = run_cli(capsys, "label", "--model", folder, "--input", sample_dir / "reviews_unlabelled.csv",
                         "--output", tmp_path / "o.csv", "--no-progress")
    assert_one_line_error(rc, err, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["mixed"]


def test_another_tokenizer_of_no_more_tokens_copied_beside_the_weights_is_refused(capsys, tmp_path, sample_dir,
                                                                                   tiny_classifier_dir):
    """Fewer tokens, or as many other ones: every id meant another token, finetune and label ran, exit 0. The
    folders the toolkit writes record their vocabulary's digest in config.json."""
    import json

    from koelectra_kit.cli import main

    assert main(["finetune", "--config", "tiny", f"model={tiny_classifier_dir}", "epochs=1", "min_steps=2",
                 f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'ft'}", "plots=false",
                 "ensemble=none", "references=false"]) == 0
    kit = json.loads((tmp_path / "ft" / "config.json").read_text())["koelectra_kit"]
    assert len(kit["vocab_digest"]) == 16
    assert main(["tokenizer", "train", "--config", "tiny", f"input={sample_dir / 'comments.txt'}",
                 f"out={tmp_path / 'tok'}", "vocab_size=1000", "progress=false"]) == 0
    for name in ("tokenizer.json", "vocab.txt", "koelectra_tokenizer.json"):
        if (tmp_path / "tok" / name).is_file():
            shutil.copy(tmp_path / "tok" / name, tmp_path / "ft" / name)
    capsys.readouterr()
    needle = "its tokenizer is not the one the model was saved with"
    rc, _, err = run_cli(capsys, "label", "--model", tmp_path / "ft", "--input", sample_dir / "reviews_unlabelled.csv",
                         "--output", tmp_path / "o.csv", "--no-progress")
    assert_one_line_error(rc, err, needle)
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={tmp_path / 'ft'}", "epochs=1",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'ft2'}")
    assert_one_line_error(rc, err, f"model={tmp_path / 'ft'}: {needle}")


def test_a_tab_separated_corpus_named_csv_says_so_on_a_line_of_its_own(capsys, tmp_path, sample_dir):
    """pretrain and tokenizer train read a TSV named .csv as one column and said "no column 'document'; columns
    present: id<TAB>...<TAB>document" (naming the column it called missing), written after the pre-split's progress
    bar on the bar's line, so that no line began with error:."""
    lines = ["id\tdocument"] + [f"{i}\t{t}" for i, t in enumerate(
        (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()[:50])]
    corpus = tmp_path / "tsv_as.csv"
    corpus.write_text("\n".join(lines) + "\n", encoding="utf-8")
    for argv in (["pretrain", "--config", TINY_PRE, f"corpus={corpus}", "text_column=document",
                  f"out={tmp_path / 'p'}", f"cache_dir={tmp_path / 'c'}"],
                 ["tokenizer", "train", "--config", "tiny", f"input={corpus}", f"out={tmp_path / 't'}"]):
        rc, _, err = run_cli(capsys, *argv)
        last = err.strip().splitlines()[-1]
        assert rc == 2 and last.startswith("error: ") and "holding tabs" in last and "name the file .tsv" in last, err
        assert "Traceback" not in err


def test_a_pretraining_runs_folder_as_model_names_the_encoder_in_it(capsys, tmp_path):
    """finetune model=runs/pt (the run folder, which pretrain init= takes) was "not a model folder (no config.json)"
    with no word of runs/pt/discriminator."""
    run = tmp_path / "pt"
    (run / "discriminator").mkdir(parents=True)
    (run / "discriminator" / "config.json").write_text("{}", encoding="utf-8")
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={run}", "train=x.csv", f"out={tmp_path / 'o'}")
    assert_one_line_error(rc, err, "is not a model folder (no config.json)", f"the model in it is {run / 'discriminator'}")


def test_prepare_names_the_folder_it_writes_and_the_trainer_prints_no_blank_lines(capsys, tmp_path, sample_dir):
    """prepare logged the tokenizer as trained into its hidden staging folder (.NAME.partial-...), and the tokenizer
    trainer's bars printed three empty lines where stderr is no terminal (a log file)."""
    out = tmp_path / "prep"
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY_PRE, f"corpus={sample_dir / 'comments.txt'}",
                         f"out={out}", f"cache_dir={tmp_path / 'c'}")
    assert rc == 0, err
    assert "tokenizer (pre-split: kiwi_word) in" in err and f"-> {out / 'tokenizer'}\n" in err and ".partial" not in err
    assert "" not in err.rstrip("\n").split("\n"), repr(err)  # no empty line


def test_cpu_ranks_whose_threads_outnumber_the_cores_are_refused(capsys, tmp_path, sample_dir):
    """pretrain --nproc 2 threads=2 on 2 cores ran at 2,965 tokens/s against ~10,000 with the cores shared out."""
    import os

    cores = os.cpu_count() or 1
    if cores < 2:
        pytest.skip("--nproc 2 needs 2 cores")
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY_PRE, f"corpus={sample_dir / 'comments.txt'}",
                         f"out={tmp_path / 'r'}", f"threads={cores}", "device=cpu", "--nproc", "2")
    assert_one_line_error(rc, err, f"threads={cores} on each of --nproc 2 ranks is {2 * cores} threads")
    assert not (tmp_path / "r").exists()


def test_evaluate_says_when_a_tfidf_folder_or_an_ensembles_member_was_fitted_on_the_rows(capsys, tmp_path,
                                                                                          sample_dir):
    """evaluate of a TF-IDF folder on its own training file: 0.90 accuracy against 0.58 held out, no word (an
    encoder folder had the warning)."""
    labelled = sample_dir / "reviews_labelled.csv"
    assert run_cli(capsys, "baseline", "--train", labelled, "--out", tmp_path / "tf")[0] == 0
    rc, _, err = run_cli(capsys, "evaluate", "--model", tmp_path / "tf", "--data", labelled, "--no-plots")
    assert rc == 0 and f"rows evaluated are among the rows {tmp_path / 'tf'} was fitted on (from {labelled})" in err
