"""A tokenizer trained once per test session on the bundled comments (vocab 2000: seconds)."""
from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def kiwi_cache(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("presplit_cache")


@pytest.fixture(scope="session")
def sample_tokenizer_dir(tmp_path_factory, sample_dir, kiwi_cache) -> Path:
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    out = tmp_path_factory.mktemp("tok") / "tok"
    train_tokenizer(TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(out), vocab_size=2000,
                                    cache_dir=str(kiwi_cache), progress=False))
    return out


@pytest.fixture(scope="session")
def sample_tokenizer(sample_tokenizer_dir):
    from koelectra_kit.tokenizer import KoTokenizer

    return KoTokenizer.from_pretrained(sample_tokenizer_dir)
