"""Shared test setup. Stage-specific fixtures live in ``tests/fixtures_<stage>.py`` (loaded below)
so each stage's fixtures sit beside its tests' owner without one huge conftest."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

# One thread per test process: on a 2-core machine torch's default of all cores thrashes when
# kiwipiepy workers or a second test process run beside it.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
os.environ.setdefault("HF_HUB_OFFLINE", "1")  # tests never touch the network
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
# no kiwi_word word file carried from one test (or its subprocesses) to the next: tests/test_wordfile.py turns it on
os.environ["KOELECTRA_WORD_FILE"] = "0"
# Caches (Kiwi pre-split, packed ids, fine-tune tokens) go to a fresh folder per test session, never the
# user's ~/.cache: a test must not reuse, or leave behind, another run's cache entries.
os.environ["KOELECTRA_CACHE"] = tempfile.mkdtemp(prefix="koelectra-kit-tests-")

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "corpora" / "sample"
SHARED_DATA = Path(os.environ.get("KOELECTRA_SHARED_DATA", ROOT.parent / "shared" / "data"))

pytest_plugins = sorted(f"tests.{p.stem}" for p in Path(__file__).parent.glob("fixtures_*.py"))


def pytest_configure(config):
    try:
        import torch

        torch.set_num_threads(1)
    except ImportError:
        pass


@pytest.fixture(scope="session")
def sample_dir() -> Path:
    return SAMPLE


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The real Korean data beside the repository ($KOELECTRA_SHARED_DATA); tests needing it skip when it is absent (fresh clones)."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"real data not available at {SHARED_DATA} (set KOELECTRA_SHARED_DATA)")
    return SHARED_DATA
