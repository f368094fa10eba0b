"""ONNX export and the onnxruntime backend: dynamic axes, fp32 = torch's argmax (>= 99.9% of nsmc3 dev, probabilities
within 1e-3), int8 close, the CLI's outputs; on the fine-tuned tiny sample model (trained, so probabilities are
not flat)."""
from __future__ import annotations

import csv

import numpy as np
import pandas as pd
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


@pytest.fixture(scope="module")
def torch_clf(finetuned_dir):
    from koelectra_kit.classify.classifier import Classifier

    return Classifier.load(finetuned_dir, device="cpu", precision="fp32", backend="torch")


@pytest.fixture(scope="module")
def onnx_clf(finetuned_dir):
    from koelectra_kit.classify.classifier import Classifier

    return Classifier.load(finetuned_dir, device="cpu", backend="onnx")


def compare(torch_clf, other, texts: list[str]) -> tuple[float, float]:
    """(share of equal argmax, max |probability difference|), texts tokenized once for both models."""
    import torch

    from koelectra_kit.classify.classifier import predict_logits

    ids = torch_clf.tok.encode_batch(texts, max_length=torch_clf.max_length, return_offsets=False)["input_ids"]
    a, b = (torch.softmax(torch.from_numpy(predict_logits(c.model, ids, pad_id=torch_clf.tok.pad_token_id,
                                                          device=c.device, dtype=c.dtype)), -1).numpy()
            for c in (torch_clf, other))
    return float((a.argmax(1) == b.argmax(1)).mean()), float(np.abs(a - b).max())


def test_onnx_backend_matches_torch_on_sample(torch_clf, onnx_clf, sample_dir):
    texts = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].astype(str).tolist()
    assert type(onnx_clf.model).__name__ == "OnnxModel" and onnx_clf.backend == "onnx"
    agree, diff = compare(torch_clf, onnx_clf, texts)
    assert agree == 1.0 and diff < 1e-3
    assert onnx_clf.predict(texts).labels == torch_clf.predict(texts).labels  # the public path, end to end


# the whole dev set (10,000 reviews, ~20 s of Kiwi on 2 cores) in the slow tier; its first 2,000 by default
@pytest.mark.parametrize("rows", [2000, pytest.param(None, marks=pytest.mark.slow)])
def test_onnx_backend_matches_torch_on_nsmc3_dev(torch_clf, onnx_clf, shared_data, rows):
    df = pd.read_csv(shared_data / "nsmc3" / "dev.tsv", sep="\t", quoting=csv.QUOTE_NONE, dtype=str,
                     keep_default_na=False)
    agree, diff = compare(torch_clf, onnx_clf, df["document"].tolist()[:rows])
    assert agree >= 0.999 and diff < 1e-3


def test_int8_onnx_stays_close(finetuned_dir, torch_clf, sample_dir):
    from koelectra_kit.classify.classifier import Classifier

    q = Classifier.load(finetuned_dir, device="cpu", quantize=True)  # auto + quantize: onnxruntime int8
    assert (q.backend, q.quantized) == ("onnx", True) and q.model.path.name == "model_quantized.onnx"
    texts = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].astype(str).tolist()
    agree, diff = compare(torch_clf, q, texts)
    assert agree >= 0.95 and diff < 0.1


def test_export_cli_writes_dynamic_axes_and_the_folder_export_is_used(finetuned_dir, tmp_path, capsys):
    import shutil

    import onnx

    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.cli import main

    folder = tmp_path / "clf"
    shutil.copytree(finetuned_dir, folder)
    assert main(["export", "--model", str(folder), "--onnx", "--int8"]) == 0
    printed = capsys.readouterr().out
    assert "model.onnx" in printed and "model_quantized.onnx" in printed
    graph = onnx.load(str(folder / "onnx" / "model.onnx")).graph
    dims = {i.name: [d.dim_param or d.dim_value for d in i.type.tensor_type.shape.dim] for i in graph.input}
    assert dims == {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"]}
    clf = Classifier.load(folder, device="cpu", backend="onnx")
    assert clf.model.path == folder / "onnx" / "model.onnx"  # newer than the weights: the folder's own export
    reference = Classifier.load(folder, device="cpu", precision="fp32", backend="torch")
    assert clf.predict(["재밌어요", "별로"]).labels == reference.predict(["재밌어요", "별로"]).labels


def test_export_into_a_folder_of_other_files_is_refused_and_a_rerun_says_it_replaced(tiny_classifier_dir, tmp_path,
                                                                                      capsys):
    """--out ~/thesis wrote model.onnx among the folder's files, and a second export replaced it without a word."""
    from koelectra_kit.cli import main

    other = tmp_path / "thesis"
    other.mkdir()
    (other / "thesis.txt").write_text("x", encoding="utf-8")
    capsys.readouterr()
    assert main(["export", "--model", str(tiny_classifier_dir), "--onnx", "--out", str(other)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --out") and "holds other files and no earlier export" in err and err.count("\n") == 1
    assert sorted(p.name for p in other.iterdir()) == ["thesis.txt"]
    out = tmp_path / "onnx"
    assert main(["export", "--model", str(tiny_classifier_dir), "--onnx", "--out", str(out)]) == 0
    assert "replaced" not in capsys.readouterr().out
    assert main(["export", "--model", str(tiny_classifier_dir), "--onnx", "--out", str(out)]) == 0
    assert "(replaced the earlier export)" in capsys.readouterr().out


def test_bad_backend_and_missing_export_request_are_one_line(finetuned_dir, capsys):
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.cli import main
    from koelectra_kit.errors import InputError

    with pytest.raises(InputError, match="backend=tensorrt"):
        Classifier.load(finetuned_dir, backend="tensorrt")
    assert main(["export", "--model", str(finetuned_dir)]) == 2
    assert capsys.readouterr().err.startswith("error: nothing to do")
    assert main(["export", "--model", str(finetuned_dir), "--int8"]) == 2  # said what is missing, not "nothing"
    assert capsys.readouterr().err == "error: --int8 quantizes the ONNX export: add --onnx\n"
    # a push of a folder that is no model (a run's root, a tokenizer, /): refused before the hub is asked
    assert main(["export", "--model", str(finetuned_dir.parent), "--push-to-hub", "me/x"]) == 2
    assert "is not a model folder (no config.json or classifier.json)" in capsys.readouterr().err


def test_an_onnx_export_of_a_name_that_is_no_folder_says_so(capsys, monkeypatch, tmp_path):
    """A mistyped --model (offline, or a hub id that does not exist) was "has no usable tokenizer ... export a folder
    written by `koelectra-kit finetune`"."""
    from koelectra_kit.cli import main

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.chdir(tmp_path)
    assert main(["export", "--model", "nonexist", "--onnx"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: --model nonexist: no such folder, and as a hub id it can't be loaded"), err


def test_a_folders_onnx_made_from_other_weights_is_not_used(finetuned_dir, tiny_classifier_dir, tmp_path, capsys):
    """Only file times were compared: `export --model A --out B/onnx` made B label with A's graph (exit 0)."""
    import shutil

    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.cli import main

    folder = tmp_path / "clf"
    shutil.copytree(finetuned_dir, folder)
    assert main(["export", "--model", str(tiny_classifier_dir), "--onnx", "--int8", "--out",
                 str(folder / "onnx")]) == 0
    capsys.readouterr()
    texts = ["재밌어요", "별로", "배송 빠르고 좋아요 다시 살게요"]
    reference = Classifier.load(folder, device="cpu", precision="fp32", backend="torch").predict(texts)
    for quantize in (False, True):
        clf = Classifier.load(folder, device="cpu", backend="onnx", quantize=quantize)
        assert clf.model.path.parent != folder / "onnx"  # exported again (into the cache) from B's own weights
        got = clf.predict(texts)
        assert np.abs(np.asarray(got.probs) - np.asarray(reference.probs)).max() < (0.1 if quantize else 1e-3)
    # B's own export, newer or not, is used
    assert main(["export", "--model", str(folder), "--onnx", "--int8"]) == 0
    assert Classifier.load(folder, device="cpu", backend="onnx").model.path == folder / "onnx" / "model.onnx"
    assert Classifier.load(folder, device="cpu", backend="onnx", quantize=True).model.path == \
        folder / "onnx" / "model_quantized.onnx"


def test_an_fp32_export_removes_an_int8_graph_of_earlier_weights(finetuned_dir, tiny_classifier_dir, tmp_path, capsys):
    """`export --onnx` (no --int8) after the weights changed left onnx/model_quantized.onnx of the old weights, which
    a push uploaded beside the new model.onnx."""
    import shutil

    from koelectra_kit.classify.onnx_backend import recorded_digest
    from koelectra_kit.cli import main

    folder = tmp_path / "clf"
    shutil.copytree(tiny_classifier_dir, folder)
    assert main(["export", "--model", str(folder), "--onnx", "--int8"]) == 0
    int8 = folder / "onnx" / "model_quantized.onnx"
    same = int8.read_bytes()
    assert main(["export", "--model", str(folder), "--onnx"]) == 0  # the same weights: their int8 graph stays
    assert int8.read_bytes() == same
    shutil.copy(finetuned_dir / "model.safetensors", folder / "model.safetensors")  # other weights
    shutil.copy(finetuned_dir / "config.json", folder / "config.json")
    for name in ("tokenizer.json", "vocab.txt", "koelectra_tokenizer.json", "tokenizer_config.json"):
        if (finetuned_dir / name).exists():
            shutil.copy(finetuned_dir / name, folder / name)
    capsys.readouterr()
    assert main(["export", "--model", str(folder), "--onnx"]) == 0
    assert not int8.exists() and "removed" in capsys.readouterr().out
    assert recorded_digest(folder / "onnx" / "model.onnx") is not None


def test_a_model_with_fewer_than_24_positions_exports(tiny_classifier_dir, tmp_path):
    """The export's probe rows were 24 tokens: a model of 16 positions crashed in export, label --backend onnx and
    label --quantize (a traceback)."""
    import json
    import shutil

    from transformers import AutoModelForSequenceClassification

    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.cli import main

    folder = tmp_path / "short"
    shutil.copytree(tiny_classifier_dir, folder)
    cfg = json.loads((folder / "config.json").read_text())
    cfg["max_position_embeddings"] = 16
    cfg["koelectra_kit"]["max_length"] = 16
    (folder / "config.json").write_text(json.dumps(cfg))
    model = AutoModelForSequenceClassification.from_pretrained(folder, ignore_mismatched_sizes=True)
    model.save_pretrained(folder)
    assert main(["export", "--model", str(folder), "--onnx", "--int8"]) == 0
    got = Classifier.load(folder, device="cpu", backend="onnx").predict(["재밌어요", "별로"])
    assert len(got.labels) == 2
