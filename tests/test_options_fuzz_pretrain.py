"""Hostile option values for `tokenizer train`, `tokenizer words`, `prepare` and `pretrain` found by fuzzing every key
(0, -1, 1e12, empty, wrong case, contradicting pairs): each is one `error:` line (exit 2) before any work, never a
traceback, a hang, a run that trains NaN and exits 0, an option accepted and ignored, or a corpus file deleted."""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from koelectra_kit.cli import main

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "pretrain" / "tiny.yaml"


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def assert_error(rc, err, *needles, only=True):
    """Exit 2 and one ``error:`` line naming ``needles``; ``only``: nothing else on stderr (a run's own log lines
    may come before the error otherwise)."""
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    errors = [ln for ln in lines if ln.startswith("error: ")]
    assert rc == 2 and len(errors) == 1 and lines[-1] == errors[0], err
    assert "Traceback" not in err
    if only:
        assert len(lines) == 1, err
    for n in needles:
        assert n in errors[0], (n, errors[0])


def pretrain_argv(*overrides):
    return ["pretrain", "--config", TINY, "corpus=a.txt", "out=o", *overrides, "--print-config"]


# ---------------------------------------------------------------------------------------------
# values the config accepted (--print-config exit 0) and the run then ignored, hung on, or crashed on
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("override, needle", [
    # a threshold on an accuracy / an AUC: 2 warned "learned little" on every run, -1 never
    ("plateau_auc=2", "plateau_auc"),
    ("plateau_auc=-0.5", "plateau_auc"),
    ("plateau_gen_margin=-1", "plateau_gen_margin"),
    ("plateau_gen_margin=2", "plateau_gen_margin"),
    # under torchrun: timedelta's OverflowError or torch's DistNetworkError with its C++ frames
    ("ddp_timeout_minutes=1e10", "ddp_timeout_minutes"),
    # the memory pre-check built 1e12 layers on torch's meta device: the run hung after its "data:" line
    ("model.num_layers=1e12", "model.num_layers"),
    ("generator.num_layers=1e9", "generator.num_layers"),
    # the positional prior's knobs: a negative gain points every head away from its neighbour, 0 is no prior at all,
    # and a shift beyond the sequence names a token no row has
    ("model.init=positional model.init_pos_dims=16 model.init_scale=0", "model.init_scale"),
    ("model.init=positional model.init_pos_dims=16 model.init_scale=-1", "model.init_scale"),
    ("model.init=positional model.init_pos_dims=16 model.init_shifts=[1,1000]", "model.init_shifts"),
    # both at once: resume won, and overwrite=true was ignored without a word
    ("resume=true overwrite=true", "resume"),
])
def test_pretrain_values_that_were_accepted_are_one_error(capsys, override, needle):
    rc, _, err = run_cli(capsys, *pretrain_argv(*override.split()))
    assert_error(rc, err, needle)


def test_pretrain_limits_still_take_their_ends(capsys):
    for override in ("plateau_auc=0", "plateau_auc=1", "plateau_gen_margin=0", "ddp_timeout_minutes=1e6",
                     "model.num_layers=48", "resume=true", "overwrite=true",
                     "model.init=positional model.init_pos_dims=16 model.init_shifts=[63,-63,0]"):
        rc, _, err = run_cli(capsys, *pretrain_argv(*override.split()))
        assert rc == 0, (override, err)


# ---------------------------------------------------------------------------------------------
# text_column= with nothing after it (an unset shell variable): the column was guessed, without a word
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv", [
    ["tokenizer", "train", "input=x.csv", "out=t"],
    ["tokenizer", "words", "tokenizer=t", "input=x.csv"],
    ["pretrain", "--config", TINY, "corpus=x.csv", "out=o", "--print-config"],
    ["prepare", "--config", TINY, "corpus=x.csv", "out=o", "--print-config"],
])
def test_an_empty_text_column_is_refused(capsys, argv):
    rc, _, err = run_cli(capsys, *argv, "text_column=")
    assert_error(rc, err, "text_column is empty")


# ---------------------------------------------------------------------------------------------
# a diverged run (lr far too high): NaN weights were checkpointed and exported, exit 0
# ---------------------------------------------------------------------------------------------


def test_a_diverged_pretraining_exports_nothing(capsys, tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache):
    out = tmp_path / "run"
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}",
                         f"tokenizer={pretrain_tokenizer}", f"cache_dir={pretrain_cache}", f"out={out}",
                         "progress=false", "plots=false", "lr=1e12", "warmup_steps=0", "max_steps=6", "log_every=1",
                         "save_every=0")
    assert_error(rc, err, "diverged", "NaN", "lr", only=False)
    assert not out.exists()  # made by the run, nothing in it worth keeping: no folder a resume would find


# ---------------------------------------------------------------------------------------------
# a corpus file inside out=: deleted by overwrite=true or replaced by the export
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["discriminator/corpus.txt", "metrics.jsonl"])
def test_pretrain_refuses_a_corpus_in_what_the_run_replaces(capsys, tmp_path, sample_dir, pretrain_tokenizer,
                                                            pretrain_cache, where):
    out = tmp_path / "run"
    (out / "discriminator").mkdir(parents=True)
    (out / "config.yaml").write_text("seed: 42\n", encoding="utf-8")  # an earlier run's folder
    corpus = out / where
    text = (sample_dir / "comments.txt").read_text(encoding="utf-8")
    if where.endswith(".jsonl"):  # a metrics.jsonl of texts
        text = "".join(json.dumps({"text": line}, ensure_ascii=False) + "\n" for line in text.splitlines())
    corpus.write_text(text, encoding="utf-8")
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"corpus={corpus}", f"tokenizer={pretrain_tokenizer}",
                         f"cache_dir={pretrain_cache}", f"out={out}", "progress=false", "plots=false", "max_steps=2",
                         "overwrite=true")
    assert_error(rc, err, f"corpus={corpus}", "out=")
    assert corpus.read_text(encoding="utf-8") == text


def test_prepare_overwrite_refuses_a_corpus_inside_its_out(capsys, tmp_path, prepared, sample_dir, pretrain_cache):
    """out= is replaced whole by prepare: a corpus kept in it (or in its tokenizer/) was deleted, exit 0, and
    prepared.json named a file that no longer existed."""
    folder = tmp_path / "prepared"
    shutil.copytree(prepared, folder)
    corpus = folder / "comments.txt"
    shutil.copy(sample_dir / "comments.txt", corpus)
    rc, _, err = run_cli(capsys, "prepare", "--config", TINY, f"corpus={corpus}",
                         f"tokenizer={folder / 'tokenizer'}", f"cache_dir={pretrain_cache}", f"out={folder}",
                         "progress=false", "overwrite=true")
    assert_error(rc, err, f"corpus={corpus}", "would be replaced")
    assert corpus.read_bytes() == (sample_dir / "comments.txt").read_bytes()


def test_pretrain_refuses_a_text_column_its_prepared_folder_was_not_made_with(capsys, tmp_path, prepared):
    """text_column= is a key of the packing, which the prepared folder already did: it was ignored, exit 0."""
    rc, _, err = run_cli(capsys, "pretrain", "--config", TINY, f"prepared={prepared}", f"out={tmp_path / 'run'}",
                         "progress=false", "max_steps=1", "text_column=comment")
    assert_error(rc, err, "text_column=comment", f"prepared={prepared}")
    assert not (tmp_path / "run").exists()


# ---------------------------------------------------------------------------------------------
# pretrain plot: what it was given besides the run folder was ignored
# ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("argv, needles", [
    (["--plot", "{run}", "lr=1"], ["lr=1", "drop"]),  # the redraw ran, lr=1 ignored
    (["--config", "tiny", "--plot", "{run}"], ["--config"]),
    (["--plot", "{run}", "plot", "{run}"], ["once"]),
    (["--plot="], ["--plot is empty"]),  # was "corpus is empty", as if a training run had been asked for
])
def test_pretrain_plot_refuses_what_it_would_ignore(capsys, tmp_path, argv, needles):
    rc, _, err = run_cli(capsys, "pretrain", *[a.format(run=tmp_path) for a in argv])
    assert_error(rc, err, *needles)
