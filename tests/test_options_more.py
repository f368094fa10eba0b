"""Options that were accepted and then ignored or checked too late, and messages that named the wrong fix: ``app
--dev`` with labels outside the app's classes (every retrain failed), ``app --classes ""``, an encoder as the
app's --model (a hint at a flag only ``label`` has), ``label --precision`` where nothing computes in it (ONNX,
int8), a missing weights file called damaged, and torch's own deprecation warning on ``--quantize``."""
from __future__ import annotations

import importlib.util
import shutil
import warnings

import pytest

from koelectra_kit.errors import ConfigError, InputError
from tests.test_bad_input import assert_one_line_error, run_cli

pytest.importorskip("fastapi")


@pytest.fixture
def pool(tmp_path, sample_dir):
    import pandas as pd

    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"]
    path = tmp_path / "pool.csv"
    pd.DataFrame({"id": range(len(reviews)), "review": reviews}).to_csv(path, index=False)
    return path


@pytest.fixture
def no_serving(monkeypatch):
    """The app's serve() replaced: a command the old code let through returns 0 here instead of serving forever."""
    import koelectra_kit.app

    served = []
    monkeypatch.setattr(koelectra_kit.app, "serve", lambda settings, classifier=None: served.append(settings))
    return served


def teach_settings(tmp_path, pool, model, **kw):
    from koelectra_kit.app import AppSettings

    return AppSettings(model=str(model), teach=str(pool), labels=str(tmp_path / "l.csv"), retrain_recipe="tfidf",
                       **kw)


# ---------------------------------------------------------------------------------------------------------
# app --dev: its labels against the app's classes, at start
# ---------------------------------------------------------------------------------------------------------


def test_app_dev_label_outside_the_classes_is_refused_at_start(capsys, tmp_path, pool, tfidf_dir, tiny_encoder_dir,
                                                              no_serving):
    """Was: the app started, and every retrain round failed naming finetune's label_map= and drop_unknown_labels=."""
    dev = tmp_path / "baddev.csv"
    dev.write_text("text,label\n좋아,great\n나빠,negative\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, "app", "--model", tfidf_dir, "--encoder", tiny_encoder_dir, "--teach", pool,
                         "--labels", tmp_path / "l.csv", "--dev", dev, "--retrain-recipe", "tfidf", "--port", "0")
    assert_one_line_error(rc, err, f"--dev {dev}", "'great'", "negative, neutral, positive")
    assert "label_map" not in err and "drop_unknown_labels" not in err
    assert not no_serving


def test_app_dev_with_no_label_of_the_classes_names_them_all(tmp_path, pool, tiny_encoder_dir):
    """Every row's label unknown (no row left to read): each label is still named, against --classes."""
    dev = tmp_path / "dev.csv"
    dev.write_text("review,sentiment\n좋아,pos\n나빠,neg\n별로,neg\n", encoding="utf-8")
    with pytest.raises(InputError) as e:
        teach_settings(tmp_path, pool, tiny_encoder_dir, dev=str(dev), classes=["good", "bad"]).validate()
    message = str(e.value)
    assert message.startswith(f"--dev {dev}:") and "'neg' (2 rows)" in message and "'pos' (1 row)" in message
    assert "good, bad" in message and "label_map" not in message


def test_app_dev_read_as_the_rounds_read_it_passes(tmp_path, pool, tfidf_dir, tiny_encoder_dir):
    """Aliases the rounds accept (긍정, Positive) are no error; the default classes for an encoder --model."""
    dev = tmp_path / "dev.csv"
    dev.write_text("review,label\n좋아,긍정\n나빠,Negative\n그냥,neutral\n", encoding="utf-8")
    teach_settings(tmp_path, pool, tfidf_dir, dev=str(dev), encoder=str(tiny_encoder_dir)).validate()
    teach_settings(tmp_path, pool, tiny_encoder_dir, dev=str(dev)).validate()
    with pytest.raises(InputError, match="'neutral' \\(1 row\\)"):  # --classes: the encoder's classes are those
        teach_settings(tmp_path, pool, tiny_encoder_dir, dev=str(dev), classes=["negative", "positive"]).validate()


# ---------------------------------------------------------------------------------------------------------
# app --classes "" and an encoder served outside teach mode
# ---------------------------------------------------------------------------------------------------------


def test_app_empty_classes_is_refused(capsys, tmp_path, pool, tiny_encoder_dir, no_serving):
    """Was: --classes "" (an unset variable) quietly meant negative,neutral,positive."""
    rc, _, err = run_cli(capsys, "app", "--model", tiny_encoder_dir, "--teach", pool, "--labels", tmp_path / "l.csv",
                         "--classes", "", "--port", "0")
    assert_one_line_error(rc, err, "--classes", "at least 2 distinct names")
    assert not no_serving


def test_app_encoder_without_teach_names_what_app_takes(capsys, tmp_path, tiny_encoder_dir, no_serving):
    """Was: "... or pass --allow-generic-labels", a flag app does not have (`label`'s only: it keeps the hint)."""
    rc, _, err = run_cli(capsys, "app", "--model", tiny_encoder_dir, "--labels", tmp_path / "l.csv", "--port", "0")
    assert_one_line_error(rc, err, "no trained classification head", "finetune", "--teach")
    assert "allow-generic-labels" not in err
    assert not no_serving


# ---------------------------------------------------------------------------------------------------------
# label --precision where nothing computes in it; torch's own deprecation warning on --quantize
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("precision", ["bf16", "fp16"])
@pytest.mark.parametrize("engine", [{"backend": "onnx"}, {"backend": "torch", "quantize": True},
                                    {"backend": "auto", "quantize": True}, {"backend": "onnx", "quantize": True}])
def test_label_precision_that_cannot_apply_is_refused(engine, precision):
    """Was: exit 0, bf16 or fp16 ignored. auto (the default) and fp32 go with every engine, and bf16 or fp16 with torch
    unquantized."""
    from koelectra_kit.label import LabelConfig

    def config(**kw):
        return LabelConfig(model="m", input="in.csv", output="out.csv", **kw)

    with pytest.raises(ConfigError, match=f"precision={precision} with "
                                          f"{'quantize' if engine.get('quantize') else 'backend=onnx'}"):
        config(precision=precision, **engine).validate()
    for fine in ("auto", "fp32"):
        config(precision=fine, **engine).validate()
    config(precision=precision, backend="torch").validate()


def test_label_cli_onnx_fp16_is_one_line_and_writes_nothing(capsys, tmp_path, sample_dir, tiny_classifier_dir):
    """Was: exit 0, the output byte for byte fp32's."""
    out = tmp_path / "o.csv"
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input",
                         sample_dir / "reviews_unlabelled.csv", "--output", out, "--backend", "onnx", "--precision",
                         "fp16", "--no-progress")
    assert_one_line_error(rc, err, "precision=fp16", "backend=onnx", "fp32 graph")
    assert not out.exists()


def test_torch_quantize_warns_once_in_the_toolkits_words(tiny_classifier_dir):
    """torch's own quantize_per_tensor deprecation (a site-packages path, a line of torch's source) is not shown on
    top of the toolkit's warning that names the replacements. (Before any other test here quantizes: torch warns once
    a process.)"""
    from koelectra_kit.classify.classifier import Classifier

    if importlib.util.find_spec("torchao") is not None:
        pytest.skip("torchao installed: quantize_dynamic is not used")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        Classifier.load(tiny_classifier_dir, device="cpu", quantize=True, backend="torch")
    shown = [str(w.message) for w in caught]
    assert not [m for m in shown if "quantize_per_tensor" in m], shown
    assert any("quantize_dynamic" in m for m in shown), shown


def test_classifier_load_refuses_bf16_with_quantize(tiny_classifier_dir):
    from koelectra_kit.classify.classifier import Classifier

    with pytest.raises(ConfigError, match="precision=bf16 with quantize"):
        Classifier.load(tiny_classifier_dir, device="cpu", precision="bf16", quantize=True, backend="torch")


# ---------------------------------------------------------------------------------------------------------
# a missing weights file
# ---------------------------------------------------------------------------------------------------------


def test_missing_weights_file_is_called_missing_not_damaged(capsys, tmp_path, sample_dir, tiny_classifier_dir):
    model = tmp_path / "mm"
    shutil.copytree(tiny_classifier_dir, model)
    (model / "model.safetensors").unlink()
    rc, _, err = run_cli(capsys, "label", "--model", model, "--input", sample_dir / "reviews_unlabelled.csv",
                         "--output", tmp_path / "o.csv", "--no-progress")
    assert_one_line_error(rc, err, f"no model.safetensors (or pytorch_model.bin) in {model}", "missing")
    assert "damaged" not in err


def test_suggest_on_an_encoder_names_its_own_key_not_labels_flag(capsys, tmp_path, sample_dir, tiny_encoder_dir):
    """suggest said "or pass --allow-generic-labels", label's flag; suggest takes the key allow_generic_labels=true."""
    rc, _, err = run_cli(capsys, "suggest", f"model={tiny_encoder_dir}", f"pool={sample_dir / 'reviews_labelled.csv'}",
                         f"out={tmp_path / 's.csv'}", "text_column=review")
    assert_one_line_error(rc, err, "no trained classification head", "pass allow_generic_labels=true")
    assert "--allow-generic-labels" not in err
