"""Published checkpoints end to end (issue 30): a folder in the format KoELECTRA / KcELECTRA ship (vocab.txt +
tokenizer_config.json, ElectraForPreTraining weights, the generator in a folder of its own as ElectraForMaskedLM;
a published fine-tuned classifier with id2label) goes through finetune, label, evaluate, distill, export, the app
and ``pretrain init= init_generator=``. The tokenizer is the checkpoint's own BERT WordPiece (no Kiwi, none of our
normalization); a folder fine-tuned from it labels the same in plain transformers' ``pipeline``. Damaged vocabularies
and a mismatched generator are one ``error:`` line. Tiny random models (hidden 32, 2 layers): seconds."""
from __future__ import annotations

import collections
import json
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import pandas as pd
import pytest
import torch

from koelectra_kit.cli import main
from koelectra_kit.config import load_config
from koelectra_kit.errors import InputError

ROOT = Path(__file__).resolve().parent.parent
TINY_FINETUNE = ROOT / "configs" / "finetune" / "tiny.yaml"
CONTINUE = ROOT / "configs" / "pretrain" / "cpu-continue.yaml"
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]  # KoELECTRA's ids 0-4
LABELS = ["negative", "neutral", "positive"]


def _texts(sample_dir: Path) -> list[str]:
    unlabelled = pd.read_csv(sample_dir / "reviews_unlabelled.csv")["review"].dropna().astype(str).tolist()
    return unlabelled + ["배송 빠르고 좋아요ㅋㅋㅋㅋㅋ", "ABC 제품 별로예요", "좋아요 " * 80]  # the last: past max_length


def _vocab(sample_dir: Path) -> list[str]:
    """A KoELECTRA-like WordPiece vocabulary: specials, ASCII, every character of the sample (Hangul syllables,
    ㅋ ㅎ ㅠ, punctuation) and its ## form, the sample's frequent words, a few endings."""
    texts = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    for name in ("reviews_labelled.csv", "reviews_unlabelled.csv"):
        texts += pd.read_csv(sample_dir / name)["review"].dropna().astype(str).tolist()
    chars = sorted({c for t in texts for c in t if not c.isspace() and ord(c) < 0x10000})
    words = collections.Counter(w for t in texts for w in re.findall("[가-힣]{2,}", t))
    ascii_ = [chr(c) for c in range(33, 127)]
    tokens = (SPECIALS + ascii_ + chars + [w for w, _ in words.most_common(300)] + [f"##{c}" for c in chars]
              + [f"##{a}" for a in ascii_ if a.isalnum()] + ["##요", "##어요", "##네요", "##는데", "##했어요"])
    return list(dict.fromkeys(tokens))


def _tokenizer_files(folder: Path, vocab: list[str]) -> None:
    """What ElectraTokenizer.save_pretrained wrote for KoELECTRA: vocab.txt, no tokenizer.json."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps({"do_lower_case": False, "model_max_length": 512}))
    (folder / "special_tokens_map.json").write_text(json.dumps(
        {"unk_token": "[UNK]", "sep_token": "[SEP]", "pad_token": "[PAD]", "cls_token": "[CLS]",
         "mask_token": "[MASK]"}))


def _electra_config(vocab_size: int, hidden: int, heads: int, **kw):
    from transformers import ElectraConfig

    return ElectraConfig(vocab_size=vocab_size, hidden_size=hidden, embedding_size=16, num_hidden_layers=2,
                         num_attention_heads=heads, intermediate_size=2 * hidden, max_position_embeddings=512, **kw)


def _save_bin(model, folder: Path) -> None:
    """Weights as pytorch_model.bin (most published ELECTRAs predate safetensors) + config.json."""
    folder.mkdir(parents=True, exist_ok=True)
    torch.save(model.state_dict(), folder / "pytorch_model.bin")
    model.config.architectures = [type(model).__name__]
    model.config.save_pretrained(folder)


@pytest.fixture(scope="module")
def pub(tmp_path_factory, sample_dir):
    """disc: ElectraForPreTraining (safetensors); gen: its ElectraForMaskedLM (pytorch_model.bin, its embedding
    tables the discriminator's, as the official code shares them); clf: a published fine-tuned classifier."""
    from transformers import ElectraForMaskedLM, ElectraForPreTraining, ElectraForSequenceClassification

    root = tmp_path_factory.mktemp("published")
    vocab = _vocab(sample_dir)
    disc, gen, clf = root / "koelectra-tiny-discriminator", root / "koelectra-tiny-generator", root / "kotiny-nsmc"
    torch.manual_seed(0)
    d = ElectraForPreTraining(_electra_config(len(vocab), 32, 2, architectures=["ElectraForPreTraining"]))
    d.save_pretrained(disc)
    g = ElectraForMaskedLM(_electra_config(len(vocab), 16, 1))
    g.electra.embeddings.load_state_dict(d.electra.embeddings.state_dict())
    _save_bin(g, gen)
    c = ElectraForSequenceClassification(_electra_config(len(vocab), 32, 2, id2label=dict(enumerate(LABELS)),
                                                         label2id={lab: i for i, lab in enumerate(LABELS)}))
    c.save_pretrained(clf)
    for folder in (disc, gen, clf):
        _tokenizer_files(folder, vocab)
    return SimpleNamespace(root=root, disc=disc, gen=gen, clf=clf, vocab=vocab)


@pytest.fixture(scope="module")
def pub_finetuned(pub, sample_dir, tmp_path_factory):
    out = tmp_path_factory.mktemp("pub_finetuned") / "sentiment"
    rc = main(["finetune", "--config", str(TINY_FINETUNE), f"model={pub.disc}",
               f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "epochs=4", "lr=3e-3", "precision=fp32",
               "references=false", "plots=false", "progress=false"])
    assert rc == 0
    return out


def _one_error_line(capsys, *fragments: str) -> str:
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "Traceback" not in err, err
    for f in fragments:
        assert f in err, err
    return err


# --- the tokenizer ------------------------------------------------------------------------------------------


def test_published_tokenizer_is_the_checkpoints_own_wordpiece(pub, sample_dir, monkeypatch):
    from transformers import AutoTokenizer

    from koelectra_kit.tokenizer import KoTokenizer, kiwi

    monkeypatch.setattr(kiwi, "kiwi_instance", lambda *a, **k: pytest.fail("Kiwi ran on a published tokenizer"))
    tok, hf = KoTokenizer.from_pretrained(pub.disc), AutoTokenizer.from_pretrained(pub.disc)
    assert (tok.presplit, tok.normalize_cfg, tok.vocab_size) == ("none", None, len(pub.vocab))
    specials = [tok.pad_token_id, tok.unk_token_id, tok.cls_token_id, tok.sep_token_id, tok.mask_token_id]
    assert specials == [0, 1, 2, 3, 4]
    texts = _texts(sample_dir)
    ids = tok.encode_batch(texts, max_length=512)["input_ids"]
    assert ids == hf(texts, truncation=True, max_length=512)["input_ids"]
    flat = [i for row in ids for i in row]
    assert flat.count(tok.unk_token_id) < 0.05 * len(flat)  # a real Korean vocabulary, not [UNK]s
    # the checkpoint's normalization, not ours: ㅋ runs are kept (ours cuts them to 2), case is kept (cased vocab)
    assert tok.encode("ㅋㅋㅋㅋㅋ").tokens == ["[CLS]", "ㅋ", "##ㅋ", "##ㅋ", "##ㅋ", "##ㅋ", "[SEP]"]
    assert tok.encode("ABC").tokens == ["[CLS]", "A", "##B", "##C", "[SEP]"]


def test_damaged_vocabularies_are_one_line_errors(pub, sample_dir, tmp_path, capsys):
    empty, cut = tmp_path / "empty", tmp_path / "cut"
    for folder in (empty, cut):
        shutil.copytree(pub.clf, folder)
    (empty / "vocab.txt").write_text("", encoding="utf-8")
    # cut mid-file by a copy: the specials survive, so transformers alone would load it and give [UNK]s
    (cut / "vocab.txt").write_text("".join(t + "\n" for t in pub.vocab[:60]) + "안녕", encoding="utf-8")
    data = str(sample_dir / "reviews_labelled.csv")
    assert main(["finetune", "--config", str(TINY_FINETUNE), f"model={empty}", f"train={data}",
                 f"out={tmp_path / 'o'}"]) == 2
    _one_error_line(capsys, "vocab.txt is empty")
    assert main(["evaluate", "--model", str(cut), "--data", data, "--out", str(tmp_path / 'e')]) == 2
    _one_error_line(capsys, "61 tokens", f"its model has {len(pub.vocab)}", "truncated")
    assert main(["label", "--model", str(cut), "--input", data, "--output", str(tmp_path / "l.csv")]) == 2
    _one_error_line(capsys, "61 tokens")
    assert not (tmp_path / "o").exists() and not (tmp_path / "l.csv").exists()


# --- fine-tune, label, evaluate, the Hugging Face stack ---------------------------------------------------


def test_finetuned_published_folder_labels_the_same_in_plain_transformers(pub, pub_finetuned, sample_dir):
    from transformers import AutoTokenizer, pipeline

    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.tokenizer import KoTokenizer

    out = pub_finetuned
    assert not (out / "koelectra_tokenizer.json").exists()  # the checkpoint's tokenizer, saved as transformers does
    assert (out / "vocab.txt").read_text(encoding="utf-8") == (pub.disc / "vocab.txt").read_text(encoding="utf-8")
    config = json.loads((out / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert "local_files_only" not in config and config["model_max_length"] == 64  # tiny.yaml's max_length

    ours = Classifier.load(out, device="cpu", precision="fp32")
    texts = _texts(sample_dir)
    got = ours.predict(texts)
    hf_tok = AutoTokenizer.from_pretrained(out)
    assert hf_tok(texts, truncation=True)["input_ids"] == \
        KoTokenizer.from_pretrained(out).encode_batch(texts, max_length=64)["input_ids"]
    answers = pipeline("text-classification", model=str(out), device="cpu")(texts, truncation=True)
    assert [a["label"] for a in answers] == got.labels
    assert [a["score"] for a in answers] == pytest.approx(got.probs.max(1).tolist(), abs=1e-4)
    assert len(set(got.labels)) > 1  # a trained head, not one constant answer


def _card_code(card_text: str) -> str:
    return re.search(r"```python\n(.*?)```", card_text, re.S).group(1)


def test_the_card_of_a_folder_from_a_published_checkpoint_describes_its_own_tokenizer(pub, pub_finetuned,
                                                                                       monkeypatch):
    """The card described the toolkit's tokenizer (normalization, pre-split, "loading fails without import
    koelectra_kit"): all false for a folder holding the checkpoint's BertTokenizer. Its code runs as shown, in plain
    transformers, and truncates (a text past the model's positions crashed the pipeline without truncation=True)."""
    from huggingface_hub import ModelCard

    text = ModelCard.load(pub_finetuned / "README.md").text
    for wrong in ("koelectra-kit's Korean tokenizer", "normalization for noisy comments", "loading fails",
                  "presplit_batch"):
        assert wrong not in text, wrong
    assert f"`BertTokenizer` (WordPiece, {len(pub.vocab):,} tokens" in text and "no Kiwi pre-split" in text
    assert "with or without `import koelectra_kit`" in text
    config = json.loads((pub_finetuned / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config.get("tokenizer_class") != "KoElectraKitTokenizer"  # what "loads without the import" rests on
    code = _card_code(text)
    assert code.startswith("from transformers import pipeline") and "truncation=True" in code
    monkeypatch.chdir(pub_finetuned.parent)  # the card names the folder as its parent sees it
    exec(code.replace('clf("배송 빠르고 좋아요", truncation=True)', 'clf("좋아요 " * 600, truncation=True)'), {})


def test_label_and_evaluate_a_published_finetune_and_a_published_classifier(pub, pub_finetuned, sample_dir,
                                                                              tmp_path):
    from transformers import pipeline

    from koelectra_kit.classify.classifier import Classifier

    for i, model in enumerate((pub_finetuned, pub.clf)):
        labelled = tmp_path / f"labelled{i}.csv"
        assert main(["label", "--model", str(model), "--input", str(sample_dir / "reviews_unlabelled.csv"),
                     "--text-column", "review", "--output", str(labelled)]) == 0
        rows = pd.read_csv(labelled)
        assert len(rows) == 60 and set(rows.loc[rows.status == "ok", "label"]) <= set(LABELS)
        assert main(["evaluate", "--model", str(model), "--data", str(sample_dir / "reviews_labelled.csv"),
                     "--out", str(tmp_path / f"eval{i}")]) == 0
        assert json.loads((tmp_path / f"eval{i}" / "eval.json").read_text(encoding="utf-8"))["dev"]["n"] == 450
    # the published classifier (vocab.txt only, id2label set) loads directly, with its own label names
    clf = Classifier.load(pub.clf, device="cpu", precision="fp32")
    texts = _texts(sample_dir)[:20]
    assert clf.labels == LABELS and clf.max_length == 512  # its position table (no max_length of ours)
    answers = pipeline("text-classification", model=str(pub.clf), device="cpu")(texts, truncation=True)
    assert clf.predict(texts).labels == [a["label"] for a in answers]


def test_distill_export_and_app_with_published_folders(pub, pub_finetuned, sample_dir, tmp_path, capsys):
    from transformers import AutoTokenizer

    from koelectra_kit.classify.classifier import Classifier

    # the student is the published discriminator; the teacher a fine-tuned published checkpoint
    student = tmp_path / "student"
    assert main(["distill", f"teachers=[{pub_finetuned}]", f"transfer={sample_dir / 'comments.txt'}",
                 f"student={pub.disc}", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={student}",
                 "epochs=0.3", "references=false", "plots=false", "precision=fp32", "progress=false"]) == 0
    texts = _texts(sample_dir)[:10]
    assert AutoTokenizer.from_pretrained(student)(texts)["input_ids"] == \
        AutoTokenizer.from_pretrained(pub.disc)(texts)["input_ids"]
    assert Classifier.load(student, device="cpu").labels == LABELS

    pytest.importorskip("onnxruntime")
    folder = tmp_path / "clf"
    shutil.copytree(pub_finetuned, folder)
    assert main(["export", "--model", str(folder), "--onnx"]) == 0
    assert "presplit_batch" not in capsys.readouterr().out  # the checkpoint's tokenizer.json is all of it
    onnx = Classifier.load(folder, device="cpu", backend="onnx")
    reference = Classifier.load(folder, device="cpu", precision="fp32", backend="torch")
    assert onnx.model.path == folder / "onnx" / "model.onnx"
    assert onnx.predict(_texts(sample_dir)).labels == reference.predict(_texts(sample_dir)).labels
    # the card's ONNX recipe: the graph takes what the checkpoint's tokenizer gives (token_type_ids included), and
    # tokenizer.json alone gives the same ids (no pre-split of ours to add)
    import onnxruntime
    from tokenizers import Tokenizer

    card = (folder / "README.md").read_text(encoding="utf-8")
    assert "`tokenizer.json` (the checkpoint's whole tokenizer)" in card and "presplit_batch" not in card
    session = onnxruntime.InferenceSession(str(folder / "onnx" / "model.onnx"), providers=["CPUExecutionProvider"])
    inputs = AutoTokenizer.from_pretrained(folder)(_texts(sample_dir), padding=True, truncation=True,
                                                    return_tensors="np")
    logits = session.run(None, dict(inputs))[0]
    assert [LABELS[i] for i in logits.argmax(1)] == reference.predict(_texts(sample_dir)).labels
    plain = Tokenizer.from_file(str(folder / "tokenizer.json"))
    plain.enable_truncation(reference.max_length)
    assert [e.ids for e in plain.encode_batch(_texts(sample_dir))] == \
        [list(r) for r in reference.tok.encode_batch(_texts(sample_dir), max_length=reference.max_length)["input_ids"]]

    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    from tests.fixtures_app import start_app

    with start_app(reference, folder, tmp_path / "app") as client:
        answer = client.call("POST", "/api/predict", json_body={"text": texts[0]})
        assert answer.status == 200, answer.body
        assert answer.json["label"] == reference.predict(texts[:1]).labels[0] and answer.json["labels"] == LABELS


# --- continued pretraining from a published pair ------------------------------------------------------------


def _pretrain_cfg(tmp_path, *overrides: str):
    from koelectra_kit.pretrain import PretrainConfig

    return load_config(PretrainConfig, CONTINUE, [f"corpus={ROOT / 'corpora' / 'sample' / 'comments.txt'}",
                                                  f"out={tmp_path / 'run'}", "max_steps=2", "batch_size=8",
                                                  "progress=false", "plots=false", *overrides])


def _built_pair(cfg):
    """The pair ``pretrain`` trains, as its recipe builds it (continued.py), and the notices it prints."""
    from koelectra_kit.pretrain.continued import apply_init_shape, init_tokenizer, load_init_model, resolve_init

    src = resolve_init(cfg)
    apply_init_shape(cfg, src)
    return src, *load_init_model(cfg, src, init_tokenizer(cfg))


def test_init_generator_loads_the_published_generator_with_shared_embeddings(pub, tmp_path):
    from transformers import ElectraForMaskedLM

    saved = torch.load(pub.gen / "pytorch_model.bin", weights_only=True)
    src, model, notes = _built_pair(_pretrain_cfg(tmp_path, f"init={pub.disc}", f"init_generator={pub.gen}"))
    gen, disc = model.generator, model.discriminator
    assert src.generator == str(pub.gen) and notes == []  # the pair shares its tables: nothing lost, nothing said
    key = "electra.encoder.layer.1.attention.self.query.weight"
    assert torch.equal(gen.state_dict()[key], saved[key])  # the given generator's weights, not a fresh one
    assert torch.equal(gen.generator_lm_head.bias, saved["generator_lm_head.bias"])
    assert gen.config.hidden_size == 16 and disc.config.hidden_size == 32
    # tied as pretraining ties them: one embedding block, the generator's output layer its word table
    assert gen.electra.embeddings is disc.electra.embeddings
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight

    # a generator trained with embeddings of its own continues with the discriminator's, and says so
    own = tmp_path / "own-embeddings"
    g = ElectraForMaskedLM.from_pretrained(pub.gen)
    with torch.no_grad():
        g.electra.embeddings.word_embeddings.weight.add_(0.5)
    _save_bin(g, own)
    _tokenizer_files(own, pub.vocab)
    _, model, notes = _built_pair(_pretrain_cfg(tmp_path, f"init={pub.disc}", f"init_generator={own}"))
    assert len(notes) == 1 and "word embeddings of its own (max |difference| 0.5" in notes[0]
    assert torch.equal(model.generator.electra.embeddings.word_embeddings.weight,
                       model.discriminator.electra.embeddings.word_embeddings.weight)

    # without init_generator a published discriminator (no generator/ beside it) gets a fresh one
    src, model, _ = _built_pair(_pretrain_cfg(tmp_path, f"init={pub.disc}"))
    assert src.generator is None and model.generator.config.hidden_size == 8  # cpu-30min's generator.size 0.25


def test_pretrain_cli_continues_a_published_pair(pub, sample_dir, tmp_path, capsys, monkeypatch):
    from transformers import AutoTokenizer, ElectraForMaskedLM

    out = tmp_path / "continued"
    assert main(["pretrain", "--config", "cpu-continue", f"init={pub.disc}", f"init_generator={pub.gen}",
                 f"corpus={sample_dir / 'comments.txt'}", f"out={out}", "max_steps=2", "batch_size=8",
                 "progress=false", "plots=false"]) == 0
    assert f"generator: {pub.gen}" in capsys.readouterr().err
    before, after = ElectraForMaskedLM.from_pretrained(pub.gen), ElectraForMaskedLM.from_pretrained(out / "generator")
    key = "electra.encoder.layer.0.output.dense.weight"
    moved = (after.state_dict()[key] - before.state_dict()[key]).abs().max()
    assert 0 < moved < 0.01  # continued from the published generator: two small steps away from it
    texts = _texts(sample_dir)[:10]
    for name in ("discriminator", "generator"):  # the published tokenizer, in plain transformers
        assert AutoTokenizer.from_pretrained(out / name)(texts)["input_ids"] == \
            AutoTokenizer.from_pretrained(pub.disc)(texts)["input_ids"]
    assert f"init_generator: {pub.gen}" in (out / "config.yaml").read_text(encoding="utf-8")
    # its card: the command continues the pair (without init= it trains from random weights), says so, describes the
    # checkpoint's tokenizer, and its code loads the discriminator folder in plain transformers
    from huggingface_hub import ModelCard

    card = ModelCard.load(out / "discriminator" / "README.md")
    assert f"init={pub.disc} init_generator={pub.gen} out={out}`" in card.text
    assert f"continued from `{pub.disc}` (generator `{pub.gen}`)" in card.text
    assert card.data.base_model is None  # a local folder: named in the text, no hub id
    assert "koelectra-kit's Korean tokenizer" not in card.text and "`BertTokenizer`" in card.text
    code = _card_code(card.text)
    assert 'AutoTokenizer.from_pretrained("continued/discriminator")' in code and "koelectra_kit" not in code
    namespace: dict = {}
    monkeypatch.chdir(tmp_path)
    exec(code, namespace)
    assert type(namespace["enc"]).__name__ == "ElectraModel" and type(namespace["tok"]).__name__ == "BertTokenizer"


def test_bad_init_generator_is_one_line(pub, sample_dir, tmp_path, capsys):
    from transformers import ElectraForMaskedLM

    small = tmp_path / "other-vocab-generator"  # another vocabulary: it can't share the discriminator's table
    _save_bin(ElectraForMaskedLM(_electra_config(100, 16, 1)), small)
    args = ["pretrain", "--config", "cpu-continue", f"corpus={sample_dir / 'comments.txt'}",
            f"out={tmp_path / 'r'}", "max_steps=1", "progress=false"]
    assert main(args + [f"init={pub.disc}", f"init_generator={small}"]) == 2
    _one_error_line(capsys, "vocab_size 100", f"has {len(pub.vocab)}", str(small), str(pub.disc))
    assert main(args + [f"init={pub.disc}", f"init_generator={tmp_path / 'nope'}"]) == 2
    _one_error_line(capsys, "init_generator=", "no such folder")
    assert main(args + [f"init={pub.disc}", f"init_generator={pub.disc}"]) == 2  # the discriminator twice
    _one_error_line(capsys, "is an ELECTRA discriminator")
    assert main(args + [f"init={pub.disc}", "init_generator=nobody-here/no-such-generator"]) == 2  # offline hub
    _one_error_line(capsys, "init_generator=nobody-here/no-such-generator")
    assert main(args + [f"init_generator={pub.gen}"]) == 2
    _one_error_line(capsys, "needs init=")
    assert not (tmp_path / "r" / "discriminator").exists()
    with pytest.raises(InputError, match="is an ELECTRA generator"):
        _built_pair(_pretrain_cfg(tmp_path, f"init={pub.gen}"))
