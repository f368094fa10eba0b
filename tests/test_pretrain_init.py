"""Continued pretraining (``init=``): a tiny run continued from the shared tiny run's export starts where that run
ended (both models), exports weights that load and differ, takes its shape and tokenizer from the checkpoint,
and refuses another vocabulary or a missing source in one line."""
from __future__ import annotations

import shutil

import pytest
import torch

from koelectra_kit.cli import main
from koelectra_kit.errors import ConfigError, InputError
from koelectra_kit.pretrain import pretrain, read_metrics


def _weights(folder):
    from transformers import ElectraForPreTraining

    return ElectraForPreTraining.from_pretrained(folder).state_dict()


def test_continue_a_run_starts_where_it_ended_and_exports_new_weights(tiny_run, tiny_cfg, tmp_path, capsys):
    out = tmp_path / "continued"
    # the preset's shape (and a conflicting hidden size, and the positional prior) give way to the checkpoint's
    cfg = tiny_cfg(f"init={tiny_run}", "tokenizer=null", f"out={out}", "max_steps=3", "model.hidden_size=128",
                   "model.num_heads=4", "model.init=positional", "lr=1e-3", "warmup_steps=0")
    pretrain(cfg)
    err = capsys.readouterr().err
    assert "model.hidden_size 128 -> 64" in err and "model.init=positional ignored" in err
    assert f"generator: {tiny_run / 'generator'}" in err

    before, after = _weights(tiny_run / "discriminator"), _weights(out / "discriminator")
    assert before.keys() == after.keys()
    assert any(not torch.equal(before[k], after[k]) for k in before)  # trained further
    # ... but from the checkpoint, not from scratch: every tensor moved only by three small steps
    key = "electra.embeddings.word_embeddings.weight"
    assert (after[key] - before[key]).abs().max() < 0.01 < before[key].std()
    # both models continued: the generator's loss starts near where the first run ended, not at ln(V)
    first, cont = read_metrics(tiny_run / "metrics.jsonl"), read_metrics(out / "metrics.jsonl")
    assert cont[0]["gen_loss"] < first[0]["gen_loss"] - 1.0
    assert abs(cont[0]["gen_loss"] - first[-1]["gen_loss"]) < 1.0
    assert (out / "discriminator" / "tokenizer.json").read_text() == \
        (tiny_run / "discriminator" / "tokenizer.json").read_text()  # init's vocabulary, not one trained here
    assert not (out / "tokenizer").exists()
    assert "hidden_size: 64" in (out / "config.yaml").read_text(encoding="utf-8")


def test_a_resume_without_the_init_it_continues_or_with_one_it_did_not_names_it(tiny_run, tiny_cfg, tmp_path):
    """A continued run resumed without init= trained a tokenizer into out/tokenizer, then was refused as
    'generator.hidden_size 32 -> None; the model shape can't change'; init= was never named."""
    out, plain = tmp_path / "continued", tmp_path / "plain"
    pretrain(tiny_cfg(f"init={tiny_run}", "tokenizer=null", f"out={out}", "max_steps=2", "save_every=2"))
    with pytest.raises(ConfigError, match=f"continues init={tiny_run} .*pass init={tiny_run} again"):
        pretrain(tiny_cfg("tokenizer=null", f"out={out}", "max_steps=3", "resume=true"))
    assert not (out / "tokenizer").exists()  # no tokenizer trained for nothing
    pretrain(tiny_cfg(f"out={plain}", "max_steps=2", "save_every=2"))
    with pytest.raises(ConfigError, match=f"was not trained from init=: drop init={tiny_run}"):
        pretrain(tiny_cfg(f"init={tiny_run}", "tokenizer=null", f"out={plain}", "max_steps=3", "resume=true"))
    # another init= of another shape: named as init=, not as "generator.hidden_size 32 -> None, ..."
    lonely = tmp_path / "encoder"
    shutil.copytree(tiny_run / "discriminator", lonely)
    with pytest.raises(ConfigError, match=f"continues init={tiny_run}; this run gives init={lonely}, a model of "
                                          f"another shape: pass init={tiny_run} again"):
        pretrain(tiny_cfg(f"init={lonely}", "tokenizer=null", f"out={out}", "max_steps=3", "resume=true",
                          "generator.size=0.25"))
    assert pretrain(tiny_cfg(f"init={tiny_run}", "tokenizer=null", f"out={out}", "max_steps=3",
                             "resume=true"))["steps"] == 3


def test_discriminator_alone_gets_a_fresh_generator_of_generator_size(tiny_run, tiny_cfg, tmp_path, capsys):
    lonely = tmp_path / "encoder"  # an encoder folder with no generator beside it
    shutil.copytree(tiny_run / "discriminator", lonely)
    out = tmp_path / "run"
    pretrain(tiny_cfg(f"init={lonely}", "tokenizer=null", f"out={out}", "max_steps=2", "generator.size=0.25"))
    assert "a fresh one (generator.size 0.25)" in capsys.readouterr().err
    from transformers import AutoConfig

    assert AutoConfig.from_pretrained(out / "generator").hidden_size == 16  # 0.25 x the checkpoint's 64
    assert AutoConfig.from_pretrained(out / "discriminator").hidden_size == 64


def test_sibling_generator_is_found_from_the_discriminator_folder(tiny_run, tiny_cfg, tmp_path, capsys):
    # tokenizer= may name another copy of init's own vocabulary (here the one the first run trained)
    pretrain(tiny_cfg(f"init={tiny_run / 'discriminator'}", f"tokenizer={tiny_run / 'tokenizer'}",
                      f"out={tmp_path / 'r'}", "max_steps=1"))
    assert f"generator: {tiny_run / 'generator'}" in capsys.readouterr().err


def test_objective_mlm_continues_with_no_generator_and_says_so(tiny_run, tiny_cfg, tmp_path, capsys):
    # the log said "generator: a fresh one (generator.size 0.5)" for a run that trains none
    pretrain(tiny_cfg(f"init={tiny_run}", "tokenizer=null", "objective=mlm", f"out={tmp_path / 'r'}", "max_steps=1"))
    err = capsys.readouterr().err
    assert "a masked LM (objective=mlm: no generator)" in err and "generator:" not in err


def test_a_classifier_continued_says_its_head_is_left_out(tiny_run, tiny_cfg, tmp_path, capsys):
    """A fine-tuned classifier as init= was continued with a fresh replaced-token head without a word."""
    from transformers import ElectraForSequenceClassification

    clf = tmp_path / "clf"
    ElectraForSequenceClassification.from_pretrained(tiny_run / "discriminator", num_labels=3).save_pretrained(clf)
    for f in (tiny_run / "discriminator").iterdir():
        if f.name not in ("config.json", "model.safetensors"):  # its tokenizer, as a fine-tune saves it
            shutil.copy(f, clf / f.name)
    pretrain(tiny_cfg(f"init={clf}", "tokenizer=null", f"out={tmp_path / 'r'}", "max_steps=1"))
    err = capsys.readouterr().err
    assert "is ElectraForSequenceClassification, not a pretraining discriminator" in err, err
    pretrain(tiny_cfg(f"init={tiny_run}", "tokenizer=null", f"out={tmp_path / 'r2'}", "max_steps=1"))
    assert "not a pretraining discriminator" not in capsys.readouterr().err  # a discriminator: no note


def test_another_vocabulary_is_a_one_line_error_naming_both(tiny_run, tiny_cfg, tiny_encoder_dir, tmp_path):
    # the fine-tuning fixture's vocabulary was trained on comments + reviews: other tokens, other ids
    with pytest.raises(InputError, match=f"tokenizer={tiny_encoder_dir}.*not the vocabulary of init={tiny_run}"):
        pretrain(tiny_cfg(f"init={tiny_run}", f"tokenizer={tiny_encoder_dir}", f"out={tmp_path / 'r'}"))


def test_missing_or_foreign_init_is_a_one_line_cli_error(tiny_run, sample_dir, tmp_path, capsys):
    args = ["pretrain", "--config", "tiny", f"corpus={sample_dir / 'comments.txt'}", f"out={tmp_path / 'r'}",
            "progress=false"]
    assert main(args + [f"init={tmp_path / 'nope'}"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: init=") and "no such folder" in err and "\n" not in err
    # a hub id cannot be fetched offline (the tests run with HF_HUB_OFFLINE=1): one line, not a traceback
    assert main(args + ["init=nobody-here/no-such-electra"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: init=nobody-here/no-such-electra") and "\n" not in err


def test_a_pickled_init_is_refused_before_the_corpus_is_read(tiny_run, tiny_cfg, tmp_path, monkeypatch):
    """A published-style folder whose pytorch_model.bin pickles more than tensors was refused only when the model was
    built, after the corpus had been pre-split and packed (minutes to hours on a real corpus)."""
    import datetime

    from koelectra_kit.pretrain.recipe import PretrainRecipe

    init = tmp_path / "published"
    shutil.copytree(tiny_run / "discriminator", init)
    state = _weights(init)
    (init / "model.safetensors").unlink()
    state["not_a_tensor"] = datetime.datetime(2020, 1, 1)  # a global weights_only does not allow
    torch.save(state, init / "pytorch_model.bin")

    def reached(self):
        raise AssertionError("the corpus was read before the weights were checked")

    monkeypatch.setattr(PretrainRecipe, "setup_data", reached)
    with pytest.raises(InputError, match=r"init=.*safe loading \(weights_only\) refuses its pytorch_model.bin"):
        pretrain(tiny_cfg(f"init={init}", f"out={tmp_path / 'r'}"))
    assert not (tmp_path / "r").exists()
    # the same folder with only tensors in its .bin passes the check (and trains)
    state.pop("not_a_tensor")
    torch.save(state, init / "pytorch_model.bin")
    from koelectra_kit.pretrain.continued import check_pickled_weights

    check_pickled_weights(str(init), "init")
