"""Hugging Face ``datasets`` as inputs (koelectra_kit/io/hfdata.py): a ``save_to_disk`` folder (``FOLDER[:SPLIT]``), a
folder of Parquet shards and ``hf:OWNER/NAME[:CONFIG]:SPLIT`` in every command that reads a corpus, a labelled table,
a transfer set or a file to label, with the files' column rules and one-line errors. Datasets are built here; the
hub is never reached: ``datasets.load_dataset`` is replaced by one that records its arguments, and the one test
that calls the real one runs offline (conftest sets HF_HUB_OFFLINE / HF_DATASETS_OFFLINE)."""
from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pytest

from koelectra_kit.io import hfdata
from koelectra_kit.cli import main
from koelectra_kit.io.corpus import iter_texts
from koelectra_kit.errors import InputError
from koelectra_kit.finetune import read_labelled
from koelectra_kit.label import label_file, merge_shards

ROOT = Path(__file__).resolve().parent.parent
TINY_FINETUNE = ROOT / "configs" / "finetune" / "tiny.yaml"
TINY_PRETRAIN = ROOT / "configs" / "pretrain" / "tiny.yaml"
L3 = ["negative", "neutral", "positive"]


def _csv(path):
    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def _parquet_folder(df: pd.DataFrame, folder: Path, shards: int) -> Path:
    folder.mkdir()
    size = -(-len(df) // shards)
    for i in range(shards):  # names sort in row order: the folder is read in name order
        df.iloc[i * size:(i + 1) * size].to_parquet(folder / f"part-{i:05d}.parquet", index=False)
    return folder


@pytest.fixture(scope="module")
def data(tmp_path_factory, sample_dir):
    """The bundled samples as datasets: labelled reviews as a DatasetDict (train/dev) and as Parquet shards, an
    NSMC-shaped Dataset (document + ClassLabel), the comments as a Dataset and as Parquet shards, the unlabelled
    reviews as a Dataset and as Parquet shards; and the CSV/TXT files they were made from, to compare with."""
    from datasets import ClassLabel, Dataset, DatasetDict, Features, Value

    root = tmp_path_factory.mktemp("hf_inputs")
    labelled = _csv(sample_dir / "reviews_labelled.csv")
    train = pd.concat([g.iloc[:24] for _, g in labelled.groupby("label")]).reset_index(drop=True)
    dev = pd.concat([g.iloc[24:32] for _, g in labelled.groupby("label")]).reset_index(drop=True)
    train.to_csv(root / "train.csv", index=False)
    DatasetDict(train=Dataset.from_pandas(train), dev=Dataset.from_pandas(dev)).save_to_disk(root / "reviews")
    _parquet_folder(dev, root / "dev_parquet", 2)
    nsmc = Features({"id": Value("string"), "document": Value("string"), "label": ClassLabel(names=L3)})
    Dataset.from_dict({"id": [str(i) for i in range(len(train))], "document": train["review"].tolist(),
                       "label": [L3.index(v) for v in train["label"]]}, features=nsmc).save_to_disk(root / "nsmc")
    comments = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    Dataset.from_dict({"comment": comments}).save_to_disk(root / "comments")
    _parquet_folder(pd.DataFrame({"comment": comments}), root / "comments_parquet", 3)
    unlabelled = _csv(sample_dir / "reviews_unlabelled.csv")
    Dataset.from_pandas(unlabelled).save_to_disk(root / "unlabelled")
    _parquet_folder(unlabelled, root / "unlabelled_parquet", 2)
    return root


@pytest.fixture
def fake_hub(monkeypatch, data):
    """``datasets.load_dataset`` replaced: records (path, name, split, streaming) and answers with a local dataset
    (the folder's, or ``fake_hub.answer``), streamed as an IterableDataset when streaming was asked for."""
    import datasets

    class Hub:
        calls: list = []
        folder = data / "reviews"
        answer = None

        def load_dataset(self, path, name=None, split=None, streaming=False, **kw):
            self.calls.append((path, name, split, streaming))
            ds = self.answer if self.answer is not None else datasets.load_from_disk(str(self.folder))
            if split is not None and isinstance(ds, datasets.DatasetDict):
                ds = ds[split]
            return ds.to_iterable_dataset() if streaming and isinstance(ds, datasets.Dataset) else ds

    hub = Hub()
    hub.calls = []
    monkeypatch.setattr(datasets, "load_dataset", hub.load_dataset)
    return hub


# --- the spec ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("spec, name, config, split", [
    ("hf:e9t/nsmc", "e9t/nsmc", None, None),
    ("hf:nsmc:train", "nsmc", None, "train"),
    ("hf:e9t/nsmc:train[:10%]", "e9t/nsmc", None, "train[:10%]"),  # a slice's colon is not a separator
    ("hf:owner/reviews:ko:test", "owner/reviews", "ko", "test"),
])
def test_hub_spec_is_name_then_split_or_config_and_split(spec, name, config, split):
    src = hfdata.parse_source(spec)
    assert (src.kind, src.name, src.config, src.split) == ("hub", name, config, split)
    assert hfdata.is_dataset_source(spec) and str(src) == spec


@pytest.mark.parametrize("spec", ["hf:", "hf:a/b:c:d:e", "hf:a/b::test", "hf:a/b:", "hf:/b", "hf:a/b/c"])
def test_ambiguous_or_malformed_hub_spec_is_one_error_line(spec):
    with pytest.raises(InputError, match="hf:OWNER/NAME:CONFIG:SPLIT") as e:
        hfdata.parse_source(spec)
    assert "\n" not in str(e.value)


def test_files_stay_files(data, tmp_path):
    assert not hfdata.is_dataset_source(data / "train.csv") and not hfdata.is_dataset_source("missing.csv")
    assert hfdata.is_dataset_source(data / "reviews") and hfdata.is_dataset_source(f"{data / 'reviews'}:dev")


# --- tables: finetune / evaluate / distill read them like the CSV --------------------------------------------


def test_save_to_disk_and_parquet_folder_read_like_the_csv(data):
    want = read_labelled(data / "train.csv", L3)
    for source in (f"{data / 'reviews'}:train", hfdata.parse_source(f"{data / 'reviews'}:train")):
        got = read_labelled(source, L3)
        assert got.texts == want.texts and got.y.tolist() == want.y.tolist()
        assert got.report["format"] == "dataset" and "encoding" not in got.report
    dev = read_labelled(data / "dev_parquet", L3)  # two shards, in name order
    assert dev.texts == read_labelled(f"{data / 'reviews'}:dev", L3).texts and len(dev.texts) == 24


def test_class_label_column_reads_as_its_names(data):
    got = read_labelled(data / "nsmc", ["부정", "중립", "긍정"])  # names, then the usual Korean aliases
    want = read_labelled(data / "train.csv", L3)
    assert got.report["text_column"] == "document" and got.y.tolist() == want.y.tolist()
    assert got.ids == [str(i) for i in range(len(want.texts))]  # the id column kept, as for a file


def test_integer_labels_with_a_gap_read_as_written_from_a_parquet_or_save_to_disk_folder(tmp_path):
    """A nullable Int64 column with a missing value: a Parquet folder failed in fillna("") with "TypeError: Invalid
    value '' for dtype 'Int64'" (a traceback), and a save_to_disk folder read the labels as '1.0'/'0.0', which
    labels=[0,1] did not match. Both read each value as written, as read_table reads one Parquet file."""
    from datasets import Dataset

    df = pd.DataFrame({"review": ["좋아요", "별로", "그냥", "최고"], "label": pd.array([1, None, 0, 1], dtype="Int64")})
    _parquet_folder(df, tmp_path / "pq", 2)
    Dataset.from_pandas(df).save_to_disk(tmp_path / "disk")
    for folder in ("pq", "disk"):
        assert [str(v) for v in hfdata.read_dataframe(tmp_path / folder)["label"]] == ["1", "", "0", "1"], folder
        got = read_labelled(tmp_path / folder, ["0", "1"], drop_unknown_labels=True)
        assert got.texts == ["좋아요", "그냥", "최고"] and got.y.tolist() == [1, 0, 1], folder


def test_hub_table_is_loaded_with_its_config_and_split(fake_hub, data):
    got = read_labelled("hf:owner/reviews:default:train", L3)
    assert fake_hub.calls == [("owner/reviews", "default", "train", False)]  # a table: a normal (cached) load
    assert got.texts == read_labelled(data / "train.csv", L3).texts


def test_hub_dataset_with_several_splits_needs_one(fake_hub):
    with pytest.raises(InputError, match=r"hf:owner/reviews: the dataset has splits train, dev: name one") as e:
        read_labelled("hf:owner/reviews", L3)
    assert "\n" not in str(e.value) and fake_hub.calls == [("owner/reviews", None, None, False)]


def test_offline_hub_is_one_error_line(capsys, tiny_classifier_dir):
    with pytest.raises(InputError, match=r"can't load it from the Hugging Face hub.*save_to_disk") as e:
        read_labelled("hf:koelectra-kit-tests/absent:train", L3)
    assert "\n" not in str(e.value)
    rc = main(["evaluate", "--model", str(tiny_classifier_dir), "--data", "hf:koelectra-kit-tests/absent:train"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: hf:koelectra-kit-tests/absent:train: can't load")


@pytest.mark.parametrize("make, message", [
    (lambda d, t: f"{d / 'reviews'}", r"this DatasetDict needs a split; splits: train, dev \(write .*reviews:SPLIT\)"),
    (lambda d, t: f"{d / 'reviews'}:test", r"has no split 'test'; splits: train, dev"),
    (lambda d, t: f"{d / 'nsmc'}:train", r"holds one Dataset, not a DatasetDict: it has no splits"),
    (lambda d, t: f"{d / 'dev_parquet'}:train", r"a folder of Parquet files has no splits"),
    (lambda d, t: _folder(t, "notes.txt"), r"is a directory, but not a dataset: no dataset_dict.json or state.json"),
    (lambda d, t: _dataset(t, {"x": ["좋아요"] * 3, "label": ["positive"] * 3}),
     r"no text column found .*columns present: x, label"),
    (lambda d, t: _dataset(t, {"review": ["1", "2", "3"], "label": ["positive"] * 3}),
     r"column 'review' holds only numbers \(3 values"),
    (lambda d, t: _mixed_shards(t), r"differ from part-0.parquet's"),
])
def test_bad_dataset_inputs_are_one_error_line(make, message, data, tmp_path, tiny_classifier_dir, capsys):
    source = make(data, tmp_path)
    capsys.readouterr()  # (datasets' own progress bars from making it)
    with pytest.raises(InputError, match=message) as e:
        read_labelled(source, L3)
    assert "\n" not in str(e.value)
    rc = main(["evaluate", "--model", str(tiny_classifier_dir), "--data", str(source)])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and err[0].startswith("error: ")


def _folder(tmp: Path, name: str) -> Path:
    (tmp / "neither").mkdir()
    (tmp / "neither" / name).write_text("좋아요\n", encoding="utf-8")
    return tmp / "neither"


def _dataset(tmp: Path, columns: dict) -> Path:
    from datasets import Dataset

    Dataset.from_dict(columns).save_to_disk(tmp / "ds")
    return tmp / "ds"


def _mixed_shards(tmp: Path) -> Path:
    (tmp / "mixed").mkdir()
    pd.DataFrame({"review": ["좋아요"], "label": ["positive"]}).to_parquet(tmp / "mixed" / "part-0.parquet")
    pd.DataFrame({"text": ["별로"], "label": ["negative"]}).to_parquet(tmp / "mixed" / "part-1.parquet")
    return tmp / "mixed"


# --- the commands ---------------------------------------------------------------------------------------------


def test_finetune_trains_on_a_datasetdict_split_with_a_parquet_dev(data, tiny_encoder_dir, tmp_path):
    out = tmp_path / "clf"
    rc = main(["finetune", "--config", str(TINY_FINETUNE), f"model={tiny_encoder_dir}",
               f"train={data / 'reviews'}:train", f"dev={data / 'dev_parquet'}", f"out={out}", "epochs=1", "precision=fp32", "progress=false",
               "plots=false", "ensemble=none", "references=false"])
    assert rc == 0
    report = json.loads((out / "data_report.json").read_text(encoding="utf-8"))
    assert report["train"]["rows"] == 72 and report["dev"]["rows"] == 24
    assert report["train_file"]["format"] == "dataset" and report["dev_source"] == f"file {data / 'dev_parquet'}"
    assert "datasets:\n- reviews\n- dev_parquet" in (out / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("source", ["nsmc", "dev_parquet", "hf"])
def test_evaluate_reads_each_form(source, data, tiny_classifier_dir, tmp_path, fake_hub):
    fake_hub.folder = data / "nsmc"
    spec = "hf:owner/nsmc:train" if source == "hf" else str(data / source)
    rc = main(["evaluate", "--model", str(tiny_classifier_dir), "--data", spec, "--out", str(tmp_path / "eval"),
               "references=false"])
    assert rc == 0
    preds = _csv(tmp_path / "eval" / "predictions.csv")
    assert len(preds) == (24 if source == "dev_parquet" else 72)
    assert fake_hub.calls == ([("owner/nsmc", None, "train", False)] if source == "hf" else [])
    if source != "dev_parquet":
        assert preds.columns[0] == "id"  # the input's own id column first, as for a file


def test_distill_takes_datasets_for_transfer_train_and_dev(data, tiny_encoder_dir, tmp_path):
    from koelectra_kit.config import load_config
    from koelectra_kit.distill import DistillConfig, distill

    cfg = load_config(DistillConfig, None, [
        "teachers=[tfidf]", f"transfer=[{data / 'comments'},{data / 'unlabelled_parquet'}]",
        f"student={tiny_encoder_dir}", f"train={data / 'reviews'}:train", f"dev={data / 'dev_parquet'}",
        f"out={tmp_path / 'student'}", "max_transfer=60", "batch_size=32", "epochs=0.5", "precision=fp32",
        "progress=false", "plots=false", "references=false"])
    result = distill(cfg)
    rep = result["distill"]["transfer"]
    assert rep["files"] == {str(data / "comments"): 400, str(data / "unlabelled_parquet"): 59}  # 1 empty review
    assert rep["kept"] == 60 and result["train"]["labelled_rows"] == 72
    assert (tmp_path / "student" / "model.safetensors").exists()


def test_label_save_to_disk_and_parquet_folder_like_the_csv(data, sample_dir, tiny_classifier, tmp_path):
    ref = tmp_path / "ref.csv"
    label_file(None, sample_dir / "reviews_unlabelled.csv", ref, "review", classifier=tiny_classifier,
               progress=False)
    s = label_file(None, data / "unlabelled", tmp_path / "a.csv", "review", classifier=tiny_classifier,
                   progress=False, chunk_rows=7)
    assert s.rows == 60
    pd.testing.assert_frame_equal(_csv(tmp_path / "a.csv"), _csv(ref))  # every row, column and status
    label_file(None, data / "unlabelled_parquet", tmp_path / "b.jsonl", "review", classifier=tiny_classifier,
               progress=False)
    got = pd.read_json(tmp_path / "b.jsonl", lines=True, dtype=False)
    assert got["label"].tolist() == _csv(ref)["label"].tolist() and got["id"].tolist() == _csv(ref)["id"].tolist()


def test_label_hub_dataset_through_the_cli(data, tiny_classifier_dir, tmp_path, fake_hub, capsys):
    fake_hub.folder = data / "unlabelled"
    out = tmp_path / "o.tsv"
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", "hf:owner/reviews:train", "--output",
               str(out), "--no-progress"])
    assert rc == 0 and fake_hub.calls == [("owner/reviews", None, "train", False)]  # a table: a cached load
    assert len(pd.read_csv(out, sep="\t", dtype=str, keep_default_na=False)) == 60


def test_label_resume_and_shards_work_on_a_dataset(data, tiny_classifier, tmp_path):
    src = f"{data / 'unlabelled'}"
    ref = tmp_path / "ref.csv"
    label_file(None, src, ref, "review", classifier=tiny_classifier, progress=False, chunk_rows=8)

    def die(n):
        if n == 2:
            raise KeyboardInterrupt  # a kill after the second chunk

    out = tmp_path / "o.csv"
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=8, _after_chunk=die)
    state = json.loads((tmp_path / "o.csv.partial.json").read_text(encoding="utf-8"))
    assert state["rows_done"] == 16 and state["input"] == hfdata.parse_source(src).identity
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=8, resume=True)
    assert s.new_rows == 44 and out.read_bytes() == ref.read_bytes()

    for k in (1, 2, 3):
        label_file(None, src, tmp_path / "sh.csv", "review", classifier=tiny_classifier, progress=False, chunk_rows=8,
                   shard=f"{k}/3")
    merged, n = merge_shards(tmp_path / "sh.csv")
    assert n == 3 and merged.read_bytes() == ref.read_bytes()


def test_label_refuses_a_dataset_without_an_output_file(data, tiny_classifier_dir, tmp_path, capsys):
    for extra in (["--output-suffix", ".labelled.csv"], ["--output", f"{tmp_path}/"]):
        rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(data / "unlabelled"), *extra])
        err = capsys.readouterr().err.strip().splitlines()
        assert rc == 2 and len(err) == 1 and "is a dataset: label it in a run of its own" in err[0]
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(data / "unlabelled"), "--text-column",
               "text", "--output", str(tmp_path / "o.csv")])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and "no column 'text'; columns present: ['id', 'product', 'review'" in err[0]


def test_corpus_texts_stream_from_each_form(data, sample_dir, fake_hub):
    comments = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    assert list(iter_texts(data / "comments")) == comments  # text column found among tables.TEXT_COLUMNS
    assert list(iter_texts(data / "comments_parquet")) == comments  # three shards, in name order
    fake_hub.folder = data / "comments"
    assert list(iter_texts("hf:owner/comments")) == comments
    assert fake_hub.calls == [("owner/comments", None, None, True)]  # a corpus is streamed


def test_tokenizer_train_streams_a_hub_corpus_once(data, tmp_path, fake_hub, capsys):
    fake_hub.folder = data / "comments"
    args = ["tokenizer", "train", "input=hf:owner/comments:train", "text_column=comment", "vocab_size=300",
            "presplit=none", "progress=false", f"cache_dir={tmp_path / 'cache'}"]
    assert main([*args, f"out={tmp_path / 'tok'}"]) == 0
    assert (tmp_path / "tok" / "tokenizer.json").exists()
    assert fake_hub.calls == [("owner/comments", None, "train", True)]
    assert main([*args, f"out={tmp_path / 'tok2'}"]) == 0  # the copy in the cache: not streamed again
    assert len(fake_hub.calls) == 1 and "using the copy streamed before" in capsys.readouterr().err
    assert (tmp_path / "tok" / "vocab.txt").read_text() == (tmp_path / "tok2" / "vocab.txt").read_text()
    assert main(["tokenizer", "train", f"input={data / 'comments_parquet'}", "vocab_size=300", "presplit=none",
                 "progress=false", f"out={tmp_path / 'tok3'}", f"cache_dir={tmp_path / 'cache'}"]) == 0
    assert (tmp_path / "tok" / "vocab.txt").read_text() == (tmp_path / "tok3" / "vocab.txt").read_text()


def test_pretrain_on_a_dataset_packs_the_same_texts_as_the_file(data, sample_dir, tiny_cfg, pretrain_cache, tmp_path):
    from koelectra_kit.pretrain import pretrain

    pretrain(tiny_cfg(f"corpus={data / 'comments'}", "max_steps=2", f"out={tmp_path / 'a'}"))
    copy = hfdata.corpus_file(data / "comments", None, pretrain_cache)  # the run's copy (found, not written again)
    assert copy.read_text(encoding="utf-8") == (sample_dir / "comments.txt").read_text(encoding="utf-8")
    metas = [json.loads(p.read_text()) for p in (pretrain_cache / "packed").glob("*/meta.json")]
    # the packed cache is keyed by content: a test that packed the sample file itself first (same texts) made the
    # entry this run found, and its meta names that file
    assert any(m["corpus"] in ([str(copy)], [str(sample_dir / "comments.txt")]) and m["texts"] == 400 for m in metas)
    rc = main(["pretrain", "--config", str(TINY_PRETRAIN), f"corpus=[{data / 'comments_parquet'}]",
               f"out={tmp_path / 'b'}", f"cache_dir={pretrain_cache}", "max_steps=2", "progress=false",
               "plots=false"])  # no tokenizer=: one is trained on the dataset's copy
    assert rc == 0 and (tmp_path / "b" / "tokenizer" / "tokenizer.json").exists()
