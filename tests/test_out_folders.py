"""What an out= folder may replace, and the reference figures `evaluate` prints beside a model: the finetune audit's
findings (a model deleted without a word, a fine-tune's ensemble silently given another member, a reference fitted
on another file or on the rows evaluated)."""
from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

from tests.test_bad_input import assert_one_line_error, run_cli

pytestmark = pytest.mark.fast


def digest(folder: Path) -> str:
    h = hashlib.sha256()
    for f in sorted(folder.rglob("*")):
        if f.is_file():
            h.update(str(f.relative_to(folder)).encode() + f.read_bytes())
    return h.hexdigest()


@pytest.fixture
def model(tmp_path, finetuned_dir):
    """A copy of a fine-tune's output: the encoder, with tfidf/ and ensemble/ (members .. and ../tfidf) inside."""
    dst = tmp_path / "model"
    shutil.copytree(finetuned_dir, dst)
    assert (dst / "ensemble" / "classifier.json").is_file() and (dst / "tfidf" / "classifier.json").is_file()
    return dst


def test_ensemble_and_baseline_never_replace_a_model_of_another_kind(capsys, model, sample_dir):
    """`ensemble out=` a fine-tuned encoder folder replaced it whole (model.safetensors gone), exit 0 and no note;
    `baseline --out` an ensemble folder made it a TF-IDF one."""
    before = digest(model)
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "ensemble", f"members=[{model},{model / 'tfidf'}]", f"dev={data}", f"out={model}")
    assert_one_line_error(rc, err, f"out={model} holds a fine-tuned encoder", "this run writes an ensemble")
    rc, _, err = run_cli(capsys, "baseline", f"train={data}", f"out={model / 'ensemble'}", "plots=false")
    assert_one_line_error(rc, err, "holds an ensemble", "writes a TF-IDF classifier")
    assert digest(model) == before


def test_a_run_that_does_not_write_a_fine_tunes_tfidf_and_ensemble_does_not_replace_its_folder(capsys, model,
                                                                                               sample_dir,
                                                                                               tiny_encoder_dir):
    """`distill out=` a fine-tune's folder replaced it with a student, deleting its tfidf/ and ensemble/ (the
    ensemble the one quickstart labelled with), exit 0 and a note; a fine-tune with ensemble=none the same."""
    before = digest(model)
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "distill", "teachers=[tfidf]", f"student={tiny_encoder_dir}",
                         f"out={model}", f"train={data}", f"transfer={sample_dir / 'reviews_unlabelled.csv'}")
    assert_one_line_error(rc, err, f"out={model} holds the classifiers ensemble/, tfidf/", "does not write again")
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={tiny_encoder_dir}", f"train={data}",
                         f"out={model}", "ensemble=none", "progress=false")
    assert_one_line_error(rc, err, "holds the classifiers ensemble/, tfidf/")
    assert digest(model) == before


def test_a_member_of_a_fine_tunes_ensemble_is_not_replaced(capsys, model, sample_dir, tiny_encoder_dir):
    """OUT/ensemble averages OUT and OUT/tfidf with weights chosen for them: a new TF-IDF (or an encoder) written
    into OUT/tfidf changed what it labels with (dev macro-F1 0.39 -> 0.33 in the audit), exit 0."""
    before = digest(model)
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "baseline", f"train={data}", f"out={model / 'tfidf'}", "plots=false")
    assert_one_line_error(rc, err, "is a member of the ensemble in", "choose another out=")
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={tiny_encoder_dir}", f"train={data}",
                         f"out={model / 'tfidf'}", "progress=false")
    assert_one_line_error(rc, err, "holds a TF-IDF classifier")
    assert digest(model) == before
    # a rerun into the same kind of folder replaces it, and says so
    rc, _, err = run_cli(capsys, "baseline", f"train={data}", f"out={model.parent / 'tfidf2'}", "plots=false")
    rc, _, err = run_cli(capsys, "baseline", f"train={data}", f"out={model.parent / 'tfidf2'}", "plots=false")
    assert rc == 0 and f"note: replaced the model that was in {model.parent / 'tfidf2'}" in err


def test_an_out_under_a_file_is_refused_before_training(capsys, tmp_path, sample_dir, tiny_encoder_dir):
    """Was "error: File exists (mk.py)" after the whole fine-tune had run."""
    (tmp_path / "notes.txt").write_text("x")
    out = tmp_path / "notes.txt" / "run"
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={tiny_encoder_dir}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "progress=false")
    assert_one_line_error(rc, err, f"out={out}: {tmp_path / 'notes.txt'} is a file")
    assert "fine-tuning" not in err


@pytest.mark.parametrize("out", [".", "..", "sub/.."])
def test_an_out_ending_in_dot_or_dot_dot_is_refused_before_training(out, capsys, tmp_path, sample_dir, tiny_encoder_dir,
                                                                     monkeypatch):
    """out=. in an empty folder trained the whole run, then ended in a ValueError traceback (". has an empty name")
    where the folder is built beside out= and renamed into place."""
    (tmp_path / "here" / "sub").mkdir(parents=True)
    monkeypatch.chdir(tmp_path / "here")
    if out == ".":
        (tmp_path / "here" / "sub").rmdir()  # empty: the one case the old check let through
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={tiny_encoder_dir}",
                         f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "progress=false")
    assert_one_line_error(rc, err, f"out={out}: the output is built beside its folder")
    assert "fine-tuning" not in err and not list((tmp_path / "here").glob(".*"))


def test_evaluate_says_when_its_rows_are_the_models_training_rows(capsys, model, sample_dir):
    """On the model's own training file the TF-IDF reference scored 0.996 (it had seen every row) beside the model,
    with no word of it, and its name was cut to "(fitted on the model's traini"."""
    rc, out, err = run_cli(capsys, "evaluate", "--model", model, "--data", sample_dir / "reviews_labelled.csv")
    assert rc == 0, err
    assert "TF-IDF + logistic regression (fitted on the model's training file)" in out
    assert "are in the model's training file" in err and "not held-out" in err


def test_a_relative_train_path_is_not_read_from_another_folder(capsys, model, tmp_path, sample_dir, monkeypatch):
    """finetune_config.yaml kept train= as given; evaluate, run from another folder, fitted its reference on whatever
    file that relative path named there (in the audit: the very file evaluated). The path is now kept absolute, and
    an old relative one is not read: the reference is cross-validated on the file evaluated instead."""
    from koelectra_kit.config import read_yaml

    saved = read_yaml(model / "finetune_config.yaml")
    assert Path(saved["train"]).is_absolute() and Path(saved["model"]).is_absolute()
    text = (model / "finetune_config.yaml").read_text(encoding="utf-8")
    (model / "finetune_config.yaml").write_text(text.replace(saved["train"], "reviews_labelled.csv"), encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    shutil.copy(sample_dir / "reviews_unlabelled.csv", elsewhere / "reviews_labelled.csv")  # another file, that name
    monkeypatch.chdir(elsewhere)
    rc, out, err = run_cli(capsys, "evaluate", "--model", model, "--data", sample_dir / "reviews_labelled.csv")
    assert rc == 0, err
    assert "fitted on the model's training file" not in out and "TF-IDF" in out


def test_the_binary_figure_knows_every_spelling_of_the_three_sentiments():
    from koelectra_kit.classify.metrics import sentiment_columns

    for labels in (["neg", "neu", "pos"], ["부정적", "중립적", "긍정적"], ["부정", "보통", "긍정"],
                   ["negative", "neutral", "positive"]):
        assert sentiment_columns(labels) == (2, 0), labels
    assert sentiment_columns(["bad", "ok", "good"]) is None and sentiment_columns(["neg", "pos"]) is None


def test_finetune_config_keeps_local_paths_absolute_and_hub_ids_as_given(tmp_path, monkeypatch):
    from koelectra_kit.finetune import FinetuneConfig
    from koelectra_kit.finetune.config import with_absolute_paths

    monkeypatch.chdir(tmp_path)
    (tmp_path / "train.csv").write_text("review,label\n")
    cfg = FinetuneConfig(model="beomi/KcELECTRA-base", train="train.csv", dev="hf:owner/reviews", out="o")
    saved = with_absolute_paths(cfg)
    assert saved.train == str(tmp_path / "train.csv") and saved.model == "beomi/KcELECTRA-base"
    assert saved.dev == "hf:owner/reviews" and cfg.train == "train.csv"  # the run's own config is left as given


def test_a_tfidf_fit_cut_by_max_iter_says_so_in_one_line(capsys, sample_dir):
    """scikit-learn's ConvergenceWarning was a raw multi-line paragraph on stderr."""
    rc, _, err = run_cli(capsys, "baseline", f"train={sample_dir / 'reviews_labelled.csv'}", "baseline.max_iter=1")
    assert rc == 0
    assert "stopped at baseline.max_iter=1 before converging" in err and "ConvergenceWarning" not in err
    rc, _, err = run_cli(capsys, "baseline", f"train={sample_dir / 'reviews_labelled.csv'}")
    assert rc == 0 and "before converging" not in err


def test_the_fine_tune_lr_by_width_meets_the_papers_points_and_runs_between_them():
    """A step at 257 fine-tuned a 384-wide encoder at 1e-4, a third of a 256-wide one's 3e-4 (the size lease's
    candidate against the preset it is compared with)."""
    from types import SimpleNamespace

    from koelectra_kit.finetune.model import default_lr

    lr = {h: default_lr(SimpleNamespace(config=SimpleNamespace(hidden_size=h))) for h in (128, 256, 384, 512, 768, 1024)}
    assert lr[128] == lr[256] == 3e-4 and lr[384] == pytest.approx(2e-4) and lr[512] == pytest.approx(1.5e-4)
    assert lr[768] == pytest.approx(1e-4) and lr[1024] == 5e-5


def test_a_run_whose_loss_diverged_saves_nothing(capsys, tmp_path, sample_dir, tiny_encoder_dir):
    """finetune lr=1e6 (and distill temperature=1e30, whose T^2 overflowed float32) wrote a folder of NaN weights,
    exit 0: every label the first class."""
    import torch

    from koelectra_kit.errors import InputError
    from koelectra_kit.finetune.model import check_finite

    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "finetune", "--config", "tiny", f"model={tiny_encoder_dir}", f"train={data}",
                         f"out={tmp_path / 'nan'}", "lr=1e6", "ensemble=none", "progress=false")
    last = err.strip().splitlines()[-1]
    assert rc == 2 and last.startswith("error: the fine-tune diverged") and "nothing was saved" in last
    assert "Traceback" not in err and not (tmp_path / "nan").exists()
    rc, _, err = run_cli(capsys, "distill", "teachers=[t]", "student=s", f"out={tmp_path / 'd'}", f"train={data}",
                         f"transfer={data}", "temperature=1e30")
    assert_one_line_error(rc, err, "temperature must be above 0 and at most 100")
    model = torch.nn.Linear(2, 2)
    check_finite(model)  # finite: nothing said
    with torch.no_grad():
        model.bias[0] = float("nan")
    with pytest.raises(InputError, match="1 of the model's weight tensors"):
        check_finite(model)


def test_distill_max_length_over_the_students_positions_is_refused_before_the_teachers_pass(capsys, tmp_path,
                                                                                          sample_dir,
                                                                                          tiny_encoder_dir):
    """It crashed in the first training step (a RuntimeError traceback), after the whole teachers' pass."""
    import json

    positions = json.loads((tiny_encoder_dir / "config.json").read_text())["max_position_embeddings"]
    data = sample_dir / "reviews_labelled.csv"
    rc, _, err = run_cli(capsys, "distill", "teachers=[nosuch-teacher]", f"student={tiny_encoder_dir}",
                         f"out={tmp_path / 'd'}", f"train={data}", f"transfer={data}", f"max_length={positions + 1}")
    assert_one_line_error(rc, err, f"max_length={positions + 1} exceeds the student's max_position_embeddings")
