"""benchmarks/bench_presplit.py's parts that take no Kiwi time: the corpus is seeded, perturbed (not the source
repeated) and of the size asked; the process-tree RSS reads; bad options are one error line."""
from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_presplit  # noqa: E402

pytestmark = pytest.mark.fast


def test_the_corpus_is_seeded_perturbed_and_sized(tmp_path, sample_dir, monkeypatch):
    monkeypatch.setattr(bench_presplit, "sources", lambda: [sample_dir / "comments.txt"])
    for d in "abc":
        (tmp_path / d).mkdir()
    a, b = (bench_presplit.make_corpus(tmp_path / d, 0.2, seed=1) for d in "ab")
    c = bench_presplit.make_corpus(tmp_path / "c", 0.2, seed=2)
    assert a.read_bytes() == b.read_bytes() != c.read_bytes()
    assert 0.19 * (1 << 20) < a.stat().st_size <= 0.2 * (1 << 20)
    source = set((sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines())
    lines = a.read_text(encoding="utf-8").splitlines()
    changed = sum(line not in source for line in lines)
    assert 0.2 < changed / len(lines) < 0.7  # lightly perturbed: five changes of probability 0.1 each
    assert bench_presplit.make_corpus(tmp_path / "a", 0.2, seed=1) == a  # reused, not rewritten
    head = bench_presplit.head(a, 0.05)
    assert a.read_bytes().startswith(head.read_bytes()) and head.read_bytes().endswith(b"\n")


def test_tree_rss_counts_this_process():
    assert bench_presplit.tree_rss(os.getpid()) > 10 << 20


@pytest.mark.parametrize("argv,message", [
    (["--size-mb", "0"], "--size-mb must be between"),
    (["--size-mb", "10", "--old-mb", "20"], "--old-mb must be between 0"),
    (["--workers", "0"], "--workers must be at least 1"),
    (["--word-cache", "-1"], "--word-cache must be >= 0"),
    (["--work", str(ROOT / "tmp-corpus")], "inside the repository"),
    (["--size-mb", "ten"], "invalid float value"),
])
def test_bad_options_are_one_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        bench_presplit.main(argv)
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
