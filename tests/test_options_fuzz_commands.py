"""Defects found by fuzzing the options of finetune, evaluate, baseline, ensemble, distill, label, label-merge,
suggest, export and the app's settings with hostile values (0, -1, 10**12, "", " ", a folder that is a model): each
test is the command line that showed one, run in-process on tiny models; each was a traceback, a silent wrong
answer or a hang before its fix."""
from __future__ import annotations

from pathlib import Path

import pytest

from tests.test_bad_input import assert_one_line_error, run_cli

TINY_FT = Path(__file__).resolve().parent.parent / "configs" / "finetune" / "tiny.yaml"
DISTILL = ["distill", "teachers=[tfidf]", "transfer=t.txt", "student=s", "train=t.csv", "out=o"]  # (not read: refused first)


# ---------------------------------------------------------------------------------------------
# baseline: its --train/--dev/--out flags were pasted into YAML unquoted
# ---------------------------------------------------------------------------------------------


def test_baseline_out_flag_is_the_path_as_typed(capsys, tmp_path, sample_dir, monkeypatch):
    """--out 'runs/b #2' wrote runs/b (YAML read ' #2' as a comment) and --out 0x10 wrote a folder 16, exit 0."""
    monkeypatch.chdir(tmp_path)
    data = sample_dir / "reviews_labelled.csv"
    for out in ("b #2", "0x10"):
        rc, _, err = run_cli(capsys, "baseline", "--train", data, "--out", tmp_path / out if "#" in out else out,
                             "plots=false")
        assert rc == 0, err
        assert (tmp_path / out / "classifier.json").is_file()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["0x10", "b #2"]


# ---------------------------------------------------------------------------------------------
# weight grids: a tiny step was a MemoryError traceback building the grid
# ---------------------------------------------------------------------------------------------


def test_ensemble_and_finetune_grid_step_too_fine_is_one_line(capsys, tmp_path, sample_dir):
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "ensemble", "members=[a,b]", f"dev={data}", f"out={tmp_path / 'e'}",
                         "grid_step=1e-12")
    assert_one_line_error(rc, err, "grid_step", "weightings")
    rc, _, err = run_cli(capsys, "finetune", "--config", TINY_FT, "model=m", f"train={data}", f"out={tmp_path / 'o'}",
                         "ensemble_grid_step=1e-12")
    assert_one_line_error(rc, err, "ensemble_grid_step", "weightings")
    assert not (tmp_path / "e").exists() and not (tmp_path / "o").exists()


def test_distill_weight_step_must_divide_one(capsys):
    """weight_step=0.3 searched thirds and reported step 0.3 in eval.json."""
    rc, _, err = run_cli(capsys, "distill", "teachers=[a,tfidf]", "weight_step=0.3")
    assert_one_line_error(rc, err, "weight_step", "whole steps")


def test_distill_teacher_weights_that_sum_past_a_float(capsys):
    """[1e308, 1e308] summed to inf: every weight became 0, the teachers' probabilities all zero, exit 0."""
    rc, _, err = run_cli(capsys, "distill", "teachers=[a,tfidf]", "teacher_weights=[1e308,1e308]")
    assert_one_line_error(rc, err, "teacher_weights")


# ---------------------------------------------------------------------------------------------
# inference batch sizes: label, suggest and the app cap them at 4096; evaluate, ensemble and distill did not
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, needle", [
    (["evaluate", "--model", "m", "--data", "d.csv", "--batch-size", "1000000000000"], "batch_size=1000000000000"),
    (["ensemble", "members=[a,b]", "dev=d.csv", "out=o", "batch_size=100000"], "batch_size=100000"),
    ([*DISTILL, "teacher_batch_size=100000"], "teacher_batch_size=100000"),
    ([*DISTILL, "eval_batch_size=100000"], "eval_batch_size=100000"),
    (["finetune", "--config", str(TINY_FT), "eval_batch_size=100000"], "eval_batch_size=100000"),
])
def test_inference_batch_sizes_are_capped_as_label_caps_them(capsys, argv, needle):
    rc, _, err = run_cli(capsys, *argv)
    assert_one_line_error(rc, err, needle, "4096")


# ---------------------------------------------------------------------------------------------
# blank options: "" silently meant "not given", " " a folder named " " in the working folder
# ---------------------------------------------------------------------------------------------


def test_evaluate_blank_out_and_columns(capsys, tmp_path, tfidf_dir, sample_dir, monkeypatch):
    monkeypatch.chdir(tmp_path)
    base = ["evaluate", "--model", tfidf_dir, "--data", sample_dir / "reviews_labelled.csv", "references=false"]
    for flags, needle in [(["--out", " "], "out=' '"), (["--out", ""], "out=''"),
                          (["--text-column", ""], "text_column=''"), (["--label-column", ""], "label_column=''"),
                          (["--encoding", ""], "encoding=''")]:
        rc, _, err = run_cli(capsys, *base, *flags)
        assert_one_line_error(rc, err, needle, "empty")
    assert list(tmp_path.iterdir()) == []  # (--out ' ' wrote ./' '/eval.json)


@pytest.mark.parametrize("argv, needle", [
    (["finetune", "--config", str(TINY_FT), "model=m", "train=t.csv", "out=o", "text_column="], "text_column=''"),
    (["finetune", "--config", str(TINY_FT), "model=m", "train=t.csv", "out=o", "dev="], "dev=''"),
    (["baseline", "--train", "t.csv", "label_column="], "label_column=''"),
    (["ensemble", "members=[a,b]", "dev=d.csv", "out=o", "text_column="], "text_column=''"),
    ([*DISTILL, "transfer_text_column="], "transfer_text_column=''"),
    (["suggest", "model=m", "pool=p.csv", "out=o.csv", "text_column="], "text_column=''"),
    (["suggest", "model=m", "pool=p.csv", "out=o.csv", "labelled_text_column="], "labelled_text_column=''"),
    (["label", "--model", "m", "--input", "i.csv", "--output", "o.csv", "--plot", ""], "plot=''"),
])
def test_blank_keys_are_refused_not_read_as_unset(capsys, tmp_path, monkeypatch, argv, needle):
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, *argv)
    assert_one_line_error(rc, err, needle, "empty")
    assert list(tmp_path.iterdir()) == []


def test_label_empty_input_is_not_the_working_folder(capsys, tmp_path, tiny_classifier_dir, sample_dir, monkeypatch):
    """--input '' was Path(''), the working folder: a folder holding a .parquet file was labelled as a dataset."""
    import pandas as pd

    pd.read_csv(sample_dir / "reviews_unlabelled.csv").to_parquet(tmp_path / "data.parquet")
    monkeypatch.chdir(tmp_path)
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", "", "--output",
                         tmp_path / "o.csv", "--no-progress")
    assert_one_line_error(rc, err, "input", "empty")
    assert not (tmp_path / "o.csv").exists()


def test_app_blank_workdir_and_a_missing_encoder(tmp_path):
    from koelectra_kit.app.settings import AppSettings
    from koelectra_kit.errors import KitError

    with pytest.raises(KitError, match="workdir=' ' is empty"):
        AppSettings(model="m", workdir=" ").validate()
    with pytest.raises(KitError, match="teach='' is empty"):
        AppSettings(model="m", teach="", labels=str(tmp_path / "L.csv")).validate()
    # the first retrain, after --retrain-every answers, failed on it; now the start does
    (tmp_path / "pool.csv").write_text("review\n좋아요\n", encoding="utf-8")
    with pytest.raises(KitError, match="--encoder .*no such folder"):
        AppSettings(model="m", teach=str(tmp_path / "pool.csv"), labels=str(tmp_path / "L.csv"),
                    encoder=str(tmp_path / "nosuch")).validate()


# ---------------------------------------------------------------------------------------------
# label --shard N and label-merge: a huge N built a list of N shard numbers (MemoryError after half a minute)
# ---------------------------------------------------------------------------------------------


def test_shard_counts_past_the_cap(capsys, tmp_path):
    rc, _, err = run_cli(capsys, "label", "--model", "m", "--input", "i.csv", "--output", tmp_path / "o.csv",
                         "--shard", "1/1000000000000")
    assert_one_line_error(rc, err, "shard='1/1000000000000'", "10000")
    # a shard file of such a run (or one named by hand): the merge names the missing shards at once
    (tmp_path / "o.shard-0000000000001-of-1000000000000.csv").write_text("review,label\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "label-merge", tmp_path / "o.csv")
    assert_one_line_error(rc, err, "shard 2 (not run)", "of 1000000000000 missing")
    assert not (tmp_path / "o.csv").exists()


# ---------------------------------------------------------------------------------------------
# distill: a student_shape too big to build was torch's allocation traceback (or a hang) after the teachers' pass
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("shape", ["{hidden_size: 1000000}", "{num_hidden_layers: 1000000000000}"])
def test_distill_student_shape_too_big_is_refused_before_the_teachers(capsys, tmp_path, sample_dir, plain_encoder_dir,
                                                                      shape):
    rc, _, err = run_cli(capsys, "distill", "teachers=[tfidf]", f"transfer={sample_dir / 'reviews_unlabelled.csv'}",
                         f"student={plain_encoder_dir}", f"train={sample_dir / 'reviews_labelled.csv'}",
                         f"out={tmp_path / 'o'}", "progress=false", "max_length=32", f"student_shape={shape}")
    assert_one_line_error(rc, err, "student_shape", "parameters")
    assert list(tmp_path.iterdir()) == []


# ---------------------------------------------------------------------------------------------
# export --out: a model folder, or a blank
# ---------------------------------------------------------------------------------------------


def test_export_out_into_a_model_folder_or_blank(capsys, tmp_path, tiny_classifier_dir, tfidf_dir, monkeypatch):
    """--out MODEL put model.onnx beside config.json, where label --backend onnx never looks; --out TFIDF_FOLDER put
    it in another model's folder; --out ' ' made a folder ' ' here; --out '' silently meant MODEL/onnx."""
    pytest.importorskip("onnxruntime")
    import shutil

    model = tmp_path / "clf"
    shutil.copytree(tiny_classifier_dir, model)
    before = sorted(p.name for p in model.iterdir())
    tfidf_before = sorted(p.name for p in tfidf_dir.iterdir())
    monkeypatch.chdir(tmp_path)
    for out, needle in [(model, "model folder"), (tfidf_dir, "model folder"), (" ", "empty"), ("", "empty")]:
        rc, _, err = run_cli(capsys, "export", "--model", model, "--onnx", "--out", out)
        assert_one_line_error(rc, err, "--out", needle)
    assert sorted(p.name for p in model.iterdir()) == before
    assert sorted(p.name for p in tfidf_dir.iterdir()) == tfidf_before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["clf"]
