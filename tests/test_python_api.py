"""The Python API refuses what it can't read in one line (InputError / ConfigError), never a silent wrong answer or a
TypeError from deep inside: every classifier kind's predict, suggest_rows, label_file(s), label_dataframe, evaluate."""
from __future__ import annotations

import ast
import importlib.util
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from koelectra_kit.errors import ConfigError, InputError, KitError

TEXTS = ["배송 빠르고 좋아요", "최악이에요 환불해주세요", "그냥 그래요"]


@pytest.fixture(scope="module")
def kinds(tiny_classifier, tiny_classifier_dir, tfidf_dir) -> dict:
    """One classifier of every kind: a fine-tuned encoder, its ONNX backend, a TF-IDF folder, an ensemble of both."""
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.classify.ensemble import EnsembleClassifier

    tfidf = Classifier.load(tfidf_dir)
    out = {"encoder": tiny_classifier, "tfidf": tfidf,
           "ensemble": EnsembleClassifier([tiny_classifier, tfidf], [0.5, 0.5], list(tiny_classifier.labels))}
    if importlib.util.find_spec("onnxruntime") is None:
        return out
    out["onnx"] = Classifier.load(tiny_classifier_dir, device="cpu", backend="onnx")
    return out


def test_every_kind_refuses_one_text_or_none(kinds):
    # the ensemble read "좋아요" as three texts (three labels) and None as a TypeError from list(None)
    for name, clf in kinds.items():
        for bad in ("좋아요", None, b"bytes"):
            with pytest.raises(InputError, match="a list of texts"):
                clf.predict(bad)


@pytest.mark.parametrize("table, says", [
    (pd.DataFrame({"review": TEXTS}), r'a DataFrame; pass its text column: df\["review"\]'),
    (np.array([[t] for t in TEXTS]), r"not one of shape \(3, 1\).*a\[:, 0\]"),
    (np.array(TEXTS[0]), r"not one of shape \(\)"),
    ({"a": TEXTS[0]}, "not a dict"),
    (set(TEXTS), "no order"),
])
def test_every_kind_refuses_what_is_not_one_column_of_texts(kinds, table, says):
    # a DataFrame scored its column names, a 2-D array each row as the empty text: answers, without a word
    for name, clf in kinds.items():
        with pytest.raises(InputError, match=says):
            clf.predict(table)


def test_every_kind_refuses_a_whole_dataset_and_takes_one_column_in_any_form(kinds):
    datasets = pytest.importorskip("datasets")
    ds = datasets.Dataset.from_dict({"text": TEXTS})
    for name, clf in kinds.items():
        with pytest.raises(InputError, match=r'a Dataset; pass its text column: ds\["text"\]'):
            clf.predict(ds)  # each row's dict was scored as the empty text
        want = clf.predict(TEXTS)
        for form in (tuple(TEXTS), pd.Series(TEXTS), np.array(TEXTS), (t for t in TEXTS), pd.Index(TEXTS),
                     ds["text"]):
            got = clf.predict(form)
            assert got.labels == want.labels, (name, type(form))
            np.testing.assert_allclose(got.probs, want.probs, atol=1e-6)


@pytest.mark.parametrize("batch_size", [0, -1, "big", True, 2.0])
def test_every_kind_refuses_a_batch_size_that_is_none(kinds, batch_size):
    # TF-IDF scores all at once and took batch_size=0 where the encoder refused it: one call, one answer
    for name, clf in kinds.items():
        with pytest.raises(InputError, match="batch_size="):
            clf.predict(TEXTS, batch_size=batch_size)


def test_predictions_name_their_probability_columns(kinds):
    from koelectra_kit.classify.predictions import Predictions

    for name, clf in kinds.items():
        p = clf.predict(TEXTS)
        assert p.classes == list(clf.labels), name
        assert p.labels == [p.classes[i] for i in p.probs.argmax(axis=1)], name
    old = Predictions(["a"], np.array([[0.9, 0.1]]), [False])  # built positionally, as before the field
    assert old.classes == [] and old.confidence.tolist() == pytest.approx([0.9])


def test_suggest_rows_refuses_what_predict_refuses(tiny_classifier, tiny_classifier_dir):
    from koelectra_kit.suggest import suggest_rows

    with pytest.raises(InputError, match="a list of texts"):
        suggest_rows(tiny_classifier, "좋아요 별로", 3)
    with pytest.raises(InputError, match=r"df\["):
        suggest_rows(tiny_classifier, pd.DataFrame({"review": TEXTS}), 3)
    with pytest.raises(InputError, match="a list of texts"):  # "좋아요" excluded its characters, not the text
        suggest_rows(tiny_classifier, TEXTS, 3, exclude="좋아요")
    # a set is what the app passes (rows done or leased): no order is answered in, so it stays accepted
    assert suggest_rows(tiny_classifier, TEXTS, 3, exclude={TEXTS[0]}).indices.tolist() == [1, 2]
    with pytest.raises(ConfigError, match=r"is a folder or hub id, not a loaded Classifier: pass Classifier.load\("):
        suggest_rows(str(tiny_classifier_dir), TEXTS, 3)
    with pytest.raises(ConfigError, match="not a NoneType"):
        suggest_rows(None, TEXTS, 3)
    with pytest.raises(InputError, match="batch_size=0"):
        suggest_rows(tiny_classifier, [], 3, batch_size=0)  # said before any work, even with nothing to score
    assert len(suggest_rows(tiny_classifier, pd.Series(TEXTS), 2).indices) == 2


@pytest.fixture()
def reviews(tmp_path) -> Path:
    path = tmp_path / "reviews.csv"
    pd.DataFrame({"review": TEXTS, "id": [1, 2, 3]}).to_csv(path, index=False)
    return path


def test_label_file_refuses_what_is_no_path(tiny_classifier_dir, reviews, tmp_path):
    from koelectra_kit.label import label_file, label_files

    df = pd.DataFrame({"review": TEXTS})
    with pytest.raises(ConfigError, match="input: a file path .*not a DataFrame; label_dataframe"):
        label_file(tiny_classifier_dir, df, tmp_path / "o.csv")  # was OSError: File name too long
    with pytest.raises(ConfigError, match="not a list; label_files"):
        label_file(tiny_classifier_dir, [reviews], tmp_path / "o.csv")  # was "--input \"['…']\" matches no file"
    with pytest.raises(ConfigError, match="inputs: a list of file paths or globs, not a DataFrame; label_dataframe"):
        label_files(tiny_classifier_dir, df, tmp_path)  # its column names were taken for files
    with pytest.raises(ConfigError, match="output: a file path"):
        label_file(tiny_classifier_dir, reviews, df)
    assert not (tmp_path / "o.csv").exists()


def test_label_file_options_are_checked_as_the_config_loader_checks_them(tiny_classifier_dir, reviews, tmp_path):
    from koelectra_kit.label import label_file

    out = tmp_path / "o.csv"
    with pytest.raises(ConfigError, match=r"unknown config key 'bach_size' \(did you mean batch_size\?\); allowed:"):
        label_file(tiny_classifier_dir, reviews, out, bach_size=3)
    with pytest.raises(ConfigError, match="batch_size: expected an integer, got 'big'"):
        label_file(tiny_classifier_dir, reviews, out, batch_size="big")
    with pytest.raises(ConfigError, match="fmt= and format= both given"):
        label_file(tiny_classifier_dir, reviews, out, fmt="csv", format="csv")
    with pytest.raises(ConfigError, match="format='xls'"):
        label_file(tiny_classifier_dir, reviews, out, format="xls")


def test_label_file_takes_format_as_the_config_names_it(tiny_classifier_dir, tmp_path):
    from koelectra_kit.label import label_file

    src = tmp_path / "reviews.dat"
    src.write_text("review\tid\n" + "".join(f"{t}\t{i}\n" for i, t in enumerate(TEXTS)), encoding="utf-8")
    label_file(tiny_classifier_dir, src, tmp_path / "a.csv", format="tsv", progress=False)
    label_file(tiny_classifier_dir, src, tmp_path / "b.csv", fmt="tsv", progress=False)
    a, b = (pd.read_csv(tmp_path / f"{x}.csv") for x in "ab")
    assert a["id"].tolist() == [0, 1, 2] and a.equals(b)


def test_label_dataframe_refuses_a_mistyped_option(tiny_classifier_dir):
    from koelectra_kit.label import label_dataframe

    df = pd.DataFrame({"review": TEXTS})
    with pytest.raises(ConfigError, match=r"unknown option 'bach_size' \(did you mean batch_size\?\); allowed:"):
        label_dataframe(df, model=tiny_classifier_dir, bach_size=3)  # was Classifier.load's TypeError


def test_label_dataframe_picks_the_text_column_as_label_does(tiny_classifier, capsys):
    from koelectra_kit.label import label_dataframe

    nsmc = pd.DataFrame({"id": [1, 2, 3], "document": TEXTS})
    out = label_dataframe(nsmc, classifier=tiny_classifier)  # was "no column 'review'"
    assert out["status"].tolist() == ["ok"] * 3
    assert "labelling its column 'document' (text_column= names another)" in capsys.readouterr().err
    with pytest.raises(InputError, match=r"no text column among \['id', 'note'\].*pass text_column= NAME"):
        label_dataframe(pd.DataFrame({"id": [1], "note": ["x"]}), classifier=tiny_classifier)
    both = pd.DataFrame({"review": TEXTS, "text": ["", "", ""]})
    for kwargs in ({}, {"text_column": "review"}):  # review is picked first, and named as before
        assert label_dataframe(both, classifier=tiny_classifier, **kwargs)["status"].tolist() == ["ok"] * 3


def test_evaluate_refuses_a_dataframe_and_checks_types(tiny_classifier_dir, tmp_path):
    from koelectra_kit.classify.evaluate import evaluate

    df = pd.DataFrame({"review": TEXTS, "label": ["positive", "negative", "neutral"]})
    with pytest.raises(ConfigError, match=r"data: a file path .*not a DataFrame; .*df.to_csv"):
        evaluate(tiny_classifier_dir, df)  # was OSError: File name too long
    dev = tmp_path / "dev.csv"
    df.to_csv(dev, index=False)
    with pytest.raises(ConfigError, match="batch_size: expected an integer, got 'big'"):
        evaluate(tiny_classifier_dir, dev, batch_size="big")  # was TypeError: '<' not supported
    with pytest.raises(ConfigError, match="model_dir: a file path"):
        evaluate(None, dev)


def test_progress_bars_are_tqdm_auto():
    """tqdm.auto: a notebook widget in Jupyter, text in a terminal; plain tqdm printed text lines into notebooks."""
    package = Path(__file__).resolve().parent.parent / "koelectra_kit"
    plain = []
    for path in package.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module == "tqdm":
                plain.append(f"{path.relative_to(package)}:{node.lineno}")
            if isinstance(node, ast.Import) and any(a.name == "tqdm" for a in node.names):
                plain.append(f"{path.relative_to(package)}:{node.lineno}")
    assert not plain, plain


def test_errors_are_kit_errors_of_one_line(kinds):
    for name, clf in kinds.items():
        with pytest.raises(KitError) as e:
            clf.predict(pd.DataFrame({"review": TEXTS}))
        assert "\n" not in str(e.value)
