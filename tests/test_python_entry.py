"""The Python entry functions (``finetune()``, ``pretrain()``, ``distill()``, ``train_tokenizer()``) as a notebook
calls them: a config built directly, edited with ``dataclasses.replace`` or given as a dict is checked as
``load_config`` checks it (the command's one-line ConfigError, before any work); a ``pathlib.Path`` goes where a path
string does; Ctrl-C publishes what the run has and then raises, so the cell stops; and a call leaves the process as
it found it (thread count, warning filters, hub offline mode)."""
from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

import pytest
import torch

from koelectra_kit.config import from_dict, load_config, to_dict
from koelectra_kit.errors import ConfigError, Interrupted
from koelectra_kit.finetune import FinetuneConfig, finetune
from koelectra_kit.pretrain import PretrainConfig, pretrain
from tests.fixtures_finetune import TINY_CONFIG

ROOT = Path(__file__).resolve().parents[1]
RUN = ("epochs=1", "eval_every=5", "precision=fp32", "progress=false", "plots=false", "references=false",
       "save_every=0", "save_every_minutes=0")


def _message(cls, **bad) -> str:
    """The one line load_config gives for ``bad`` (what the command prints after "error: ")."""
    with pytest.raises(ConfigError) as e:
        from_dict(cls, bad)
    return str(e.value)


@pytest.mark.fast
@pytest.mark.parametrize("bad", [{"batch_size": 0}, {"epochs": -1.0}, {"dev_fraction": 0.9}, {"lr": float("nan")}])
def test_finetune_checks_a_replaced_config_as_load_config_does(bad, tmp_path):
    cfg = load_config(FinetuneConfig, "tiny", [f"model={tmp_path / 'm'}", f"train={tmp_path / 't.csv'}",
                                               f"out={tmp_path / 'o'}"])
    with pytest.raises(ConfigError) as e:
        finetune(dataclasses.replace(cfg, **bad))
    assert str(e.value) == _message(FinetuneConfig, **{**to_dict(cfg), **bad}) and not (tmp_path / "o").exists()


@pytest.mark.fast
def test_pretrain_checks_a_replaced_config_and_a_section_given_as_a_dict(tmp_path):
    cfg = load_config(PretrainConfig, "tiny", ["corpus=a.txt", f"out={tmp_path / 'o'}"])
    with pytest.raises(ConfigError) as e:
        pretrain(dataclasses.replace(cfg, max_steps=0))
    assert str(e.value) == _message(PretrainConfig, **{**to_dict(cfg), "max_steps": 0})
    with pytest.raises(ConfigError, match="model.hidden_size: expected an integer"):
        pretrain(PretrainConfig(model={"hidden_size": "wide"}, corpus=["a.txt"], out=str(tmp_path / "o")))
    assert not (tmp_path / "o").exists()


@pytest.mark.fast
@pytest.mark.parametrize("entry", ["finetune", "pretrain", "distill", "train_tokenizer"])
def test_an_entry_given_a_preset_name_says_what_to_pass(entry):
    import koelectra_kit.distill as d
    import koelectra_kit.tokenizer as t

    fn = {"finetune": finetune, "pretrain": pretrain, "distill": d.distill, "train_tokenizer": t.train_tokenizer}[entry]
    with pytest.raises(ConfigError, match=rf"^{entry}\(\) takes a \w+Config or a dict of its keys, got str 'tiny' "
                                          r"\(e.g. .*load_config\("):
        fn("tiny")


@pytest.mark.fast
@pytest.mark.parametrize("cls", ["finetune", "pretrain", "tokenizer"])
def test_a_second_check_changes_no_shipped_preset(cls):
    """What the CLI validated comes back equal from the entry's check (it runs once more there)."""
    from koelectra_kit.config import checked
    from koelectra_kit.tokenizer import TokenizerConfig

    klass = {"finetune": FinetuneConfig, "pretrain": PretrainConfig, "tokenizer": TokenizerConfig}[cls]
    overrides = {"pretrain": ["corpus=a.txt", "out=x"], "tokenizer": ["input=a.txt", "out=x"]}.get(cls, [])
    for preset in sorted((ROOT / "configs" / cls).glob("*.yaml")):
        cfg = load_config(klass, preset, overrides)
        assert checked(cfg, klass, cls) == cfg, preset.name


@pytest.mark.fast
def test_a_path_goes_where_a_path_string_does(tmp_path):
    cfg = from_dict(FinetuneConfig, {"model": tmp_path / "m", "train": tmp_path / "t.csv", "out": tmp_path / "o"})
    assert (cfg.model, cfg.out) == (str(tmp_path / "m"), str(tmp_path / "o"))
    from koelectra_kit.pretrain import PretrainConfig

    cfg = from_dict(PretrainConfig, {"corpus": [tmp_path / "a.txt", "b.txt"], "out": "x"})
    assert cfg.corpus == [str(tmp_path / "a.txt"), "b.txt"]


@pytest.mark.fast
def test_overrides_a_dict_of_values_or_one_line_for_a_string():
    cfg = load_config(FinetuneConfig, "tiny", {"epochs": 1, "baseline.C": 2})
    assert cfg.epochs == 1.0 and cfg.baseline.C == 2.0
    assert load_config(FinetuneConfig, "tiny", ["epochs=1"]).epochs == 1.0  # a list, as always
    with pytest.raises(ConfigError, match=r"^overrides: a list of 'key=value' strings .*got 'epochs=1'$"):
        load_config(FinetuneConfig, "tiny", "epochs=1")


def test_ctrl_c_publishes_the_best_model_then_raises(tiny_encoder_dir, sample_dir, tmp_path):
    """A KeyboardInterrupt in on_step (as Jupyter's interrupt button): the model so far is in OUT, and finetune()
    raises instead of returning as if the run had finished; the CLI still says so and exits 130."""
    out = tmp_path / "s"

    def stop(step):
        if step == 3:
            raise KeyboardInterrupt

    cfg = load_config(FinetuneConfig, str(TINY_CONFIG), [f"model={tiny_encoder_dir}",
                                                          f"train={sample_dir / 'reviews_labelled.csv'}",
                                                          f"out={out}", *RUN, "ensemble=none"])
    with pytest.raises(Interrupted) as e:
        finetune(cfg, on_step=stop)
    assert isinstance(e.value, KeyboardInterrupt)
    assert e.value.result["train"]["stopped"] == "interrupted" and (out / "model.safetensors").is_file()
    assert e.value.result["best_model"] == str(out.resolve())


def test_best_model_is_the_folder_that_won_on_dev(tiny_encoder_dir, sample_dir, tmp_path):
    out = tmp_path / "s"
    threads = torch.get_num_threads()
    cfg = load_config(FinetuneConfig, str(TINY_CONFIG), [*RUN, "ensemble=tfidf"])  # a dict, Paths in it
    result = finetune({**to_dict(cfg), "model": tiny_encoder_dir, "train": sample_dir / "reviews_labelled.csv",
                       "out": out})
    folder = result["candidates"]["folder"]
    assert result["best_model"] == str((out if folder == "." else out / folder).resolve())
    assert Path(result["best_model"]).is_dir() and torch.get_num_threads() == threads


def test_pretrain_threads_are_put_back(tiny_cfg):
    before = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        pretrain(tiny_cfg("max_steps=1", "threads=1"))
        assert torch.get_num_threads() == 2
    finally:
        torch.set_num_threads(before)


@pytest.mark.fast
def test_a_tfidf_fit_leaves_no_warning_filter_behind():
    import numpy as np
    from sklearn.exceptions import ConvergenceWarning

    from koelectra_kit.classify.references import BaselineConfig, fit_tfidf

    before = list(warnings.filters)
    texts = ["좋아요 최고", "별로 최악", "좋은 영화", "나쁜 영화"] * 5
    fit_tfidf(texts, np.array([0, 1, 0, 1] * 5), BaselineConfig(max_iter=1, min_df=1))
    assert warnings.filters == before
    assert not any(f[2] is ConvergenceWarning for f in warnings.filters)


@pytest.mark.fast
def test_offline_mode_lasts_only_for_the_call(monkeypatch):
    """A hub that did not answer switches the process offline for the call that asked, not for good."""
    import datasets.config
    import huggingface_hub
    from huggingface_hub import constants

    from koelectra_kit.io import hubreach
    from koelectra_kit.io.scope import entry_scope

    monkeypatch.setattr(hubreach, "_answer", [])
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
    monkeypatch.setenv("HF_HUB_OFFLINE", "0")

    class Session:
        def head(self, url, timeout=None):
            raise OSError("[Errno 111] Connection refused")

    monkeypatch.setattr(huggingface_hub, "get_session", lambda: Session())
    with entry_scope():
        assert hubreach.unreachable() and constants.HF_HUB_OFFLINE and os.environ["HF_HUB_OFFLINE"] == "1"
    assert not constants.HF_HUB_OFFLINE and not datasets.config.HF_HUB_OFFLINE
    assert os.environ["HF_HUB_OFFLINE"] == "0" and hubreach._answer == []
