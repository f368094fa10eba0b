"""Distillation: the soft-label loss against a hand computation, the transfer set's exclusion, a tiny end-to-end
distill (fine-tuned teacher + TF-IDF into a tiny student) whose folder ``Classifier.load`` and ``label`` use,
the teacher cache reused by a second run, a killed run that resumes to the same weights, one-line errors for
bad transfer files, the binary (positive/negative) figure, and the 2-CPU-hour recipe script's smoke run."""
from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

from koelectra_kit.cli import main
from koelectra_kit.config import load_config
from koelectra_kit.distill import DistillConfig, distill, distill_loss
from koelectra_kit.errors import ConfigError

ROOT = Path(__file__).resolve().parent.parent


def test_soft_label_loss_matches_a_hand_computation():
    logits = torch.tensor([[2.0, 0.0, -1.0], [0.5, 0.5, 0.0], [-1.0, 1.0, 3.0]])
    soft = torch.tensor([[0.7, 0.2, 0.1], [0.3, 0.3, 0.4], [0.05, 0.15, 0.8]])
    labels = torch.tensor([0, -1, 2])  # the middle row is a transfer row: no hard label
    T, alpha = 2.0, 0.5

    def log_softmax(row, t):
        z = [x / t for x in row]
        m = math.log(sum(math.exp(x) for x in z))
        return [x - m for x in z]

    kl = sum(sum(q * (math.log(q) - lp) for q, lp in zip(s, log_softmax(r, T)))
             for s, r in zip(soft.tolist(), logits.tolist())) / 3
    ce = -(log_softmax(logits[0].tolist(), 1)[0] + log_softmax(logits[2].tolist(), 1)[2]) / 2
    loss, got_kl, got_ce = distill_loss(logits, soft, labels, T, alpha)
    assert got_kl.item() == pytest.approx(kl, rel=1e-5) and got_ce.item() == pytest.approx(ce, rel=1e-5)
    assert loss.item() == pytest.approx(T * T * kl + alpha * ce, rel=1e-5)
    # no labelled row: the soft term alone
    assert distill_loss(logits, soft, torch.full((3,), -1), T, alpha)[0].item() == pytest.approx(T * T * kl, rel=1e-5)


def test_exclude_drops_dev_texts_by_normalized_match(tmp_path):
    from koelectra_kit.distill.data import exclusion_keys, load_transfer

    dev = tmp_path / "dev.csv"
    pd.DataFrame({"review": ["정말 재밌어요", "최악이에요ㅋㅋㅋㅋ"],
                  "label": ["positive", "negative"]}).to_csv(dev, index=False)
    transfer = tmp_path / "t.txt"
    lines = ["정말  재밌어요", "", "최악이에요ㅋㅋ", "다른 리뷰", "다른 리뷰", "또 다른 리뷰"]
    transfer.write_text("\n".join(lines) + "\n", encoding="utf-8")
    got = load_transfer([str(transfer)], None, exclusion_keys([str(dev)], []), None, seed=0)
    assert got.texts == ["다른 리뷰", "또 다른 리뷰"]  # spacing and ㅋ runs normalized away; repeats once
    assert got.report["excluded"] == 2 and got.report["repeated"] == 1 and got.report["read"] == 5


@pytest.mark.fast
def test_a_hub_teachers_cache_key_follows_its_revision(tmp_path, monkeypatch):
    """A hub-id teacher's cached probabilities were keyed by its name alone: after a new revision was pushed under
    the same id, distill reused the old model's soft labels. The key is the cached snapshot's commit."""
    from huggingface_hub import constants

    from koelectra_kit.distill.teacher import teacher_fingerprint

    root = tmp_path / "hub" / "models--owner--teacher"
    for commit in ("a" * 40, "b" * 40):
        (root / "snapshots" / commit).mkdir(parents=True)
        (root / "snapshots" / commit / "config.json").write_text("{}")
    (root / "refs").mkdir()
    monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hub"))

    def key(commit):
        (root / "refs" / "main").write_text(commit)
        return teacher_fingerprint("owner/teacher", [], np.zeros(0), None)

    assert key("a" * 40) == key("a" * 40) != key("b" * 40)
    assert teacher_fingerprint("owner/other", [], np.zeros(0), None) != key("a" * 40)  # not cached: the name


def test_binary_accuracy_on_positive_and_negative_rows_only():
    from koelectra_kit.classify.metrics import classification_report, format_report

    labels = ["부정", "중립", "긍정"]
    y = np.array([0, 2, 1, 2, 0])
    pred = np.array([0, 1, 1, 2, 2])  # row 1 answered neutral, row 4 wrong
    scores = np.array([[3, 0, 1], [0, 5, 1], [0, 9, 0], [0, 0, 2], [1, 0, 2]], dtype=float)
    hard = classification_report(y, pred, labels)
    soft = classification_report(y, pred, labels, scores=scores)
    assert hard["binary"] == {"accuracy": 0.5, "n": 4, "positive": "긍정", "negative": "부정", "from": "labels"}
    assert soft["binary"]["accuracy"] == 0.75  # restricted to the two classes, row 1 is positive: right
    assert hard["accuracy"] == 0.6 and "binary accuracy 0.7500 on the 4 긍정/부정 rows" in format_report(soft)
    assert "binary" not in classification_report(y % 2, pred % 2, ["a", "b"])  # other label sets: no figure


@pytest.fixture(scope="module")
def distill_data(tmp_path_factory, sample_dir):
    """train.csv / dev.csv from the labelled sample, and a transfer file that holds the unlabelled reviews, the
    sample comments and (spaced differently) every dev text, which exclude= must drop."""
    root = tmp_path_factory.mktemp("distill_data")
    df = pd.read_csv(sample_dir / "reviews_labelled.csv")
    dev = pd.concat([g.iloc[:10] for _, g in df.groupby("label")])
    df.drop(dev.index).to_csv(root / "train.csv", index=False)
    dev.to_csv(root / "dev.csv", index=False)
    unlabelled = pd.read_csv(sample_dir / "reviews_unlabelled.csv").iloc[:, 0].astype(str).tolist()
    planted = [t.replace("\n", " ").replace(" ", "  ") for t in dev["review"]]  # one line each, spaced apart
    (root / "transfer.txt").write_text("\n".join(unlabelled + planted) + "\n", encoding="utf-8")
    return root


def _cfg(data: Path, teacher: Path, student: Path, out: Path, *extra: str) -> DistillConfig:
    return load_config(DistillConfig, None, [
        f"teachers=[{teacher},tfidf]", f"transfer=[{data / 'transfer.txt'}]", f"exclude=[{data / 'dev.csv'}]",
        "exclude_dev=false", f"student={student}", f"train={data / 'train.csv'}", f"dev={data / 'dev.csv'}",
        f"out={out}", "batch_size=32", "epochs=0.4", "eval_every=3", "log_every=1", "precision=fp32",
        "progress=false", "plots=false", "lr=1e-3", "save_every=1", *extra])


@pytest.fixture(scope="module")
def distilled(tmp_path_factory, distill_data, finetuned_dir, tiny_encoder_dir):
    out = tmp_path_factory.mktemp("distilled") / "student"
    result = distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out))
    return out, result


def test_student_folder_loads_labels_a_file_and_reports(distilled, distill_data, finetuned_dir, tmp_path):
    from koelectra_kit.classify.classifier import Classifier

    out, result = distilled
    rep = result["distill"]["transfer"]
    assert rep["excluded"] == 30  # the 30 planted dev texts, nothing else
    assert rep["read"] == rep["kept"] + rep["excluded"] + rep["repeated"] and rep["kept"] > 50
    n_train = len(pd.read_csv(distill_data / "train.csv"))
    assert result["train"]["labelled_rows"] == n_train and result["train"]["rows"] == n_train + rep["kept"]
    w = result["distill"]["weights"]
    assert len(w) == 2 and sum(w) == pytest.approx(1.0) and result["distill"]["from"].startswith("dev grid")
    assert set(result["distill"]["teacher_dev"]) == {str(finetuned_dir), "tfidf", "ensemble"}
    assert "binary" in result["dev"] and result["dev"]["binary"]["from"] == "scores"
    assert not out.with_name("student.work").exists()  # work files go once the student is written

    clf = Classifier.load(out, precision="fp32")
    assert clf.labels == ["negative", "neutral", "positive"] and clf.max_length == 128
    saved = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    assert saved["dev"]["macro_f1"] == result["dev"]["macro_f1"] and "references" in saved
    labelled = tmp_path / "labelled.csv"
    rc = main(["label", "--model", str(out), "--input", str(distill_data / "dev.csv"), "--text-column", "review",
               "--output", str(labelled)])
    assert rc == 0
    got = pd.read_csv(labelled)
    assert len(got) == 30 and set(got["label"]) <= set(clf.labels)


def test_teacher_cache_is_reused_on_a_second_run(distilled, distill_data, finetuned_dir, tiny_encoder_dir,
                                                 tmp_path, monkeypatch, capsys):
    from koelectra_kit.distill import teacher

    def never(*a, **k):
        raise AssertionError("a teacher ran again instead of reading the cache")

    monkeypatch.setattr(teacher, "TeacherPredictor", never)
    result = distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, tmp_path / "again", "epochs=0.1"))
    assert capsys.readouterr().err.count("probabilities read from the cache") == 2
    assert result["distill"]["weights"] == distilled[1]["distill"]["weights"]


def test_a_killed_distill_resumes_to_the_same_weights(distilled, distill_data, finetuned_dir, tiny_encoder_dir,
                                                      tmp_path, capsys):
    from safetensors.torch import load_file

    class Killed(Exception):
        pass

    def kill(step):
        if step == 4:
            raise Killed

    out = tmp_path / "student"
    with pytest.raises(Killed):
        distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out), on_step=kill)
    assert (tmp_path / "student.work" / "checkpoints" / "latest.json").exists() and not out.exists()
    # a resume with another lr is refused naming it (it said "other settings, teachers or texts")
    with pytest.raises(ConfigError, match=r"holds a distill run with other settings: lr 0\.001 -> 0\.002; pass resume"):
        distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out, "lr=2e-3"))
    result = distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out))
    err = capsys.readouterr().err
    assert "resumed from" in err and "at step 4 of" in err
    assert result["train"]["steps"] == distilled[1]["train"]["steps"]
    a, b = load_file(out / "model.safetensors"), load_file(distilled[0] / "model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)  # bit-exact continuation
    assert result["best"] == distilled[1]["best"]


def test_sigterm_checkpoints_the_step_and_the_same_command_continues(distilled, distill_data, finetuned_dir,
                                                                      tiny_encoder_dir, tmp_path, capsys):
    """A scheduler's SIGTERM (or Ctrl-C) ends the step in flight and checkpoints it: nothing since the last
    save_every is lost, and the rerun reaches the uninterrupted run's exact weights."""
    import os
    import signal

    from safetensors.torch import load_file

    def term(step):
        if step == 3:
            os.kill(os.getpid(), signal.SIGTERM)

    out = tmp_path / "student"
    before = signal.getsignal(signal.SIGTERM)
    with pytest.raises(KeyboardInterrupt):
        distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out), on_step=term)
    assert signal.getsignal(signal.SIGTERM) is before and not out.exists()
    assert "interrupted at step 3: checkpointed" in capsys.readouterr().err
    distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out))
    assert "at step 3 of" in capsys.readouterr().err
    a, b = load_file(out / "model.safetensors"), load_file(distilled[0] / "model.safetensors")
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_distill_steps_read_nothing_back_between_logging_steps(distill_data, finetuned_dir, tiny_encoder_dir,
                                                              tmp_path):
    """The loop's steps leave their losses on the device (a GPU runs ahead of the host) until a train row reads the
    window: no host-sync op outside evaluate. Before, each step read loss, kl and ce back, and the
    loss asked whether the batch had labelled rows (any(), then a boolean index)."""
    from koelectra_kit.distill.recipe import DistillRecipe
    from tests.test_gpu_path import SyncRecorder

    r = DistillRecipe(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, tmp_path / "student", "log_every=3",
                           "eval_every=1000", "save_every=0", "save_every_minutes=0", "epochs=0.5"))
    for step in (r.setup_labels, r.setup_data, r.setup_teachers, r.setup_student, r.setup_optimizer, r.setup_resume):
        step()
    assert r.total_steps >= 7 and (r.y >= 0).any() and (r.y < 0).any()  # batches with and without labelled rows
    rec = SyncRecorder(r)
    r.evaluate = rec.during(r.evaluate, "eval")  # (a train row's read, torch.stack(...).tolist(), is no aten op)
    with rec.mode:
        r.train()
    assert rec.per_phase("step") == 0, (rec.calls, rec.sites)
    rows = [json.loads(x) for x in (r.work / "metrics.jsonl").read_text().splitlines()]
    train = [x for x in rows if x["kind"] == "train"]
    assert [x["step"] for x in train] == list(range(3, r.total_steps + 1, 3))
    assert all(np.isfinite(x["loss"]) for x in train)


def test_distill_reports_to_tensorboard_what_metrics_jsonl_holds(distill_data, finetuned_dir, tiny_encoder_dir,
                                                                 tmp_path):
    pytest.importorskip("tensorboard", reason="the TensorBoard check needs tensorboard (pip install -e '.[dev]')")
    from tests.test_trackers import assert_same, numbers, tensorboard_scalars

    out = tmp_path / "student"
    distill(_cfg(distill_data, finetuned_dir, tiny_encoder_dir, out, "report_to=tensorboard", "log_every=2"))
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()]
    want = numbers(rows, lambda r: r["kind"])
    assert {"train/loss", "train/kl", "train/ce", "eval/macro_f1"} <= set(want)
    assert_same(tensorboard_scalars(out / "runs"), want)


@pytest.mark.parametrize("content,msg", [(None, "file not found"), ("", "file is empty"),
                                         ("\n  \n\n", "no text in it")])
def test_bad_transfer_file_is_a_one_line_error(content, msg, distill_data, finetuned_dir, tiny_encoder_dir,
                                               tmp_path, capsys):
    bad = tmp_path / "transfer.txt"
    if content is not None:
        bad.write_text(content, encoding="utf-8")
    rc = main(["distill", f"teachers=[{finetuned_dir}]", f"transfer={bad}", f"student={tiny_encoder_dir}",
               f"train={distill_data / 'train.csv'}", f"dev={distill_data / 'dev.csv'}", f"out={tmp_path / 'o'}",
               "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and err[-1].startswith("error: ") and msg in err[-1] and str(bad) in err[-1]
    if content is None:  # named, and before the teachers' pass
        assert err == [f"error: transfer: {bad}: file not found"]


def test_missing_keys_and_foreign_teacher_labels_are_one_line_errors(distill_data, finetuned_dir, tiny_encoder_dir,
                                                                      tmp_path, capsys):
    assert main(["distill", f"teachers=[{finetuned_dir}]", f"student={tiny_encoder_dir}", "train=t.csv",
                 "out=o"]) == 2
    assert capsys.readouterr().err == "error: transfer is empty: pass transfer=FILE (or a list) of unlabelled " \
                                      "in-domain text\n"
    rc = main(["distill", f"teachers=[{finetuned_dir}]", f"transfer={distill_data / 'transfer.txt'}",
               f"student={tiny_encoder_dir}", f"train={distill_data / 'train.csv'}", f"out={tmp_path / 'o'}",
               "labels=[negative,positive]", "drop_unknown_labels=true", "progress=false"])
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert rc == 2 and err.startswith("error: teacher") and "predicts" in err
    # refused before any teacher labels a row (the TF-IDF teacher before it was fitted and run over every text first)
    rc = main(["distill", f"teachers=[tfidf,{finetuned_dir}]", f"transfer={distill_data / 'transfer.txt'}",
               f"student={tiny_encoder_dir}", f"train={distill_data / 'train.csv'}", f"out={tmp_path / 'o2'}",
               "labels=[negative,positive]", "drop_unknown_labels=true", "progress=false"])
    captured = capsys.readouterr()
    assert rc == 2 and captured.err.strip().splitlines()[-1].startswith(f"error: teacher {finetuned_dir} predicts")
    assert "teacher tfidf" not in captured.err + captured.out and not (tmp_path / "o2").exists()


def test_budget_recipe_script_smoke_run(tmp_path):
    script = [sys.executable, str(ROOT / "examples" / "experiments" / "budget_2h.py"), "--smoke",
              "--runs", str(tmp_path / "runs")]
    proc = subprocess.run(script, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    table = proc.stdout
    for stage in ("pretrain", "finetune-s1", "student-pretrain", "student-continue", "distill-s1", "total"):
        assert f"| {stage} |" in table
    assert "| continue |" not in table  # the teacher encoder's continued stage is off by default
    assert (tmp_path / "runs" / "student-s1" / "eval.json").exists()
    assert "student-continued" in (tmp_path / "runs" / "student-s1" / "distill_config.yaml").read_text()
    # a second seed with the teacher's continued stage: the shared stages are reused, the teacher is the continued one
    proc = subprocess.run([*script, "--seed", "2", "--continue-minutes", "1"], cwd=tmp_path, capture_output=True,
                          text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "[student-pretrain] reused" in proc.stdout and "| continue |" in proc.stdout
    assert "continued" in (tmp_path / "runs" / "teacher-s2" / "finetune_config.yaml").read_text()
