"""The tokenizer class transformers loads (koelectra_kit.tokenizer.hf): AutoTokenizer, pipeline, Trainer and
save/load round trips give KoTokenizer's ids and offsets; without ``import koelectra_kit`` loading fails, naming
the package; folders saved before the class keep loading. Tiny random-init classifiers on the committed golden
tokenizers (a character vocabulary and a Kiwi + WordPiece subword one)."""
from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import koelectra_kit  # noqa: F401 - registers the class, as a user's import does

GOLDEN = Path(__file__).parent / "golden"
KINDS = ["tok_characters", "tok_wordpiece"]
LABELS = ["negative", "neutral", "positive"]


@pytest.fixture(scope="module", params=KINDS)
def hf_model_dir(request, tmp_path_factory) -> Path:
    return build_model_dir(request.param, tmp_path_factory)


@pytest.fixture(scope="module")
def subword_model_dir(tmp_path_factory) -> Path:
    """One kind is enough where the tokenizer's vocabulary cannot matter (loading with and without the import)."""
    return build_model_dir("tok_wordpiece", tmp_path_factory)


def build_model_dir(kind: str, tmp_path_factory) -> Path:
    """A 3-class ELECTRA (hidden 32, 1 layer) on a golden tokenizer, saved as ``finetune`` saves; wide random
    weights so its classes are far apart and a label flip means a real difference."""
    import torch
    from transformers import ElectraConfig, ElectraForSequenceClassification

    from koelectra_kit.tokenizer import KoTokenizer

    tok = KoTokenizer.from_pretrained(GOLDEN / kind)
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=tok.vocab_size, hidden_size=32, embedding_size=32, num_hidden_layers=1,
                        num_attention_heads=2, intermediate_size=64, max_position_embeddings=64,
                        pad_token_id=tok.pad_token_id, num_labels=3, initializer_range=0.2,
                        id2label=dict(enumerate(LABELS)), label2id={lab: i for i, lab in enumerate(LABELS)})
    cfg.koelectra_kit = {"task": "text-classification", "max_length": 48, "labels": LABELS}
    out = tmp_path_factory.mktemp(kind) / "clf"
    ElectraForSequenceClassification(cfg).eval().save_pretrained(out)
    tok.save(out)
    return out


def sample_texts(sample_dir) -> list[str]:
    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].astype(str).tolist()
    comments = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()[:300]
    return reviews + comments + ["", "ㅋㅋㅋㅋㅋ😀 https://x.co @user", "  띄어쓰기   이상한\t문장  "]


def nsmc_dev(shared_data, n: int | None = None) -> list[str]:
    df = pd.read_csv(shared_data / "nsmc3" / "dev.tsv", sep="\t", quoting=csv.QUOTE_NONE, dtype=str,
                     keep_default_na=False)
    texts = df["document"].tolist()
    return texts[:n] if n else texts


def assert_same_as_kotokenizer(folder: Path, texts: list[str]) -> None:
    from transformers import AutoTokenizer

    from koelectra_kit.tokenizer import KoTokenizer

    hf = AutoTokenizer.from_pretrained(folder)
    assert type(hf).__name__ == "KoElectraKitTokenizer"
    ko = KoTokenizer.from_pretrained(folder)
    got = hf(texts, truncation=False, return_offsets_mapping=True)
    want = ko.encode_batch(texts)
    assert got["input_ids"] == want["input_ids"]
    assert [[tuple(o) for o in offs] for offs in got["offset_mapping"]] == want["offsets"]


def test_auto_tokenizer_gives_kotokenizer_ids_and_offsets(hf_model_dir, sample_dir):
    assert_same_as_kotokenizer(hf_model_dir, sample_texts(sample_dir))


def test_padding_truncation_pairs_and_tensors(hf_model_dir):
    from transformers import AutoTokenizer

    from koelectra_kit.tokenizer import KoTokenizer

    hf = AutoTokenizer.from_pretrained(hf_model_dir)
    ko = KoTokenizer.from_pretrained(hf_model_dir)
    assert hf.model_max_length == 48  # the classifier's max_length, as Classifier.load reads it
    long_text = "영화가 정말 재밌었는데 결말이 아쉬웠다 " * 20
    # unset truncation truncates to model_max_length, as the predictor does (a model past its positions crashes)
    assert hf(long_text)["input_ids"] == ko.encode(long_text, max_length=48).ids
    batch = hf(["좋아요", long_text], padding=True, return_tensors="pt")
    assert tuple(batch["input_ids"].shape) == (2, 48) and batch["attention_mask"][0].sum() < 48
    pair = hf("배송 빠름", "별로예요", max_length=6, truncation=True)
    assert pair["input_ids"][0] == hf.cls_token_id and pair["input_ids"].count(hf.sep_token_id) == 2
    assert len(pair["input_ids"]) <= 6 and pair["token_type_ids"][-1] == 1
    assert hf.tokenize("영화 좋아요") == ko.encode("영화 좋아요", add_special_tokens=False).tokens


def test_pipeline_label_equals_classifier_on_sample(hf_model_dir, sample_dir):
    check_pipeline_against_classifier(hf_model_dir, sample_texts(sample_dir)[:450])


def check_pipeline_against_classifier(folder: Path, texts: list[str]) -> None:
    from transformers import pipeline

    from koelectra_kit.classify.classifier import Classifier

    texts = [t for t in texts if t.strip()]  # an empty input is no text for the pipeline
    pipe = pipeline("text-classification", model=str(folder), device="cpu")
    assert type(pipe.tokenizer).__name__ == "KoElectraKitTokenizer"
    got = pipe(texts, batch_size=32)
    want = Classifier.load(folder, device="cpu", precision="fp32").predict(texts)
    assert [g["label"] for g in got] == want.labels
    np.testing.assert_allclose([g["score"] for g in got], want.confidence, atol=1e-4)


def test_pipeline_label_equals_classifier_on_2000_real_reviews(hf_model_dir, shared_data):
    check_pipeline_against_classifier(hf_model_dir, nsmc_dev(shared_data, 2000))


@pytest.mark.slow  # ~20 s a tokenizer on 2 cores (each text encoded twice); the 2,000-review test runs by default
def test_auto_tokenizer_ids_and_offsets_on_10000_real_texts(hf_model_dir, shared_data):
    comments = (shared_data / "pretrain" / "comments_mix.txt").read_text(encoding="utf-8").splitlines()
    assert_same_as_kotokenizer(hf_model_dir, nsmc_dev(shared_data, 5000) + comments[:5000])


def test_save_pretrained_round_trip_names_the_class(hf_model_dir, tmp_path):
    from transformers import AutoTokenizer

    hf = AutoTokenizer.from_pretrained(hf_model_dir)
    hf.save_pretrained(tmp_path / "again")
    config = json.loads((tmp_path / "again" / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config["tokenizer_class"] == "KoElectraKitTokenizer"
    again = AutoTokenizer.from_pretrained(tmp_path / "again")
    texts = ["영화는 봤는데 ㅋㅋㅋ", "배송 빠르고 좋아요😀"]
    assert again(texts)["input_ids"] == hf(texts)["input_ids"]


def test_folder_from_before_the_class_loads_and_resaves_with_it(tmp_path):
    from koelectra_kit.tokenizer import KoTokenizer, tokenizer_fingerprint

    old = GOLDEN / "tok_wordpiece"  # committed before the class: says PreTrainedTokenizerFast
    assert json.loads((old / "tokenizer_config.json").read_text())["tokenizer_class"] == "PreTrainedTokenizerFast"
    tok = KoTokenizer.from_pretrained(old)
    tok.save(tmp_path / "new")
    assert json.loads((tmp_path / "new" / "tokenizer_config.json").read_text())["tokenizer_class"] \
        == "KoElectraKitTokenizer"
    again = KoTokenizer.from_pretrained(tmp_path / "new")
    assert again.encode("영화는 봤는데").ids == tok.encode("영화는 봤는데").ids
    # the loading metadata does not move the fingerprint: checkpoints and caches made before stay valid
    assert tokenizer_fingerprint(again) == tokenizer_fingerprint(tok)


def test_without_the_import_loading_fails_naming_the_package(subword_model_dir):
    script = f"""
import sys
from transformers import AutoTokenizer, pipeline
for load in (lambda: AutoTokenizer.from_pretrained({str(subword_model_dir)!r}),
             lambda: pipeline("text-classification", model={str(subword_model_dir)!r}, device="cpu")):
    try:
        load()
        print("LOADED")
    except Exception as e:
        print("FAILED", type(e).__name__, e)
print("kit imported:", "koelectra_kit" in sys.modules)
"""
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120).stdout
    lines = out.splitlines()
    assert "LOADED" not in out and sum(line.startswith("FAILED") for line in lines) == 2, out
    assert all("pip install koelectra-kit" in line and "import koelectra_kit" in line
               for line in lines if line.startswith("FAILED"))
    assert "kit imported: False" in out


def test_import_registers_without_loading_transformers(subword_model_dir):
    script = f"""
import sys
import koelectra_kit
assert "transformers" not in sys.modules, "import koelectra_kit must stay light"
from transformers import AutoTokenizer
print(type(AutoTokenizer.from_pretrained({str(subword_model_dir)!r})).__name__)
"""
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120)
    assert done.stdout.strip() == "KoElectraKitTokenizer", done.stderr[-2000:]


def test_trainer_trains_and_saves_a_loadable_tokenizer(hf_model_dir, tmp_path):
    pytest.importorskip("accelerate")
    import torch
    from transformers import (AutoModelForSequenceClassification, AutoTokenizer, DataCollatorWithPadding, Trainer,
                              TrainingArguments)

    tok = AutoTokenizer.from_pretrained(hf_model_dir)
    model = AutoModelForSequenceClassification.from_pretrained(hf_model_dir)
    texts, labels = ["재밌어요 최고", "별로였다", "그냥 그래요", "배우 연기 좋았다"] * 4, [2, 0, 1, 2] * 4
    rows = [{**tok(t), "labels": y} for t, y in zip(texts, labels)]
    args = TrainingArguments(output_dir=str(tmp_path / "t"), per_device_train_batch_size=8, max_steps=2,
                             report_to=[], use_cpu=True, save_strategy="no", disable_tqdm=True)
    before = [p.detach().clone() for p in model.parameters()]
    Trainer(model=model, args=args, train_dataset=rows, processing_class=tok,
            data_collator=DataCollatorWithPadding(tok)).train()
    assert any(not torch.equal(a, b) for a, b in zip(before, model.parameters()))
    Trainer(model=model, args=args, processing_class=tok).save_model(str(tmp_path / "saved"))
    again = AutoTokenizer.from_pretrained(tmp_path / "saved")
    assert type(again).__name__ == "KoElectraKitTokenizer"
    assert again(texts[:2])["input_ids"] == tok(texts[:2])["input_ids"]


MAP_IN_WORKERS = """
import sys
import datasets
from transformers import AutoTokenizer
import koelectra_kit  # noqa: F401
texts = open(sys.argv[2], encoding="utf-8").read().split("\\n")
tok = AutoTokenizer.from_pretrained(sys.argv[1])
want = tok(texts)["input_ids"]  # Kiwi's worker threads now exist in this process
ds = datasets.Dataset.from_dict({"text": texts})
got = ds.map(lambda b: tok(b["text"]), batched=True, num_proc=2, cache_file_name=sys.argv[3])
print("same" if got["input_ids"] == want else "differ")
"""


def test_datasets_map_with_worker_processes(subword_model_dir, sample_dir, tmp_path):
    """The way transformers users tokenize a data set: ``Dataset.map(num_proc=2)``, forked after the parent has
    already run Kiwi. Each worker loads its own Kiwi (the parent's copy has no worker threads in a child: it
    waited forever); the ids are the parent's. In a subprocess, so a hang fails the test instead of the run."""
    texts = tmp_path / "texts.txt"
    texts.write_text("\n".join(t.replace("\n", " ") for t in sample_texts(sample_dir)[:300]), encoding="utf-8")
    proc = subprocess.run([sys.executable, "-c", MAP_IN_WORKERS, str(subword_model_dir), str(texts),
                           str(tmp_path / "m.arrow")], capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().splitlines()[-1] == "same"


def test_decode_gives_the_text_back_as_kotokenizer_does(sample_tokenizer_dir):
    """With the jamo/byte fallback (the default), transformers' own decode showed the byte tokens ("존잼<0xF0>
    <0x9F>...") and left a rare syllable as unjoined jamo; fill-mask and batch_decode showed the same."""
    from transformers import AutoTokenizer

    from koelectra_kit.tokenizer import KoTokenizer

    ko = KoTokenizer.from_pretrained(sample_tokenizer_dir)
    hf = AutoTokenizer.from_pretrained(sample_tokenizer_dir)
    texts = ["존잼👍 최고", "해리와샐리가 재밌었다", "café 굿", "ㅋㅋㅋㅋ 뷁뷁"]
    ids = [hf(t)["input_ids"] for t in texts]
    assert any(set(i) & set(ko._fb.byte_of) for i in ids)  # the fallback's byte tokens are in play
    assert [hf.decode(i, skip_special_tokens=True) for i in ids] == [ko.decode(i) for i in ids]
    assert [hf.decode(i, skip_special_tokens=True) for i in ids[:3]] == [ko.normalize(t) for t in texts[:3]]
    assert hf.batch_decode(ids, skip_special_tokens=True) == [ko.decode(i) for i in ids]
    assert hf.decode(ids[0]).startswith("[CLS] ") and hf.decode(ids[0]).endswith(" [SEP]")
    assert hf.convert_tokens_to_string(hf.convert_ids_to_tokens(ids[2][1:-1])) == ko.decode(ids[2])
