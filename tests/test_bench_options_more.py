"""The benchmark scripts' options and inputs beyond the sizes of test_bench_options.py: each was taken (a run that
failed after its work, or timed something else than asked), a traceback, or an exit 1 without an error line. Each is
one `error:` line, exit 2, before the run starts: a sentinel stands in for the run, so a check that comes too late
fails the test at once instead of running the benchmark."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from types import SimpleNamespace

import pytest

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_active  # noqa: E402
import bench_finetune  # noqa: E402
import bench_label  # noqa: E402
import bench_presplit  # noqa: E402
import bench_pretrain  # noqa: E402
import bench_teach_round  # noqa: E402
from tests.test_bad_input import assert_one_line_error  # noqa: E402


class Ran(Exception):
    """The benchmark got past its checks (the sentinel's run started)."""


def ran(*_, **__):
    raise Ran


def script(name: str, *argv, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / name), *map(str, argv)], capture_output=True,
                          text=True, cwd=ROOT, timeout=180, env={**os.environ, **(env or {})})


def refused(main, argv, capsys, *needles) -> None:
    with pytest.raises(SystemExit) as e:
        main(argv)
    assert_one_line_error(e.value.code, capsys.readouterr().err, *needles)


@pytest.fixture
def empty_dir(tmp_path) -> Path:
    d = tmp_path / "empty"
    d.mkdir()
    return d


@pytest.fixture
def nsmc_dev(tmp_path) -> Path:
    """KOELECTRA_SHARED_DATA with nsmc3/dev.tsv: two reviews in nsmc3's layout."""
    dev = tmp_path / "data" / "nsmc3" / "dev.tsv"
    dev.parent.mkdir(parents=True)
    dev.write_text("id\tmovie_id\trating\tlabel\tdocument\n1\t0\t0\tpositive\t좋아요\n2\t0\t0\tnegative\t별로\n",
                   encoding="utf-8")
    return dev


# 1. bench_finetune: sizes of nothing, a length beyond the model's positions, a --json nowhere, a folder no model
@pytest.mark.parametrize("argv, needle", [
    (["--max-length", "0"], "--max-length: '0': a whole number >= 1"),
    (["--max-length", "2"], "--max-length 2: between 3"),
    (["--max-length", "100000"], "--max-length 100000: between 3 ([CLS], a token, [SEP]) and the 512 positions"),
    (["--threads", "-2"], "--threads: '-2': a whole number >= 1"),
    (["--cache-rows", "-5"], "--cache-rows: '-5': a whole number >= 0"),
    (["--batch-size", "0"], "--batch-size: '0': a whole number >= 1"),
    (["--reference", "0"], "--reference: '0': a number > 0"),
    (["--reference", "nan"], "--reference: 'nan': a number > 0"),
    (["--json", "NOWHERE/ft.json"], "no folder"),
    (["--json", "TMP"], "a folder; give a file path"),
    (["--model", "EMPTY"], "is not a model folder (no config.json)"),
])
def test_bench_finetune_refuses_before_the_rows_are_read(argv, needle, tmp_path, empty_dir, monkeypatch, capsys):
    monkeypatch.setattr(bench_finetune, "load_rows", ran)
    argv = [{"TMP": str(tmp_path), "EMPTY": str(empty_dir)}.get(a, a.replace("NOWHERE", str(tmp_path / "nowhere")))
            for a in argv]
    refused(bench_finetune.main, argv, capsys, needle)


def test_bench_finetune_model_without_a_tokenizer_and_its_positions(tmp_path, monkeypatch, capsys):
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text(json.dumps({"model_type": "electra", "max_position_embeddings": 128}))
    monkeypatch.setattr(bench_finetune, "load_rows", ran)
    refused(bench_finetune.main, ["--model", str(model), "--max-length", "200"], capsys,
            f"--model {model}: no tokenizer")  # its tokenizer is looked at first: this folder has none
    assert bench_finetune.model_positions(str(model)) == 128 and bench_finetune.model_positions(None) == 512


# 2. bench_pretrain: a --seq beyond the shape's positions, negative threads and profile, a --json nowhere
@pytest.mark.parametrize("argv, needle", [
    (["--seq", "100000"], "--seq 100000: between 8 and shape small's 512 positions"),
    (["--shape", "tiny", "--seq", "256"], "--seq 256: between 8 and shape tiny's 128 positions"),
    (["--seq", "4"], "--seq 4: between 8"),
    (["--threads", "-1"], "--threads: '-1': a whole number >= 0"),
    (["--profile", "-1"], "--profile: '-1': a whole number >= 0"),
    (["--rss-steps", "0"], "--rss-steps: '0': a whole number >= 1"),
    (["--warmup", "-1"], "--warmup: '-1': a whole number >= 0"),
    (["--json", "NOWHERE/p.json"], "no folder"),
])
def test_bench_pretrain_refuses_before_the_run(argv, needle, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_pretrain, "speed", ran)
    argv = [a.replace("NOWHERE", str(tmp_path / "nowhere")) for a in argv]
    refused(bench_pretrain.main, argv, capsys, needle)


def test_bench_pretrain_builds_both_models_with_the_shapes_positions(monkeypatch):
    """The check above is what the models allow: both take the shape's max_position_embeddings (they had 512)."""
    import torch

    from koelectra_kit.electra import model as electra

    built, real = [], electra.build_pretrain_model
    monkeypatch.setattr(electra, "build_pretrain_model", lambda *a, **kw: built.append(real(*a, **kw)) or built[-1])
    cfg, cpu = bench_pretrain.load_shape("tiny"), torch.device("cpu")
    ids = bench_pretrain.batch_ids(1, 16, 100, cpu)
    bench_pretrain.toolkit_step(cfg, ids, 100, bench_pretrain.SPECIAL, cpu)
    baseline = bench_pretrain.straightforward_step(cfg, ids, 100, bench_pretrain.SPECIAL, cpu)
    names = dict(zip(baseline.__code__.co_freevars, (c.cell_contents for c in baseline.__closure__)))
    encoders = [built[0].generator, built[0].discriminator, names["b_gen"], names["b_disc"]]
    assert cfg.model.max_position_embeddings == 128
    assert [m.config.max_position_embeddings for m in encoders] == [128] * 4


# 3. a folder that is not a model or tokenizer of the kind asked: one line, not an InputError traceback
def test_bench_ensemble_folder_that_is_no_model(empty_dir, nsmc_dev):
    (empty_dir / "tfidf").mkdir()
    (empty_dir / "ensemble").mkdir()
    proc = script("bench_ensemble.py", "--model", empty_dir, "--rows", "2", "--rounds", "1",
                  env={"KOELECTRA_SHARED_DATA": str(nsmc_dev.parents[1])})
    assert_one_line_error(proc.returncode, proc.stderr, f"--model {empty_dir}:", "is not a model folder")


def test_bench_ensemble_without_its_members_is_one_line(empty_dir):
    proc = script("bench_ensemble.py", "--model", empty_dir)
    assert_one_line_error(proc.returncode, proc.stderr, "tfidf: missing; --model must be a finetune output")


def test_bench_distill_folder_that_is_no_model(empty_dir, nsmc_dev):
    proc = script("bench_distill.py", "--teacher", empty_dir, "--student", empty_dir, "--rows", "2", "--rounds", "1",
                  env={"KOELECTRA_SHARED_DATA": str(nsmc_dev.parents[1])})
    assert_one_line_error(proc.returncode, proc.stderr, f"--teacher {empty_dir}:", "is not a model folder")


def test_bench_distill_without_the_real_data_is_one_line(tmp_path, empty_dir):
    proc = script("bench_distill.py", "--teacher", empty_dir, "--student", empty_dir,
                  env={"KOELECTRA_SHARED_DATA": str(tmp_path / "none")})
    assert_one_line_error(proc.returncode, proc.stderr, "dev.tsv not found")


def test_bench_app_folder_that_is_no_model(empty_dir):
    proc = script("bench_app.py", "--model", empty_dir, "--rows", "2")
    assert_one_line_error(proc.returncode, proc.stderr, f"--model {empty_dir}:", "is not a model folder")


@pytest.mark.parametrize("argv, needle", [
    (["--tokenizer", "EMPTY"], "no tokenizer in"),
    (["--train-vocab", "10", "--train-input", "CORPUS"], "--train-vocab: vocab_size 10 is too small"),
    (["--train-input", "NOWHERE"], "--train-input NOWHERE: no such file"),
    (["--train-mb", "-1"], "--train-mb: '-1': a number >= 0"),
])
def test_bench_tokenizer_input_that_is_none_is_one_line(argv, needle, tmp_path, empty_dir):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("좋아요\n별로\n", encoding="utf-8")
    names = {"EMPTY": str(empty_dir), "CORPUS": str(corpus), "NOWHERE": str(tmp_path / "nowhere.txt")}
    proc = script("bench_tokenizer.py", "--corpus", corpus, "--lines", "2", "--repeats", "1",
                  *[names.get(a, a) for a in argv])
    assert_one_line_error(proc.returncode, proc.stderr, needle.replace("NOWHERE", names["NOWHERE"]))


def test_bench_tokenizer_without_its_corpus_is_one_line(tmp_path):
    proc = script("bench_tokenizer.py", "--corpus", tmp_path / "none.tsv")
    assert_one_line_error(proc.returncode, proc.stderr, f"--corpus {tmp_path / 'none.tsv'}: no such file")


def test_bench_label_model_folder_without_a_model(tmp_path, nsmc_dev, monkeypatch, capsys):
    """A folder with a tokenizer.json (what check_model_options looks for) but no model: was a traceback in the
    comparison."""
    folder = tmp_path / "tok"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}")
    monkeypatch.setattr(bench_label, "DEV", nsmc_dev)
    monkeypatch.setattr(bench_label, "compare", ran)
    refused(bench_label.main, ["--model", str(folder), "--dup-rows", "0", "--big-rows", "0"], capsys,
            f"--model {folder}:", "is not a model folder (no config.json)")


def test_bench_label_json_nowhere_and_rows_zero(tmp_path, monkeypatch, capsys):
    """--json into a missing folder was found after the device comparison; --rows 0 skips the speed comparison, as
    its help says (it was refused)."""
    monkeypatch.setattr(bench_label, "check_model_options", ran)
    refused(bench_label.main, ["--device", "cpu", "--shape", "tiny", "--json", str(tmp_path / "no" / "l.json")],
            capsys, "no folder")
    with pytest.raises(Ran):
        bench_label.main(["--model", "m", "--rows", "0"])


def test_bench_kiwi_without_the_real_data_is_one_line(tmp_path):
    pytest.importorskip("kiwipiepy")
    proc = script("bench_kiwi.py", "--lines", "2", env={"KOELECTRA_SHARED_DATA": str(tmp_path)})
    assert_one_line_error(proc.returncode, proc.stderr, "dev.tsv not found")


# 4. gpu_bundle: common.Parser and typed options; its refusals exit 2
@pytest.mark.parametrize("argv, needle", [
    (["make", "DIR", "--bundle-rows", "-3"], "--bundle-rows: '-3': a whole number >= 1"),
    (["make", "DIR", "--bundle-rows", "x"], "--bundle-rows: 'x': a whole number >= 1"),
    (["ft", "EMPTY", "DIR", "--weights", "fp16"], "--weights: invalid choice: 'fp16'"),
    (["ft", "EMPTY", "DIR"], "not an encoder folder (config.json + model.safetensors)"),
    (["unpack", "DIR/run.tar", "DIR/back"], "no parts run.tar.00"),
    (["make", "DIR", "--corpus", "DIR/none.txt"], "none.txt not found"),
    (["pack"], "invalid choice: 'pack'"),
])
def test_gpu_bundle_bad_input_is_one_line(argv, needle, tmp_path, empty_dir):
    names = {"DIR": str(tmp_path / "bundle"), "EMPTY": str(empty_dir)}
    argv = [a.replace("DIR", names["DIR"]) if a != "EMPTY" else names["EMPTY"] for a in argv]
    proc = script("gpu_bundle.py", *argv)
    assert_one_line_error(proc.returncode, proc.stderr, needle)


@pytest.mark.parametrize("argv, needle", [
    (["--make-bundle", "DIR", "--bundle-rows", "-3", "--corpus", "DIR/none.txt"], "--bundle-rows: '-3'"),
    (["--make-bundle", "DIR", "--corpus", "DIR/none.txt"], "none.txt not found"),
    (["--minutes", "nan"], "--minutes, --rows and --budget-s must be positive"),
    (["--step-s", "inf"], "--step-s must be positive"),
])
def test_gpu_check_bad_input_is_one_line(argv, needle, tmp_path):
    argv = [a.replace("DIR", str(tmp_path / "bundle")) for a in argv]
    proc = script("gpu_check.py", "--tiny", "--device", "cpu", "--stages", "env", "--out", tmp_path / "out", *argv)
    assert_one_line_error(proc.returncode, proc.stderr, needle)
    assert not (tmp_path / "out").exists()


# 5. budget_2h_report: a seed with no runs was left out without a word
def _report(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "examples" / "experiments" / "budget_2h_report.py"),
                           *map(str, argv)], capture_output=True, text=True, cwd=ROOT, timeout=60)


def test_budget_report_refuses_seeds_without_runs(tmp_path):
    runs = tmp_path / "runs"
    for who in ("teacher-s1", "student-s1", "teacher-s3"):
        (runs / who).mkdir(parents=True)
        (runs / who / "eval.json").write_text("{}")
    (runs / "stages.json").write_text("{}")
    out = tmp_path / "page.md"
    proc = _report("--runs", runs, "--seeds", "1", "2", "3", "--out", out)
    assert_one_line_error(proc.returncode, proc.stderr, "no finished runs of seeds 2, 3 in")
    assert not out.exists()
    proc = _report("--runs", tmp_path / "none", "--out", out)
    assert_one_line_error(proc.returncode, proc.stderr, "no stages.json")


# 6. bench_presplit --kill: exit 1 and no error line when the run to kill had already finished
def test_presplit_children_run_without_the_word_file(monkeypatch):
    """The cause: each child read the word file the earlier runs left (the timed run's words), so the run to kill
    was warm and finished before the kill, and no run was cold as the benchmark says."""
    seen = {}

    def popen(cmd, **kw):
        seen.update(kw)
        return SimpleNamespace(poll=lambda: 0, pid=os.getpid())

    monkeypatch.setattr(bench_presplit.subprocess, "Popen", popen)
    bench_presplit.Run("pass", False)
    assert seen["env"]["KOELECTRA_WORD_FILE"] == "0"


def test_presplit_kill_that_checked_nothing_is_one_error_line(tmp_path, monkeypatch, capsys):
    corpus = tmp_path / "corpus.txt"
    corpus.write_text("좋아요\n", encoding="utf-8")
    monkeypatch.setattr(bench_presplit, "make_corpus", lambda work, mb, seed: corpus)
    monkeypatch.setattr(bench_presplit, "presplit", lambda c, mode, cache, args: {
        "mbps": 1.0, "peak": 0, "wall": 1.0, "cache": str(corpus)})

    class Finished:  # the run to kill, over before the kill
        def __init__(self, code, progress):
            self.proc, self.t0 = SimpleNamespace(poll=lambda: 0), time.perf_counter()

    monkeypatch.setattr(bench_presplit, "Run", Finished)
    assert bench_presplit.main(["--size-mb", "1", "--kill", "--work", str(tmp_path / "work")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: --kill checked nothing") and "raise --size-mb" in err[0]


def test_presplit_old_mb_that_is_no_number(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(bench_presplit, "make_corpus", ran)
    refused(bench_presplit.main, ["--size-mb", "1", "--old-mb", "nan", "--work", str(tmp_path)], capsys,
            "--old-mb: 'nan': a number >= 0")


# 7. bench_active: a pool larger than --train was recorded as the size given
def _active(sample_dir: Path, runs: Path) -> list[str]:
    data = str(sample_dir / "reviews_labelled.csv")
    return ["--recipe", "tfidf", "--train", data, "--dev", data, "--start", "30", "--step", "20", "--until", "50",
            "--seeds", "1", "--runs", str(runs), "--threads", "1"]


@pytest.mark.parametrize("argv, needle", [
    (["--pool-size", "100000"], "--pool-size 100000: more than the 450 rows of --train"),
    (["--pool-size", "300", "--start-rows", "200"], "--pool-size 300 + --start-rows 200: more than the 450 rows"),
    (["--pool-size", "300", "--pool-seed", "-1"], "--pool-seed: '-1': a whole number >= 0"),
])
def test_bench_active_pool_larger_than_train(argv, needle, tmp_path, sample_dir, monkeypatch, capsys):
    monkeypatch.setattr(bench_active, "save_settings", ran)
    refused(bench_active.main, _active(sample_dir, tmp_path / "runs") + argv, capsys, needle)
    assert not (tmp_path / "runs").exists()


def test_bench_active_report_of_no_rounds_exits_2(tmp_path, capsys):
    (tmp_path / "settings.json").write_text('{"recipe": "tfidf"}')
    refused(bench_active.main, ["--report-only", "--runs", str(tmp_path), "--out", str(tmp_path / "p.md")], capsys,
            "no finished rounds yet")  # (the line was there, with exit 1)


# the sweep: bench_teach_round's seed and tables
def test_bench_teach_round_seed_and_a_table_without_labels(tmp_path, sample_dir, capsys):
    data = str(sample_dir / "reviews_labelled.csv")
    refused(bench_teach_round.main, ["--train", data, "--dev", data, "--seed", "-1"], capsys,
            "--seed: '-1': a whole number >= 0")
    plain = tmp_path / "plain.csv"
    plain.write_text("review\n좋아요\n별로\n", encoding="utf-8")
    refused(bench_teach_round.main, ["--train", str(plain), "--dev", data], capsys, "label")
