"""benchmarks/bench_active.py on the bundled sample with the TF-IDF recipe (seconds): rounds recorded, the labelled
set grows by --step with no row twice, both strategies start from the same labels and then differ, a killed run
continues from its finished rounds, the report is written, and bad options are one error line."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_active  # noqa: E402

pytestmark = pytest.mark.fast


def _args(sample_dir: Path, runs: Path, until: int = 90) -> list[str]:
    data = str(sample_dir / "reviews_labelled.csv")
    return ["--recipe", "tfidf", "--train", data, "--dev", data, "--pool-size", "300", "--start", "30",
            "--step", "20", "--until", str(until), "--seeds", "1", "--runs", str(runs), "--threads", "1"]


def _rounds(runs: Path, chain: str) -> list[dict]:
    return [json.loads(line) for line in (runs / f"{chain}.jsonl").read_text().splitlines()]


def test_rounds_grow_by_step_from_the_same_start_and_resume(tmp_path, sample_dir, capsys):
    runs = tmp_path / "runs"
    bench_active.main(_args(sample_dir, runs, until=70))
    margin, random = _rounds(runs, "margin-s1"), _rounds(runs, "random-s1")
    assert [r["labels"] for r in margin] == [r["labels"] for r in random] == [30, 50, 70]
    assert margin[0]["labelled"] == random[0]["labelled"]  # the same first labels for both strategies
    for rounds in (margin, random):
        for r, nxt in zip(rounds, rounds[1:]):
            assert nxt["labelled"] == r["labelled"] + r["next"]
            assert len(r["next"]) == 20
        final = rounds[-1]["labelled"] + rounds[-1]["next"]
        assert len(final) == len(set(final))  # no row picked twice
        assert 0 <= rounds[-1]["dev"]["best"]["macro_f1"] <= 1
    assert set(margin[0]["next"]) != set(random[0]["next"])  # the strategies choose differently
    # margin asks for the rows the model is least sure of: a smaller mean margin than a random draw
    assert margin[0]["picked_margin"] < random[0]["picked_margin"]
    assert [p.name for p in (runs / "margin-s1").glob("n*")] == ["n70"]  # only the last folder is kept

    # a killed run: the last round's line torn mid-write; the rerun redoes it and extends to --until 90
    path = runs / "margin-s1.jsonl"
    text = path.read_text()
    path.write_text(text[:text.rstrip("\n").rfind("\n") + 1] + '{"strategy": "margin", "se')
    bench_active.main(_args(sample_dir, runs, until=90))
    again = _rounds(runs, "margin-s1")
    assert [r["labels"] for r in again] == [30, 50, 70, 90]
    assert again[:2] == margin[:2]  # finished rounds are not redone
    assert again[2]["labelled"] == margin[2]["labelled"]

    page = tmp_path / "active.md"
    bench_active.main(["--runs", str(runs), "--report-only", "--out", str(page)])
    text = page.read_text()
    assert "<!-- bench_active:tfidf -->" in text and "| 90 |" in text and "--report-only" in text
    assert (tmp_path / "active-tfidf.png").stat().st_size > 0


@pytest.mark.parametrize("bad, says", [
    (["--step", "0"], "--step 0"),
    (["--until", "75"], "--until 75"),
    (["--strategies", "margin"], "include random"),
    (["--recipe", "bert"], "--recipe bert"),
    (["--device", "gpu"], "--device gpu"),
    (["--pool-size", "50"], "--pool-size 50"),
])
def test_bad_options_are_one_error_line(tmp_path, sample_dir, capsys, bad, says):
    with pytest.raises(SystemExit) as e:
        bench_active.main(_args(sample_dir, tmp_path / "runs") + bad)
    err = capsys.readouterr().err.strip().splitlines()
    assert e.value.code == 2 and len(err) == 1 and err[0].startswith("error: ") and says in err[0]
    assert not (tmp_path / "runs").exists()  # nothing written


def test_a_runs_folder_of_other_settings_is_refused(tmp_path, sample_dir, capsys):
    runs = tmp_path / "runs"
    bench_active.main(_args(sample_dir, runs, until=30))
    with pytest.raises(SystemExit) as e:
        bench_active.main(_args(sample_dir, runs, until=30) + ["--pool-size", "200"])
    assert e.value.code == 2 and "pool_size 300 there, 200 here" in capsys.readouterr().err


def test_from_a_start_model_each_round_is_judged_and_the_serving_model_asks(tmp_path, sample_dir, capsys):
    """--start-rows (issue 41): a TF-IDF start fitted on rows outside the pool; every round records whether the app's
    rule served it, and the dev scores of the round, the model serving after it and the start."""
    runs = tmp_path / "runs"
    bench_active.main(_args(sample_dir, runs, until=70)[:-4] + ["--start-rows", "100", "--runs", str(runs),
                                                               "--threads", "1"])
    out = capsys.readouterr().out
    assert "rounds served a model below it on dev" in out
    for chain in ("margin-s1", "random-s1"):
        rounds = _rounds(runs, chain)
        assert [r["labels"] for r in rounds] == [30, 50, 70]
        for r in rounds:
            v = r["verdict"]
            assert r["served"] == v["served"] and v["method"] == "cross-validation" and v["n"] == r["labels"]
            assert r["served"] == (v["score"] >= v["incumbent_score"])
            assert {"round", "start", "best"} <= set(r["dev"]) and r["start_rows"] == 100
            if r["served"]:
                assert r["dev"]["best"] == r["dev"]["round"]
        assert len(set(rounds[-1]["labelled"] + rounds[-1]["next"])) == 70 + 20
    for bad in (["--start-rows", "-1"], ["--start-rows", "100", "--recipe", "full"]):
        with pytest.raises(SystemExit) as e:
            bench_active.main(_args(sample_dir, tmp_path / "x") + bad)
        assert e.value.code == 2 and "--start-rows" in capsys.readouterr().err
