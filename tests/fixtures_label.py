"""A tiny 3-class classifier directory (random-init ELECTRA + the sample tokenizer), in the format
``koelectra-kit finetune`` writes: enough for every labelling test that checks rows, columns and files."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def tiny_classifier_dir(tmp_path_factory, sample_tokenizer) -> Path:
    import torch
    from transformers import ElectraConfig, ElectraForSequenceClassification

    labels = ["negative", "neutral", "positive"]
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=sample_tokenizer.vocab_size, hidden_size=32, embedding_size=32,
                        num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
                        max_position_embeddings=64, pad_token_id=0, num_labels=3,
                        id2label=dict(enumerate(labels)), label2id={l: i for i, l in enumerate(labels)})
    cfg.koelectra_kit = {"task": "text-classification", "max_length": 32, "labels": labels}
    model = ElectraForSequenceClassification(cfg).eval()
    out = tmp_path_factory.mktemp("clf") / "clf"
    model.save_pretrained(out)
    sample_tokenizer.save(out)
    return out


@pytest.fixture(scope="session")
def tiny_classifier(tiny_classifier_dir):
    from koelectra_kit.classify.classifier import Classifier

    return Classifier.load(tiny_classifier_dir, device="cpu", precision="fp32")
