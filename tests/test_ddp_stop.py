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
def test_the_launcher_asks_torch_for_pretrains_time_to_save_and_keeps_ignored_signals_ignored(monkeypatch):
    from torch.distributed.run import get_args_parser

    parser = get_args_parser()
    if not {"--signals-to-handle", "--shutdown-timeout"} <= set(parser._option_string_actions):
        pytest.skip("this torch's torchrun has no --signals-to-handle or --shutdown-timeout (its own rules stand)")
    monkeypatch.delenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", raising=False)
    assert launch._signal_options(parser, 300) == ["--signals-to-handle=SIGHUP,SIGQUIT", "--shutdown-timeout=300"]
    assert launch._signal_options(parser, None) == ["--signals-to-handle=SIGHUP,SIGQUIT"]  # label: torch's 30 s
    monkeypatch.setenv("TORCH_ELASTIC_SHUTDOWN_TIMEOUT", "45")
    before = signal.signal(signal.SIGHUP, signal.SIG_IGN)  # nohup: a hangup must not stop the job
    try:
        assert launch._signal_options(parser, 300) == ["--signals-to-handle=SIGQUIT"]
    finally:
        signal.signal(signal.SIGHUP, before)


def fake_agent(*signals, rank_0_said=False):
    """torch's ``run`` as the launcher sees it: the ranks start, rank 0 says it was interrupted (or not), and the
    signals come in; the agent catches the first one's SignalException while it stops the ranks, and the second ends
    it."""
    from torch.distributed.elastic.multiprocessing.api import SignalException

    def run(args):
        from pathlib import Path

        if rank_0_said:
            (Path(args.log_dir) / "rank-0.interrupted").write_text("")
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
@pytest.mark.parametrize("signals, rank_0_said, said", [
    ((signal.SIGTERM,), True, ""),  # passed on as Ctrl-C: rank 0 said what it saved
    ((signal.SIGINT,), True, ""),
    ((signal.SIGTERM,), False, "interrupted (SIGTERM): every rank was stopped"),  # e.g. as the ranks started
    ((signal.SIGTERM, signal.SIGINT), True, "interrupted again (SIGINT): every rank was stopped at once"),
])
def test_a_scheduler_sigterm_reaches_the_ranks_as_ctrl_c_and_the_launcher_speaks_when_rank_0_did_not(
        monkeypatch, tmp_path, capsys, terminal_sigint, signals, rank_0_said, said):
    import torch.distributed.run

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setattr(torch.distributed.run, "run", fake_agent(*signals, rank_0_said=rank_0_said))
    before = signal.getsignal(signal.SIGTERM)
    assert launch.launch(["pretrain"], 2, resume="rerun it") == 130
    err = capsys.readouterr().err.strip()
    assert err == (f"{said}; outputs already written are complete; rerun it" if said else ""), err
    assert signal.getsignal(signal.SIGTERM) is before


@pytest.mark.fast
def test_a_signal_once_the_job_ended_is_counted_not_raised():
    """A third Ctrl-C while the launcher says how the job ended: exit 130 still, not a signal's exit or a trace."""
    stops = launch._Stops()
    stops.closing = True
    stops(signal.SIGTERM, None)
    assert stops.got == ["SIGTERM"]


def test_a_rank_that_never_comes_is_one_line_after_the_timeout():
    """The wait on the rendezvous store keeps the process group's promise: after its timeout, one line saying what
    to do (here a job of two whose second rank never starts)."""
    import socket

    import torch.distributed as dist

    from koelectra_kit.errors import KitError
    from koelectra_kit.runtime import wait_for_ranks

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        wait_for_ranks(1, 5.0, "unused")  # all here: at once
        t0 = time.monotonic()
        with pytest.raises(KitError, match="the other ranks did not come in 0.3 s: raise the timeout"):
            wait_for_ranks(2, 0.3, "raise the timeout")
        assert time.monotonic() - t0 < 5
        assert wait_for_ranks(1, 5.0, "unused", share={"out.shard-1-of-2.csv": [40, 0.5]}) == [
            {"out.shard-1-of-2.csv": [40, 0.5]}]  # every rank's value, in rank order, over the store
    finally:
        dist.destroy_process_group()


RANK = """
import os, signal, sys, time
time.sleep(float(sys.argv[2]))  # 1: its launcher is gone before this rank gets going
from koelectra_kit.cli.launch import as_launched_rank
as_launched_rank()
with open(sys.argv[1], "w") as f:
    f.write(str(signal.getsignal(signal.SIGINT) is signal.default_int_handler and
                signal.getsignal(signal.SIGTERM) is signal.SIG_DFL))
time.sleep(60)
"""


@pytest.mark.parametrize("early", [False, True])
def test_a_rank_takes_its_signals_whatever_it_inherited_and_ends_when_its_launcher_goes(tmp_path, early):
    """A launcher started in the background hands its ranks SIGINT ignored (the SIGTERM it passes on as SIGINT was
    lost: the ranks trained on until the agent's SIGKILL), and an ignored SIGTERM (the agent's end for a failed
    job's ranks); a launcher gone, even before its rank started (``early``), leaves no rank training alone."""
    import subprocess
    import sys

    said = tmp_path / "said"
    wait = "" if early else (f"import pathlib, time; [time.sleep(0.1) for _ in "
                             f"iter(lambda: pathlib.Path({str(said)!r}).exists(), True)]")
    launcher = ("import os, signal, subprocess, sys; signal.signal(signal.SIGINT, signal.SIG_IGN); "
                "signal.signal(signal.SIGTERM, signal.SIG_IGN); "
                f"os.environ[{launch.LAUNCHER_ENV!r}] = str(os.getpid()); "
                f"p = subprocess.Popen([sys.executable, '-c', {RANK!r}, {str(said)!r}, {'1' if early else '0'!r}], "
                "start_new_session=True); print(p.pid, flush=True); " + wait)  # then exit, leaving the rank behind
    proc = subprocess.run([sys.executable, "-c", launcher], capture_output=True, text=True, timeout=120,
                          env={**os.environ, launch.ERRORS_ENV: str(tmp_path)})
    pid = int(proc.stdout)
    deadline = time.monotonic() + 30
    while _alive(pid):
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)
            pytest.fail("the rank outlived its launcher")
        time.sleep(0.2)
    assert early or said.read_text() == "True", proc.stderr


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:  # a zombie (exited, its new parent not done reaping it) is gone too
        return open(f"/proc/{pid}/stat").read().split(") ")[1][0] != "Z"
    except OSError:
        return True


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


BARRIER = """
import os, sys, time
from koelectra_kit.label.torchrun import Launch
from koelectra_kit.pretrain.distributed import DistContext

if sys.argv[1] == "pretrain":
    ctx = DistContext("cpu", 1)
    wait, done = ctx.barrier, ctx.close
else:  # label's ranks, at the end of their shards
    job = Launch.from_env()
    job.meet()
    wait, done = (lambda: job.join([])), job.leave
if int(os.environ["RANK"]) == 1:
    time.sleep(60)  # rank 0 builds the data cache, or rank 1's shard is the longer one
print("waiting", flush=True)
try:
    wait()
except KeyboardInterrupt:
    print("interrupted", flush=True)
    done()  # and the process can end: nothing of the wait is left in flight
"""


def _two_ranks(tmp_path, script: str, *args):
    import socket
    import subprocess
    import sys

    (tmp_path / "worker.py").write_text(script, encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    env = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
           "OMP_NUM_THREADS": "1"}
    return [subprocess.Popen([sys.executable, str(tmp_path / "worker.py"), *args], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env={**env, "RANK": str(r), "LOCAL_RANK": str(r)},
                             cwd=os.getcwd()) for r in range(2)]


def test_ranks_stop_after_the_same_step_whichever_of_them_was_asked(tmp_path):
    """Only rank 1 is asked, in its step 3: both end step 4 (the request goes round during the next step)."""
    procs = _two_ranks(tmp_path, WORKER, "3")
    try:
        outs = [p.communicate(timeout=120) for p in procs]
    finally:
        for p in procs:
            p.kill()
    assert [p.returncode for p in procs] == [0, 0], [o[1][-2000:] for o in outs]
    assert [o[0].strip() for o in outs] == ["rank 0 stopped after step 4", "rank 1 stopped after step 4"]


@pytest.mark.parametrize("command", ["pretrain", "label"])
def test_ctrl_c_reaches_a_rank_waiting_for_another(tmp_path, command):
    """Rank 0 waits while rank 1 is busy: Ctrl-C stops it now, not when torch's agent kills it (its wait was inside
    the collective, where a signal's handler does not run)."""
    procs = _two_ranks(tmp_path, BARRIER, command)
    try:
        assert procs[0].stdout.readline().strip() == "waiting"
        time.sleep(0.5)
        procs[0].send_signal(signal.SIGINT)
        out, err = procs[0].communicate(timeout=10)
        assert out.strip() == "interrupted" and procs[0].returncode == 0, err[-2000:]
    finally:
        for p in procs:
            p.kill()
            p.communicate()


def _args(tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache, *extra):
    return ["pretrain", "--nproc", "2", "--config", TINY_PRESET, f"corpus={sample_dir / 'comments.txt'}",
            f"tokenizer={pretrain_tokenizer}", f"cache_dir={pretrain_cache}", "device=cpu", "progress=false",
            "plots=false", "log_every=1", "save_every=100", "save_every_minutes=0", *extra]


def _signal_when_it_trains(proc, metrics, sig):
    deadline = time.monotonic() + 240
    while not (metrics.is_file() and metrics.stat().st_size) and proc.poll() is None:
        assert time.monotonic() < deadline, "no metrics row in 240 s"
        time.sleep(0.05)
    proc.send_signal(sig)


def test_sigterm_on_two_ranks_stops_them_at_one_step_and_a_resume_continues_exactly(
        tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache):
    """The real launch, started in the background and signalled as a scheduler does once the run trains (a SIGTERM
    to the launcher alone): every rank ends the same step, the
    checkpoint and the encoder at that step are written (exit 130, rank 0's lines said once, no launcher line and no
    traceback), and resume=true ends on the uninterrupted two-rank run's exact weights."""
    common = _args(tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache, "max_steps=40",
                   "model.hidden_dropout=0.1")
    env = {"TMPDIR": str(tmp_path)}
    full = koelectra(*common, f"out={tmp_path / 'full'}", env=env)
    assert full.returncode == 0, full.stderr[-3000:]
    cut = tmp_path / "cut"
    # started in the background, as a scheduler's job often is: SIGINT ignored, which the ranks must not inherit
    proc = start_koelectra(*common, f"out={cut}", env=env, sigint=signal.SIG_IGN)
    _signal_when_it_trains(proc, cut / "metrics.jsonl", signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
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
    """The second Ctrl-C as soon as rank 0 took the first, while it ends its step: the ranks end at once
    (the agent's SIGTERM), the run says so in one line after rank 0's notice, and no rank is left running."""
    out = tmp_path / "run"
    proc = start_koelectra(*_args(tmp_path, sample_dir, pretrain_tokenizer, pretrain_cache, "max_steps=200",
                                  "model.hidden_size=256", "model.intermediate_size=1024", "model.num_layers=4",
                                  "batch_size=128", f"out={out}"), env={"TMPDIR": str(tmp_path)})
    _signal_when_it_trains(proc, out / "metrics.jsonl", signal.SIGINT)
    said = []
    for line in proc.stderr:  # the second Ctrl-C once rank 0 took the first (and is ending its step)
        said.append(line)
        if "SIGINT: pretraining stops after the next step" in line:
            proc.send_signal(signal.SIGINT)
            break
    _, rest = proc.communicate(timeout=300)
    err = "".join(said) + rest
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


def test_label_on_two_ranks_stopped_by_sigterm_resumes_to_one_processs_bytes(tmp_path, tiny_classifier_dir):
    """`label --nproc 2` SIGTERMed once a rank is writing (a scheduler's end): the ranks get it as Ctrl-C, keep their
    finished chunks and exit 130 with rank 0's own line (the launcher adds none); `--resume` then writes the bytes
    one process writes."""
    from tests.test_label_scale import TEXTS

    src = tmp_path / "reviews.csv"
    src.write_text("id,review\n" + "".join(f'{i},"{TEXTS[i % len(TEXTS)]} {i}"\n' for i in range(6000)),
                   encoding="utf-8")
    common = ["--model", tiny_classifier_dir, "--text-column", "review", "--precision", "fp32", "--no-progress",
              "--device", "cpu", "--input", src.name]
    env = {"TMPDIR": str(tmp_path)}
    one = koelectra("label", *common, "--output", "one.csv", cwd=tmp_path, env=env)
    assert one.returncode == 0, one.stderr[-3000:]
    proc = start_koelectra("label", "--nproc", "2", *common, "--output", "two.csv", cwd=tmp_path, env=env,
                           sigint=signal.SIG_IGN)
    deadline = time.monotonic() + 240
    while not list(tmp_path.glob("two.shard-*")) and proc.poll() is None:
        assert time.monotonic() < deadline, "no shard in 240 s"
        time.sleep(0.02)
    proc.send_signal(signal.SIGTERM)
    out, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the job ended before the signal landed (a fast machine)")
    assert proc.returncode == 130, err[-3000:]
    assert out.count("\ninterrupted") == 1 and "Traceback" not in err and "interrupted (" not in err, (out, err)
    assert not (tmp_path / "two.csv").exists()
    resumed = koelectra("label", "--nproc", "2", *common, "--output", "two.csv", "--resume", cwd=tmp_path, env=env)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert (tmp_path / "two.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
