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
    assert dims == {"input_ids": ["batch", "sequence"], "attention_mask": ["batch", "sequence"],
                    "token_type_ids": ["batch", "sequence"]}
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


def _torch_logits(folder, ids, mask):
    import torch
    from transformers import AutoModelForSequenceClassification

    model = AutoModelForSequenceClassification.from_pretrained(folder).float().eval()
    with torch.no_grad():
        return model(input_ids=torch.from_numpy(ids), attention_mask=torch.from_numpy(mask)).logits.numpy()


def test_the_exported_graph_takes_what_the_folders_tokenizer_gives(finetuned_dir, tmp_path, capsys):
    """The graph took only input_ids and attention_mask: ``sess.run(None, dict(tok(texts, return_tensors="np")))``
    (transformers' tokenizers give token_type_ids too, as optimum's ELECTRA export takes them) was "Invalid input
    name: token_type_ids". fp32 and int8 both take them; the toolkit's backend feeds them, and still reads an export
    made before (two inputs)."""
    import shutil

    import onnxruntime as ort
    from transformers import AutoTokenizer

    from koelectra_kit.classify.classifier import Classifier  # (importing koelectra_kit registers the tokenizer)
    from koelectra_kit.cli import main

    folder = tmp_path / "clf"
    shutil.copytree(finetuned_dir, folder)
    assert main(["export", "--model", str(folder), "--onnx", "--int8"]) == 0
    capsys.readouterr()
    texts = ["배송 빠르고 좋아요ㅋㅋㅋㅋㅋ", "별로예요", "재밌어요 다시 살게요 " * 40]  # the last: past max_length
    inputs = dict(AutoTokenizer.from_pretrained(folder)(texts, padding=True, return_tensors="np"))
    assert set(inputs) == {"input_ids", "token_type_ids", "attention_mask"}
    ref = _torch_logits(folder, inputs["input_ids"], inputs["attention_mask"])
    for name, tolerance in (("model.onnx", 1e-3), ("model_quantized.onnx", 0.5)):
        session = ort.InferenceSession(str(folder / "onnx" / name), providers=["CPUExecutionProvider"])
        logits = session.run(None, inputs)[0]
        assert np.abs(logits - ref).max() < tolerance, name
    reference = Classifier.load(folder, device="cpu", precision="fp32", backend="torch").predict(texts)
    for quantize in (False, True):  # the toolkit's own backend on these graphs (it feeds token_type_ids)
        got = Classifier.load(folder, device="cpu", backend="onnx", quantize=quantize).predict(texts)
        assert np.abs(np.asarray(got.probs) - np.asarray(reference.probs)).max() < (0.1 if quantize else 1e-3)
    # an export made before the graph took token_type_ids (two inputs) is still read: the backend feeds the inputs
    # the session names
    old = _two_input_export(folder)
    clf = Classifier.load(folder, device="cpu", backend="onnx")
    assert clf.model.path == old  # the folder's own (older) export
    assert np.abs(np.asarray(clf.predict(texts).probs) - np.asarray(reference.probs)).max() < 1e-3


def _two_input_export(folder):
    """onnx/model.onnx as exports were made before token_type_ids: input_ids and attention_mask only."""
    import warnings

    import onnx
    import torch
    from transformers import AutoModelForSequenceClassification

    from koelectra_kit.classify.onnx_backend import DIGEST_KEY, probe_batch, weights_digest

    model = AutoModelForSequenceClassification.from_pretrained(folder).float().eval()
    ids, mask = probe_batch(model.config.vocab_size, model.config.pad_token_id or 0,
                            positions=model.config.max_position_embeddings)
    path = folder / "onnx" / "model.onnx"
    axes = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the tracer's notes, as export_onnx silences them
        torch.onnx.export(model, (ids, mask), str(path), input_names=["input_ids", "attention_mask"],
                          output_names=["logits"], dynamic_axes=axes, opset_version=17, dynamo=False)
    graph = onnx.load(str(path))
    graph.metadata_props.add(key=DIGEST_KEY, value=weights_digest(model))
    onnx.save(graph, str(path))
    assert [i.name for i in onnx.load(str(path)).graph.input] == ["input_ids", "attention_mask"]
    return path


def test_the_model_cards_recipe_outside_python_gives_the_models_ids_and_raw_text_does_not(finetuned_dir, tmp_path,
                                                                                          capsys, sample_dir):
    """What the card and docs/huggingface.md tell a user of tokenizer.json (transformers.js, optimum, the
    ``tokenizers`` library): pre-split with KoTokenizer.presplit_batch, truncate to max_length, and the ONNX graph
    gives Classifier's labels; on raw text tokenizer.json takes the text without complaint and gives other ids."""
    import json
    import shutil

    import onnxruntime as ort
    from tokenizers import Tokenizer

    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.cli import main
    from koelectra_kit.tokenizer import KoTokenizer

    folder = tmp_path / "clf"
    shutil.copytree(finetuned_dir, folder)
    assert main(["export", "--model", str(folder), "--onnx"]) == 0
    assert "tokenizer.json alone (transformers.js, optimum) expects text pre-split" in capsys.readouterr().out
    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "presplit_batch" in card and "token_type_ids" in card and "onnx/model.onnx" in card
    texts = pd.read_csv(sample_dir / "reviews_unlabelled.csv")["review"].dropna().astype(str).tolist()
    texts += ["배송 빠르고 좋아요ㅋㅋㅋㅋㅋ", "재밌어요 다시 살게요 " * 40]
    max_length = json.loads((folder / "config.json").read_text(encoding="utf-8"))["koelectra_kit"]["max_length"]
    plain = Tokenizer.from_file(str(folder / "tokenizer.json"))
    plain.enable_truncation(max_length)
    plain.enable_padding(pad_id=KoTokenizer.from_pretrained(folder).pad_token_id)
    ours = KoTokenizer.from_pretrained(folder).encode_batch(texts, max_length=max_length)["input_ids"]
    raw = plain.encode_batch(texts)
    assert sum([t for t in e.ids if t or not e.attention_mask] != list(r) for e, r in zip(raw, ours)) > 0
    pre = plain.encode_batch(KoTokenizer.from_pretrained(folder).presplit_batch(texts))
    assert [[t for t, m in zip(e.ids, e.attention_mask) if m] for e in pre] == [list(r) for r in ours]
    session = ort.InferenceSession(str(folder / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    ids = np.array([e.ids for e in pre], dtype=np.int64)
    logits = session.run(None, {"input_ids": ids, "attention_mask": np.array([e.attention_mask for e in pre],
                                                                             dtype=np.int64),
                                "token_type_ids": np.zeros_like(ids)})[0]
    clf = Classifier.load(folder, device="cpu", precision="fp32", backend="torch")
    assert [clf.labels[i] for i in logits.argmax(1)] == clf.predict(texts).labels
