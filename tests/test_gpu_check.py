"""benchmarks/gpu_check.py, the one GPU check (issue 39 item 7), run dry on the CPU: every stage runs and leaves its
figures, a stage that cannot run is one line and the others go on, the bundle for a lease has the shared data's
layout, and bad options are one error line."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SAMPLE = ROOT / "corpora" / "sample"
SCRIPT = [sys.executable, str(ROOT / "benchmarks" / "gpu_check.py")]


def check(*args, timeout=600, env=None):
    return subprocess.run([*SCRIPT, *map(str, args)], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env=env)


def test_every_stage_runs_dry_on_the_cpu_and_leaves_its_figures(tmp_path):
    """As on a lent GPU machine: kiwipiepy and datasets cannot be imported (modules that refuse to load, ahead of
    the installed ones on PYTHONPATH, in every stage's process)."""
    block = tmp_path / "block"
    block.mkdir()
    for name in ("kiwipiepy", "kiwipiepy_model", "datasets"):
        (block / f"{name}.py").write_text("raise ImportError('not on this machine')\n")
    out = tmp_path / "check"
    proc = check("--tiny", "--device", "cpu", "--out", out, "--step-plan", "tiny:2,4", "--no-compile-step",
                 env={**os.environ, "PYTHONPATH": str(block)})
    assert "kiwipiepy: not installed" in proc.stdout and "datasets: not installed" in proc.stdout
    assert proc.returncode == 0, proc.stderr[-2000:]
    figures = json.loads((out / "gpu_check.json").read_text())
    assert {"gpu", "step_tiny", "pretrain", "finetune", "finetune_bench", "label"} <= set(figures)
    assert figures["pretrain"]["steps"] == 6 and figures["pretrain"]["tokens_per_s_steady"] > 0
    assert figures["finetune"]["train"]["examples_per_s"] > 0
    assert figures["step_tiny"]["shapes"][0]["shape"] == "tiny"
    report = (out / "gpu_check.txt").read_text()
    assert report.count(": ok in ") >= 6 and "failed" not in report and "label: " in report
    assert "== acceptance" in report and "finetune (the preset's encoder, batch 32): " in report


def test_a_stage_that_cannot_run_is_one_line_and_the_others_go_on(tmp_path):
    out = tmp_path / "check"
    proc = check("--tiny", "--device", "cpu", "--out", out, "--stages", "env,finetune,label", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "finetune: skipped (no encoder from the pretrain stage)" in proc.stdout
    assert "label: skipped (no classifier from the finetune stage)" in proc.stdout
    assert json.loads((out / "gpu_check.json").read_text())["gpu"] == "none (cpu)"


def test_the_bundle_has_the_shared_datas_layout_and_says_the_device_command(tmp_path):
    bundle = tmp_path / "gpu"
    proc = check("--make-bundle", bundle, "--corpus", SAMPLE / "comments.txt", "--bundle-train",
                 SAMPLE / "reviews_labelled.csv", "--bundle-dev", SAMPLE / "reviews_labelled.csv", "--bundle-rows", 50,
                 timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    info = json.loads((bundle / "corpus" / "prepared.json").read_text())
    assert info["tokenizer"]["presplit"] == "none"  # the preset's: the GPU machine needs no Kiwi
    train = (bundle / "data" / "nsmc3" / "train.csv").read_text(encoding="utf-8").splitlines()
    assert len(train) == 51 and train[0] == (SAMPLE / "reviews_labelled.csv").read_text(encoding="utf-8").splitlines()[0]
    assert f"KOELECTRA_SHARED_DATA={bundle}/data python benchmarks/gpu_check.py --prepared {bundle}/corpus" in proc.stdout


@pytest.mark.fast
@pytest.mark.parametrize("args,needle", [
    (["--stages", "env,warp"], "unknown warp"),
    (["--minutes", "0"], "must be positive"),
    (["--train", "nope.csv"], "--train nope.csv: no such file"),
    (["--prepared", str(SAMPLE)], "not a prepared-data folder"),
])
def test_bad_options_are_one_error_line(args, needle):
    proc = check("--device", "cpu", *args, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], \
        proc.stderr
