"""A 200,000-row ``label`` run killed with SIGKILL at 10 random moments and resumed each time ends with the
same bytes as a run that was never interrupted (slow tier: ``python -m pytest -m slow tests/test_label_kill.py``)."""
from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

ROWS = 200_000


def _cmd(model, src, out, *extra):
    return [sys.executable, "-m", "koelectra_kit", "label", "--model", str(model), "--input", str(src), "--output",
            str(out), "--no-progress", "--precision", "fp32", "--chunk-rows", "4000", "--threads", "1", *extra]


@pytest.mark.slow
def test_sigkill_at_random_points_then_resume_is_byte_identical(tmp_path, tiny_classifier_dir, sample_dir):
    texts = [line for line in (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines() if line.strip()]
    rng = random.Random(7)
    src = tmp_path / "big.csv"
    with open(src, "w", encoding="utf-8") as f:
        f.write("id,review\n")
        for i in range(ROWS):
            f.write(f'{i},"{rng.choice(texts).replace(chr(34), chr(34) * 2)} {i % 97}"\n')
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    ref = tmp_path / "ref.csv"
    t0 = time.perf_counter()
    subprocess.run(_cmd(tiny_classifier_dir, src, ref), check=True, env=env, capture_output=True)
    full_s = time.perf_counter() - t0

    out = tmp_path / "out.csv"
    kills = 0
    for _ in range(10):
        proc = subprocess.Popen(_cmd(tiny_classifier_dir, src, out, "--resume"), env=env,
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rng.uniform(0.5, max(1.0, full_s / 6)))
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
            kills += 1
        proc.wait()
        if out.exists():
            break
    if not out.exists():
        done = subprocess.run(_cmd(tiny_classifier_dir, src, out, "--resume"), env=env, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
    assert kills >= 5, "the runs finished before they could be killed: the test proved little"
    assert out.read_bytes() == ref.read_bytes()
    assert not (tmp_path / "out.csv.partial").exists()
