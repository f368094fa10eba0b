"""Fixtures for the pretraining tests: a tokenizer trained once on the bundled comments, a shared packed-data
cache, a helper that builds a tiny config, and one finished run of the ``tiny`` preset through the CLI."""
from __future__ import annotations

from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TINY_PRESET = ROOT / "configs" / "pretrain" / "tiny.yaml"


@pytest.fixture(scope="session")
def pretrain_tokenizer(tmp_path_factory, sample_dir) -> Path:
    """A 2000-token tokenizer trained on corpora/sample/comments.txt."""
    tokenizer = pytest.importorskip("koelectra_kit.tokenizer")
    out = tmp_path_factory.mktemp("pretrain_tok") / "tok"
    tokenizer.train_tokenizer(tokenizer.TokenizerConfig(input=[str(sample_dir / "comments.txt")], out=str(out),
                                                        vocab_size=2000))
    return out


@pytest.fixture(scope="session")
def pretrain_cache(tmp_path_factory) -> Path:
    """One packed-data cache dir for every test (each corpus/tokenizer/seq_len is packed once)."""
    return tmp_path_factory.mktemp("pretrain_cache")


@pytest.fixture
def tiny_cfg(tmp_path, pretrain_tokenizer, pretrain_cache, sample_dir):
    """``tiny_cfg("max_steps=4", ...)`` -> PretrainConfig of the tiny preset on the sample comments, with the
    shared tokenizer and cache, no progress bar and no plot; out= defaults to tmp_path/run."""
    from koelectra_kit.config import load_config
    from koelectra_kit.pretrain import PretrainConfig

    def make(*overrides: str):
        base = [f"corpus={sample_dir / 'comments.txt'}", f"tokenizer={pretrain_tokenizer}",
                f"cache_dir={pretrain_cache}", f"out={tmp_path / 'run'}", "progress=false", "plots=false",
                "max_steps=4", "log_every=1", "save_every=0"]
        return load_config(PretrainConfig, TINY_PRESET, base + list(overrides))

    return make


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, sample_dir, pretrain_cache) -> Path:
    """The quickstart command as a user types it (the tokenizer is trained by the run itself)."""
    pytest.importorskip("koelectra_kit.tokenizer")
    from koelectra_kit.cli import main

    out = tmp_path_factory.mktemp("tiny_run") / "run"
    rc = main(["pretrain", "--config", str(TINY_PRESET), f"corpus={sample_dir / 'comments.txt'}", f"out={out}",
               f"cache_dir={pretrain_cache}", "progress=false"])
    assert rc == 0
    return out


@pytest.fixture(scope="session")
def prepared(tmp_path_factory, sample_dir, pretrain_tokenizer, pretrain_cache) -> Path:
    """A prepared-data folder (`koelectra-kit prepare`) of the sample comments with the tiny preset; read only
    (tests that edit one copy it first)."""
    from koelectra_kit.cli import main

    out = tmp_path_factory.mktemp("prepared") / "comments"
    assert main(["prepare", "--config", str(TINY_PRESET), f"corpus={sample_dir / 'comments.txt'}",
                 f"tokenizer={pretrain_tokenizer}", f"cache_dir={pretrain_cache}", f"out={out}",
                 "progress=false"]) == 0
    return out
