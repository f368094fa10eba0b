"""More of Hugging Face ``datasets`` as inputs (koelectra_kit/io/hfdata.py; tests/test_hf_inputs.py has the forms):
a ``ClassLabel`` column reads as its names in every reader of a dataset (``label`` copied it as integers while
``finetune`` read names), and a dataset of no rows is one line saying so in every command that reads one (it was
"not a readable `save_to_disk` folder (list index out of range)")."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from koelectra_kit.errors import InputError
from koelectra_kit.finetune import read_labelled
from koelectra_kit.io import hfdata
from koelectra_kit.label import label_file
from tests.test_bad_input import assert_one_line_error, run_cli

L3 = ["negative", "neutral", "positive"]
REVIEWS = ["연출이 세련됐어요", "그냥 그랬어요", "시간 아까움", "배우 연기 최고", "무난한 편"]
LABELS = [2, 1, 0, -1, 2]  # -1: datasets' "no label"
NAMES = ["positive", "neutral", "negative", "", "positive"]
TAGS = [[0, 2], [], [1], [2], [0]]  # a list of ClassLabel: multi-label tags


def _csv(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


@pytest.fixture(scope="module")
def classlabel_ds(tmp_path_factory):
    """A Dataset with a ClassLabel column (one -1), a list of ClassLabel and an id, and a CSV of the same rows with
    the names spelled out."""
    from datasets import ClassLabel, Dataset, Features, Sequence, Value

    root = tmp_path_factory.mktemp("hf_classlabel")
    features = Features({"id": Value("string"), "review": Value("string"), "label": ClassLabel(names=L3),
                         "tags": Sequence(ClassLabel(names=["acting", "story", "visuals"]))})
    Dataset.from_dict({"id": [f"r{i}" for i in range(5)], "review": REVIEWS, "label": LABELS, "tags": TAGS},
                      features=features).save_to_disk(root / "ds")
    pd.DataFrame({"id": [f"r{i}" for i in range(5)], "review": REVIEWS, "label": NAMES}).to_csv(root / "same.csv",
                                                                                              index=False)
    return root


def test_every_dataset_reader_sees_class_label_names(classlabel_ds):
    rows = hfdata.open_rows(classlabel_ds / "ds")  # label's and suggest's reader
    got = [r.fields for r in rows.records]
    assert [f[2] for f in got] == ["positive", "neutral", "negative", None, "positive"]
    assert [f[3] for f in got] == [["acting", "visuals"], [], ["story"], ["visuals"], ["acting"]]
    assert [f[:2] for f in got] == [[f"r{i}", t] for i, t in enumerate(REVIEWS)]  # the other columns as stored
    df = hfdata.read_dataframe(classlabel_ds / "ds")  # finetune's and evaluate's: the same, missing as ''
    assert df["label"].tolist() == NAMES and df["id"].tolist() == [f"r{i}" for i in range(5)]
    got = read_labelled(classlabel_ds / "ds", L3, drop_unknown_labels=True)
    assert got.texts == [t for t, n in zip(REVIEWS, NAMES) if n]


def test_label_writes_a_class_label_column_as_its_names_and_resumes(classlabel_ds, tiny_classifier,
                                                                     tiny_classifier_dir, tmp_path, capsys):
    ref = tmp_path / "ref.csv"
    label_file(None, classlabel_ds / "same.csv", ref, "review", classifier=tiny_classifier, progress=False)
    out = tmp_path / "o.csv"
    rc, _, err = run_cli(capsys, "label", "--model", tiny_classifier_dir, "--input", classlabel_ds / "ds",
                         "--output", out, "--no-progress")
    assert rc == 0, err
    got = _csv(out)
    assert got["label"].tolist() == NAMES  # was 2, 1, 0, -1, 2
    assert got["tags"].tolist()[:3] == ['["acting", "visuals"]', "[]", '["story"]']  # a list as JSON
    pd.testing.assert_frame_equal(got.drop(columns="tags"), _csv(ref))  # every other column and prediction

    def die(n):
        if n == 1:
            raise KeyboardInterrupt  # a kill after the first chunk

    resumed = tmp_path / "r.csv"
    with pytest.raises(KeyboardInterrupt):
        label_file(None, classlabel_ds / "ds", resumed, "review", classifier=tiny_classifier, progress=False,
                   chunk_rows=2, _after_chunk=die)
    state = json.loads((tmp_path / "r.csv.partial.json").read_text(encoding="utf-8"))
    assert state["rows_done"] == 2
    s = label_file(None, classlabel_ds / "ds", resumed, "review", classifier=tiny_classifier, progress=False,
                   chunk_rows=2, resume=True)
    assert s.new_rows == 3 and resumed.read_bytes() == out.read_bytes()


@pytest.fixture(scope="module")
def empty_ds(tmp_path_factory, sample_dir):
    """``save_to_disk`` of no rows (it writes no Arrow file), alone and as one split of a DatasetDict."""
    from datasets import Dataset, DatasetDict

    root = tmp_path_factory.mktemp("hf_empty")
    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv", dtype=str, keep_default_na=False)
    Dataset.from_pandas(reviews.head(0)).save_to_disk(root / "ds_empty")
    DatasetDict(train=Dataset.from_pandas(reviews.head(30)),
                test=Dataset.from_pandas(reviews.head(0))).save_to_disk(root / "dd")
    return root


@pytest.mark.parametrize("command", ["label", "evaluate", "tokenizer", "finetune", "distill"])
def test_a_dataset_of_no_rows_is_one_error_line(command, empty_ds, tiny_classifier_dir, tiny_encoder_dir, tmp_path,
                                                capsys):
    src = empty_ds / "ds_empty"
    argv = {
        "label": ["label", "--model", tiny_classifier_dir, "--input", src, "--output", tmp_path / "o.csv"],
        "evaluate": ["evaluate", "--model", tiny_classifier_dir, "--data", src],
        # the error before "ds_empty: writing its texts to ...txt", a file never written
        "tokenizer": ["tokenizer", "train", f"input=[{src}]", f"out={tmp_path / 'tok'}"],
        "finetune": ["finetune", f"model={tiny_encoder_dir}", f"train={src}", f"out={tmp_path / 'clf'}"],
        "distill": ["distill", "teachers=[tfidf]", f"transfer={src}", f"student={tiny_encoder_dir}",
                    f"train={empty_ds / 'dd'}:train", f"out={tmp_path / 'student'}"],
    }[command]
    capsys.readouterr()
    rc, _, err = run_cli(capsys, *argv)
    assert_one_line_error(rc, err, f"{src}: the dataset has no rows")


def test_an_empty_split_leaves_the_others_readable(empty_ds):
    assert len(hfdata.read_dataframe(f"{empty_ds / 'dd'}:train")) == 30  # loading the whole dict failed on 'test'
    with pytest.raises(InputError, match=r"dd:test: the dataset has no rows$"):
        hfdata.read_dataframe(f"{empty_ds / 'dd'}:test")


def test_corpus_file_of_no_rows_names_no_file(tmp_path, monkeypatch):
    """A dataset filtered to no rows (save_to_disk writes an Arrow file of none: it loads) is refused before the log
    names a texts file."""
    from datasets import Dataset

    Dataset.from_dict({"text": ["좋아요"]}).filter(lambda r: False).save_to_disk(tmp_path / "none")
    said: list[str] = []
    monkeypatch.setattr(hfdata, "log", said.append)
    with pytest.raises(InputError, match=r"none: the dataset has no rows$"):
        hfdata.corpus_file(tmp_path / "none", None, tmp_path / "cache")
    assert said == []
    assert not list((tmp_path / "cache").rglob("*.txt"))


def test_a_parquet_file_datasets_wrote_reads_its_class_labels_as_names(classlabel_ds, tiny_classifier, tmp_path):
    """datasets keeps its features in a Parquet file's schema (to_parquet, the hub's Parquet copies): the ClassLabel
    column read as integers there while the same dataset's save_to_disk folder read names; a Parquet file of
    another writer (no features) reads as stored."""
    from datasets import load_from_disk

    from koelectra_kit.io.tables import read_table

    load_from_disk(str(classlabel_ds / "ds")).to_parquet(tmp_path / "reviews.parquet")
    assert read_table(tmp_path / "reviews.parquet")["label"].tolist() == NAMES  # finetune's and evaluate's reader
    (tmp_path / "shards").mkdir()
    load_from_disk(str(classlabel_ds / "ds")).to_parquet(tmp_path / "shards" / "train-00000-of-00001.parquet")
    assert [r.fields[2] for r in hfdata.open_rows(tmp_path / "shards").records] == \
        ["positive", "neutral", "negative", None, "positive"]  # a folder of shards: label's reader
    out = tmp_path / "out.csv"
    label_file(None, tmp_path / "reviews.parquet", out, "review", classifier=tiny_classifier, progress=False)
    assert _csv(out)["label"].tolist() == NAMES
    pd.DataFrame({"review": REVIEWS, "label": [2, 1, 0, 0, 2]}).to_parquet(tmp_path / "plain.parquet")
    assert read_table(tmp_path / "plain.parquet")["label"].tolist() == [2, 1, 0, 0, 2]  # as stored
