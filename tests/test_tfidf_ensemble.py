"""TF-IDF and ensemble folders as classifiers: `baseline out=` and `ensemble` write folders that label, evaluate,
the app, distill and Classifier.load take like a fine-tuned model; saved without pickles, refused when damaged."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from koelectra_kit.cli import main

LABELS = ["negative", "neutral", "positive"]


@pytest.fixture(scope="module")
def split(tmp_path_factory, sample_dir) -> tuple[Path, Path]:
    """The labelled sample as train.csv and a balanced 30-row dev.csv."""
    root = tmp_path_factory.mktemp("split")
    df = pd.read_csv(sample_dir / "reviews_labelled.csv")
    dev = pd.concat([g.iloc[:10] for _, g in df.groupby("label")])
    df.drop(dev.index).to_csv(root / "train.csv", index=False)
    dev.to_csv(root / "dev.csv", index=False)
    return root / "train.csv", root / "dev.csv"


@pytest.fixture(scope="module")
def tfidf_dir(tmp_path_factory, split) -> Path:
    out = tmp_path_factory.mktemp("tfidf") / "tfidf"
    assert main(["baseline", f"train={split[0]}", f"dev={split[1]}", f"out={out}", "baseline.min_df=1",
                 "plots=false"]) == 0
    return out


@pytest.fixture(scope="module")
def ensemble_dir(tmp_path_factory, tiny_classifier_dir, tfidf_dir, split) -> Path:
    out = tmp_path_factory.mktemp("ens") / "ens"
    assert main(["ensemble", f"members=[{tiny_classifier_dir},{tfidf_dir}]", f"dev={split[1]}", f"out={out}",
                 "precision=fp32", "grid_step=0.25"]) == 0
    return out


def test_tfidf_folder_predicts_what_the_fitted_model_does(tfidf_dir, split):
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.finetune.config import BaselineConfig
    from koelectra_kit.classify.references import fit_tfidf

    train = pd.read_csv(split[0])
    vec, model, _ = fit_tfidf(train.review.tolist(), np.array([LABELS.index(x) for x in train.label]),
                              BaselineConfig(min_df=1))
    texts = pd.read_csv(split[1]).review.tolist() + ["", "완전 처음 보는 글자들 ㅋㅋ 🎬", "A"]
    clf = Classifier.load(tfidf_dir)
    assert type(clf).__name__ == "TfidfClassifier" and clf.labels == LABELS
    got = clf.predict(texts)
    np.testing.assert_allclose(got.probs, model.predict_proba(vec.transform(texts)), atol=1e-5)
    assert (tfidf_dir / "classifier.json").is_file() and (tfidf_dir / "README.md").is_file()
    assert not list(tfidf_dir.glob("*.pkl")) and not list(tfidf_dir.glob("*.joblib"))
    ev = json.loads((tfidf_dir / "eval.json").read_text())
    assert ev["dev"]["n"] == 30 and ev["dev"]["macro_f1"] > 0.5


def test_tfidf_reads_decomposed_hangul_as_the_same_text(tfidf_dir, split, tmp_path):
    """A Mac writes Hangul decomposed (NFD): TF-IDF's n-grams of it were never fitted. The fit, the folder and an
    ensemble holding it read it as the NFC text it is (a folder fitted before this reads it so too)."""
    import unicodedata

    from koelectra_kit.classify.classifier import Classifier

    texts = pd.read_csv(split[1]).review.tolist()
    nfd = [unicodedata.normalize("NFD", t) for t in texts]
    assert nfd != texts
    clf = Classifier.load(tfidf_dir)
    np.testing.assert_array_equal(clf.predict(nfd).probs, clf.predict(texts).probs)
    old = tmp_path / "old"  # no preprocessor recorded: settings as a folder from before wrote them
    clf.save(old)
    np.testing.assert_array_equal(Classifier.load(old).predict(nfd).probs, clf.predict(texts).probs)


def test_a_text_of_only_invisible_characters_scores_as_the_empty_text(tmp_path):
    """TF-IDF scored "\u200b" (a zero-width space alone) on its zero-width n-grams, apart from "", while training
    drops such a text as empty and label marks it so; the encoder's normalizer reads it as "" too."""
    from koelectra_kit.classify.tfidf import TfidfClassifier

    texts = ["좋아요 최고\u200b", "별로 \u200b최악", "그냥 그래요", "재밌어요\u200b\u200b", "지루해요", "보통"] * 5
    clf = TfidfClassifier.fit(texts, np.array([0, 1, 2] * 10), ["positive", "negative", "neutral"])
    got = clf.predict(["", "\u200b", "\u200b\u200b", " \ufeff "]).probs
    np.testing.assert_array_equal(got, np.repeat(got[:1], 4, axis=0))


def test_a_tfidf_folder_given_from_home_loads(tmp_path, monkeypatch):
    """model=~/tfidf loaded an encoder folder (check_model_source expands ~) but not a TF-IDF one: "no
    classifier.json" although toolkit_kind had found it there."""
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.classify.tfidf import TfidfClassifier

    monkeypatch.setenv("HOME", str(tmp_path))
    TfidfClassifier.fit(["좋아요 최고", "별로 최악", "그냥 그래요"] * 5, np.array([0, 1, 2] * 5),
                        ["positive", "negative", "neutral"]).save(tmp_path / "tfidf")
    assert Classifier.load("~/tfidf").predict(["좋아요 최고"]).labels == ["positive"]


def test_two_label_tfidf_uses_the_binary_model(tmp_path):
    """scikit-learn fits one coefficient row for two classes: the folder must give its probabilities too."""
    from koelectra_kit.classify.tfidf import TfidfClassifier

    texts = ["좋아요 최고", "최고 추천", "별로 최악", "최악 비추", "좋아요 추천해요", "비추 별로예요"] * 3
    y = np.array([1, 1, 0, 0, 1, 0] * 3)
    clf = TfidfClassifier.fit(texts, y, ["bad", "good"])
    clf.save(tmp_path / "bin")
    back = TfidfClassifier.load(tmp_path / "bin")
    assert back.coef.shape[0] == 1
    np.testing.assert_allclose(back.predict(texts).probs, clf.predict(texts).probs, atol=1e-6)
    assert back.predict(["최고 좋아요"]).labels == ["good"] and back.predict(["최악"]).labels == ["bad"]


def test_label_and_evaluate_take_a_tfidf_folder(tfidf_dir, split, sample_dir, tmp_path, capsys):
    out = tmp_path / "labelled.csv"
    assert main(["label", "--model", str(tfidf_dir), "--input", str(sample_dir / "reviews_unlabelled.csv"),
                 "--output", str(out), "--no-progress"]) == 0
    df = pd.read_csv(out)
    ok = df[df.status == "ok"]
    assert len(ok) >= 55 and set(ok.label) <= set(LABELS)
    np.testing.assert_allclose(ok[[f"prob_{x}" for x in LABELS]].sum(axis=1), 1, atol=2e-4)
    assert main(["evaluate", "--model", str(tfidf_dir), "--data", str(split[1]), "--out", str(tmp_path / "ev")]) == 0
    ev = json.loads((tmp_path / "ev" / "eval.json").read_text())
    assert ev["dev"]["macro_f1"] == pytest.approx(json.loads((tfidf_dir / "eval.json").read_text())["dev"]["macro_f1"])


def test_resume_refuses_a_refitted_tfidf_folder(tfidf_dir, split, tmp_path):
    """label --resume compares the model's digest: a TF-IDF fitted on other rows is another model."""
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.errors import InputError
    from koelectra_kit.label import label_file

    src = tmp_path / "in.csv"
    src.write_text("review\n" + "\n".join(f"리뷰 {i} 좋아요" for i in range(30)) + "\n", encoding="utf-8")
    first = Classifier.load(tfidf_dir)
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=first, progress=False, chunk_rows=10,
                   _after_chunk=lambda n: (_ for _ in ()).throw(KeyboardInterrupt))
    other = tmp_path / "other"
    assert main(["baseline", f"train={split[1]}", f"out={other}", "baseline.min_df=1", "plots=false",
                 "dev_fraction=0.2"]) == 0
    with pytest.raises(InputError, match="model"):
        label_file(None, src, tmp_path / "o.csv", "review", classifier=Classifier.load(other), progress=False,
                   resume=True)
    s = label_file(None, src, tmp_path / "o.csv", "review", classifier=Classifier.load(tfidf_dir), progress=False,
                   resume=True)
    assert s.rows == 30 and s.new_rows == 20  # the first chunk of 10 was kept


@pytest.mark.parametrize("damage", ["truncated_weights", "no_weights", "vocab_edited", "bad_json", "wrong_type",
                                    "nan_coef"])
def test_damaged_tfidf_folder_is_one_error_line(tfidf_dir, tmp_path, damage, capsys):
    import shutil

    from safetensors.numpy import load_file, save_file

    bad = tmp_path / "bad"
    shutil.copytree(tfidf_dir, bad)
    weights, manifest = bad / "tfidf.safetensors", bad / "classifier.json"
    if damage == "truncated_weights":
        weights.write_bytes(weights.read_bytes()[:500])
    elif damage == "no_weights":
        weights.unlink()
    elif damage == "vocab_edited":
        m = json.loads(manifest.read_text())
        m["vocabulary"] = m["vocabulary"][:-5]
        manifest.write_text(json.dumps(m))
    elif damage == "bad_json":
        manifest.write_text(manifest.read_text()[:100])
    elif damage == "wrong_type":
        manifest.write_text(json.dumps({"type": "pickle", "format": 1}))
    elif damage == "nan_coef":
        arrays = load_file(str(weights))
        arrays["coef"][0, 0] = np.nan
        save_file(arrays, str(weights))
    rc = main(["label", "--model", str(bad), "--input", str(tmp_path / "missing.csv"), "--output",
               str(tmp_path / "o.csv")])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error:") and err.count("\n") == 1 and "Traceback" not in err
    assert not (tmp_path / "o.csv").exists()
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.errors import InputError

    with pytest.raises(InputError):
        Classifier.load(bad)


def test_ensemble_averages_its_members_with_the_weights_it_chose(ensemble_dir, tiny_classifier_dir, tfidf_dir,
                                                                 split):
    from koelectra_kit.classify.classifier import Classifier

    m = json.loads((ensemble_dir / "classifier.json").read_text())
    weights = [e["weight"] for e in m["members"]]
    assert m["type"] == "ensemble" and sum(weights) == pytest.approx(1) and all(w % 0.25 == 0 for w in weights)
    # members copied in: the folder moves as one
    assert all((ensemble_dir / e["path"]).is_dir() and e["path"].startswith("members/") for e in m["members"])
    texts = pd.read_csv(split[1]).review.tolist()
    ens = Classifier.load(ensemble_dir, precision="fp32")
    a = Classifier.load(tiny_classifier_dir, precision="fp32").predict(texts).probs
    b = Classifier.load(tfidf_dir).predict(texts).probs
    np.testing.assert_allclose(ens.predict(texts).probs, weights[0] * a + weights[1] * b, atol=1e-5)
    ev = json.loads((ensemble_dir / "eval.json").read_text())
    # the grid holds each member alone, so on dev the ensemble is never below the better member
    assert ev["dev"]["macro_f1"] >= max(r["macro_f1"] for r in ev["member_dev"].values()) - 1e-9
    assert len(ev["weight_search"]["points"]) == 5


def test_label_evaluate_and_distill_take_an_ensemble_folder(ensemble_dir, tfidf_dir, split, tiny_encoder_dir,
                                                            sample_dir, tmp_path):
    out = tmp_path / "labelled.csv"
    assert main(["label", "--model", str(ensemble_dir), "--input", str(sample_dir / "reviews_unlabelled.csv"),
                 "--output", str(out), "--no-progress", "--precision", "fp32"]) == 0
    assert pd.read_csv(out).status.isin(["ok", "truncated"]).sum() >= 55  # the tiny encoder reads 32 tokens
    assert main(["evaluate", "--model", str(ensemble_dir), "--data", str(split[1])]) == 0
    transfer = tmp_path / "transfer.txt"
    transfer.write_text((sample_dir / "comments.txt").read_text(encoding="utf-8"), encoding="utf-8")
    student = tmp_path / "student"
    assert main(["distill", f"teachers=[{ensemble_dir},{tfidf_dir}]", f"transfer={transfer}",
                 f"student={tiny_encoder_dir}", f"train={split[0]}", f"dev={split[1]}", f"out={student}",
                 "max_length=64", "epochs=1", "progress=false", "plots=false", "precision=fp32",
                 "references=false"]) == 0
    assert (student / "config.json").is_file()


def test_app_serves_a_tfidf_folder(tfidf_dir):
    from koelectra_kit.app.server import create_app
    from koelectra_kit.app.settings import AppSettings
    from fastapi.testclient import TestClient

    app = create_app(AppSettings(model=str(tfidf_dir)))
    with TestClient(app, base_url="http://127.0.0.1") as client:  # the guard answers its own host only
        r = client.post("/api/predict", json={"text": "배송 빠르고 좋아요 최고"})
        assert r.status_code == 200 and r.json()["label"] in LABELS
        assert client.get("/api/info").json()["labels"] == LABELS


@pytest.mark.parametrize("case", ["one_member", "same_twice", "labels_differ", "nested", "member_moved"])
def test_bad_ensembles_are_one_error_line(case, ensemble_dir, tfidf_dir, split, tmp_path, capsys):
    import shutil

    args = ["ensemble", f"dev={split[1]}", f"out={tmp_path / 'e'}"]
    if case == "one_member":
        args.append(f"members=[{tfidf_dir}]")
    elif case == "same_twice":
        args.append(f"members=[{tfidf_dir},{tfidf_dir}]")
    elif case == "labels_differ":
        two = tmp_path / "two.csv"
        pd.read_csv(split[0]).query("label != 'neutral'").to_csv(two, index=False)
        assert main(["baseline", f"train={two}", f"out={tmp_path / 'bin'}", "labels=[negative,positive]",
                     "baseline.min_df=1", "plots=false"]) == 0
        capsys.readouterr()
        args.append(f"members=[{tfidf_dir},{tmp_path / 'bin'}]")
    elif case == "nested":
        args.append(f"members=[{ensemble_dir},{tfidf_dir}]")
    else:
        moved = tmp_path / "moved"
        shutil.copytree(ensemble_dir, moved)
        shutil.rmtree(moved / "members" / json.loads((moved / "classifier.json").read_text())["members"][1]["path"]
                      .split("/", 1)[1])
        args = ["label", "--model", str(moved), "--input", str(split[1]), "--output", str(tmp_path / "o.csv")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1
    assert not (tmp_path / "e").exists() and not (tmp_path / "o.csv").exists()


def test_an_ensemble_dev_set_without_a_class_is_refused(tiny_classifier_dir, tfidf_dir, split, tmp_path, capsys):
    """As fine-tuning's dev file: weights chosen on a dev set with no neutral row (or one row) were written, exit 0,
    blind to that class."""
    dev = tmp_path / "dev.csv"
    pd.read_csv(split[1]).query("label != 'neutral'").to_csv(dev, index=False)
    assert main(["ensemble", f"members=[{tiny_classifier_dir},{tfidf_dir}]", f"dev={dev}", f"out={tmp_path / 'e'}",
                 "precision=fp32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and err.count("\n") == 1 and "no examples of 'neutral'" in err
    assert not (tmp_path / "e").exists()


def test_an_ensemble_dev_set_the_members_were_fitted_on_is_refused_or_counted(tiny_classifier_dir, tfidf_dir, split,
                                                                              tmp_path, capsys):
    """dev= a member's training file gave all weight to TF-IDF (which memorised those rows) and reported its
    training score as the dev score, exit 0; part of it is a warning counting the rows."""
    members = f"members=[{tiny_classifier_dir},{tfidf_dir}]"
    capsys.readouterr()
    assert main(["ensemble", members, f"dev={split[0]}", f"out={tmp_path / 'e'}", "precision=fp32"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: dev=") and err.count("\n") == 1, err
    assert f"every dev text is among the rows member {tfidf_dir} was fitted on (from {split[0]})" in err
    assert not (tmp_path / "e").exists()
    mixed = tmp_path / "mixed.csv"
    pd.concat([pd.read_csv(split[1]), pd.read_csv(split[0]).iloc[:7]]).to_csv(mixed, index=False)
    assert main(["ensemble", members, f"dev={mixed}", f"out={tmp_path / 'e'}", "precision=fp32",
                 "grid_step=0.5"]) == 0
    err = capsys.readouterr().err
    assert f"warning: 7 of the 37 dev rows are among the rows member {tfidf_dir} was fitted" in err


def test_finetune_writes_tfidf_and_ensemble_beside_the_encoder(tiny_encoder_dir, split, tmp_path, capsys):
    from koelectra_kit.classify.classifier import Classifier

    out = tmp_path / "clf"
    assert main(["finetune", "--config", "tiny", f"model={tiny_encoder_dir}", f"train={split[0]}",
                 f"dev={split[1]}", f"out={out}", "epochs=1", "precision=fp32", "progress=false",
                 "plots=false"]) == 0
    printed = capsys.readouterr().err
    ev = json.loads((out / "eval.json").read_text())
    c = ev["candidates"]
    best = max(c["scores"], key=lambda k: c["scores"][k]["macro_f1"])
    assert c["scores"][c["best"]]["macro_f1"] == c["scores"][best]["macro_f1"]
    assert f"best on dev: {c['best']}" in printed
    assert ev["references"]["tfidf"]["macro_f1"] == c["scores"]["tfidf"]["macro_f1"]
    # OUT stays a transformers folder; its ensemble loads through its relative members
    assert type(Classifier.load(out, precision="fp32")).__name__ == "Classifier"
    ens = Classifier.load(out / "ensemble", precision="fp32")
    dev = pd.read_csv(split[1])
    got = ens.predict(dev.review.tolist())
    f1 = json.loads((out / "ensemble" / "eval.json").read_text())["dev"]["macro_f1"]
    from koelectra_kit.classify.metrics import macro_f1

    assert macro_f1(np.array([LABELS.index(x) for x in dev.label]), got.probs.argmax(1), 3) == pytest.approx(f1)
    assert Classifier.load(out / "tfidf").labels == LABELS


def test_onnx_export_of_a_tfidf_or_ensemble_folder_is_one_line(tfidf_dir, ensemble_dir, capsys):
    for folder in (tfidf_dir, ensemble_dir):
        assert main(["export", "--model", str(folder), "--onnx"]) == 2
        err = capsys.readouterr().err
        assert err.startswith("error:") and "folder: --onnx exports fine-tuned encoders" in err
        assert not (folder / "onnx").exists()


def _reorder_labels(folder: Path, kind: str) -> None:
    """The hand edit issue 40 found labelling every row wrong: a folder's label list put in another order."""
    if kind == "finetuned":
        path = folder / "config.json"
        cfg = json.loads(path.read_text(encoding="utf-8"))
        names = [cfg["id2label"][k] for k in sorted(cfg["id2label"], key=int)][::-1]
        cfg["id2label"] = {str(i): n for i, n in enumerate(names)}
        cfg["label2id"] = {n: i for i, n in enumerate(names)}
    else:
        path = folder / "classifier.json"
        cfg = json.loads(path.read_text(encoding="utf-8"))
        cfg["labels"] = cfg["labels"][::-1]
    path.write_text(json.dumps(cfg, ensure_ascii=False), encoding="utf-8")


@pytest.mark.parametrize("kind", ["tfidf", "ensemble", "finetuned"])
def test_a_reordered_label_list_is_one_error_line(kind, tfidf_dir, ensemble_dir, tiny_classifier_dir, split,
                                                  tmp_path, capsys):
    import shutil

    from koelectra_kit.classify.classifier import Classifier

    from .test_bad_input import assert_one_line_error, run_cli

    src = {"tfidf": tfidf_dir, "ensemble": ensemble_dir, "finetuned": tiny_classifier_dir}[kind]
    bad = tmp_path / "bad"
    shutil.copytree(src, bad)
    assert Classifier.load(bad).labels == LABELS  # the copy, unedited, loads
    _reorder_labels(bad, kind)
    rc, _, err = run_cli(capsys, "label", "--model", bad, "--input", split[1], "--output", tmp_path / "o.csv")
    assert_one_line_error(rc, err, str(LABELS), str(LABELS[::-1]))
    assert not (tmp_path / "o.csv").exists()


def test_a_tfidf_folder_without_the_trained_labels_record_loads_as_before(tfidf_dir, tmp_path):
    """Folders written before the weights carried their label names have nothing to compare: they load."""
    import shutil

    from safetensors import safe_open
    from safetensors.numpy import load_file, save_file

    from koelectra_kit.classify.classifier import Classifier

    old = tmp_path / "old"
    shutil.copytree(tfidf_dir, old)
    weights = old / "tfidf.safetensors"
    with safe_open(str(weights), framework="np") as f:
        assert json.loads(f.metadata()["labels"]) == LABELS
    save_file(load_file(str(weights)), str(weights))  # no metadata, as before issue 40
    assert Classifier.load(old).labels == LABELS


def test_a_device_that_is_not_one_is_refused_for_a_tfidf_folder_too(tfidf_dir, tmp_path, capsys):
    """A TF-IDF folder computes on no device, but a mistyped --device passed unnoticed there and failed only once
    an encoder came along: it is checked as for an encoder."""
    from tests.test_bad_input import assert_one_line_error, run_cli

    src = tmp_path / "in.csv"
    src.write_text("review\n좋아요\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "label", "--model", tfidf_dir, "--input", src, "--output", tmp_path / "o.csv",
                         "--device", "banana", "--no-progress")
    assert_one_line_error(rc, err, "device='banana' is not a device")
    assert not (tmp_path / "o.csv").exists()
    assert run_cli(capsys, "label", "--model", tfidf_dir, "--input", src, "--output", tmp_path / "o.csv",
                   "--device", "cpu", "--no-progress")[0] == 0
