"""The bad-input matrix: every hostile input a user can give gets one ``error:`` line and exit 2 (no traceback,
no output file) or a labelled file where every input row appears exactly once, in order, with its columns
unchanged. Commands run in-process through the CLI, as a user types them."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from koelectra_kit.cli import main

GOOD_CSV = "id,review\n1,배송 빠르고 좋아요\n2,별로예요 ㅠㅠ\n3,그냥 그래요\n"


def run_cli(capsys, *argv):
    """(exit status, stdout, stderr) of one command."""
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_one_line_error(rc, err, *needles):
    assert rc == 2, err
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert "Traceback" not in err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def read_out(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


@pytest.fixture
def good_csv(tmp_path):
    p = tmp_path / "in.csv"
    p.write_text(GOOD_CSV, encoding="utf-8")
    return p


@pytest.fixture
def label(capsys, tiny_classifier_dir, tmp_path):
    """label(input, *flags, output=...) -> (rc, out, err); --model and --no-progress filled in."""
    def run(src, *flags, output=None, model=tiny_classifier_dir):
        output = output or tmp_path / "out.csv"
        return run_cli(capsys, "label", "--model", model, "--input", src, "--output", output, "--no-progress",
                       "--precision", "fp32", *flags)
    return run


@pytest.fixture(scope="session")
def discriminator_dir(tmp_path_factory, sample_tokenizer):
    """What pretraining exports: an ElectraForPreTraining with no classification head."""
    import torch
    from transformers import ElectraConfig, ElectraForPreTraining

    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=sample_tokenizer.vocab_size, hidden_size=32, embedding_size=32,
                        num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, pad_token_id=0)
    out = tmp_path_factory.mktemp("disc") / "discriminator"
    ElectraForPreTraining(cfg).save_pretrained(out)
    sample_tokenizer.save(out)
    return out


# ---------------------------------------------------------------------------------------------
# label: files and folders
# ---------------------------------------------------------------------------------------------


def test_missing_input(label, tmp_path):
    rc, _, err = label(tmp_path / "nope.csv")
    assert_one_line_error(rc, err, "file not found")
    assert not (tmp_path / "out.csv").exists()


def test_input_is_a_folder(label, tmp_path):
    rc, _, err = label(tmp_path)
    assert_one_line_error(rc, err, "is a directory")


def test_empty_input_file(label, tmp_path):
    (tmp_path / "e.csv").write_bytes(b"")
    rc, _, err = label(tmp_path / "e.csv")
    assert_one_line_error(rc, err, "empty")
    assert not (tmp_path / "out.csv").exists()


def test_header_only_gives_header_only_output(label, tmp_path):
    (tmp_path / "h.csv").write_text("id,review\n", encoding="utf-8")
    rc, out, err = label(tmp_path / "h.csv")
    assert rc == 0, err
    got = read_out(tmp_path / "out.csv")
    assert len(got) == 0 and list(got.columns)[:2] == ["id", "review"] and "status" in got.columns


def test_unknown_text_column(label, good_csv):
    rc, _, err = label(good_csv, "--text-column", "text")
    assert_one_line_error(rc, err, "no column 'text'", "'review'")


def test_empty_text_column_option(label, good_csv):
    rc, _, err = label(good_csv, "--text-column", "")
    assert_one_line_error(rc, err, "text_column")


def test_duplicated_text_column(label, tmp_path):
    (tmp_path / "d.csv").write_text("review,review\n좋아요,싫어요\n", encoding="utf-8")
    rc, _, err = label(tmp_path / "d.csv")
    assert_one_line_error(rc, err, "2 columns are named 'review'")


def test_unknown_extension(label, tmp_path):
    (tmp_path / "r.xyz").write_text(GOOD_CSV, encoding="utf-8")
    rc, _, err = label(tmp_path / "r.xyz")
    assert_one_line_error(rc, err, "can't tell the format")


def test_damaged_parquet(label, tmp_path):
    (tmp_path / "r.parquet").write_bytes(b"PAR1 this is not parquet")
    rc, _, err = label(tmp_path / "r.parquet")
    assert_one_line_error(rc, err, "not a readable Parquet file")


def test_binary_file_named_csv(label, tmp_path):
    (tmp_path / "img.csv").write_bytes(bytes(range(256)) * 40)
    rc, _, err = label(tmp_path / "img.csv")
    assert_one_line_error(rc, err, "not UTF-8 or cp949", "line")


def test_output_folder_missing(label, good_csv, tmp_path):
    rc, _, err = label(good_csv, output=tmp_path / "no" / "such" / "out.csv")
    assert_one_line_error(rc, err, "does not exist")


def test_output_folder_read_only(label, good_csv):
    if not Path("/sys").is_dir():
        pytest.skip("needs a read-only mount (/sys) to write into")
    rc, _, err = label(good_csv, output="/sys/out.csv")
    assert_one_line_error(rc, err, "can't write in folder /sys")


def test_output_is_a_folder(label, good_csv, tmp_path):
    (tmp_path / "o.csv").mkdir()
    rc, _, err = label(good_csv, output=tmp_path / "o.csv")
    assert_one_line_error(rc, err, "is a folder")


def test_output_same_as_input(label, good_csv):
    before = good_csv.read_bytes()
    rc, _, err = label(good_csv, output=good_csv)
    assert_one_line_error(rc, err, "must differ")
    assert good_csv.read_bytes() == before


def test_parquet_output_refused(label, good_csv, tmp_path):
    rc, _, err = label(good_csv, output=tmp_path / "o.parquet")
    assert_one_line_error(rc, err, "parquet output")


def test_existing_output_needs_overwrite(label, good_csv, tmp_path):
    out = tmp_path / "o.csv"
    out.write_text("precious\n", encoding="utf-8")
    rc, _, err = label(good_csv, output=out)
    assert_one_line_error(rc, err, "exists", "--overwrite")
    assert out.read_text(encoding="utf-8") == "precious\n"
    rc, _, err = label(good_csv, "--overwrite", output=out)
    assert rc == 0 and len(read_out(out)) == 3


# ---------------------------------------------------------------------------------------------
# label: options
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("flags, needle", [
    (["--batch-size", "0"], "batch_size=0"),
    (["--batch-size", "-5"], "batch_size=-5"),
    (["--batch-size", "many"], "invalid int value"),
    (["--batch-size", "100000"], "more than 4096"),
    (["--chunk-rows", "0"], "chunk_rows=0"),
    (["--threads", "0"], "threads=0"),
    (["--encoding", "klingon"], "not an encoding"),
    (["--output-encoding", "klingon"], "not an encoding"),
    (["--sep", ";;"], "one character"),
    (["--sep", '"'], "a quote or a line break cannot separate columns"),
    (["--sep", "\n"], "a quote or a line break cannot separate columns"),
    (["--format", "xlsx"], "invalid choice"),
    (["--precision", "fp8"], "invalid choice"),
    (["--resume", "--overwrite"], "contradict"),
    (["bacth_size=8"], "did you mean batch_size"),
    (["--config", "/no/such/label.yaml"], "config file not found"),
])
def test_bad_options(label, good_csv, tmp_path, flags, needle):
    rc, _, err = label(good_csv, *flags)
    assert_one_line_error(rc, err, needle)
    assert not (tmp_path / "out.csv").exists()


def test_config_file_and_overrides_are_the_same_options(label, good_csv, tmp_path):
    cfg = tmp_path / "label.yaml"
    cfg.write_text("batch_size: 2\nchunk_rows: 1\n", encoding="utf-8")
    rc, _, err = label(good_csv, "--config", cfg, "text_column=review")
    assert rc == 0, err
    assert read_out(tmp_path / "out.csv")["id"].tolist() == ["1", "2", "3"]


# ---------------------------------------------------------------------------------------------
# label: encodings
# ---------------------------------------------------------------------------------------------


def test_encoding_that_does_not_match_names_the_line(label, tmp_path):
    src = tmp_path / "u.csv"
    src.write_text("id,review\n1,좋아요\n2,최고예요\n", encoding="utf-8")
    rc, _, err = label(src, "--encoding", "cp949")
    assert_one_line_error(rc, err, "line 2", "cp949")


def test_one_cp949_line_in_utf8_names_the_line_and_replace_labels_the_rest(label, tmp_path):
    src = tmp_path / "mixed.csv"
    src.write_bytes("id,review\n1,좋아요\n".encode() + "2,별로예요\n".encode("cp949") + "3,최고\n".encode())
    rc, _, err = label(src)
    assert_one_line_error(rc, err, "line 3", "--encoding-errors replace")
    rc, _, err = label(src, "--encoding-errors", "replace")
    assert rc == 0, err
    got = read_out(tmp_path / "out.csv")
    assert got["id"].tolist() == ["1", "2", "3"]
    assert got["status"].tolist()[0] == got["status"].tolist()[2] == "ok"
    assert got["status"].tolist()[1].startswith("error: line 3 has bytes invalid")



def test_replace_reads_a_cp949_file_with_a_broken_byte_as_cp949(label, tmp_path):
    """--encoding-errors replace without --encoding guessed UTF-8 for any file neither encoding reads whole, so a
    cp949 export with one broken byte came out as U+FFFD throughout: every row flagged, none labelled. The encoding
    that reads further is taken (``tables.likeliest_encoding``), and only the broken line is flagged."""
    src = tmp_path / "cp.csv"
    src.write_bytes("id,review\r\n1,좋아요 최고\r\n2,별로예요\r\n".encode("cp949") + b"3,\xff\r\n"
                    + "4,그냥 그래요\r\n".encode("cp949"))
    rc, _, err = label(src, "--encoding-errors", "replace")
    assert rc == 0, err
    got = read_out(tmp_path / "out.csv")
    assert got["review"].tolist() == ["좋아요 최고", "별로예요", "\ufffd", "그냥 그래요"]
    assert got["status"].tolist()[:2] == ["ok", "ok"] and got["status"].tolist()[3] == "ok"
    assert got["status"].tolist()[2].startswith("error: line 4 has bytes invalid in cp949")


@pytest.mark.parametrize("encoding", ["utf-16", "utf-16-be", "utf-32"])
def test_excel_unicode_text_is_read_without_options(label, tmp_path, encoding):
    """Excel's "Unicode Text" export is UTF-16 with a BOM, tab-separated: read as such, not refused as neither
    UTF-8 nor cp949 (nor split at a newline byte that is half of a Hangul syllable, as in 갊 = U+AC0A)."""
    utf8 = tmp_path / "u8.tsv"
    utf8.write_text("id\treview\n1\t갊 좋아요\n2\t별로예요\n3\t최고\n", encoding="utf-8")
    wide = tmp_path / "u16.tsv"
    text = utf8.read_text(encoding="utf-8")
    wide.write_bytes(text.encode(encoding) if encoding != "utf-16-be" else b"\xfe\xff" + text.encode(encoding))
    assert label(utf8, output=tmp_path / "a.csv")[0] == 0
    rc, _, err = label(wide, output=tmp_path / "b.csv")
    assert rc == 0, err
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_broken_or_written_workbook_is_one_line(label, tmp_path, good_csv):
    src = tmp_path / "reviews.xlsx"
    src.write_bytes(b"PK\x03\x04 not really a workbook")
    rc, _, err = label(src)
    assert_one_line_error(rc, err, "not a readable .xlsx workbook")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "reviews.xlsx"]  # no output, no sheet left
    rc, _, err = label(good_csv, output=tmp_path / "out.xls")  # the old binary format: .xlsx is written
    assert_one_line_error(rc, err, "write .xlsx for Excel", "old binary format")
    rc, _, err = label(good_csv, output=tmp_path / "out.xlsx")  # written now (tests/test_label_xlsx.py)
    assert rc == 0, err
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.xlsx.job.json", "in.csv", "out.xlsx", "reviews.xlsx"]
    rc, _, err = label(good_csv, output=tmp_path / "out.xlsx")  # an existing one, as an existing .csv
    assert_one_line_error(rc, err, "out.xlsx exists; pass --overwrite")

def test_character_the_output_encoding_cannot_store_is_one_line(label, tmp_path):
    """cp949 has no emoji: the row is named, and no chunk is half-written (the output never appears)."""
    src = tmp_path / "emoji.csv"
    src.write_text("id,review\n1,좋아요\n2,별로\n3,최고 😀\n", encoding="utf-8")
    rc, _, err = label(src, "--output-encoding", "cp949", "--chunk-rows", "1")
    assert_one_line_error(rc, err, "output line 4", "U+1F600", "cp949")
    assert not (tmp_path / "out.csv").exists()
    # the two chunks before it are whole in the partial file, nothing of the third
    assert (tmp_path / "out.csv.partial").read_bytes().decode("cp949").count("\n") == 3

def test_binary_file_starting_like_a_utf16_bom_is_refused(label, tmp_path):
    """Almost any bytes decode as UTF-16: a binary file that starts with FF FE is not taken for text."""
    import random

    rng = random.Random(0)
    src = tmp_path / "blob.csv"
    src.write_bytes(b"\xff\xfe" + bytes(rng.randrange(1, 256) for _ in range(5000)))
    rc, _, err = label(src)
    assert_one_line_error(rc, err, "not UTF-8 or cp949")
    assert not (tmp_path / "out.csv").exists()

# ---------------------------------------------------------------------------------------------
# label: models
# ---------------------------------------------------------------------------------------------


def test_missing_local_model_fails_at_once(label, good_csv, tmp_path):
    import time

    t = time.perf_counter()
    rc, _, err = label(good_csv, model=tmp_path / "runs" / "sentimnet")
    assert_one_line_error(rc, err, "sentimnet")
    assert time.perf_counter() - t < 10  # not tried as a hub id (that waits on the network)


def test_truncated_weights(label, good_csv, tmp_path, tiny_classifier_dir):
    broken = tmp_path / "broken"
    shutil.copytree(tiny_classifier_dir, broken)
    w = broken / "model.safetensors"
    w.write_bytes(w.read_bytes()[: w.stat().st_size // 2])
    rc, _, err = label(good_csv, model=broken)
    assert_one_line_error(rc, err, "model.safetensors")


def test_pretraining_discriminator_is_refused(label, good_csv, tmp_path, discriminator_dir):
    rc, _, err = label(good_csv, model=discriminator_dir)
    assert_one_line_error(rc, err, "no trained classification head", "--allow-generic-labels")
    assert not (tmp_path / "out.csv").exists()
    rc, _, err = label(good_csv, "--allow-generic-labels", model=discriminator_dir)
    assert rc == 0, err


# ---------------------------------------------------------------------------------------------
# label: resume
# ---------------------------------------------------------------------------------------------


def _interrupted(tmp_path, clf, src, out, **kw):
    from koelectra_kit.label import label_file

    def die(n):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=clf, progress=False, chunk_rows=2, _after_chunk=die, **kw)
    assert (tmp_path / (out.name + ".partial")).exists()


def test_resume_with_another_model_is_refused(label, capsys, tmp_path, good_csv, tiny_classifier):
    import torch

    from koelectra_kit.classify.classifier import Classifier

    out = tmp_path / "out.csv"
    _interrupted(tmp_path, tiny_classifier, good_csv, out)
    other = tmp_path / "other"
    shutil.copytree(tiny_classifier.source, other)
    clf = Classifier.load(other, device="cpu", precision="fp32")
    with torch.no_grad():
        next(clf.model.parameters()).add_(0.01)  # a retrained model: same files' names, other weights
    clf.model.save_pretrained(other)
    capsys.readouterr()
    before = json.loads((tmp_path / "out.csv.partial.json").read_text())
    rc, _, err = label(good_csv, "--resume", model=other)
    assert_one_line_error(rc, err, "another model")
    assert json.loads((tmp_path / "out.csv.partial.json").read_text()) == before  # the record is not overwritten


def test_resume_with_another_text_column_is_refused(label, tmp_path, tiny_classifier):
    src = tmp_path / "two.csv"
    src.write_text("review,comment\n좋아요,a\n별로,b\n최고,c\n", encoding="utf-8")
    _interrupted(tmp_path, tiny_classifier, src, tmp_path / "out.csv")
    rc, _, err = label(src, "--resume", "--text-column", "comment")
    assert_one_line_error(rc, err, "another text column")


def test_resume_of_a_finished_output_is_refused(label, good_csv, tmp_path):
    assert label(good_csv)[0] == 0
    rc, _, err = label(good_csv, "--resume")
    assert_one_line_error(rc, err, "complete", "--overwrite")


def test_ctrl_c_before_the_first_chunk_says_nothing_was_kept(capsys, monkeypatch, good_csv, tmp_path,
                                                              tiny_classifier_dir):
    import koelectra_kit.label.run as run

    def interrupted(*a, **k):
        raise KeyboardInterrupt

    monkeypatch.setattr(run, "label_chunk", interrupted)
    rc, out, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", good_csv, "--output",
                           tmp_path / "o.csv", "--no-progress")
    assert rc == 130 and "nothing to keep" in out and ".partial" not in out
    assert not (tmp_path / "o.csv").exists()


# ---------------------------------------------------------------------------------------------
# label: contents that must come through exactly
# ---------------------------------------------------------------------------------------------


def test_jsonl_ids_stay_exact_with_nulls_in_the_column(label, tmp_path):
    src = tmp_path / "r.jsonl"
    rows = [{"id": 9007199254740993, "n": 5, "review": "좋아요"}, {"id": None, "n": None, "review": "별로"},
            {"id": 3, "n": 7, "review": "최고"}]
    src.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    rc, _, err = label(src, output=tmp_path / "o.jsonl")
    assert rc == 0, err
    got = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    assert [g["id"] for g in got] == [9007199254740993, None, 3]
    assert [g["n"] for g in got] == [5, None, 7]


def test_csv_ids_are_byte_identical(label, tmp_path):
    src = tmp_path / "ids.csv"
    src.write_text("id,review\n007,좋아요\n1e5,별로\n 3 ,최고\n-0,그냥\n", encoding="utf-8")
    assert label(src)[0] == 0
    assert read_out(tmp_path / "out.csv")["id"].tolist() == ["007", "1e5", " 3 ", "-0"]


def test_field_longer_than_the_csv_limit_is_labelled_and_flagged_truncated(label, tmp_path):
    src = tmp_path / "long.csv"
    src.write_text(f'id,review\n1,"{"재밌다 " * 250_000}"\n2,좋아요\n', encoding="utf-8")
    rc, _, err = label(src)
    assert rc == 0, err
    got = read_out(tmp_path / "out.csv")
    assert got["id"].tolist() == ["1", "2"]
    assert got["status"].tolist() == ["truncated", "ok"] and got["label"].tolist()[0]
    assert len(got["review"][0]) == len("재밌다 " * 250_000)  # the text itself is kept whole


def test_too_many_fields_keep_the_raw_line(label, tmp_path):
    src = tmp_path / "wide.csv"
    src.write_text("id,review\n1,좋아요\n2,필드가,너무,많음\n3,최고\n", encoding="utf-8")
    assert label(src)[0] == 0
    got = read_out(tmp_path / "out.csv")
    assert got["id"].tolist() == ["1", "", "3"]
    assert got["review"][1] == "2,필드가,너무,많음"  # nothing of the line is lost
    assert got["status"][1] == "error: malformed line 3: 4 fields, expected 2" and got["label"][1] == ""


def test_nul_bytes_flag_the_row(label, tmp_path):
    src = tmp_path / "nul.csv"
    src.write_text("id,review\n1,좋아\x00요\n2,별로\n", encoding="utf-8")
    assert label(src)[0] == 0
    got = read_out(tmp_path / "out.csv")
    assert len(got) == 2 and got["id"][1] == "2" and got["status"][1] == "ok"


def test_jsonl_first_line_not_json(label, tmp_path):
    (tmp_path / "r.jsonl").write_text("not json\n{\"review\": \"좋아요\"}\n", encoding="utf-8")
    rc, _, err = label(tmp_path / "r.jsonl", output=tmp_path / "o.jsonl")
    assert_one_line_error(rc, err, "line 1 is not JSON")


def test_jsonl_line_that_is_not_an_object_is_flagged(label, tmp_path):
    (tmp_path / "r.jsonl").write_text('{"review": "좋아요"}\n[1, 2]\n{"review": "별로"}\n', encoding="utf-8")
    assert label(tmp_path / "r.jsonl", output=tmp_path / "o.jsonl")[0] == 0
    got = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text(encoding="utf-8").splitlines()]
    assert len(got) == 3 and got[1]["status"].startswith("error: malformed line 2") and got[1]["review"] == "[1, 2]"


def test_existing_label_column_gets_prefixed_outputs(label, tmp_path):
    src = tmp_path / "l.csv"
    src.write_text("review,label,status\n좋아요,mine,kept\n", encoding="utf-8")
    assert label(src)[0] == 0
    got = read_out(tmp_path / "out.csv")
    assert got["label"][0] == "mine" and got["status"][0] == "kept" and got["pred_status"][0] == "ok"


def test_input_is_never_modified(label, tmp_path):
    src = tmp_path / "bad.csv"
    src.write_bytes('id,review\n1,"unbalanced\n2,ok\n'.encode())
    before = src.read_bytes()
    label(src)
    assert src.read_bytes() == before


# ---------------------------------------------------------------------------------------------
# finetune and evaluate
# ---------------------------------------------------------------------------------------------

TINY_FT = Path(__file__).resolve().parent.parent / "configs" / "finetune" / "tiny.yaml"


def test_finetune_truncated_weights(capsys, tmp_path, tiny_encoder_dir, sample_dir):
    broken = tmp_path / "enc"
    shutil.copytree(tiny_encoder_dir, broken)
    w = broken / "model.safetensors"
    w.write_bytes(w.read_bytes()[:100])
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={broken}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}", "progress=false")
    assert_one_line_error(rc, err, "model.safetensors")
    assert not (tmp_path / "o").exists()


def test_finetune_mistyped_model_path(capsys, tmp_path, sample_dir):
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={tmp_path / 'runs' / 'discriminatr'}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}", "progress=false")
    assert_one_line_error(rc, err, "discriminatr", "no such folder")


def test_finetune_ctrl_c_keeps_the_best_checkpoint_and_exits_non_zero(capsys, monkeypatch, tmp_path,
                                                                      tiny_encoder_dir, sample_dir):
    import koelectra_kit.finetune.recipe as recipe

    real, calls = recipe.train_step, {"n": 0}

    def interrupted_after_three(*a, **k):
        calls["n"] += 1
        if calls["n"] > 3:
            raise KeyboardInterrupt
        return real(*a, **k)

    monkeypatch.setattr(recipe, "train_step", interrupted_after_three)
    out = tmp_path / "clf"
    rc, printed, _ = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={tiny_encoder_dir}",
                             f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "progress=false",
                             "plots=false")
    assert rc == 130 and "interrupted" in printed
    assert (out / "model.safetensors").exists()
    assert json.loads((out / "eval.json").read_text())["train"]["stopped"] == "interrupted"


def test_finetune_sigterm_stops_at_a_step_and_keeps_the_best_checkpoint(capsys, monkeypatch, tmp_path,
                                                                          tiny_encoder_dir, sample_dir):
    """A scheduler's SIGTERM (or `timeout`) is Ctrl-C: the step ends, the best model so far is written and the
    staging folder is gone. Unhandled, it ended the process with nothing saved and a hidden .partial folder left."""
    import os
    import signal

    import koelectra_kit.finetune.recipe as recipe

    real, calls = recipe.train_step, {"n": 0}

    def terminated_at_three(*a, **k):
        calls["n"] += 1
        if calls["n"] == 3:
            os.kill(os.getpid(), signal.SIGTERM)
        return real(*a, **k)

    monkeypatch.setattr(recipe, "train_step", terminated_at_three)
    before = signal.getsignal(signal.SIGTERM)
    out = tmp_path / "clf"
    rc, printed, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={tiny_encoder_dir}",
                               f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "progress=false",
                               "plots=false")
    assert rc == 130 and "SIGTERM: fine-tuning stops after this step" in err and calls["n"] == 3
    assert json.loads((out / "eval.json").read_text())["train"]["stopped"] == "interrupted"
    # no staging folder left; clf.work holds the run's checkpoint, which the same command continues
    # (tests/test_finetune_resume.py)
    assert (out / "model.safetensors").exists() and sorted(p.name for p in tmp_path.iterdir()) == ["clf", "clf.work"]
    assert signal.getsignal(signal.SIGTERM) is before  # put back


def test_finetune_into_an_earlier_model_says_it_replaced_it(capsys, tmp_path, tiny_encoder_dir, sample_dir):
    """A rerun into the same out= replaces the earlier classifier (scripts and teach mode rely on it), and now says
    so, with the replaced model's dev score: it happened silently."""
    out = tmp_path / "clf"
    args = ("finetune", "--config", TINY_FT, f"model={tiny_encoder_dir}", f"train={sample_dir / 'reviews_labelled.csv'}",
            f"out={out}", "progress=false", "plots=false", "epochs=0.05", "references=false")
    rc, _, err = run_cli(capsys, *args)
    assert rc == 0 and "replaced" not in err
    first = json.loads((out / "eval.json").read_text())["dev"]["macro_f1"]
    rc, _, err = run_cli(capsys, *args)
    assert rc == 0 and f"note: replaced the model that was in {out} (dev macro-F1 {first:.4f})" in err


def test_finetune_report_stands_beside_majority_and_tfidf(capsys, tmp_path, tiny_encoder_dir, sample_dir):
    rc, printed, _ = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={tiny_encoder_dir}",
                             f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}",
                             "progress=false", "plots=false", "epochs=0.05")
    assert rc == 0
    refs = json.loads((tmp_path / "o" / "eval.json").read_text())["references"]
    assert {"majority", "tfidf"} <= set(refs)
    assert "always '" in printed and "TF-IDF" in printed
    # a model trained for a twentieth of an epoch is not above TF-IDF: the report says so, not silently
    assert "warning: macro-F1" in printed


@pytest.mark.parametrize("flags, needle", [
    (["--batch-size", "0"], "batch_size=0"),
    (["--format", "xml"], "invalid choice"),
    (["--data", "/no/such.csv"], "file not found"),
])
def test_evaluate_bad_options(capsys, finetuned_dir, sample_dir, flags, needle):
    argv = ["evaluate", "--model", finetuned_dir, "--data", sample_dir / "reviews_labelled.csv", *flags]
    rc, _, err = run_cli(capsys, *argv)
    assert_one_line_error(rc, err, needle)


def test_evaluate_predictions_keep_the_input_id(capsys, tmp_path, finetuned_dir):
    data = tmp_path / "test.csv"
    data.write_text("id,review,label\nA-7,정말 재밌어요,positive\n007,최악이에요,negative\nx,그냥 그래요,neutral\n",
                    encoding="utf-8")
    rc, printed, err = run_cli(capsys, "evaluate", "--model", finetuned_dir, "--data", data, "--out", tmp_path / "e")
    assert rc == 0, err
    pred = pd.read_csv(tmp_path / "e" / "predictions.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    assert pred.columns[0] == "id" and pred["id"].tolist() == ["A-7", "007", "x"]
    assert "always '" in printed  # the references are printed beside the model's figures


# ---------------------------------------------------------------------------------------------
# the other commands: options out of range, outputs that are someone else's folder, odd inputs
# ---------------------------------------------------------------------------------------------

TINY_PRE = Path(__file__).resolve().parent.parent / "configs" / "pretrain" / "tiny.yaml"


@pytest.mark.parametrize("override, needle", [
    ("min_frequency=-3", "min_frequency"),  # was an OverflowError traceback from tokenizers
    ("limit_alphabet=0", "limit_alphabet"),  # was a vocabulary of fallback pieces only
    ("max_lines=-1", "max_lines"),  # was a vocabulary trained on one text
    ("num_workers=0", "num_workers"),
    ("vocab_size=1e9", "vocab_size"),  # was a Rust allocation abort (exit 134) with tokenizers' backtrace
])
def test_tokenizer_train_bad_numbers(capsys, tmp_path, sample_dir, override, needle):
    rc, _, err = run_cli(capsys, "tokenizer", "train", f"input={sample_dir / 'comments.txt'}", f"out={tmp_path / 't'}",
                         "progress=false", override)
    assert_one_line_error(rc, err, needle)
    assert not (tmp_path / "t").exists()


@pytest.mark.parametrize("argv", [["tokenizer", "train", "input="], ["pretrain", "--config", str(TINY_PRE), "corpus="],
                                  ["prepare", "--config", str(TINY_PRE), "corpus="]])
def test_an_empty_corpus_path_is_not_the_working_folder(capsys, tmp_path, monkeypatch, argv):
    """input= / corpus= with nothing after it (an unset shell variable) was Path(""), the working folder: the
    Parquet files there were read as a dataset and trained on, without a word."""
    pd.DataFrame({"text": ["다른 사람의 데이터", "이걸로 학습하면 안 돼요"] * 50}).to_parquet(tmp_path / "other.parquet")
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, *argv, "out=o", "progress=false")
    assert_one_line_error(rc, err, "input path is empty")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("argv", [["tokenizer", "train", "input=[{a},{b}]"],
                                  ["pretrain", "--config", str(TINY_PRE), "corpus=[{a},{b}]"],
                                  ["prepare", "--config", str(TINY_PRE), "corpus=[{a},{b}]"]])
def test_a_corpus_file_given_twice(capsys, tmp_path, sample_dir, monkeypatch, argv):
    """The same file twice (here as comments.txt and ./comments.txt) was read twice: every text counted double in
    the vocabulary's pair counts and packed twice for pretraining, without a word."""
    shutil.copy(sample_dir / "comments.txt", tmp_path / "comments.txt")
    monkeypatch.chdir(tmp_path)
    argv = [a.format(a="comments.txt", b="./comments.txt") for a in argv]
    rc, _, err = run_cli(capsys, *argv, "out=o", "progress=false")
    assert_one_line_error(rc, err, "twice", "comments.txt and ./comments.txt")
    assert not (tmp_path / "o").exists()


def test_tokenizer_train_into_a_model_folder_is_refused(capsys, tmp_path, sample_dir, tiny_classifier_dir):
    model = tmp_path / "clf"
    shutil.copytree(tiny_classifier_dir, model)
    before = (model / "tokenizer.json").read_bytes()
    rc, _, err = run_cli(capsys, "tokenizer", "train", f"input={sample_dir / 'comments.txt'}", f"out={model}",
                         "vocab_size=500", "progress=false")
    assert_one_line_error(rc, err, str(model), "holds a model")
    assert (model / "tokenizer.json").read_bytes() == before


def test_tokenizer_train_into_a_folder_of_other_files_is_refused(capsys, tmp_path, sample_dir, sample_tokenizer_dir):
    """out=. or a documents folder got tokenizer.json, vocab.txt and three more files written among its own."""
    out = tmp_path / "docs"
    out.mkdir()
    (out / "notes.txt").write_text("keep me", encoding="utf-8")
    rc, _, err = run_cli(capsys, "tokenizer", "train", f"input={sample_dir / 'comments.txt'}", f"out={out}",
                         "vocab_size=500", "progress=false")
    assert_one_line_error(rc, err, str(out), "not a tokenizer folder")
    assert [p.name for p in out.iterdir()] == ["notes.txt"]
    mine = tmp_path / "tok"  # an earlier tokenizer's folder is replaced, as before
    shutil.copytree(sample_tokenizer_dir, mine)
    rc, _, err = run_cli(capsys, "tokenizer", "train", f"input={sample_dir / 'comments.txt'}", f"out={mine}",
                         "vocab_size=500", "progress=false")
    assert rc == 0, err


def test_tokenizer_given_as_the_run_folder_that_holds_it(capsys, tmp_path, sample_tokenizer_dir):
    """tokenizer=runs/x (or a prepared folder) for runs/x/tokenizer said only "no tokenizer in runs/x"."""
    run = tmp_path / "run"
    shutil.copytree(sample_tokenizer_dir, run / "tokenizer")
    rc, _, err = run_cli(capsys, "tokenizer", "encode", "--tokenizer", run, "좋아요")
    assert_one_line_error(rc, err, f"no tokenizer in {run}", f"its tokenizer is in {run / 'tokenizer'}")
    # its tokenizer.json itself: transformers' "Repo id must be in the form ..." before
    rc, _, err = run_cli(capsys, "tokenizer", "encode", "--tokenizer", run / "tokenizer" / "tokenizer.json", "좋아요")
    assert_one_line_error(rc, err, "is a file", f"pass {run / 'tokenizer'}")


def test_tokenizer_encode_cp949_stdin_and_argv(capsys, monkeypatch, sample_tokenizer_dir):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("좋아요\n별로예요\n".encode("cp949")),
                                                       encoding="utf-8", errors="surrogateescape"))
    rc, _, err = run_cli(capsys, "tokenizer", "encode", "--tokenizer", sample_tokenizer_dir)
    assert_one_line_error(rc, err, "stdin line 1", "UTF-8")
    bad = "좋아요".encode("cp949").decode("utf-8", errors="surrogateescape")  # what a cp949 terminal's argv becomes
    rc, _, err = run_cli(capsys, "tokenizer", "encode", "--tokenizer", sample_tokenizer_dir, "좋아요", bad)
    assert_one_line_error(rc, err, "text 2", "UTF-8")


def test_tokenizer_encode_utf8_stdin_with_bom(capsys, monkeypatch, sample_tokenizer_dir):
    import io
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO("\ufeff좋아요\r\n".encode("utf-8"))))
    rc, out, _ = run_cli(capsys, "tokenizer", "encode", "--tokenizer", sample_tokenizer_dir, "--json")
    assert rc == 0 and json.loads(out)["text"] == "좋아요"


@pytest.mark.parametrize("settings", ["[1, 2]", '{"normalize": [1]}', '{"normalize": {"nfc": true, "typo": 1}}'])
def test_tokenizer_with_a_damaged_settings_file(capsys, tmp_path, sample_tokenizer_dir, settings):
    tok = tmp_path / "tok"
    shutil.copytree(sample_tokenizer_dir, tok)
    (tok / "koelectra_tokenizer.json").write_text(settings, encoding="utf-8")
    rc, _, err = run_cli(capsys, "tokenizer", "encode", "--tokenizer", tok, "좋아요")
    assert_one_line_error(rc, err, "cannot read the tokenizer", str(tok))


@pytest.mark.parametrize("override, needle", [
    ("lr=-1", "lr"),  # was torch's ValueError traceback
    ("lr=0", "lr"),  # was a run that learns nothing
    ("model.num_heads=0", "model.num_heads"),  # was ZeroDivisionError in validate
    ("model.hidden_size=0", "model.hidden_size"),
    ("model.num_layers=0", "model.num_layers"),  # was a 0-layer encoder, silently
    ("model.hidden_act=relux", "relux"),  # was a KeyError traceback
    ("generator.size=0", "generator.size"),  # was a 1-wide generator, silently
    ("generator.num_heads=3", "not a multiple"),  # was a shape error at the first step
    ("adam_beta1=1.5", "adam_beta1"),
    ("adam_eps=0", "adam_eps"),
    ("max_minutes=-1", "max_minutes"),  # was "no time limit", silently
    ("max_grad_norm=-1", "max_grad_norm"),
    ("min_lr_ratio=2", "min_lr_ratio"),
    ("keep_checkpoints=-1", "keep_checkpoints"),
    ("keep_checkpoints=0", "at least 1"),  # was accepted, and one kept anyway
    ("num_workers=0", "num_workers"),
    ("vocab_size=1e9", "vocab_size"),  # was accepted, then tokenizers' Rust aborted on it after the first log line
])
def test_pretrain_bad_numbers(capsys, override, needle):
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY_PRE, "corpus=a.txt", "out=o", override, "--print-config")
    assert_one_line_error(rc, err, needle)


def test_pretrain_base_preset_builds_a_valid_generator(capsys):
    rc, out, err = run_cli(capsys, "pretrain", "--config", "base", "corpus=a.txt", "out=o", "--print-config")
    assert rc == 0, err  # 12 heads x 0.333 used to give a 3-head generator that 256 does not divide


@pytest.mark.parametrize("what", ["notes", "classifier"])
def test_pretrain_refuses_a_folder_that_is_not_a_run(capsys, tmp_path, sample_dir, sample_tokenizer_dir,
                                                     tiny_classifier_dir, what):
    out = tmp_path / "out"
    if what == "classifier":
        shutil.copytree(tiny_classifier_dir, out)
    else:
        out.mkdir()
        (out / "notes.txt").write_text("keep me", encoding="utf-8")
    before = sorted(p.name for p in out.iterdir())
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY_PRE, f"corpus={sample_dir / 'comments.txt'}",
                         f"tokenizer={sample_tokenizer_dir}", f"out={out}", "max_steps=1", "progress=false")
    assert_one_line_error(rc, err, str(out), "not a pretraining run")
    assert sorted(p.name for p in out.iterdir()) == before


def test_pretrain_empty_corpus_is_refused_before_anything_is_written(capsys, tmp_path):
    (tmp_path / "empty.txt").write_text("", encoding="utf-8")
    out = tmp_path / "run"
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY_PRE, f"corpus={tmp_path / 'empty.txt'}", f"out={out}")
    assert_one_line_error(rc, err, "empty")  # before: the resolved config was logged first
    assert not out.exists()


def test_pretrain_failing_in_setup_leaves_no_folder_it_made(capsys, tmp_path):
    """A run that fails after training its tokenizer into out/ removes out/ (a leftover config.yaml made the
    next run with that out= look like one to resume); the toolkit's own warning reads as one ``warning:`` line."""
    (tmp_path / "one.txt").write_text("abc\n", encoding="utf-8")
    out = tmp_path / "run"
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY_PRE, f"corpus={tmp_path / 'one.txt'}", f"out={out}",
                         "vocab_size=100", "progress=false")
    assert rc == 2 and err.strip().splitlines()[-1].startswith("error: corpus too small"), err
    assert not out.exists()
    assert "warning: the 493-token vocabulary is nearly all single characters" in err
    assert "UserWarning" not in err and "warnings.warn" not in err


def test_pretrain_failing_in_setup_keeps_a_folder_that_was_there(capsys, tmp_path, sample_tokenizer_dir):
    (tmp_path / "one.txt").write_text("abc\n", encoding="utf-8")
    out = tmp_path / "run"
    out.mkdir()
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY_PRE, f"corpus={tmp_path / 'one.txt'}", f"out={out}",
                         f"tokenizer={sample_tokenizer_dir}", "progress=false")
    assert rc == 2 and "corpus too small" in err, err
    assert out.is_dir()


def test_pretrain_plot_of_a_file_of_other_rows(capsys, tmp_path):
    (tmp_path / "metrics.jsonl").write_text('[1, 2]\n{"epoch": 1, "loss": 0.5}\n', encoding="utf-8")
    rc, _, err = run_cli(capsys, "pretrain", "plot", tmp_path)
    assert_one_line_error(rc, err, "no metrics to plot")


@pytest.mark.parametrize("override, needle", [
    ("eval_batch_size=0", "eval_batch_size"),  # was range() arg 3 must not be zero, after training
    ("adam_eps=-1", "adam_eps"),  # was torch's ValueError traceback
    ("max_grad_norm=-1", "max_grad_norm"),  # was a flipped gradient, silently
    ("weight_decay=-1", "weight_decay"),
    ("baseline.C=0", "baseline.C"),  # was sklearn's InvalidParameterError traceback
    ("baseline.min_df=0", "baseline.min_df"),
    ("baseline.max_features=0", "baseline.max_features"),
    ("baseline.max_iter=0", "baseline.max_iter"),
    ("baseline.tol=-1", "baseline.tol"),  # would be sklearn's InvalidParameterError traceback, after the vectorizing
])
def test_finetune_and_baseline_bad_numbers(capsys, tmp_path, sample_dir, override, needle):
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, "model=m", f"train={data}", f"out={tmp_path / 'o'}",
                         override)
    assert_one_line_error(rc, err, needle)
    rc, _, err = run_cli(capsys, "baseline", "--train", data, "--out", tmp_path / "b", override)
    assert_one_line_error(rc, err, needle)
    assert not (tmp_path / "o").exists() and not (tmp_path / "b").exists()


def test_baseline_min_df_above_the_rows(capsys, tmp_path, sample_dir):
    rc, _, err = run_cli(capsys, "baseline", "--train", sample_dir / "reviews_labelled.csv", "--out", tmp_path / "b",
                         "baseline.min_df=100000")
    assert_one_line_error(rc, err, "min_df")
    assert not (tmp_path / "b").exists()


def test_report_commands_refuse_a_model_folder_as_out(capsys, tmp_path, finetuned_dir, sample_dir):
    model = tmp_path / "clf"
    shutil.copytree(finetuned_dir, model)
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "evaluate", "--model", model, "--data", data, "--out", model)
    assert_one_line_error(rc, err, "is a model folder")
    rc, _, err = run_cli(capsys, "baseline", "--train", data, "--out", model)
    assert_one_line_error(rc, err, "is a model folder")
    assert {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} == before


def test_evaluate_refuses_a_tfidf_classifier_folder_as_out(capsys, tmp_path, sample_dir):
    """A TF-IDF (or ensemble) folder has no config.json: evaluate --out into it replaced its training eval.json and
    confusion.png with this file's, exit 0. A baseline rerun into its own TF-IDF folder still replaces it."""
    data = sample_dir / "reviews_labelled.csv"
    model = tmp_path / "tfidf"
    assert main(["baseline", "--train", str(data), "--out", str(model), "plots=false"]) == 0
    capsys.readouterr()
    before = {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()}
    rc, _, err = run_cli(capsys, "evaluate", "--model", model, "--data", data, "--out", model)
    assert_one_line_error(rc, err, "is a model folder", "classifier.json")
    assert {p.name: p.read_bytes() for p in model.iterdir() if p.is_file()} == before
    rc, _, err = run_cli(capsys, "baseline", "--train", data, "--out", model, "plots=false")
    assert rc == 0, err


def test_finetune_and_distill_refuse_out_equal_to_their_model(capsys, tmp_path, finetuned_dir, sample_dir):
    model = tmp_path / "clf"
    shutil.copytree(finetuned_dir, model)
    before = (model / "model.safetensors").read_bytes()
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, f"model={model}", f"train={data}", f"out={model}/",
                         "progress=false")
    assert_one_line_error(rc, err, "model=", "would be replaced")
    rc, _, err = run_cli(capsys, "distill", f"teachers=[{model}]", f"transfer={sample_dir / 'reviews_unlabelled.csv'}",
                         f"student={model}", f"train={data}", f"out={model}", "progress=false")
    assert_one_line_error(rc, err, "would be replaced")
    assert (model / "model.safetensors").read_bytes() == before


def test_export_refuses_a_discriminator_and_a_bad_opset(capsys, tmp_path, discriminator_dir, tiny_classifier_dir):
    pytest.importorskip("onnxruntime")
    rc, _, err = run_cli(capsys, "export", "--model", discriminator_dir, "--onnx", "--out", tmp_path / "x")
    assert_one_line_error(rc, err, "not a fine-tuned classifier")
    # 0 was silently the default; 9 was a torch.onnx traceback; 99: ~180 lines of the traced graph on stdout before
    # the line, and an empty --out folder left behind
    for opset in ("0", "9", "99"):
        rc, out, err = run_cli(capsys, "export", "--model", tiny_classifier_dir, "--onnx", "--opset", opset,
                               "--out", tmp_path / "x")
        assert_one_line_error(rc, err, f"--opset {opset}")
        assert not out.strip(), out[:500]
    assert not (tmp_path / "x").exists()


def test_an_export_that_fails_leaves_no_folder_it_made(capsys, tmp_path, tiny_classifier_dir, monkeypatch):
    pytest.importorskip("onnxruntime")
    from koelectra_kit.classify import onnx_backend

    def fails(model, dest, opset):
        Path(dest).parent.mkdir(parents=True, exist_ok=True)  # as export_onnx does before the exporter runs
        raise RuntimeError("Unsupported thing")

    monkeypatch.setattr(onnx_backend, "export_onnx", fails)
    rc, _, err = run_cli(capsys, "export", "--model", tiny_classifier_dir, "--onnx", "--opset", "18",
                         "--out", tmp_path / "x")
    assert_one_line_error(rc, err, "--opset 18: the ONNX exporter failed (Unsupported thing)")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize("size", ["nan", "inf"])
def test_app_upload_size_that_is_not_a_number(capsys, tiny_classifier_dir, size):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    rc, _, err = run_cli(capsys, "app", "--model", tiny_classifier_dir, "--max-upload-mb", size)
    assert_one_line_error(rc, err, "--max-upload-mb")


def test_app_busy_port_and_unknown_host_are_one_line():
    import socket

    pytest.importorskip("fastapi")
    from koelectra_kit.app.server import bind_socket
    from koelectra_kit.errors import InputError

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        with pytest.raises(InputError, match="cannot serve on"):
            bind_socket("127.0.0.1", port)
    with pytest.raises(InputError, match="--host"):
        bind_socket("999.1.1.1", 0)


@pytest.mark.parametrize("flags, needle", [
    (["label.nokey=1"], "nokey"),  # was found after tokenizer, pretraining and fine-tuning had run
    (["finetune.epochs=-1"], "epochs"),
    (["--text-column", "nope"], "nope"),
    (["--labelled", "/no/such.csv"], "file not found"),
    (["--show", "-1"], "--show"),
    # was said by finetune after the tokenizer and pretraining had run (30 minutes with --preset cpu-30min)
    (["finetune.max_length=4096"], "finetune.max_length=4096 exceeds the pretrained encoder's max_position_embeddings"),
])
def test_quickstart_checks_everything_before_the_first_step(capsys, tmp_path, flags, needle):
    out = tmp_path / "qs"
    rc, printed, err = run_cli(capsys, "quickstart", "--out", out, *flags)
    assert_one_line_error(rc, err, needle)
    assert not out.exists() and "===" not in printed


def test_evaluate_says_a_discriminator_has_no_trained_head(capsys, discriminator_dir, sample_dir):
    """Not "labels not in ['LABEL_0', 'LABEL_1']: map them with label_map=", which would score a random head."""
    rc, _, err = run_cli(capsys, "evaluate", "--model", discriminator_dir, "--data",
                         sample_dir / "reviews_labelled.csv")
    assert_one_line_error(rc, err, "no trained classification head", "finetune")
