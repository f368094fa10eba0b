"""benchmarks/gpu_check.py, the one GPU check (issue 39 item 7), run dry on the CPU: every stage runs and leaves its
figures, a stage that cannot run is one line and the others go on, the bundle for a lease has the shared data's
layout, and bad options are one error line."""
from __future__ import annotations

import json
import os
import re
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
    assert "== acceptance" in report and re.search(r"finetune \(\d+ x \d+, batch 32\): ", report), report[-1500:]


def test_a_stage_that_cannot_run_is_one_line_and_the_others_go_on(tmp_path):
    out = tmp_path / "check"
    proc = check("--tiny", "--device", "cpu", "--out", out, "--stages", "env,finetune,label", timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "finetune: skipped (no encoder from the pretrain stage)" in proc.stdout
    assert "label: skipped (no classifier from the finetune stage)" in proc.stdout
    assert json.loads((out / "gpu_check.json").read_text())["gpu"] == "none (cpu)"


def test_the_profile_stage_says_where_the_compiled_steps_time_goes(tmp_path):
    """--stages profile (not run by default): bench_pretrain --compile --profile on the plan's first shape; on a CPU
    the ops' CPU time by kind (a GPU's kernels there), in the report."""
    out = tmp_path / "check"
    proc = check("--tiny", "--device", "cpu", "--out", out, "--stages", "profile", "--step-plan", "tiny:2")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (out / "gpu_check.txt").read_text()
    assert "--shape tiny --batch 2 --compile --profile 2" in report and "[profile_tiny: ok in " in report
    assert "profile of 2 toolkit steps:" in report and "ms/step  matmul (linear layers" in report


def test_the_bundle_has_the_shared_datas_layout_and_says_the_device_command(tmp_path):
    """The corpus is prepared without the dev texts (they score every encoder), the train table travels whole as
    parquet (nsmc3's 150,000 rows fit the carry that way) and reads back as the toolkit reads the original."""
    from koelectra_kit.io.tables import read_table

    dev = SAMPLE / "reviews_labelled.csv"
    corpus = tmp_path / "corpus.txt"  # the sample comments plus three dev reviews, one with other spacing
    reviews = list(read_table(dev)["review"][:3])
    corpus.write_text((SAMPLE / "comments.txt").read_text(encoding="utf-8") + "\n".join(
        [reviews[0], "  " + reviews[1].replace(" ", "   ") + " ", reviews[2]]) + "\n", encoding="utf-8")
    bundle = tmp_path / "gpu"
    proc = check("--make-bundle", bundle, "--corpus", corpus, "--bundle-train", dev, "--bundle-dev", dev, timeout=180)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "corpus: 3 lines that are dev texts left out" in proc.stdout
    info = json.loads((bundle / "corpus" / "prepared.json").read_text())
    assert info["tokenizer"]["presplit"] == "none"  # the preset's: the GPU machine needs no Kiwi
    texts = sum(1 for line in (SAMPLE / "comments.txt").read_text(encoding="utf-8").splitlines() if line.strip())
    assert json.loads((bundle / "corpus" / "meta.json").read_text())["texts"] == texts
    train = read_table(bundle / "data" / "nsmc3" / "train.parquet")
    original = read_table(dev)  # every row, every cell as the CSV reads (a parquet's values are read as written:
    assert list(train.columns) == list(original.columns)  # object columns, where the CSV's are strings)
    assert train.values.tolist() == original.values.tolist()
    assert f"KOELECTRA_SHARED_DATA={bundle}/data python benchmarks/gpu_check.py --prepared {bundle}/corpus" in proc.stdout
    assert not (bundle / "corpus" / "tokenizer" / "kiwi_words.tsv").exists()  # no Kiwi, no words
    # a seeded sample keeps the file's order; a Kiwi pre-split preset's tokenizer gets the tables' words, so they
    # fine-tune on the GPU machine, which has no kiwipiepy
    sample = tmp_path / "gpu2"
    proc = check("--make-bundle", sample, "--corpus", corpus, "--bundle-train", dev, "--bundle-dev", dev,
                 "--bundle-rows", 50, "--preset", ROOT / "configs" / "pretrain" / "tiny.yaml", timeout=180)
    assert proc.returncode == 0 and len(read_table(sample / "data" / "nsmc3" / "train.parquet")) == 50
    from koelectra_kit.tokenizer import KoTokenizer
    from koelectra_kit.tokenizer.wordlist import load

    tok = KoTokenizer.from_pretrained(sample / "corpus" / "tokenizer")
    assert tok.presplit == "kiwi_word"
    words = load(tok.source, tok.saved_kiwi)
    assert {w for t in original["review"] for w in tok.normalize(t).split()} <= set(words)


def test_a_quality_lease_packs_its_run_and_tables_what_it_fine_tuned(tmp_path):
    """--stages env,pretrain,export,quality dry: the run comes back as parts that unpack into an encoder that loads,
    and the label-efficiency table (encoder, TF-IDF, random init) is in the report and its acceptance lines."""
    out, back = tmp_path / "check", tmp_path / "OUT"
    proc = check("--tiny", "--device", "cpu", "--stages", "env,pretrain,export,quality", "--quality-sizes", "64",
                 "--quality-seeds", "1", "--quality-arms", "default,random", "--out", out, "--report",
                 back / "gpu_check.txt", "--export", back / "run.tar", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert sorted(p.name for p in back.iterdir()) == ["gpu_check-logs.tar.gz", "gpu_check.json", "gpu_check.txt",
                                                      "run.tar.00", "run.tar.sha256"]
    report = (back / "gpu_check.txt").read_text()
    assert "| 64 | 0." in report and "quality at 64 rows: encoder 0." in report
    figures = json.loads((back / "gpu_check.json").read_text())
    assert figures["quality"]["complete"] and "random init" in figures["quality"]["table"]
    unpack = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_bundle.py"), "unpack", back / "run.tar",
                             tmp_path / "run"], capture_output=True, text=True)
    assert unpack.returncode == 0, unpack.stderr
    assert (tmp_path / "run" / "discriminator" / "model.safetensors").read_bytes() == (
        out / "pretrain" / "discriminator" / "model.safetensors").read_bytes()
    assert {p.name for p in (tmp_path / "run").iterdir()} == {"discriminator", "metrics.jsonl", "summary.json",
                                                             "config.yaml"}
    # a fine-tune lease: the encoder brought back, carried to another machine, fine-tuned there without pretraining
    out2 = tmp_path / "check2"
    proc = check("--tiny", "--device", "cpu", "--stages", "env,quality", "--encoder", tmp_path / "run" /
                 "discriminator", "--quality-sizes", "64", "--quality-seeds", "2", "--out", out2, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not (out2 / "pretrain").exists()
    report = (out2 / "gpu_check.txt").read_text()
    assert f"--encoder {tmp_path / 'run' / 'discriminator'}" in report and "quality at 64 rows: encoder 0." in report
    assert "step benchmark" not in report  # no pretrain bar for an encoder pretrained elsewhere


def test_a_run_packs_without_the_encoders_word_list(tmp_path):
    """A subword run's encoder carries the bundle's word list (7.8 MB): it stays behind, so that the fp32 encoder
    and the report's three files come back within the device tool's 8 files; everything else comes back whole."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_bundle

    run = tmp_path / "run"
    (run / "discriminator").mkdir(parents=True)
    (run / "discriminator" / "model.safetensors").write_bytes(os.urandom(3000))
    (run / "discriminator" / "kiwi_words.tsv").write_text("#kiwi_words\t{}\n영화\t\n", encoding="utf-8")
    (run / "summary.json").write_text("{}", encoding="utf-8")
    parts = gpu_bundle.pack(run, tmp_path / "back" / "run.tar", part_bytes=2048)
    assert len(parts) > 1  # (put back together from several)
    gpu_bundle.unpack(tmp_path / "back" / "run.tar", tmp_path / "here")
    assert sorted(p.relative_to(tmp_path / "here").as_posix() for p in (tmp_path / "here").rglob("*")) == [
        "discriminator", "discriminator/model.safetensors", "summary.json"]
    assert (tmp_path / "here" / "discriminator" / "model.safetensors").read_bytes() == (
        run / "discriminator" / "model.safetensors").read_bytes()


@pytest.mark.fast
@pytest.mark.parametrize("args,needle", [
    (["--stages", "env,warp"], "unknown warp"),
    (["--minutes", "0"], "must be positive"),
    (["--train", "nope.csv"], "--train nope.csv: no such file"),
    (["--prepared", str(SAMPLE)], "not a prepared-data folder"),
    (["--quality-arms", "default,warp"], "--quality-arms: unknown warp"),
    (["--compile-scopes", "model,regional"], "--compile-scopes: model, layers or both"),
    (["--quality-sizes", "1000,x"], "--quality-sizes: positive whole numbers"),
    (["--profile-plan", "small"], "--profile-plan: 'small' is not SHAPE:BATCH"),
    (["--earlier", "nope.json"], "--earlier nope.json: not an earlier call's gpu_check.json"),
    (["--encoder", str(SAMPLE)], "not a model folder (no config.json)"),
])
def test_bad_options_are_one_error_line(args, needle):
    proc = check("--device", "cpu", *args, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], \
        proc.stderr


def test_a_stage_out_of_time_is_stopped_with_what_it_started(tmp_path):
    """The quality stage's script starts fine-tunes of its own: when the stage's time is up they stop with it."""
    import time
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    flag = tmp_path / "grandchild-still-ran"
    grandchild = f"import time, pathlib; time.sleep(7); pathlib.Path({str(flag)!r}).write_text('x')"
    child = (f"import subprocess, sys, time; subprocess.Popen([sys.executable, '-c', {grandchild!r}]); "
             "print('started', flush=True); time.sleep(60)")
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt"))
    t = time.perf_counter()
    code, text = c.run("slow", [sys.executable, "-c", child], limit_s=5)
    assert code == 124 and "started" in text and time.perf_counter() - t < 30
    time.sleep(4)  # past the grandchild's 7 s
    assert not flag.exists()
    assert "[slow: ran out of time in " in "\n".join(c.lines)


@pytest.mark.fast
def test_the_acceptance_turns_measured_rates_into_a_step_budget_and_epochs(tmp_path):
    """Issue 39 item 4's trade of model size against epochs, and the preset's 10 minutes as a step budget, from
    the figures a check measured (none invented where a stage did not run)."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    prepared = tmp_path / "corpus"
    prepared.mkdir()
    (prepared / "meta.json").write_text(json.dumps({"tokens": 20_000_000}))
    shape = lambda name, rate: {"shapes": [{"shape": name, "best": {"batch": 256, "tokens_per_s": rate}}]}  # noqa: E731
    figures = {"step_small": shape("small", 1_000_000), "step_compiled_small": shape("small", 2_000_000),
               "step_base": shape("base", 200_000),
               "pretrain": {"tokens_per_s_steady": 1_500_000, "tokens": 32768 * 100, "steps": 100}}
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt",
                                        compile_mode="reduce-overhead", preset="small", prepared=str(prepared),
                                        encoder=None))
    c.figures = figures
    gpu_check.acceptance(c)
    text = "\n".join(c.lines)
    assert "pretrain small: 75% of the step benchmark's 2,000,000 tokens/s" in text  # the compiled step counts
    assert "small: 10 minutes at the steady 1,500,000 tokens/s = 27,466 steps of 32,768 tokens (900M tokens)" in text
    assert gpu_check.preset_minutes("gpu-1h") == 60 and gpu_check.preset_minutes("small") is None  # a preset's own
    assert "size small: 2,000,000 tokens/s in the step benchmark = 60.0 epochs of the 20.0M-token corpus" in text
    assert "size base: 200,000 tokens/s in the step benchmark = 6.0 epochs" in text
    assert "finetune: not measured" in text and "label: not measured" in text


@pytest.mark.fast
def test_the_quality_lines_compare_with_tfidf_only_where_it_ran(tmp_path):
    """The size lease fine-tunes 150,000 rows with --finetune-set ensemble=none (no TF-IDF fit, to fit the lease):
    its encoder figure is still reported, without a difference to a TF-IDF it did not fit."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    table = ("| labelled rows | TF-IDF | encoder, default | ensemble | best folder (as chosen on dev) |\n"
             "|---:|---:|---:|---:|---:|\n| 1,000 | 0.4288 | 0.5179 | 0.5229 | ensemble |\n"
             "| 150,000 | - | 0.6760 | - | - |\n\n## Accuracy\n| 150,000 | 0.6 | 0.7 |\n")
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt",
                                        compile_mode="reduce-overhead", preset="gpu-10min", prepared=None,
                                        encoder="enc"))
    c.figures = {"quality": {"table": table, "complete": True}}
    gpu_check.acceptance(c)
    text = "\n".join(c.lines)
    assert "quality at 1,000 rows: encoder 0.5179 vs TF-IDF 0.4288: +8.9 points (bar +5)" in text
    assert "quality at 150,000 rows: encoder 0.6760 (no TF-IDF fitted in this run" in text
    assert "150,000 rows: encoder 0.6760 vs" not in text and text.count("quality at") == 2


@pytest.mark.fast
def test_a_stages_variables_reach_its_command_and_no_later_stage(tmp_path, monkeypatch):
    """The label stage points KOELECTRA_SHARED_DATA at its dev-only folder for bench_label; it used to set it for
    the whole check, so bench_finetune after it found no nsmc3 train there and timed the sample reviews instead."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    monkeypatch.setenv("KOELECTRA_SHARED_DATA", "/the/bundle")
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt"))
    show = [sys.executable, "-c", "import os; print(os.environ['KOELECTRA_SHARED_DATA'])"]
    assert c.run("label", show, 30, env={"KOELECTRA_SHARED_DATA": "/label-data"})[1].strip() == "/label-data"
    assert c.run("finetune_bench", show, 30)[1].strip() == "/the/bundle"
    assert os.environ["KOELECTRA_SHARED_DATA"] == "/the/bundle"


@pytest.mark.fast
@pytest.mark.parametrize("comparison, compiled", [(512, "512,1024"), (1024, "1024"), (None, "1024")])
def test_the_compiled_step_also_runs_where_the_straightforward_one_fit(tmp_path, comparison, compiled):
    """On the H100 the straightforward small step did not fit at the toolkit's best batch (1,024), so the compiled
    run at 1,024 had no speed-up figure for the bar: it now also runs at the largest batch both fit."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    args = SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt", tiny=False, device="cuda",
                           preset="gpu-10min", prepared=None, compile_step=True, compile_mode="reduce-overhead",
                           step_s=150)
    c = gpu_check.Check(args)
    calls = []

    def run(name, argv, limit_s, **kw):
        calls.append((name, argv, limit_s))
        if name == "step_small":
            entry = {"shape": "small", "best": {"batch": 1024, "tokens_per_s": 9e5},
                     "comparison": comparison and {"batch": comparison, "speedup": 2.4}}
            Path(argv[argv.index("--json") + 1]).write_text(json.dumps({"shapes": [entry]}))
        return 0, ""
    c.run = run
    gpu_check.bench_shape(c, "small", "256,512,1024")
    (_, eager, _), (name, argv, limit) = calls
    assert eager[eager.index("--batch") + 1] == "256,512,1024" and name == "step_compiled_small"
    assert argv[argv.index("--batch") + 1] == compiled and limit == 150 * len(compiled.split(","))


@pytest.mark.fast
def test_both_compile_scopes_run_cold_and_are_set_side_by_side(tmp_path):
    """--compile-scopes model,layers: step_more's compiled step once per scope, each from its own empty inductor
    cache (the step stage's, the bars', only the whole forward), and one acceptance line with each one's step rate and
    first-step (compiling) seconds at the batches both ran."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    args = SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt", tiny=False, device="cuda",
                           preset="gpu-10min", prepared=None, compile_step=True, compile_mode="reduce-overhead",
                           step_s=150, compile_scopes=["model", "layers"], step_plan="small:256 gpu-10min:256")
    c = gpu_check.Check(args)
    calls = []
    figures = {"model": (1_200_000, 90.0), "layers": (900_000, 30.0)}

    def run(name, argv, limit_s, env=None, **kw):
        scope = argv[argv.index("--compile-scope") + 1]
        calls.append((name, scope, env))
        rate, warm = figures[scope]
        row = {"batch": 256, "toolkit": {"fits": True, "tokens_per_s": rate, "warmup_s": warm}}
        Path(argv[argv.index("--json") + 1]).write_text(json.dumps({"shapes": [{"shape": "gpu-10min",
                                                                                "batches": [row]}]}))
        return 0, ""
    c.run = run
    gpu_check.stage_step(c)  # the bars' shape: the whole forward only
    assert [(n, s) for n, s, _ in calls] == [("step_compiled_small", "model")] and calls[0][2] is None
    calls.clear()
    gpu_check.stage_step_more(c)
    assert [(n, s) for n, s, _ in calls] == [("step_compiled_gpu-10min", "model"), ("step_layers_gpu-10min", "layers")]
    caches = [env["TORCHINDUCTOR_CACHE_DIR"] for _, _, env in calls]
    assert len(set(caches)) == 2
    assert gpu_check.scope_line(c.figures, "gpu-10min") == (
        "compile scope at gpu-10min: batch 256: layers 900,000 tokens/s after 30 s of first steps, model 1,200,000 "
        "after 90 s = 0.75x the step, 0.33x the compiling")
    assert "not compared" in gpu_check.scope_line({}, "small")


def test_a_stage_given_grace_gets_ctrl_c_and_time_to_write_what_it_has(tmp_path):
    """The pretrain stage at the budget: SIGTERM first (pretrain then ends its step, checkpoints and exports), a
    kill only if it does not end within the grace."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    done = tmp_path / "exported"
    child = ("import pathlib, signal, sys, time\n"
             "def stop(*_):\n"
             f"    time.sleep(1); pathlib.Path({str(done)!r}).write_text('x'); sys.exit(130)\n"
             "signal.signal(signal.SIGTERM, stop)\n"
             "print('training', flush=True)\n"
             "time.sleep(60)\n")
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt"))
    code, text = c.run("pretrain", [sys.executable, "-c", child], limit_s=5, grace_s=20)
    assert code == 124 and "training" in text and done.exists()


@pytest.mark.fast
def test_a_second_call_takes_what_it_did_not_measure_from_the_first(tmp_path):
    """--earlier: call 2 of a lease compiles the preset's step, call 1 ran the preset (the 90% bar needs both; the
    second lease printed "not measured" in each call's report). The eager sweep's bar line is printed too: at the
    base shape it was the faster (24.7% vs 20.9% compiled)."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    def shape(name, rate, line=None):
        return {"shapes": [{"shape": name, "best": {"batch": 256, "tokens_per_s": rate}, "acceptance": line}]}

    earlier = {"pretrain": {"tokens_per_s_steady": 1_320_000, "tokens": 32768 * 100, "steps": 100},
               "step_base": shape("base", 287_000, "base: 24.7% of bf16 peak (bar 35%)")}
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=600, report=tmp_path / "r.txt",
                                        compile_mode="reduce-overhead", preset="gpu-10min", prepared=None,
                                        earlier="call1/gpu_check.json", earlier_figures=earlier, encoder=None))
    c.figures = {"step_compiled_gpu-10min": shape("gpu-10min", 1_120_000, "gpu-10min: 9.6% of bf16 peak")}
    gpu_check.acceptance(c)
    text = "\n".join(c.lines)
    assert "(with pretrain, step_base from --earlier call1/gpu_check.json)" in text
    assert "pretrain gpu-10min: 118% of the step benchmark's 1,120,000 tokens/s at its shape (bar 90%)" in text
    assert "step, uncompiled: base: 24.7% of bf16 peak (bar 35%)" in text
    assert "step, compiled (reduce-overhead): gpu-10min: 9.6% of bf16 peak" in text


@pytest.mark.fast
def test_a_profile_the_budget_cannot_compile_is_skipped_in_one_line(tmp_path, monkeypatch):
    """The second lease's profile started with 39 s left, ran out of time compiling and said nothing useful."""
    from types import SimpleNamespace

    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    ran = []
    c = gpu_check.Check(SimpleNamespace(out=tmp_path / "out", budget_s=60, report=tmp_path / "r.txt", tiny=False,
                                        device="cuda", step_plan="base:32", profile_plan="small:512 base:128",
                                        step_s=150))
    names = []
    monkeypatch.setattr(c, "run", lambda name, argv, *a, **k: names.append(name) or ran.append(argv) or (0, ""))
    gpu_check.stage_profile(c)
    assert ran == []
    assert [x.split(" (")[0] for x in c.lines] == ["profile small: skipped", "profile base: skipped"]
    c.args.budget_s = 600
    gpu_check.stage_profile(c)
    assert [argv[argv.index("--shape") + 1:argv.index("--shape") + 4] for argv in ran] == [
        ["small", "--batch", "512"], ["base", "--batch", "128"]]
    assert names == ["profile_small", "profile_base"]
    c.args.profile_plan = "small:256 small:512"  # one shape at two batches: a log each, not one overwritten
    gpu_check.stage_profile(c)
    assert names[2:] == ["profile_small_256", "profile_small_512"]


@pytest.mark.fast
@pytest.mark.parametrize("text", ["not json", "[1, 2]", '{"gpu": "H100", "pretrain": 5}'])
def test_an_earlier_file_that_is_not_a_checks_figures_is_one_error_line(tmp_path, text):
    """--earlier's figures feed the acceptance lines: a file of anything else would end them in a traceback."""
    bad = tmp_path / "gpu_check.json"
    bad.write_text(text)
    proc = check("--device", "cpu", "--earlier", bad, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith(f"error: --earlier {bad}: not an "
                                                                           "earlier call's gpu_check.json"), proc.stderr


@pytest.mark.fast
@pytest.mark.parametrize("args,needle", [
    (["--profile-plan", ""], "--profile-plan is empty"),  # was: the default profile, silently
    (["--step-plan", ""], "--step-plan is empty"),
    (["--profile-plan", "small:512,1024"], "one batch a profile"),  # was: small at 512 only, silently
    (["--profile-plan", "smal:512"], "no shape smal (base, "),  # was: a failed stage, minutes in
    (["--step-plan", "tiny:2 bse:4"], "--step-plan: 'bse:4': no shape bse"),
    (["--label-rows", "0"], "--label-rows must be positive"),
    (["--label-s", "-1"], "--label-s must be positive"),
])
def test_an_empty_or_misspelt_plan_or_a_stage_limit_below_one_is_one_error_line(tmp_path, args, needle):
    """Each was taken (and with --stages env the check ran and said nothing of it)."""
    proc = check("--tiny", "--device", "cpu", "--stages", "env", "--out", tmp_path / "out", *args, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: ") and needle in lines[0], \
        proc.stdout[-500:] + proc.stderr
    assert not (tmp_path / "out").exists()


@pytest.mark.fast
@pytest.mark.parametrize("figures, needle", [
    ({"call1": {"pretrain": {}}, "call2": {"step_compiled_small": {}}}, "call1, call2: no stage's figures"),
    ({"gpu": "NVIDIA H100 80GB HBM3"}, "no stage's figures in it"),
    ({}, "no stage's figures in it"),
])
def test_an_earlier_file_with_no_stages_figures_is_one_error_line(tmp_path, figures, needle):
    """docs/benchmarks/gpu_check-h100-2.json holds a lease's two calls as call1 and call2: passed as --earlier it was
    taken, and the acceptance said "(with call1, call2 from --earlier ...)" and used none of it."""
    earlier = tmp_path / "gpu_check.json"
    earlier.write_text(json.dumps(figures))
    proc = check("--tiny", "--device", "cpu", "--stages", "env", "--out", tmp_path / "out", "--earlier", earlier,
                 timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and needle in lines[0], proc.stdout[-500:] + proc.stderr
    assert lines[0].startswith(f"error: --earlier {earlier}: not an earlier call's gpu_check.json")


@pytest.mark.fast
def test_a_fine_tuned_classifier_as_the_encoder_is_one_error_line_naming_its_encoder(tmp_path):
    """--encoder takes a folder with a config.json: a fine-tune's output has one, and the finetune and quality stages
    fine-tuned it again, scoring a model that had seen labels already as the pretrained encoder."""
    clf = tmp_path / "sentiment"
    clf.mkdir()
    (clf / "config.json").write_text(json.dumps({"architectures": ["ElectraForSequenceClassification"],
                                                 "koelectra_kit": {"source_model": "runs/gpu/a/discriminator"}}))
    proc = check("--tiny", "--device", "cpu", "--stages", "env", "--out", tmp_path / "out", "--encoder", clf,
                 timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1, proc.stdout[-500:] + proc.stderr
    assert lines[0] == (f"error: --encoder {clf}: a fine-tuned classifier, not a pretrained encoder (the stages would "
                        "fine-tune what has seen labels already); pass the encoder it was fine-tuned from: "
                        "runs/gpu/a/discriminator")


def test_the_resume_stage_stops_a_fine_tune_and_continues_it(tmp_path):
    """--stages ...,finetune,resume (not run by default): the finetune stage's run again, SIGTERM after its first dev
    evaluation, then the same command, which continues from OUT.work's checkpoint (on a GPU: CUDA graphs' optimizer
    state, which no CPU run makes)."""
    out = tmp_path / "check"
    proc = check("--tiny", "--device", "cpu", "--out", out, "--stages", "env,pretrain,finetune,resume", timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = (out / "gpu_check.txt").read_text()
    figures = json.loads((out / "gpu_check.json").read_text())["resume"]
    assert 0 < figures["stopped_at"] < figures["steps"] == 200 * 2, report[-2000:]  # tiny: 58 rows, batch 32
    assert "resumed from" in (out / "resume.log").read_text() and "[resume: ok in " in report
    assert re.search(r"resume: stopped at step \d+, resumed to 400: dev macro-F1 0\.\d{4}", report)
    assert not (out / "finetune-resume.work").exists()
