"""A fine-tune that is killed, crashes or is stopped continues when the same command runs again: from its last
checkpoint in OUT.work, to the very weights the uninterrupted run reaches (finetune/checkpoint.py). Another run's
checkpoint (other settings or rows) is refused naming what changed, a damaged one in one line, a second run for the
same out= while the first trains stops before touching it, and a finished run leaves no OUT.work behind."""
from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
import torch

from koelectra_kit.config import load_config
from koelectra_kit.errors import ConfigError, InputError
from koelectra_kit.finetune import FinetuneConfig, finetune
from tests.fixtures_finetune import TINY_CONFIG

# 3 epochs of 26 steps, dev every 10 steps: checkpoints every 10 steps land mid-epoch (step 30 is epoch 1's 4th batch)
RUN = ("epochs=3", "eval_every=10", "precision=fp32", "progress=false", "plots=false", "ensemble=none",
       "references=false", "save_every=10", "save_every_minutes=0")


class Killed(Exception):
    pass


def _cfg(model: Path, train: Path, out: Path, *extra: str) -> FinetuneConfig:
    return load_config(FinetuneConfig, str(TINY_CONFIG), [f"model={model}", f"train={train}", f"out={out}", *RUN,
                                                         *extra])


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def _same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def _rows(folder: Path) -> list[tuple]:
    """metrics.jsonl's rows without their timings: what a resumed run must log as the uninterrupted one did."""
    rows = [json.loads(x) for x in (folder / "metrics.jsonl").read_text().splitlines()]
    return [(r["kind"], r["step"], r["loss"], r.get("macro_f1")) for r in rows]


def _kill_at(step: int):
    def on_step(s: int) -> None:
        if s == step:
            raise Killed

    return on_step


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory, tiny_encoder_dir, sample_dir):
    """(folder, eval.json) of the run every resumed run must reach."""
    out = tmp_path_factory.mktemp("whole") / "sentiment"
    result = finetune(_cfg(tiny_encoder_dir, sample_dir / "reviews_labelled.csv", out))
    return out, result


def test_a_killed_finetune_resumes_to_the_uninterrupted_weights(uninterrupted, tiny_encoder_dir, sample_dir, tmp_path,
                                                               capsys):
    train = sample_dir / "reviews_labelled.csv"
    out, work = tmp_path / "sentiment", tmp_path / "sentiment.work"
    with pytest.raises(Killed):  # checkpoints every 8 steps: step 32, mid-epoch, 2 steps into a train row's window
        finetune(_cfg(tiny_encoder_dir, train, out, "save_every=8"), on_step=_kill_at(37))
    assert not out.exists()
    assert json.loads((work / "checkpoints" / "latest.json").read_text())["step"] == 32
    assert max(json.loads(x)["step"] for x in (work / "metrics.jsonl").read_text().splitlines()) > 32

    # another lr is another run: refused, naming it, and the checkpoint is kept
    with pytest.raises(ConfigError, match=r"sentiment\.work holds a fine-tuning run with other settings: lr 0\.001 -> "
                                          r"0\.002; pass resume=false"):
        finetune(_cfg(tiny_encoder_dir, train, out, "lr=2e-3"))
    assert (work / "checkpoints" / "latest.json").exists()
    capsys.readouterr()

    result = finetune(_cfg(tiny_encoder_dir, train, out, "save_every=8", "progress=true"))  # (how it runs may change)
    assert "resumed from" in capsys.readouterr().err
    assert _same(_weights(out), _weights(uninterrupted[0]))  # bit-exact continuation
    assert result["best"] == uninterrupted[1]["best"] and result["dev"] == uninterrupted[1]["dev"]
    assert result["train"]["steps"] == uninterrupted[1]["train"]["steps"] and result["train"]["stopped"] == "completed"
    # the same log: the killed run's rows after its checkpoint went, none twice, and the first train row after the
    # resume averages the whole window (its first 2 steps were in the checkpoint)
    assert _rows(out) == _rows(uninterrupted[0])
    assert not work.exists()  # done: the checkpoints are gone


def test_sigterm_publishes_the_best_so_far_and_the_same_command_finishes_the_run(uninterrupted, tiny_encoder_dir,
                                                                                 sample_dir, tmp_path, capsys):
    """A scheduler's SIGTERM (or Ctrl-C) still writes the best model so far, as it always did, and now also
    checkpoints the step it stopped at: the rerun finishes the run instead of starting it over."""
    train = sample_dir / "reviews_labelled.csv"
    out, work = tmp_path / "sentiment", tmp_path / "sentiment.work"

    def term(step):
        if step == 20:  # a step with a dev evaluation: it runs before the run stops (the resume skipped it)
            os.kill(os.getpid(), signal.SIGTERM)

    before = signal.getsignal(signal.SIGTERM)
    first = finetune(_cfg(tiny_encoder_dir, train, out), on_step=term)
    assert signal.getsignal(signal.SIGTERM) is before
    assert first["train"]["stopped"] == "interrupted" and first["train"]["steps"] == 20 and out.is_dir()
    err = capsys.readouterr().err
    assert f"{work} keeps the run at step 20 of 78: the same command continues it" in err
    assert json.loads((work / "checkpoints" / "latest.json").read_text())["step"] == 20

    result = finetune(_cfg(tiny_encoder_dir, train, out))
    assert "at step 20 of 78" in capsys.readouterr().err
    assert result["train"]["stopped"] == "completed" and result["best"] == uninterrupted[1]["best"]
    assert _same(_weights(out), _weights(uninterrupted[0])) and _rows(out) == _rows(uninterrupted[0])
    assert not work.exists()


def test_other_rows_are_another_run_and_resume_false_starts_over(tiny_encoder_dir, sample_dir, tmp_path, capsys):
    import pandas as pd

    train = sample_dir / "reviews_labelled.csv"
    out, work = tmp_path / "sentiment", tmp_path / "sentiment.work"
    with pytest.raises(Killed):
        finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1"), on_step=_kill_at(12))
    fewer = tmp_path / "fewer.csv"
    pd.read_csv(train).iloc[:-30].to_csv(fewer, index=False)
    with pytest.raises(ConfigError, match="holds a fine-tuning run with other training rows"):
        finetune(_cfg(tiny_encoder_dir, fewer, out, "epochs=1"))
    capsys.readouterr()
    result = finetune(_cfg(tiny_encoder_dir, fewer, out, "epochs=1", "resume=false"))
    err = capsys.readouterr().err
    assert "resumed" not in err, err
    assert result["train"]["rows"] < 405  # the fewer rows (405: the sample's 450 less its dev share)
    assert not work.exists()


def test_a_damaged_checkpoint_is_one_line_and_resume_false_recovers(tiny_encoder_dir, sample_dir, tmp_path):
    train = sample_dir / "reviews_labelled.csv"
    out, work = tmp_path / "sentiment", tmp_path / "sentiment.work"
    with pytest.raises(Killed):
        finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1"), on_step=_kill_at(12))
    ckpt = work / "checkpoints" / json.loads((work / "checkpoints" / "latest.json").read_text())["checkpoint"]
    (ckpt / "state.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(InputError, match=r"checkpoint .*step-00000010 is damaged .*; pass resume=false to start over"):
        finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1"))
    finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1", "resume=false"))
    assert (out / "model.safetensors").exists() and not work.exists()


def test_a_second_run_for_the_same_out_stops_before_touching_the_first_ones(tiny_encoder_dir, sample_dir, tmp_path):
    """Two runs sharing OUT.work would clear or overwrite each other's checkpoints: the second stops in one line
    (the hold is the kernel's flock: another open of the folder conflicts as another process's would)."""
    from koelectra_kit.finetune.checkpoint import hold_work

    out, work = tmp_path / "sentiment", tmp_path / "sentiment.work"
    fd = hold_work(work, out)
    try:
        (work / "metrics.jsonl").write_text('{"kind": "train", "step": 1}\n')
        with pytest.raises(InputError, match=r"is being trained by another run \(it holds .*sentiment\.work\)"):
            finetune(_cfg(tiny_encoder_dir, sample_dir / "reviews_labelled.csv", out))
        assert (work / "metrics.jsonl").exists()  # the first run's files are untouched
    finally:
        os.close(fd)


def test_a_folder_that_is_not_a_work_folder_is_never_cleared(tiny_encoder_dir, sample_dir, tmp_path):
    (tmp_path / "sentiment.work").mkdir()
    (tmp_path / "sentiment.work" / "reviews.csv").write_text("a user's file\n")
    with pytest.raises(InputError, match="is not a fine-tuning run's work folder"):
        finetune(_cfg(tiny_encoder_dir, sample_dir / "reviews_labelled.csv", tmp_path / "sentiment"))
    assert (tmp_path / "sentiment.work" / "reviews.csv").exists()


def test_a_run_that_fails_before_a_checkpoint_leaves_no_work_folder(tiny_encoder_dir, sample_dir, tmp_path):
    with pytest.raises(Killed):
        finetune(_cfg(tiny_encoder_dir, sample_dir / "reviews_labelled.csv", tmp_path / "sentiment"),
                 on_step=_kill_at(3))
    assert not (tmp_path / "sentiment.work").exists() and not (tmp_path / "sentiment").exists()


def test_a_gpu_runs_optimizer_state_loads_into_a_cpu_run():
    """CUDA graphs leave the optimizer with device-tensor learning rates and capturable updates; a checkpoint of such
    a run resumed on a CPU keeps the CPU optimizer's own settings, with the saved moments and lr."""
    from koelectra_kit.finetune.checkpoint import _load_optimizer

    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    first = torch.optim.AdamW(model.parameters(), lr=1e-3)
    model(torch.randn(3, 4)).sum().backward()
    first.step()
    saved = first.state_dict()
    saved["param_groups"][0]["lr"] = torch.tensor(5e-4)  # as GraphedStep leaves them (a device tensor there)
    saved["param_groups"][0]["capturable"] = True
    second = torch.optim.AdamW(model.parameters(), lr=1e-3)
    _load_optimizer(second, saved)
    group = second.param_groups[0]
    assert group["lr"] == float(torch.tensor(5e-4)) and isinstance(group["lr"], float) and group["capturable"] is False
    state = second.state[model.weight]
    assert torch.equal(state["exp_avg"], first.state[model.weight]["exp_avg"]) and state["step"].device.type == "cpu"
    model(torch.randn(3, 4)).sum().backward()
    second.step()  # (capturable=True on CPU tensors is refused by torch)


def test_metrics_rows_past_the_checkpoint_and_a_cut_line_go(tmp_path):
    from koelectra_kit.finetune.checkpoint import rows_until

    path = tmp_path / "metrics.jsonl"
    path.write_text('{"kind": "train", "step": 5}\n{"kind": "eval", "step": 10}\n{"kind": "train", "step": 15}\n'
                    '{"kind": "tra')
    assert [r["step"] for r in rows_until(path, 10)] == [5, 10]
    assert path.read_text().count("\n") == 2


def test_a_work_folder_with_trackers_files_is_a_work_folder(tmp_path):
    """report_to writes runs/ (TensorBoard) and wandb/ into OUT.work: a distill killed with report_to=tensorboard was
    refused on its rerun ("is not a distill run's work folder"), so the same command could not continue it."""
    from koelectra_kit.finetune.checkpoint import check_work_dir

    work = tmp_path / "student.work"
    for name in ("checkpoints", "runs", "wandb"):
        (work / name).mkdir(parents=True)
    (work / "metrics.jsonl").write_text("")
    check_work_dir(work, "distill")
    (work / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="is not a distill run's work folder"):
        check_work_dir(work, "distill")


def test_a_model_folder_retrained_in_place_is_another_run(tiny_encoder_dir, sample_dir, tmp_path):
    """model= names a path: an encoder pretrained or exported again there was resumed with the old weights' run."""
    import shutil

    from safetensors.torch import load_file, save_file

    train, model = sample_dir / "reviews_labelled.csv", tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, model)
    out = tmp_path / "sentiment"
    with pytest.raises(Killed):
        finetune(_cfg(model, train, out, "epochs=1"), on_step=_kill_at(12))
    weights = load_file(model / "model.safetensors")
    save_file({k: v * 1.01 for k, v in weights.items()}, model / "model.safetensors")
    with pytest.raises(ConfigError, match=r"holds a fine-tuning run with other starting weights \(the model= folder "
                                          r"holds other weights"):
        finetune(_cfg(model, train, out, "epochs=1"))


def test_a_lost_pointer_resumes_from_the_newest_checkpoint_and_a_damaged_one_is_one_line(tiny_encoder_dir, sample_dir,
                                                                                      tmp_path, capsys):
    """latest.json deleted (or damaged): the run started over without a word and pruned the checkpoint it had.
    A truncated model.safetensors was safetensors' traceback."""
    train = sample_dir / "reviews_labelled.csv"
    out, work = tmp_path / "sentiment", tmp_path / "sentiment.work"
    with pytest.raises(Killed):
        finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1"), on_step=_kill_at(24))
    (work / "checkpoints" / "latest.json").write_text("{not json")
    with pytest.raises(Killed):  # resumed at 20, then killed again before its next checkpoint
        finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1"), on_step=_kill_at(22))
    err = capsys.readouterr().err
    assert "latest.json is missing or damaged: resuming from the newest checkpoint, step-00000020" in err
    assert "resumed from" in err and "at step 20 of 26" in err
    (work / "checkpoints" / "latest.json").unlink()
    with open(work / "checkpoints" / "step-00000020" / "model.safetensors", "r+b") as f:
        f.truncate(1000)
    with pytest.raises(InputError, match=r"checkpoint .*step-00000020 is damaged \(.*\); pass resume=false"):
        finetune(_cfg(tiny_encoder_dir, train, out, "epochs=1"))


@pytest.mark.parametrize("failure", ["full", "denied"])
def test_a_checkpoint_that_cannot_be_written_is_one_line_naming_the_fix(failure, tiny_encoder_dir, sample_dir,
                                                                        tmp_path, monkeypatch):
    """A full disk ended in torch.save's RuntimeError ("unexpected pos ...") or safetensors' error, tracebacks both;
    a folder it may not write in was blamed on disk space."""
    import errno

    from koelectra_kit.errors import KitError

    def full(*a, **k):
        raise RuntimeError("[enforce fail at inline_container.cc:672] . unexpected pos 9920 vs 9814")

    def denied(*a, **k):
        raise PermissionError(errno.EACCES, "Permission denied")

    monkeypatch.setattr("safetensors.torch.save_model", full if failure == "full" else denied)
    fix = "free disk space" if failure == "full" else "make .*checkpoints writable"
    with pytest.raises(KitError, match=f"could not write the step-10 checkpoint .*no earlier checkpoint exists; {fix}"):
        finetune(_cfg(tiny_encoder_dir, sample_dir / "reviews_labelled.csv", tmp_path / "sentiment", "epochs=1"))
    assert not list((tmp_path / "sentiment.work" / "checkpoints").glob("*step*"))
