"""Stopping a multi-rank pretraining run: Ctrl-C or a scheduler's SIGTERM makes every rank end the same step, then
checkpoint and export, as a single process does, and `resume=true` continues to the uninterrupted run's weights; a
second signal stops the ranks at once. Before, a signal under torchrun or --nproc killed the ranks where they stood
(the work since the last periodic checkpoint lost)."""
from __future__ import annotations

import json
import os
import signal
import time

import pytest

from koelectra_kit.cli import launch
from koelectra_kit.runtime import StopRequest
from tests.fixtures_pretrain import TINY_PRESET
from tests.launch import koelectra, start_koelectra


@pytest.mark.fast
def test_a_signal_passed_on_twice_is_one_request_and_a_later_one_stops_at_once(terminal_sigint, capsys):
    """A cluster scheduler signals every process of a job and torchrun's agent signals its ranks again: two signals
    within ``same_within_s`` are one request; a signal after that is the second Ctrl-C."""
    with StopRequest(what="the test", signals=("SIGINT",), same_within_s=30.0) as stop:
        assert signal.getsignal(signal.SIGTERM) is not stop._handle  # DDP ranks: SIGTERM keeps its meaning
        os.kill(os.getpid(), signal.SIGINT)
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested
        stop.at -= 31.0  # as if 31 s had passed
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)
    assert capsys.readouterr().err.count("SIGINT: the test stops after this step") == 1
    with StopRequest(what="the test") as stop:  # a single process: both signals, and no window
        os.kill(os.getpid(), signal.SIGTERM)
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGTERM)


@pytest.mark.fast
def test_the_launcher_asks_torch_for_time_to_save_unless_the_user_set_it(monkeypatch):
    from torch.distributed.run import get_args_parser

    monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    options = launch._signal_options(get_args_parser())
    assert options == ["--signals-to-handle=SIGHUP,SIGQUIT", f"--shutdown-timeout={launch.STOP_GRACE_S}"]
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "45")
    assert launch._signal_options(get_args_parser()) == ["--signals-to-handle=SIGHUP,SIGQUIT"]


def fake_agent(*signals):
    """torch's ``run`` as the launcher sees it: the ranks start (their log folder appears), then the signals come
    in; the agent catches the first one's SignalException while it stops the ranks, and the second ends it."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def run(args):
        from pathlib import Path

        (Path(args.log_dir) / "job" / "attempt_0").mkdir(parents=True)
        try:
            os.kill(os.getpid(), signals[0])
            time.sleep(5)
        except SignalException as first:
            assert first.sigval == signal.SIGINT  # what the agent passes on to the ranks: Ctrl-C, whatever came
            if len(signals) == 1:
                raise
            os.kill(os.getpid(), signals[1])
            time.sleep(5)
    return run


@pytest.mark.fast
@pytest.mark.parametrize("signals, said", [
    ((signal.SIGTERM,), ""),  # passed on as Ctrl-C: rank 0 says what it saved
    ((signal.SIGINT,), ""),
    ((signal.SIGTERM, signal.SIGINT), "interrupted again (SIGINT): every rank was stopped at once"),
])
def test_a_scheduler_sigterm_reaches_the_ranks_as_ctrl_c_and_a_second_signal_is_said(
        monkeypatch, tmp_path, capsys, terminal_sigint, signals, said):
    import torch.distributed.run

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(torch.distributed.run, "run", fake_agent(*signals))
    before = signal.getsignal(signal.SIGTERM)
    assert launch.launch(["pretrain"], 2, resume="rerun it") == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"{said}; outputs already written are complete; rerun it" if said else ""), err
    assert signal.getsignal(signal.SIGTERM) is before


WORKER = """
import os, sys, time
from koelectra_kit.pretrain.distributed import DistContext, SharedStop
from koelectra_kit.runtime import StopRequest

rank, asked_at = int(os.environ["RANK"]), int(sys.argv[1])
ctx = DistContext("cpu", 1)
request = StopRequest(enabled=False)
stop, step = SharedStop(ctx, request), 0
while not stop.now():
    step += 1
    if rank == 1 and step == asked_at:
        request.requested = True  # as the signal handler does, in the middle of this rank's step
    time.sleep(0.02 * (rank + 1))  # the ranks at different paces
print(f"rank {rank} stopped after step {step}")
ctx.close()
"""


def test_ranks_stop_after_the_same_step_whichever_of_them_was_asked(tmp_path):
    """Only rank 1 is asked, in its step 3: both end step 4 (the request goes round during the next step)."""
    import socket
    import sys

    (tmp_path / "worker.py").write_text(WORKER, encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "OMP_NUM_THREADS": "1"}
    import subprocess

    procs = [subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), "3"], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                              cwd=os.getcwd()) for r in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert [o[0].strip() for o in outs] == ["rank 0 stopped after step 4", "rank 1 stopped after step 4"]


def _args(tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache, *extra):
    return ["pretrain", "--nproc", "2", "--config", TINY_PRESET, f"corpus={sample_dir / 'comments.txt'}",
            f"tokenizer={pretrain_tokenizer}", f"cache_dir={pretrain_cache}", "device=cpu", "progress=false",
            "plots=false", "log_every=1", "save_every=100", "save_every_minutes=0", *extra]


def _signal_when_it_trains(proc, metrics, *signals, gap=0.3):
    deadline = time.monotonic() + 240
    while not (metrics.is_file() and metrics.stat().st_size) and proc.poll() is None:
        assert time.monotonic() < deadline, "no metrics row in 240 s"
        time.sleep(0.05)
    for k, sig in enumerate(signals):
        if k:
            time.sleep(gap)
        proc.send_signal(sig)
    return proc.communicate(timeout=300)


def test_sigterm_on_two_ranks_stops_them_at_one_step_and_a_resume_continues_exactly(
        tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache):
    """The real launch, signalled as a scheduler does once the run trains: every rank ends the same step, the
    checkpoint and the encoder at that step are written (exit 130, rank 0's lines said once, no launcher line and no
    traceback), and resume=true ends on the uninterrupted two-rank run's exact weights."""
    common = _args(tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache, "max_steps=40",
                   "model.hidden_dropout=0.1")
    env = {"TMPDIR": str(tmp_path)}
    full = koelectra(*common, f"out={tmp_path / 'full'}", env=env)
    assert full.returncode == 0, full.stderr[-3000:]
    cut = tmp_path / "cut"
    proc = start_koelectra(*common, f"out={cut}", env=env)
    _, err = _signal_when_it_trains(proc, cut / "metrics.jsonl", signal.SIGTERM)
    assert proc.returncode == 130, err[-3000:]
    summary = json.loads((cut / "summary.json").read_text())
    assert summary["stopped"] == "interrupted" and summary["steps"] < 40 and summary["ranks_in_sync"], summary
    step = summary["steps"]
    assert (cut / "checkpoints" / f"step-{step:08d}").is_dir(), list((cut / "checkpoints").iterdir())
    assert (cut / "discriminator" / "model.safetensors").is_file()
    assert err.count("SIGINT: pretraining stops after the next step (every rank stops at the same one)") == 1, err
    assert err.count(f"interrupted at step {step}, before the end of the budget") == 1, err
    assert "Traceback" not in err and "interrupted (" not in err, err[-3000:]

    resumed = koelectra(*common, f"out={cut}", "resume=true", env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    a, b = (json.loads((tmp_path / n / "summary.json").read_text()) for n in ("full", "cut"))
    assert b["steps"] == 40 and b["stopped"] == "completed"
    assert b["rank_param_digests"] == a["rank_param_digests"]
    assert not list(tmp_path.glob("koelectra-ranks-*"))


def test_a_second_ctrl_c_stops_every_rank_at_once_in_one_line(tmp_path, sample_dir, pretrain_tokenizer,
                                                              pretrain_cache):
    """Steps long enough for the second Ctrl-C to land before the first one's step ends: the ranks end at once
    (the agent's SIGTERM), the run says so in one line after rank 0's notice, and no rank is left running."""
    out = tmp_path / "run"
    proc = start_koelectra(*_args(tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache, "max_steps=200",
                                  "model.hidden_size=256", "model.intermediate_size=1024", "model.num_layers=4",
                                  "batch_size=128", f"out={out}"), env={"TMPDIR": str(tmp_path)})
    _, err = _signal_when_it_trains(proc, out / "metrics.jsonl", signal.SIGINT, signal.SIGINT)
    assert proc.returncode == 130, err[-3000:]
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert lines[-1].startswith("interrupted again (SIGINT): every rank was stopped at once; outputs already "
                                "written are complete; rerun the same command with resume=true"), err[-3000:]
    assert "Traceback" not in err and not (out / "summary.json").exists()
    assert not _processes_naming(tmp_path), "a rank outlived its launcher"


def _processes_naming(folder) -> list[str]:
    """The command lines of this machine's processes that name ``folder`` (the ranks read their config there)."""
    from pathlib import Path

    if not Path("/proc/self/cmdline").is_file():
        pytest.skip("no /proc to list processes from")
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(folder) in text and cmdline.parent.name != str(os.getpid()):
            found.append(text)
    return found
