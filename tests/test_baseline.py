"""The TF-IDF baseline: same data handling and report format as fine-tuning."""
from __future__ import annotations

import json

import pytest

from koelectra_kit.finetune.baseline import run_baseline
from koelectra_kit.cli import main
from koelectra_kit.config import load_config
from koelectra_kit.finetune import FinetuneConfig


def test_baseline_on_sample_beats_majority_with_same_report_format(tmp_path, sample_dir, capsys):
    out = tmp_path / "tfidf"
    rc = main(["baseline", "--train", str(sample_dir / "reviews_labelled.csv"), "--out", str(out)])
    assert rc == 0
    printed = capsys.readouterr().out
    assert "confusion matrix" in printed and "stratified 0.1" in printed
    result = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    dev = result["dev"]
    assert dev["n"] == 45  # the same stratified split as finetune's
    assert dev["accuracy"] > dev["majority_accuracy"] + 0.2
    assert set(dev) >= {"accuracy", "macro_f1", "per_class", "confusion_matrix", "labels"}
    assert sum(map(sum, dev["confusion_matrix"])) == 45
    assert (out / "confusion.png").stat().st_size > 1000
    assert json.loads((out / "data_report.json").read_text())["dev"]["rows"] == 45


def test_baseline_uses_the_finetune_config_and_mapping(tmp_path, sample_dir):
    data = tmp_path / "stars.csv"
    import pandas as pd

    df = pd.read_csv(sample_dir / "reviews_labelled.csv")
    df["stars"] = df["label"].map({"negative": 1, "neutral": 3, "positive": 5})
    df[["review", "stars"]].to_csv(data, index=False, encoding="cp949", errors="ignore")  # emoji have no cp949 code
    cfg = load_config(FinetuneConfig, None, [f"train={data}", "rating_map=stars5", "labels=[부정,중립,긍정]",
                                             "baseline.ngram_max=2", "class_weights=balanced", "plots=false"])
    result = run_baseline(cfg)
    assert result["dev"]["labels"] == ["부정", "중립", "긍정"]
    assert "char_wb 1-2-grams" in result["model"]
    assert result["dev"]["accuracy"] > result["dev"]["majority_accuracy"]


def test_baseline_bad_input_is_an_error_line(tmp_path, capsys):
    data = tmp_path / "a.csv"
    data.write_text("review,label\n좋아요,good\n", encoding="utf-8")
    assert main(["baseline", "--train", str(data)]) == 2
    assert "'good' (1 rows)" in capsys.readouterr().err


@pytest.mark.slow
def test_baseline_nsmc3(shared_data):
    """The documented reference point: about 0.69 accuracy / 0.65 macro-F1 on nsmc3 dev."""
    cfg = load_config(FinetuneConfig, None, [f"train={shared_data / 'nsmc3' / 'train.tsv'}",
                                             f"dev={shared_data / 'nsmc3' / 'dev.tsv'}", "plots=false"])
    result = run_baseline(cfg)
    assert result["dev"]["n"] == 10000
    assert result["dev"]["accuracy"] > 0.67 and result["dev"]["macro_f1"] > 0.63


def test_baseline_tol_is_the_fits_stop(sample_dir):
    """baseline.tol reaches lbfgs: a loose one stops in fewer iterations than the default (which the default needs
    so that the reference does not move with the BLAS thread count; classify/references.py)."""
    import pandas as pd

    from koelectra_kit.classify.references import BaselineConfig, fit_tfidf

    df = pd.read_csv(sample_dir / "reviews_labelled.csv")
    y = df["label"].astype("category").cat.codes.to_numpy()
    _, loose, _ = fit_tfidf(df["review"].tolist(), y, BaselineConfig(min_df=1, tol=1e-1))
    _, default, _ = fit_tfidf(df["review"].tolist(), y, BaselineConfig(min_df=1))
    assert loose.n_iter_[0] < default.n_iter_[0]
