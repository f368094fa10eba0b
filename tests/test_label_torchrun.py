"""``torchrun ... -m koelectra_kit label``: every process labels a shard, rank 0 joins them into the one output an
unsharded run writes (its bytes, in fp32), reports the whole file, and resumes; what a torchrun job can't be is
refused before any row is labelled; commands that are one process's work are refused under torchrun."""
from __future__ import annotations

import os
import sys
from dataclasses import replace
from pathlib import Path

import pytest

from koelectra_kit.cli import main
from koelectra_kit.label import LabelConfig
from koelectra_kit.label import torchrun as tr
from koelectra_kit.label.shard import shard_path

from .launch import torchrun
from .test_label_scale import _write

ROOT = Path(__file__).resolve().parent.parent


def _torchrun(*argv, cwd):
    return torchrun("-m", "koelectra_kit", "label", *argv, cwd=cwd)


@pytest.mark.extended
def test_two_processes_write_the_unsharded_runs_bytes_report_the_whole_file_and_resume(tmp_path, tiny_classifier_dir,
                                                                                         capsys):
    src = _write(tmp_path / "reviews.csv")
    common = ["--model", str(tiny_classifier_dir), "--input", str(src), "--text-column", "review", "--precision",
              "fp32", "--no-progress"]
    assert main(["label", *common, "--output", str(tmp_path / "one.csv")]) == 0
    one = capsys.readouterr().out.splitlines()[0]  # "labelled N rows -> ..."

    out = tmp_path / "two.csv"
    proc = _torchrun(*common, "--output", out, "--plot", tmp_path / "dist.png", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert out.read_bytes() == (tmp_path / "one.csv").read_bytes()
    # each output with its record (the joined one's written by the join, as label-merge writes it)
    assert sorted(p.name for p in tmp_path.iterdir()) == [".one.csv.job.json", ".two.csv.job.json", "dist.png",
                                                          "one.csv", "reviews.csv", "two.csv"]
    assert proc.stdout.count("labelled ") == 1  # rank 0 reports the joined file, once
    assert proc.stdout.splitlines()[0] == one.replace("one.csv", "two.csv")
    assert "by 2 processes" in proc.stdout

    again = _torchrun(*common, "--output", out, cwd=tmp_path)  # an existing output: refused before any labelling
    assert again.returncode != 0 and "error: " in again.stderr and "two.csv exists; pass --overwrite" in again.stderr
    assert out.read_bytes() == (tmp_path / "one.csv").read_bytes()

    # shard 1 labelled earlier (a job killed after rank 0 finished): --resume keeps it and labels only shard 2
    out3 = tmp_path / "three.csv"
    assert main(["label", *common, "--output", str(out3), "--shard", "1/2"]) == 0
    capsys.readouterr()
    resumed = _torchrun(*common, "--output", out3, "--resume", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    assert out3.read_bytes() == (tmp_path / "one.csv").read_bytes()
    assert resumed.stdout.splitlines()[0] == one.replace("one.csv", "three.csv")  # every row counted, also shard 1's
    assert not shard_path(out3, 1, 2).exists()


@pytest.fixture
def two_ranks(monkeypatch):
    """This process as rank 0 of a 2-process torchrun job (no process group is started by the refusals)."""
    for key, value in {"WORLD_SIZE": "2", "RANK": "0", "LOCAL_RANK": "0", "LOCAL_WORLD_SIZE": "2"}.items():
        monkeypatch.setenv(key, value)


def _one_error(capsys, rc):
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert rc == 2 and len(errors) == 1 and "Traceback" not in err, err
    return errors[0]


def test_one_process_commands_are_refused_under_torchrun(two_ranks, tmp_path, capsys):
    rc = main(["finetune", "model=x", f"train={tmp_path / 'train.csv'}", f"out={tmp_path / 'clf'}"])
    line = _one_error(capsys, rc)
    assert "finetune runs as one process" in line and "WORLD_SIZE" in line and "pretrain and label" in line
    assert not (tmp_path / "clf").exists()
    assert _one_error(capsys, main(["label-merge", str(tmp_path / "out.csv")]))


def test_what_a_torchrun_label_job_cannot_be_is_refused_before_labelling(two_ranks, tmp_path, tiny_classifier_dir,
                                                                         capsys):
    src = _write(tmp_path / "reviews.csv", n=10)
    common = ["label", "--model", str(tiny_classifier_dir), "--input", str(src), "--text-column", "review"]
    line = _one_error(capsys, main([*common, "--output", str(tmp_path / "o.csv"), "--shard", "1/2"]))
    assert "under torchrun" in line and "leave --shard out" in line
    line = _one_error(capsys, main([*common, "--output", str(tmp_path / "o.xlsx")]))
    assert "workbook" in line and "torchrun" in line
    (tmp_path / "done.csv").write_text("kept\n", encoding="utf-8")
    line = _one_error(capsys, main([*common, "--output", str(tmp_path / "done.csv"), "--resume"]))
    assert "done.csv is complete; pass --overwrite" in line
    assert (tmp_path / "done.csv").read_text(encoding="utf-8") == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["done.csv", "reviews.csv"]
    # shards an earlier run of 3 processes left: the join refused them only after every rank had labelled
    (tmp_path / "s.shard-1-of-3.csv").write_text("kept\n", encoding="utf-8")
    line = _one_error(capsys, main([*common, "--output", str(tmp_path / "s.csv")]))
    assert "shards of an earlier run of 3 processes are beside it (s.shard-1-of-3.csv, ...)" in line
    assert "--nproc 3 to continue that run" in line and not (tmp_path / "s.shard-1-of-2.csv").exists()


def test_each_rank_takes_its_shard_its_gpu_or_its_share_of_the_cores(monkeypatch, tmp_path):
    cfg = LabelConfig(model="m", input=str(_write(tmp_path / "r.csv", n=4)), output=str(tmp_path / "o.csv"),
                      plot=str(tmp_path / "d.png"))
    rank1 = tr.Launch(rank=3, world=4, local_rank=1, local_world=2)
    monkeypatch.setattr(tr, "_gpus", lambda: 2)
    current = []
    monkeypatch.setattr(tr, "_use_gpu", current.append)
    got = rank1.rank_config(cfg)
    assert (got.shard, got.device, got.threads, got.plot, got.progress) == ("4/4", "cuda:1", None, None, False)
    assert current == [1]  # also torch's current GPU
    assert rank1.plot == cfg.plot and rank1.outputs == (tmp_path / "o.csv",)
    monkeypatch.setattr(tr, "_gpus", lambda: 0)
    monkeypatch.setattr(os, "cpu_count", lambda: 16)
    got = rank1.rank_config(cfg)
    assert (got.device, got.threads) == ("auto", 8)  # 16 cores over the machine's 2 ranks
    assert rank1.rank_config(replace(cfg, threads=3)).threads == 3  # the user's own count


def test_the_joined_summary_adds_the_shards_counts():
    a = {"counts": {"rows": 3, "per_label": {"positive": 2, "negative": 1}, "status": {"ok": 3}, "malformed": [],
                    "reused": 1, "human": 1, "flattened": 0, "human_conflicts": 1}, "human_labels_file": "L.csv"}
    b = {"counts": {"rows": 2, "per_label": {"positive": 1}, "status": {"ok": 1, "error": 1},
                    "malformed": ["line 9: ..."], "reused": 0, "human": 0, "flattened": 2, "human_conflicts": 1}}
    s = tr.combine([a, b], "out.csv")
    assert (s.rows, s.per_label, s.status, s.malformed) == (5, {"positive": 3, "negative": 1}, {"ok": 4, "error": 1},
                                                            ["line 9: ..."])
    assert (s.reused, s.human, s.flattened, s.human_labels, s.human_conflicts) == (1, 1, 2, "L.csv", 1)


@pytest.mark.extended
def test_the_ranks_benchmark_times_both_commands_and_compares_their_labels(tiny_classifier_dir, capsys):
    from .conftest import SHARED_DATA

    if not (SHARED_DATA / "nsmc3" / "train.tsv").exists():
        pytest.skip(f"the benchmark reads nsmc3 train from the real data ({SHARED_DATA}), absent here")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    try:
        import bench_label_ranks
    finally:
        sys.path.remove(str(ROOT / "benchmarks"))
    bench_label_ranks.main(["--model", str(tiny_classifier_dir), "--rows", "40", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "one process, every core" in out and "torchrun, 2 processes" in out
    assert "labels: 40 of 40 rows the same in both outputs" in out


@pytest.mark.extended
@pytest.mark.filterwarnings("ignore:vocab_size=8000:UserWarning")  # (a vocabulary trained on 40 reviews)
def test_the_ranks_benchmark_runs_without_a_model_or_the_tsv(tmp_path, sample_dir, monkeypatch, capsys):
    """As on a GPU lease: no fine-tuned model (a random-init classifier of --shape on --tokenizer's vocabulary,
    pre-split none, so no Kiwi) and nsmc3 train as the bundle's Parquet (gpu_bundle.py), on --device cpu here."""
    import pandas as pd

    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))  # (it imports bench_label as it runs)
    import bench_label
    import bench_label_ranks

    reviews = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].astype(str).tolist()[:40]
    tokenizer = bench_label.bench_tokenizer(reviews, tmp_path / "tok")  # WordPiece, presplit=none
    train = tmp_path / "train.parquet"
    pd.DataFrame({"id": [str(i) for i in range(40)], "label": "neutral", "document": reviews}).to_parquet(train)
    monkeypatch.setattr(bench_label_ranks, "NSMC_TRAIN", train)
    bench_label_ranks.main(["--shape", "tiny", "--tokenizer", tokenizer, "--presplit", "none", "--device", "cpu",
                            "--rows", "40", "--rounds", "1"])
    out = capsys.readouterr().out
    assert "40 nsmc3 train reviews" in out and "device cpu" in out and "model tiny" in out
    assert "labels: 40 of 40 rows the same in both outputs" in out


def test_a_failed_ranks_command_shows_what_the_ranks_said_and_the_launchers_summary(monkeypatch):
    """torchrun's launcher writes its traceback last: the ranks' own lines (a faulthandler dump, an error) are at
    the beginning of a failed command's stderr, and must not be cut off by the launcher's ~2,500 characters."""
    monkeypatch.syspath_prepend(str(ROOT / "benchmarks"))
    import bench_label_ranks
    ranks = "Fatal Python error: Aborted\n" + "rank line\n" * 200
    launcher = "Traceback (most recent call last):\n" + "  launcher frame\n" * 300 + "ChildFailedError: rank 1\n"
    shown = bench_label_ranks.said(ranks + launcher)
    assert shown.startswith("Fatal Python error: Aborted") and shown.endswith("ChildFailedError: rank 1\n")
    assert "characters ...]" in shown and len(shown) < len(ranks + launcher)
    assert bench_label_ranks.said("short") == "short"


def test_the_ranks_meet_on_the_store_with_no_gloo_collective(monkeypatch):
    """A gloo collective's worker thread frees the collective's tensors after the caller has gone on: a rank that
    exits at once (every rank but 0, after the meeting) could then end in SIGABRT at interpreter shutdown (2 runs in
    113 of two CPU ranks under load, with gather_object). The meeting uses the rendezvous store alone."""
    import socket

    import torch.distributed as dist

    def refused(*args, **kwargs):
        raise AssertionError("a gloo collective in the ranks' meeting")

    for name in ("gather_object", "all_gather_object", "gather", "all_gather", "barrier", "broadcast_object_list"):
        monkeypatch.setattr(dist, name, refused)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    try:
        launch = tr.Launch(rank=0, world=1, local_rank=0, local_world=1)
        assert launch.join([]) == [] and launch.joining
    finally:
        if dist.is_initialized():
            dist.destroy_process_group()
