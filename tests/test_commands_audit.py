"""Defects found by running suggest, evaluate, baseline, ensemble, tokenizer train/words and quickstart with hostile
input as a user would: each test is the command line that showed one, run in-process on tiny models."""
from __future__ import annotations

import shutil

import pandas as pd
import pytest

from koelectra_kit.cli import main


def error_lines(capsys) -> list[str]:
    err = capsys.readouterr().err
    assert "Traceback" not in err
    return [line for line in err.splitlines() if line.startswith("error: ")]


def test_tokenizer_train_refuses_an_out_folder_that_holds_its_corpus(tmp_path, sample_dir, capsys):
    """The tokenizer folder is replaced whole: a corpus kept in it was trained on, then deleted, exit 0."""
    out = tmp_path / "tok"
    out.mkdir()
    (out / "vocab.txt").write_text("[PAD]\n", encoding="utf-8")  # an earlier tokenizer: out= may replace it
    corpus = out / "corpus.txt"
    shutil.copy(sample_dir / "comments.txt", corpus)
    assert main(["tokenizer", "train", f"input={corpus}", f"out={out}", "vocab_size=2000", "progress=false"]) == 2
    lines = error_lines(capsys)
    assert len(lines) == 1 and "corpus.txt" in lines[0] and "choose another out=" in lines[0]
    assert corpus.read_bytes() == (sample_dir / "comments.txt").read_bytes()
    assert (out / "vocab.txt").read_text(encoding="utf-8") == "[PAD]\n"


def test_evaluate_rerun_without_plots_leaves_no_stale_confusion_matrix(tmp_path, tfidf_dir, sample_dir, capsys):
    """A rerun into the same out= with --no-plots kept the earlier run's confusion.png beside the new eval.json."""
    data = sample_dir / "reviews_labelled.csv"
    out = tmp_path / "ev"
    assert main(["evaluate", "--model", str(tfidf_dir), "--data", str(data), "--out", str(out),
                 "references=false"]) == 0
    assert (out / "confusion.png").is_file()
    other = tmp_path / "other.csv"
    pd.read_csv(data).iloc[::3].to_csv(other, index=False)
    assert main(["evaluate", "--model", str(tfidf_dir), "--data", str(other), "--out", str(out),
                 "references=false", "--no-plots"]) == 0
    assert sorted(p.name for p in out.iterdir()) == ["eval.json", "predictions.csv"]


def test_ensemble_copies_a_hub_id_member_from_the_hub_cache(tmp_path, tiny_classifier_dir, tfidf_dir, sample_dir,
                                                            capsys, monkeypatch):
    """A member given as a hub id (EnsembleConfig: "classifier folders or hub ids") loaded and was scored, then the
    run ended with "error: No such file or directory (owner/clf)": it was copied as if the id were a local path."""
    import huggingface_hub.constants

    from koelectra_kit.classify.classifier import Classifier

    repo = tmp_path / "hub" / "models--owner--clf"
    shutil.copytree(tiny_classifier_dir, repo / "snapshots" / "abc123")
    (repo / "refs").mkdir()
    (repo / "refs" / "main").write_text("abc123", encoding="utf-8")
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_CACHE", str(tmp_path / "hub"))
    out, dev = tmp_path / "ens", tmp_path / "dev.csv"
    rows = pd.read_csv(sample_dir / "reviews_labelled.csv")
    rows.assign(review=rows.review.astype(str) + " 다시 봄").to_csv(dev, index=False)  # rows no member was fitted on
    assert main(["ensemble", f"members=[{tfidf_dir},owner/clf]", f"dev={dev}",
                 f"out={out}", "precision=fp32", "grid_step=0.5"]) == 0, capsys.readouterr().err
    assert (out / "members" / "1-clf" / "model.safetensors").is_file()
    assert Classifier.load(out).labels == ["negative", "neutral", "positive"]


@pytest.mark.parametrize("flag, inside", [("--unlabelled", "labelled.csv"), ("--labelled", "sentiment/train.csv")])
def test_quickstart_refuses_an_input_its_stages_write_before_the_first_one_runs(tmp_path, sample_dir, capsys, flag,
                                                                                inside):
    """--unlabelled OUT/labelled.csv ran the tokenizer, pretraining and fine-tuning, then failed at step 4/4 (label:
    "--output must differ from --input"); --labelled in OUT/sentiment/ failed at step 3/4 (finetune's out=)."""
    out = tmp_path / "qs"
    src = sample_dir / ("reviews_unlabelled.csv" if flag == "--unlabelled" else "reviews_labelled.csv")
    (out / inside).parent.mkdir(parents=True, exist_ok=True)
    shutil.copy(src, out / inside)
    assert main(["quickstart", "--out", str(out), flag, str(out / inside)]) == 2
    captured = capsys.readouterr()
    assert "===" not in captured.out  # no step started
    lines = [line for line in captured.err.splitlines() if line.startswith("error: ")]
    assert len(lines) == 1 and flag in lines[0] and "Traceback" not in captured.err
    assert not (out / "tokenizer").exists() and (out / inside).read_bytes() == src.read_bytes()
