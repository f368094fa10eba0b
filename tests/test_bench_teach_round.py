"""benchmarks/bench_teach_round.py on the bundled sample (seconds): both ways of judging a round are timed and
compared on the same two rounds, the sampled one refits on --cap start rows, and bad options are one error line."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_teach_round  # noqa: E402

pytestmark = pytest.mark.fast


def test_both_judgings_of_two_rounds_on_the_sample(sample_dir, capsys):
    from koelectra_kit.app import serving

    data, cap = str(sample_dir / "reviews_labelled.csv"), serving.CV_START_ROWS
    report = bench_teach_round.main(["--train", data, "--dev", data, "--start-rows", "300", "--labels", "100",
                                     "--cap", "100"])
    out = capsys.readouterr().out
    assert [c["case"] for c in report["cases"]] == ["round 1 vs the start", "round 2 vs round 1"]
    for case in report["cases"]:
        full, sampled = case["all start rows"], case["100 sampled"]
        for got in (full, sampled):
            assert got["seconds"] > 0 and got["served"] == (got["score"] >= got["incumbent_score"])
        assert 0 < case["dev"]["round"] <= 1 and 0 < case["dev"]["serving"] <= 1
    assert out.count("judged in") == 2 and "x; served" in out
    assert serving.CV_START_ROWS == cap  # the benchmark leaves the app's setting as it found it


@pytest.mark.parametrize("argv, message", [(["--labels", "2"], "--labels at least 4"),
                                           (["--start-rows", "10000"], "is more than the 450 rows")])
def test_bad_options_are_one_error_line(sample_dir, capsys, argv, message):
    data = str(sample_dir / "reviews_labelled.csv")
    with pytest.raises(SystemExit) as e:
        bench_teach_round.main(["--train", data, "--dev", data, *argv])
    assert e.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and message in err[0]
