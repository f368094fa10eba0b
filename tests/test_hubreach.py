"""A hub id is looked up only when the hub can be reached: offline, a mistyped local path that looks like a hub id
is one line in seconds (huggingface_hub's retries took 25-50 s and a dozen lines), and an id in the local cache
still loads. The tests point the hub at a closed local port, so they hold with or without a network."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from koelectra_kit.errors import InputError
from koelectra_kit.io import hubreach as network
from koelectra_kit.hub.modelio import check_model_source

class _Session:
    def __init__(self, fail: bool):
        self.fail, self.calls = fail, 0

    def head(self, url, timeout=None):
        self.calls += 1
        if self.fail:
            raise OSError("[Errno 111] Connection refused")


@pytest.fixture
def hub(monkeypatch):
    """huggingface_hub as if the user had not chosen offline mode, with a fake session; restores what the offline
    switch changes."""
    import datasets.config
    import huggingface_hub
    from huggingface_hub import constants

    monkeypatch.setattr(network, "_answer", [])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", datasets.config.HF_HUB_OFFLINE)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")

    def use(fail: bool) -> _Session:
        session = _Session(fail)
        monkeypatch.setattr(huggingface_hub, "get_session", lambda: session)
        return session
    return use


@pytest.mark.fast
def test_unreachable_hub_an_uncached_id_is_one_line_and_the_process_goes_offline(hub):
    import datasets.config
    from huggingface_hub import constants

    session = hub(fail=True)
    with pytest.raises(InputError, match=r"model=t1x: no such local folder, and the hub .* can't be reached .*"
                                         r"Connection refused"):
        check_model_source("t1x")
    assert constants.is_offline_mode() and datasets.config.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"
    with pytest.raises(InputError, match="tokenizer=owner/tok: no such local folder"):
        from koelectra_kit.tokenizer import KoTokenizer
        KoTokenizer.from_pretrained("owner/tok")
    assert session.calls == 1  # asked once a process
    # a flag-only command (export) names the flag as typed: "model=owner/name" was a spelling it does not take
    with pytest.raises(InputError, match="^--model owner/name: no such local folder"):
        check_model_source("owner/name", "--model")


@pytest.mark.fast
def test_reachable_hub_the_id_goes_to_transformers(hub):
    session = hub(fail=False)
    assert check_model_source("owner/name") == "owner/name"
    assert check_model_source("owner/other") == "owner/other"
    assert session.calls == 1


@pytest.mark.fast
def test_offline_by_choice_asks_nothing(hub, monkeypatch):
    from huggingface_hub import constants

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    session = hub(fail=True)
    assert check_model_source("owner/name") == "owner/name"  # transformers then says it is offline, in one line
    assert session.calls == 0


def _cache_a_model(hf_home: Path, repo: str, folder: Path) -> None:
    """The hub cache's layout (models--owner--name/refs/main -> snapshots/<commit>/files), as a download leaves it."""
    import shutil

    commit = "0" * 40
    root = hf_home / "hub" / ("models--" + repo.replace("/", "--"))
    shutil.copytree(folder, root / "snapshots" / commit)
    (root / "refs").mkdir()
    (root / "refs" / "main").write_text(commit)


def test_offline_a_cached_hub_id_labels_and_a_typo_fails_fast(tiny_classifier_dir, tmp_path):
    _cache_a_model(tmp_path / "hf", "owner/tiny", tiny_classifier_dir)
    (tmp_path / "in.csv").write_text("review\n재밌었어요 ㅋㅋ\n별로였다\n", encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if "proxy" not in k.lower() and not k.startswith("HF_")}
    env.update(HF_HOME=str(tmp_path / "hf"), HF_ENDPOINT="http://127.0.0.1:9")  # a closed port: no hub here

    def label(model: str) -> tuple[subprocess.CompletedProcess, float]:
        start = time.perf_counter()
        done = subprocess.run([sys.executable, "-m", "koelectra_kit", "label", "--input", "in.csv", "--model", model,
                               "--output", "out.csv", "--overwrite", "--no-progress"],
                              cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
        return done, time.perf_counter() - start

    done, _ = label("owner/tiny")
    assert done.returncode == 0, done.stderr
    assert "Retrying" not in done.stderr and (tmp_path / "out.csv").read_text(encoding="utf-8").count("\n") == 3
    done, seconds = label("nosuch")
    assert done.returncode == 2 and done.stderr.strip().count("\n") == 0, done.stderr
    assert "model=nosuch: no such local folder, and the hub (http://127.0.0.1:9) can't be reached" in done.stderr
    assert "Retrying" not in done.stderr and seconds < 20  # retries took 25 s or more


@pytest.mark.fast
def test_a_push_to_an_unreachable_hub_is_one_line_before_any_upload(hub, monkeypatch, tmp_path):
    from koelectra_kit.errors import KitError
    from koelectra_kit.hub import push_folder

    monkeypatch.setenv("HF_TOKEN", "hf_not_a_real_token")
    hub(fail=True)
    with pytest.raises(KitError, match=r"push_to_hub=owner/name: the hub .* can't be reached .*push it later"):
        push_folder(tmp_path, "owner/name")
