"""Fixtures for the fine-tuning tests: tiny random-init ELECTRA model directories in exactly the
format the pre-trainer exports (config.json + model.safetensors + tokenizer files), one with a Kiwi tokenizer and one
without, and one fine-tuned output shared by the evaluate / predictor / re-fine-tuning tests."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_CONFIG = ROOT / "configs" / "finetune" / "tiny.yaml"


@pytest.fixture(scope="session")
def tiny_encoder_dir(tmp_path_factory, sample_dir) -> Path:
    """Random-init ELECTRA, hidden 64, 2 layers; WordPiece vocabulary trained on the sample comments
    plus the sample reviews' text (a pretraining corpus normally includes the domain's text)."""
    tokenizer = pytest.importorskip("koelectra_kit.tokenizer")
    import pandas as pd

    root = tmp_path_factory.mktemp("tiny_encoder")
    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].str.replace("\n", " ")
    corpus = root / "corpus.txt"
    corpus.write_text((sample_dir / "comments.txt").read_text(encoding="utf-8").rstrip("\n") + "\n"
                      + "\n".join(reviews) + "\n", encoding="utf-8")
    tokenizer.train_tokenizer(tokenizer.TokenizerConfig(input=[str(corpus)], out=str(root / "tok"), vocab_size=2000))
    return save_encoder(tokenizer.KoTokenizer.from_pretrained(root / "tok"), root / "model", hidden=64,
                        max_positions=128)


@pytest.fixture(scope="session")
def plain_encoder_dir(tmp_path_factory, sample_dir) -> Path:
    """A smaller one (hidden 32) whose tokenizer has no Kiwi pre-split (presplit=none): made in a second, and it runs
    where kiwipiepy is not installed."""
    import pandas as pd

    from koelectra_kit.tokenizer import KoTokenizer, TokenizerConfig, train_tokenizer

    root = tmp_path_factory.mktemp("plain_encoder")
    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].str.replace("\n", " ")
    (root / "corpus.txt").write_text("\n".join(reviews) + "\n", encoding="utf-8")
    with pytest.warns(UserWarning, match="single characters"):  # a 800-token vocabulary on 450 reviews
        train_tokenizer(TokenizerConfig(input=[str(root / "corpus.txt")], out=str(root / "tok"), vocab_size=800,
                                        presplit="none", progress=False))
    return save_encoder(KoTokenizer.from_pretrained(root / "tok"), root / "model", hidden=32, max_positions=64)


def save_encoder(tok, model_dir: Path, hidden: int, max_positions: int, layers: int = 2) -> Path:
    """A random-init ELECTRA encoder (``layers`` layers, 2 heads, FFN 2 x hidden, seed 0) with ``tok``'s vocabulary,
    saved with the tokenizer as the pre-trainer exports it."""
    import torch
    from transformers import ElectraConfig, ElectraModel

    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=tok.vocab_size, hidden_size=hidden, embedding_size=hidden, num_hidden_layers=layers,
                        num_attention_heads=2, intermediate_size=2 * hidden, max_position_embeddings=max_positions,
                        pad_token_id=tok.pad_token_id)
    ElectraModel(cfg).save_pretrained(model_dir)
    tok.save(model_dir)
    return model_dir


@pytest.fixture(scope="session")
def finetuned_dir(tmp_path_factory, tiny_encoder_dir, sample_dir) -> Path:
    """``koelectra-kit finetune`` with configs/finetune/tiny.yaml on the bundled labelled sample,
    in fp32 so the predictor (also fp32) must give bit-for-bit the same labels."""
    from koelectra_kit.cli import main

    out = tmp_path_factory.mktemp("finetuned") / "sentiment"
    rc = main(["finetune", "--config", str(TINY_CONFIG), f"model={tiny_encoder_dir}",
               f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "precision=fp32", "progress=false"])
    assert rc == 0
    return out


@pytest.fixture(scope="session")
def tfidf_dir(tmp_path_factory, sample_dir) -> Path:
    """A TF-IDF classifier folder (`koelectra-kit baseline`) fitted on the bundled labelled sample; read only."""
    from koelectra_kit.cli import main

    out = tmp_path_factory.mktemp("tfidf") / "tfidf"
    assert main(["baseline", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "baseline.min_df=1",
                 "plots=false"]) == 0
    return out
