"""The benchmark scripts' size options: 0 or less gave a traceback (a median of no rounds), or timed another run
than asked (--lines -5 timed every text; --rows -9995 labelled 5 rows), exit 0. Each is one `error:` line, exit 2."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.parametrize("script, argv", [
    ("bench_label.py", ["--model", "m", "--rounds", "0"]),
    ("bench_label.py", ["--model", "m", "--rows", "-5"]),
    ("bench_label.py", ["--model", "m", "--dup-rows", "-3"]),
    ("bench_ensemble.py", ["--model", "m", "--rows", "-9995"]),
    ("bench_distill.py", ["--teacher", "t", "--student", "s", "--rounds", "0"]),
    ("bench_kiwi.py", ["--lines", "-5"]),
    ("bench_tokenizer.py", ["--tokenizer", "t", "--repeats", "0"]),
    ("bench_app.py", ["--rows", "0"]),
])
def test_a_size_that_is_no_size_is_one_error_line(script, argv):
    proc = subprocess.run([sys.executable, str(ROOT / "benchmarks" / script), *argv], capture_output=True, text=True,
                          cwd=ROOT, timeout=120)
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr
    assert "a whole number >= " in lines[0]
