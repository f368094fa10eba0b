"""Multi-process (torchrun) pretraining and its resume: a kill mid-save and a resume give the uninterrupted run's rows;
every rank's own counts survive a checkpoint; a rerun after a kill before the first checkpoint starts its own metrics.

Run as a script, this file is torchrun's worker: the CLI, with KILL_IN_SAVE=STEP killing rank 0 (SIGKILL) while it
writes step STEP's state.pt, after the checkpoint's weights and optimizer are in its staging folder."""
from __future__ import annotations

import json
import os
import signal
import sys
from pathlib import Path

import pytest
import torch

from tests.launch import torchrun

ROOT = Path(__file__).resolve().parent.parent
TINY = ROOT / "configs" / "pretrain" / "tiny.yaml"


class Killed(Exception):
    pass


def test_every_ranks_counts_survive_a_checkpoint(tmp_path):
    """The unigram counts and the metrics window are per rank (a metrics row sums them over ranks). Only rank 0's
    were saved and every rank loaded them: a 2-process resume's gen_unigram_acc and the first row's losses differed
    from the uninterrupted run's (0.0197 vs 0.0174), and a resume on another number of ranks counted rank 0's twice."""
    from koelectra_kit.pretrain.checkpoint import LoopState

    def state(rank):
        s = LoopState.fresh(5, "cpu")
        s.unigram += torch.tensor([1, 2, 3, 4, 5]) * (rank + 1)
        s.window = {"loss": torch.tensor(1.5 + rank), "n_steps": torch.tensor(2.0)}
        return s

    ranks = [state(0), state(1)]
    saved = ranks[0].to_checkpoint([({"rank": r}, s.counts()) for r, s in enumerate(ranks)])
    torch.save(saved, tmp_path / "state.pt")
    saved = torch.load(tmp_path / "state.pt", weights_only=True)  # still plain tensors: safe loading reads it
    for r in (0, 1):  # as many ranks as saved it: each its own, exactly
        back, rng = LoopState.from_checkpoint(saved, "cpu", r, 2)
        assert rng == [{"rank": 0}, {"rank": 1}]
        assert torch.equal(back.unigram, ranks[r].unigram)
        assert {k: float(v) for k, v in back.window.items()} == {k: float(v) for k, v in ranks[r].window.items()}
    one, _ = LoopState.from_checkpoint(saved, "cpu", 0, 1)  # 2 -> 1: the sums
    assert one.unigram.tolist() == [3, 6, 9, 12, 15] and float(one.window["loss"]) == 4.0
    single = one.to_checkpoint([({}, one.counts())])
    assert "rank_counts" not in single  # one process: the sums are its counts
    a, b = (LoopState.from_checkpoint(single, "cpu", r, 2)[0] for r in (0, 1))  # 1 -> 2: summed once, same keys
    assert torch.equal(a.unigram + b.unigram, one.unigram) and a.window.keys() == b.window.keys()
    assert float(a.window["loss"] + b.window["loss"]) == 4.0


def test_a_fresh_rerun_after_a_kill_before_the_first_checkpoint_keeps_one_row_per_step(tiny_cfg, tmp_path):
    """Killed before its first checkpoint, the run can't be resumed ("drop resume to start fresh"); the fresh rerun
    appended its rows to the killed run's: steps 1, 2, 3, 1, 2, 3, 4 in metrics.jsonl (and in curves.png)."""
    from koelectra_kit.errors import InputError
    from koelectra_kit.pretrain import pretrain, read_metrics

    def kill(step, row):
        if step == 3:
            raise Killed

    with pytest.raises(Killed):
        pretrain(tiny_cfg("save_every=4"), on_step=kill)
    with pytest.raises(InputError, match="drop resume to start fresh"):
        pretrain(tiny_cfg("save_every=4", "resume=true"))
    pretrain(tiny_cfg("save_every=4"))
    assert [r["step"] for r in read_metrics(tmp_path / "run" / "metrics.jsonl")] == [1, 2, 3, 4]


def test_a_finished_run_without_its_checkpoints_is_not_overwritten_by_a_fresh_run(tiny_cfg, tmp_path):
    """A finished run whose checkpoints/ were deleted to save space held no step-* folder, so a fresh run into it
    started without a word and replaced its discriminator (and, with the metrics cleared, its rows)."""
    import shutil

    from koelectra_kit.errors import ConfigError
    from koelectra_kit.pretrain import pretrain

    out = tmp_path / "run"
    pretrain(tiny_cfg("max_steps=2", "save_every=2"))
    shutil.rmtree(out / "checkpoints")
    before = (out / "discriminator" / "model.safetensors").read_bytes(), (out / "metrics.jsonl").read_bytes()
    with pytest.raises(ConfigError, match="holds a finished run .*overwrite=true"):
        pretrain(tiny_cfg("max_steps=3", "seed=7"))
    assert ((out / "discriminator" / "model.safetensors").read_bytes(), (out / "metrics.jsonl").read_bytes()) == before
    pretrain(tiny_cfg("max_steps=3", "seed=7", "overwrite=true"))
    assert (out / "discriminator" / "model.safetensors").read_bytes() != before[0]


def _torchrun(out: Path, *args: str, tok: Path, cache: Path, sample_dir: Path, env: dict | None = None):
    return torchrun(__file__, "pretrain", "--config", TINY, f"corpus={sample_dir / 'comments.txt'}", f"tokenizer={tok}",
                    f"cache_dir={cache}", f"out={out}", "progress=false", "plots=false", *args, env=env)


@pytest.mark.extended
def test_two_processes_killed_mid_save_resume_to_the_uninterrupted_runs_rows(tmp_path, pretrain_tokenizer,
                                                                              pretrain_cache, sample_dir):
    """Rank 0 SIGKILLed while writing step 8's checkpoint (step 4's is the last complete one), then resume=true on 2
    processes: the same rows and weights as the uninterrupted run (rows every 3 steps: step 4's checkpoint holds a
    half-full metrics window)."""
    from koelectra_kit.pretrain import read_metrics

    common = ("max_steps=9", "log_every=3", "save_every=4", "keep_checkpoints=1", "model.hidden_dropout=0.1")
    where = dict(tok=pretrain_tokenizer, cache=pretrain_cache, sample_dir=sample_dir)
    full = _torchrun(tmp_path / "full", *common, **where)
    assert full.returncode == 0, full.stderr[-3000:]
    cut = tmp_path / "cut"
    killed = _torchrun(cut, *common, **where, env={"KILL_IN_SAVE": "8"})
    assert killed.returncode != 0
    assert json.loads((cut / "checkpoints" / "latest.json").read_text())["step"] == 4
    assert list((cut / "checkpoints").glob(".step-00000008.partial-*"))  # the half-written one, not taken as one
    resumed = _torchrun(cut, *common, "resume=true", **where)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert "resumed from" in resumed.stderr and "Traceback" not in resumed.stderr

    def rows(run):
        return [{k: v for k, v in r.items() if k not in ("elapsed_s", "tokens_per_s")}
                for r in read_metrics(run / "metrics.jsonl")]

    assert [r["step"] for r in rows(cut)] == [3, 6, 9]
    assert rows(cut) == rows(tmp_path / "full")
    digests = [json.loads((run / "summary.json").read_text())["rank_param_digests"] for run in (tmp_path / "full", cut)]
    assert digests[0] == digests[1]
    assert sorted(p.name for p in (cut / "checkpoints").iterdir()) == ["latest.json", "step-00000009"]


if __name__ == "__main__":  # torchrun's worker (see the module docstring)
    if os.environ.get("KILL_IN_SAVE") and os.environ.get("RANK") == "0":
        real_save, kill_step = torch.save, int(os.environ["KILL_IN_SAVE"])

        def save(obj, f, *args, **kwargs):
            if isinstance(obj, dict) and obj.get("step") == kill_step:  # state.pt, the last file of the checkpoint
                os.kill(os.getpid(), signal.SIGKILL)
            return real_save(obj, f, *args, **kwargs)

        torch.save = save
    from koelectra_kit.cli import main

    sys.exit(main(sys.argv[1:]))
