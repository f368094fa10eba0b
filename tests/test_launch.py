"""`pretrain --nproc N`: the ranks started by torch's launcher with the toolkit's error contract kept. A bad option
is one line before any rank starts; a failed job ends in one line (rank 0's, or the failing rank's from its log),
never torchrun's ChildFailedError report; a real two-rank CPU run trains in sync."""
from __future__ import annotations

import argparse
import json

import pytest

from koelectra_kit.cli import launch, main
from koelectra_kit.errors import ConfigError
from tests.fixtures_pretrain import TINY_PRESET
from tests.launch import koelectra, run_python


def one_error(rc, err, *needles):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.mark.fast
@pytest.mark.parametrize("text, expected", [("2", 2), ("auto", "auto"), (" AUTO", "auto"), ("1", 1)])
def test_nproc_takes_a_count_or_auto(text, expected):
    assert launch.nproc_arg(text) == expected


@pytest.mark.fast
@pytest.mark.parametrize("text", ["0", "-2", "two", "", "1.5"])
def test_nproc_refuses_what_is_no_count(text):
    with pytest.raises(argparse.ArgumentTypeError):
        launch.nproc_arg(text)


@pytest.mark.fast
def test_more_cpu_ranks_than_cores_auto_without_gpus_and_nproc_under_torchrun_are_refused(monkeypatch):
    import os

    cores = os.cpu_count() or 1
    with pytest.raises(ConfigError, match=f"this machine has {cores} cores"):
        launch.resolve_nproc(cores + 1, "cpu")
    with pytest.raises(ConfigError, match="one rank per GPU"):
        launch.resolve_nproc("auto", "cpu")
    assert launch.resolve_nproc(1, "cpu") == 1
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="already one of 2"):
        launch.resolve_nproc(2, "cpu")


@pytest.mark.fast
@pytest.mark.parametrize("extra, needle", [
    (["batch_size=15"], "multiple of ranks x grad_accum (2 x 1)"),  # fine in one process, not on two ranks
    (["corpus=missing.txt"], "missing.txt: file not found"),
    (["prepared=missing-folder"], "missing-folder"),  # found where a rank opens it, not by the config's checks
])
def test_a_bad_option_is_one_line_before_any_rank_starts(tmp_path, capsys, sample_dir, extra, needle):
    out = tmp_path / "run"
    rc = main(["pretrain", "--nproc", "2", "--config", str(TINY_PRESET), f"corpus={sample_dir / 'comments.txt'}",
               f"out={out}", "device=cpu", *extra])
    one_error(rc, capsys.readouterr().err, needle)
    assert not out.exists()


@pytest.mark.fast
def test_a_finished_run_in_out_is_refused_before_any_rank_starts(tmp_path, capsys, sample_dir):
    out = tmp_path / "run"
    (out / "checkpoints" / "step-00000004").mkdir(parents=True)
    (out / "config.yaml").write_text("seq_len: 64\n")
    rc = main(["pretrain", "--nproc", "2", "--config", str(TINY_PRESET), f"corpus={sample_dir / 'comments.txt'}",
               f"out={out}", "device=cpu"])
    one_error(rc, capsys.readouterr().err, "already holds a run's checkpoints")
    assert sorted(p.name for p in out.iterdir()) == ["checkpoints", "config.yaml"]


@pytest.mark.fast
def test_plot_takes_no_nproc(tmp_path, capsys):
    rc = main(["pretrain", "--nproc", "2", "plot", str(tmp_path)])
    one_error(rc, capsys.readouterr().err, "--nproc")


def failed(tmp_path, *failures):
    """A ChildFailedError for (rank, exitcode, the error: line it left or None) each, with the lines where the
    launcher's ranks leave them (``note_error``) and each rank's log."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    found = {}
    for rank, code, said in failures:
        log = tmp_path / "run_x" / "attempt_0" / str(rank) / "stderr.log"
        log.parent.mkdir(parents=True)
        log.write_text(f"step 40\n{said or ''}\n")
        if said is not None:
            (tmp_path / f"rank-{rank}.error").write_text(said + "\n")
        found[rank] = ProcessFailure(local_rank=rank, pid=100 + rank, exitcode=code, error_file="")
    return ChildFailedError("koelectra_kit", found)


@pytest.mark.fast
def test_rank_0s_own_error_line_is_the_only_one(tmp_path, capsys):
    code, keep = launch._one_line_for(failed(tmp_path, (0, 2, "error: the same"), (1, 2, "error: the same")), 2,
                                      tmp_path)
    assert (code, keep) == (2, False) and capsys.readouterr().err == ""


@pytest.mark.fast
def test_rank_0_stopped_after_its_line_still_says_it_once(tmp_path, capsys):
    """Rank 1 fails first and torch stops rank 0 (SIGTERM, -15) after rank 0 printed the same line: one line."""
    code, _ = launch._one_line_for(failed(tmp_path, (1, 2, "error: the same"), (0, -15, "error: the same")), 2,
                                   tmp_path)
    assert code == 2 and capsys.readouterr().err == ""


@pytest.mark.fast
def test_rank_0_interrupted_and_saying_so_ends_the_job_in_its_words(tmp_path, capsys):
    """Rank 0 took a Ctrl-C and said what it kept (``note_interrupted``) while rank 1 ended otherwise: exit 130 and
    no launcher line; without rank 0's word the job is named by its first failure."""
    error = failed(tmp_path, (0, 130, None), (1, -15, None))
    (tmp_path / "rank-0.interrupted").write_text("")
    assert launch._one_line_for(error, 2, tmp_path) == (130, False) and capsys.readouterr().err == ""
    (tmp_path / "rank-0.interrupted").unlink()
    code, _ = launch._one_line_for(error, 2, tmp_path)
    assert code == 1 and capsys.readouterr().err.startswith("error: rank ")


@pytest.mark.fast
def test_another_ranks_error_line_is_said_once_whatever_rank_0_did(tmp_path, capsys):
    """Rank 1's own error, and rank 0 crashing in a collective whose peer is gone (exit 1, its traceback on the
    terminal) or stopped (-15): rank 1's line is the job's."""
    for rank0 in (1, -15):
        sub = tmp_path / str(rank0)
        sub.mkdir()
        code, keep = launch._one_line_for(failed(sub, (0, rank0, None), (1, 2, "error: GPU 1 has 2 GiB free")), 2,
                                          sub)
        assert (code, keep) == (2, False)
        assert capsys.readouterr().err == "error: GPU 1 has 2 GiB free\n"


@pytest.mark.fast
def test_a_killed_rank_is_named_and_the_logs_kept(tmp_path, capsys):
    code, keep = launch._one_line_for(failed(tmp_path, (1, -9, None)), 4, tmp_path)
    err = capsys.readouterr().err
    assert (code, keep) == (1, True)
    assert err.startswith("error: rank 1 of 4 was killed by SIGKILL (out of memory?)") and err.count("\n") == 1
    assert str(tmp_path / "run_x" / "attempt_0" / "1" / "stderr.log") in err


@pytest.mark.fast
def test_rank_0_ending_without_an_error_line_points_above(tmp_path, capsys):
    code, _ = launch._one_line_for(failed(tmp_path, (0, 1, None)), 2, tmp_path)
    assert code == 1
    assert capsys.readouterr().err == ("error: rank 0 of 2 ended with exit code 1; the other ranks were stopped; its "
                                       "output is above\n")


@pytest.mark.fast
def test_a_ranks_error_line_is_left_for_the_launcher_only_under_it(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("RANK", "1")
    assert main(["pretrain", "--config", str(TINY_PRESET), "corpus=a.txt", "out=o", "lr=-1"]) == 2
    assert not list(tmp_path.iterdir())
    monkeypatch.setenv(launch.ERRORS_ENV, str(tmp_path))
    assert main(["pretrain", "--config", str(TINY_PRESET), "corpus=a.txt", "out=o", "lr=-1"]) == 2
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("error: lr") and (tmp_path / "rank-1.error").read_text() == line


@pytest.mark.fast
def test_gpu_ranks_each_take_a_gpu_for_pretrain_and_may_share_for_label(monkeypatch):
    import os

    import torch

    import koelectra_kit.runtime as runtime

    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(runtime, "resolve_device", lambda name: torch.device(name if name != "auto" else "cuda"))
    assert launch.resolve_nproc("auto", "auto") == 2
    with pytest.raises(ConfigError, match="shows 2 GPU"):
        launch.resolve_nproc(3, "cuda")
    with pytest.raises(ConfigError, match="puts all 2 ranks on one GPU"):
        launch.resolve_nproc(2, "cuda:1")
    assert launch.resolve_nproc(3, "cuda", gpu_each=False) == 3
    assert launch.resolve_nproc(2, "cuda:1", gpu_each=False) == 2


@pytest.mark.fast
def test_the_callers_signal_handlers_and_environment_come_back(tmp_path, monkeypatch):
    import os
    import signal

    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    before = signal.getsignal(signal.SIGTERM)
    with launch._rank_env(2, tmp_path), launch._own_signals(launch._Stops()):
        signal.signal(signal.SIGTERM, lambda *a: None)  # as torch's launcher does
        os.environ[launch.SIGNALS_ENV] = "SIGTERM"
        assert os.environ["OMP_NUM_THREADS"] == str(max(1, (os.cpu_count() or 1) // 2))
    assert signal.getsignal(signal.SIGTERM) is before
    assert "OMP_NUM_THREADS" not in os.environ and launch.ERRORS_ENV not in os.environ
    assert launch.SIGNALS_ENV not in os.environ


def test_two_cpu_ranks_train_in_sync_and_a_failing_job_says_one_line(tmp_path, sample_dir, pretrain_tokenizer,
                                                                     pretrain_cache):
    """The real launch: two gloo ranks end with identical weights; then ranks that fail (a check made only in the
    ranks: launch called past the command's own checks) end in rank 0's one line, exit 2, and no torchrun report."""
    out = tmp_path / "ddp"
    common = ["--config", TINY_PRESET, f"corpus={sample_dir / 'comments.txt'}", f"tokenizer={pretrain_tokenizer}",
              f"cache_dir={pretrain_cache}", "device=cpu", "progress=false", "plots=false", "max_steps=4",
              "log_every=2", "save_every=2"]
    proc = koelectra("pretrain", "--nproc", "2", *common, f"out={out}", env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    summary = json.loads((out / "summary.json").read_text())
    assert summary["world_size"] == 2 and summary["ranks_in_sync"], summary.get("rank_param_digests")
    assert proc.stderr.count("model: electra") == 1 and "torchelastic" not in proc.stderr, proc.stderr[-3000:]

    argv = ["pretrain", *map(str, common), f"out={tmp_path / 'bad'}", "batch_size=15"]
    bad = run_python(f"import sys; from koelectra_kit.cli.launch import launch; sys.exit(launch({argv!r}, 2))",
                     cwd=tmp_path, env={"TMPDIR": str(tmp_path)})
    assert bad.returncode == 2, bad.stderr[-3000:]
    lines = [ln for ln in bad.stderr.splitlines() if ln.strip()]
    assert lines == ["error: batch_size 15 must be a multiple of ranks x grad_accum (2 x 1)"], bad.stderr[-3000:]
    assert not list(tmp_path.glob("koelectra-ranks-*"))  # the ranks' logs go with a job that said why it failed


def test_label_on_two_ranks_writes_one_processs_bytes_and_a_refusal_is_one_line(tmp_path, tiny_classifier_dir,
                                                                                 capsys):
    """`label --nproc 2`: the ranks get the config the command resolved (its relative paths read from the same
    folder) and rank 0's joined output is an unsharded run's bytes; an existing output is one line, exit 2."""
    from tests.test_label_scale import _write

    src = _write(tmp_path / "reviews.csv")
    common = ["--model", str(tiny_classifier_dir), "--text-column", "review", "--precision", "fp32", "--no-progress",
              "--device", "cpu"]
    assert main(["label", *common, "--input", str(src), "--output", str(tmp_path / "one.csv")]) == 0
    capsys.readouterr()
    proc = koelectra("label", "--nproc", "2", *common, "--input", src.name, "--output", "two.csv", cwd=tmp_path,
                     env={"TMPDIR": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "two.csv").read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert proc.stdout.count("labelled ") == 1 and "by 2 processes" in proc.stdout

    again = koelectra("label", "--nproc", "2", *common, "--input", src.name, "--output", "two.csv", cwd=tmp_path,
                      env={"TMPDIR": str(tmp_path)})
    assert again.returncode == 2
    assert [ln for ln in again.stderr.splitlines() if ln.strip()] == [
        "error: two.csv exists; pass --overwrite to label it again"], again.stderr[-3000:]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".one.csv.job.json", ".two.csv.job.json", "one.csv",
                                                          "reviews.csv", "two.csv"]


@pytest.mark.fast
def test_label_on_ranks_takes_a_tfidf_folder_as_one_process_does(tmp_path, monkeypatch, tfidf_dir):
    from tests.test_label_scale import _write

    started = []
    monkeypatch.setattr(launch, "launch", lambda argv, n, **k: started.append((argv, n)) or 0)
    src = _write(tmp_path / "reviews.csv")
    assert main(["label", "--nproc", "2", "--model", str(tfidf_dir), "--input", str(src), "--text-column",
                 "review", "--device", "cpu", "--output", str(tmp_path / "out.csv")]) == 0
    assert [n for _, n in started] == [2]


@pytest.mark.fast
@pytest.mark.parametrize("case, needle", [
    ("exists", "exists; pass --overwrite to label it again"),
    ("missing input", "nope.csv: file not found"),
    ("xlsx", "a workbook can't be"),
    ("shard", "leave --shard out"),
    ("no model", "model"),
])
def test_label_refusals_are_one_line_before_any_rank_starts(tmp_path, capsys, monkeypatch, tiny_classifier_dir,
                                                             case, needle):
    """Said by the command itself, no rank started (a started one would import torch in a process of its own: a
    launch here fails the test), and nothing written."""
    from tests.test_label_scale import _write

    monkeypatch.setattr(launch, "launch", lambda *a, **k: pytest.fail("a rank was started"))
    src = _write(tmp_path / "reviews.csv")
    (tmp_path / "out.csv").write_text("x\n") if case == "exists" else None
    argv = ["label", "--nproc", "2", "--model", str(tmp_path / "none" if case == "no model" else tiny_classifier_dir),
            "--input", str(tmp_path / "nope.csv" if case == "missing input" else src), "--text-column", "review",
            "--device", "cpu", "--output", str(tmp_path / ("out.xlsx" if case == "xlsx" else "out.csv")),
            *(["--shard", "1/2"] if case == "shard" else [])]
    before = sorted(p.name for p in tmp_path.iterdir())
    one_error(main(argv), capsys.readouterr().err, needle)
    assert sorted(p.name for p in tmp_path.iterdir()) == before
