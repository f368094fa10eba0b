"""One GPU check a user can run (issue 39 item 7): on any CUDA machine, the environment, the pretraining step
against the straightforward one, a short run of the GPU preset, a fine-tune and labelling, in one command that
fits a 10-minute slot. Each stage is a subprocess with its own time limit: one that fails or runs out is reported
in a line and the others still run. Everything printed is also written to --report (docs/benchmarks/ keeps it,
named after the GPU).

    python benchmarks/gpu_check.py                                   # the bundled sample: speed and plumbing
    python benchmarks/gpu_check.py --prepared data/corpus --train nsmc3/train.tsv --dev nsmc3/dev.tsv
    python benchmarks/gpu_check.py --tiny --device cpu               # a dry run of every stage (minutes)

Before a lease on a machine without the data or Kiwi (the device tool's, notes/GPU-PROBE.md), make what it carries
here, then run the command it prints there (carry=[".gpu"]):

    python benchmarks/gpu_check.py --make-bundle .gpu                # the shared corpus prepared + nsmc3 rows

--prepared: a folder from `koelectra-kit prepare --config gpu-10min ...` (made on any machine: the GPU machine
needs neither the corpus nor Kiwi). Without it the bundled sample comments are prepared here (the preset needs no
Kiwi); they are far too few to say whether pretraining learns, only how fast it runs. --train/--dev: labelled
tables for the fine-tune and labelling stages (default: the bundled sample reviews).
"""
from __future__ import annotations

import ast
import json
import math
import os
import platform
import shlex
import signal
import subprocess
import sys
import tarfile
import time
from pathlib import Path

from common import ROOT, Parser, input_errors, positive_int, shape_file, shape_names  # noqa: E402  (common.py)
from gpu_bundle import BACK_BYTES, BACK_FILES, kk, make_bundle, pack, travel_weights  # noqa: E402

SAMPLE = ROOT / "corpora" / "sample"
STAGES = ("env", "step", "pretrain", "finetune", "label", "finetune_bench", "step_more")
# torch's logs in the pretrain stage: each recompile and its reason, each graph break, and why CUDA graphs were
# skipped (perf_hints)
PRETRAIN_LOGS = "recompiles,graph_breaks,perf_hints"
# not run by default: a quality lease's (--stages env,pretrain,export,quality), where the compiled step's time
# goes (profile), and a fine-tune stopped and resumed (resume: after the finetune stage)
EXTRA_STAGES = ("export", "quality", "profile", "resume")


# what gpu_check.json holds besides "gpu": the stages' figures (Check.figures), step_* one per shape and kind
FIGURE_KEYS = ("pretrain", "finetune", "finetune_bench", "label", "export", "quality", "resume")


def is_figure_key(key: str) -> bool:
    return key == "gpu" or key in FIGURE_KEYS or key.startswith("step_")


class Check:
    """The report: printed as it goes and written whole to ``report`` at every stage's end (a slot that runs out
    keeps what was measured)."""

    def __init__(self, args):
        self.args, self.lines, self.figures = args, [], {}
        self.earlier = getattr(args, "earlier_figures", None) or {}
        self.t0 = time.perf_counter()
        self.out = Path(args.out)
        self.out.mkdir(parents=True, exist_ok=True)

    def say(self, line: str = "") -> None:
        print(line, flush=True)
        self.lines.append(line)

    def save(self) -> None:
        """The report, the figures beside it and in --out, and the stages' logs beside it as one tar.gz: the device
        tool brings back 8 files from $OUT, so --out stays on the machine and these three come back."""
        report = Path(self.args.report)
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text("\n".join(self.lines) + "\n", encoding="utf-8")
        figures = json.dumps(self.figures, indent=1)
        (self.out / "gpu_check.json").write_text(figures, encoding="utf-8")
        if report.parent.resolve() != self.out.resolve():
            report.with_suffix(".json").write_text(figures, encoding="utf-8")
            with tarfile.open(report.with_name(report.stem + "-logs.tar.gz"), "w:gz") as tar:
                for f in sorted(self.out.glob("*.log")) + sorted(self.out.glob("*.json")) + sorted(
                        self.out.glob("*.md")):
                    tar.add(f, arcname=f.name)

    def left(self) -> float:
        return self.args.budget_s - (time.perf_counter() - self.t0)

    def run(self, name: str, argv: list[str], limit_s: float, tail: int = 12, env: dict | None = None,
            grace_s: float = 0, indented: bool = False) -> tuple[int, str]:
        """One stage's command: (exit code, its output); 124 when it ran past ``limit_s`` (or the budget).
        ``env``: variables set for this command only. ``grace_s``: at the limit, SIGTERM first and this long to
        finish (pretrain then writes its checkpoint and encoder), inside the budget. The report shows the last
        ``tail`` lines of its output, indented ones (tracebacks' frames, tables' rows) only with ``indented``."""
        limit = max(5.0, min(limit_s, self.left() - 5 - grace_s))
        self.say(f"$ {shlex.join(argv)}")
        env = {**os.environ, **(env or {}),
               "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        t = time.perf_counter()
        # its own process group: a stage out of time is stopped with everything it started (label_efficiency.py's
        # fine-tunes would otherwise run on, holding the GPU)
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                start_new_session=True)
        try:
            out, err = proc.communicate(timeout=limit)
            code = proc.returncode
        except subprocess.TimeoutExpired:
            out = err = None
            if grace_s:  # SIGTERM, not SIGINT: a detached job (the quality lease's) starts with SIGINT ignored
                os.killpg(proc.pid, signal.SIGTERM)
                try:
                    out, err = proc.communicate(timeout=grace_s)
                except subprocess.TimeoutExpired:
                    pass
            if out is None:
                os.killpg(proc.pid, signal.SIGKILL)
                out, err = proc.communicate()
            code = 124
        text = (out or "") + (err or "")
        (self.out / f"{name}.log").write_text(text, encoding="utf-8")
        shown = [ln for ln in text.splitlines() if ln.strip() and (indented or not ln.startswith("  "))][-tail:]
        for line in shown:
            self.say(f"  | {line[:220]}")
        state = "ok" if code == 0 else ("ran out of time" if code == 124 else f"failed (exit {code})")
        self.say(f"  [{name}: {state} in {time.perf_counter() - t:.0f}s; full log {self.out / (name + '.log')}]")
        return code, text


def stage_env(c: Check) -> None:
    import torch

    c.say(f"python {platform.python_version()}, torch {torch.__version__}, CUDA {torch.version.cuda}, "
          f"{os.cpu_count()} CPU cores")
    try:
        import transformers

        c.say(f"transformers {transformers.__version__}")
    except ImportError:
        c.say("transformers: not installed")
    for name in ("kiwipiepy", "datasets", "tensorboard"):
        try:
            __import__(name)
            c.say(f"{name}: installed")
        except ImportError:
            c.say(f"{name}: not installed")
    dev = c.args.device
    if dev.startswith("cuda"):
        if not torch.cuda.is_available():
            raise SystemExit("error: --device cuda but torch sees no CUDA GPU (pass --device cpu for a dry run)")
        p = torch.cuda.get_device_properties(0)
        c.figures["gpu"] = p.name
        c.say(f"GPU: {p.name}, {p.total_memory / 2**30:.0f} GiB, compute capability {p.major}.{p.minor}, "
              f"{p.multi_processor_count} SMs, bf16 {'yes' if torch.cuda.is_bf16_supported() else 'no'}")
    else:
        c.figures["gpu"] = "none (cpu)"
        c.say(f"device: {dev} ({torch.get_num_threads()} threads)")


STEP_PLAN = "small:128,256,512,1024 gpu-10min:256 base:16,32,64,128"  # the shapes, the preset's own
TINY_STEP_PLAN = "tiny:2,4 small:2"  # a dry run: the same stages in minutes on a CPU


def step_plan(text: str, flag: str = "--step-plan") -> list[tuple[str, str]]:
    """``--step-plan``: "SHAPE:B1,B2 SHAPE:B ..." -> [(shape, "B1,B2"), ...] (the first is the ``step`` stage's,
    the rest ``step_more``'s); ``--profile-plan`` is read the same way, one batch a profile. A shape is what
    bench_pretrain.py --shape takes (a configs/pretrain preset, a benchmarks/shapes one or a YAML path), checked
    here: a misspelt one failed only when its stage came, minutes into a lease."""
    plan = []
    for item in text.split():
        shape, _, batches = item.partition(":")
        if not shape or not batches or not all(b.isdigit() and int(b) > 0 for b in batches.split(",")):
            raise ValueError(f"{flag}: {item!r} is not SHAPE:BATCH[,BATCH...] (e.g. small:128,256,512)")
        if flag == "--profile-plan" and "," in batches:  # bench_pretrain --profile takes one --batch
            raise ValueError(f"{flag}: {item!r}: one batch a profile (e.g. small:256 small:512)")
        if shape_file(shape) is None and not (shape.endswith(".yaml") and (ROOT / shape).is_file()):
            raise ValueError(f"{flag}: {item!r}: no shape {shape} ({', '.join(shape_names())}; or a YAML path)")
        plan.append((shape, batches))
    if not plan:
        raise ValueError(f"{flag} is empty")
    return plan


def bench_shape(c: Check, shape: str, batches: str, scopes: tuple[str, ...] | list[str] = ("model",)) -> None:
    """bench_pretrain.py for one shape: a sweep of ``batches`` in eager mode beside the straightforward step (one
    batch: no sweep), then the toolkit's step compiled (--compile-mode) at the best batch (and at the largest batch
    the straightforward step fit, where that is smaller), again beside the straightforward step: the acceptance
    figures (fraction of the bf16 peak, speed-up at the same batch). ``scopes``: the compiled run's compile_scope,
    the whole forward (the bars' figure) and/or each layer."""
    a = c.args
    tiny = ["--seq", "32", "--vocab", "500", "--steps", "1", "--rounds", "1"] if a.tiny else []
    vocab = [] if a.tiny or shape != a.preset or not a.prepared else [
        "--vocab", str(json.loads(Path(a.prepared, "meta.json").read_text())["vocab_size"])]  # the real vocabulary
    best = batches
    if "," in batches or not a.compile_step:
        j = c.out / f"step_{shape}.json"
        c.run(f"step_{shape}", [sys.executable, "benchmarks/bench_pretrain.py", "--device", a.device, "--shape", shape,
                                "--batch", batches, "--json", str(j), *vocab, *tiny], a.step_s)
        if j.exists():  # rewritten after every batch: a sweep cut short still says what it measured
            c.figures[f"step_{shape}"] = figures = json.loads(j.read_text())
            entry = (figures.get("shapes") or [{}])[0]
            summary = entry.get("summary") or entry
            best = str((summary.get("best") or {}).get("batch") or batches.split(",")[0])
            # the straightforward step did not fit at the best batch (the H100's small shape at 1,024): compiled at
            # the largest batch both fit too, for the bar's speed-up at the same batch (one more compile)
            both = str((summary.get("comparison") or {}).get("batch") or best)
            best = best if both == best else f"{both},{best}"
    if a.compile_step:
        for scope in scopes:
            # step_compiled_SHAPE: the whole forward compiled (the bars' figure); step_layers_SHAPE: each layer
            # (compile_scope=layers), to set its step and its compiling beside the whole forward's in one call, each
            # from an empty inductor cache then (an earlier stage's compile of the same graphs would time a cache)
            key = f"step_compiled_{shape}" if scope == "model" else f"step_layers_{shape}"
            jc = c.out / f"{key}.json"
            cold = {"TORCHINDUCTOR_CACHE_DIR": str(c.out / f"inductor-{key}")} if len(scopes) > 1 else None
            c.run(key, [sys.executable, "benchmarks/bench_pretrain.py", "--device", a.device, "--shape", shape,
                        "--batch", best, "--compile-mode", a.compile_mode, "--compile-scope", scope, "--json", str(jc),
                        *vocab, *tiny], a.step_s * len(best.split(",")), env=cold)
            if jc.exists():
                c.figures[key] = json.loads(jc.read_text())


def stage_step(c: Check) -> None:
    """The first shape of --step-plan (the small shape: the issue's bar)."""
    bench_shape(c, *step_plan(c.args.step_plan)[0])


PROFILE_MIN_S = 130  # the profile compiles first: 73 s (base) to 103 s (small at 512) on the H100


def stage_profile(c: Check) -> None:
    """Where the compiled step's GPU time goes, by kind of kernel, and its top kernels (bench_pretrain --profile):
    each SHAPE:BATCH of --profile-plan (default: the first --step-plan shape at its first batch), compiled without
    CUDA graphs (inside a replayed graph the profiler sees one launch). On the H100 the small step ran at 11-12% of
    the bf16 peak at any batch from 256 to 1,024, and compiling did not pay at the base shape (20.9% compiled, 24.7%
    eager): this says which kernels hold them. A profile that cannot compile in what the budget leaves is skipped
    in one line (the second lease's started with 39 s left and said nothing)."""
    a = c.args
    plan = step_plan(a.profile_plan, "--profile-plan") if a.profile_plan else [step_plan(a.step_plan)[0]]
    tiny = ["--seq", "32", "--vocab", "500"] if a.tiny else []
    shapes = [shape for shape, _ in plan]
    for shape, batches in plan:
        if not a.tiny and c.left() < PROFILE_MIN_S:
            c.say(f"profile {shape}: skipped ({c.left():.0f} s left; compiling alone took 73-103 s on the H100)")
            continue
        batch = batches.split(",")[0]  # (the default's first; --profile-plan has one)
        # a shape profiled at two batches: a log each
        name = f"profile_{shape}" if shapes.count(shape) == 1 else f"profile_{shape}_{batch}"
        c.run(name, [sys.executable, "benchmarks/bench_pretrain.py", "--device", a.device, "--shape", shape,
                     "--batch", batch, "--compile", "--profile", "2" if a.tiny else "10", *tiny], a.step_s, tail=40,
              indented=True)


def stage_step_more(c: Check) -> None:
    """The other shapes of --step-plan (the preset's own, to compare the real run with; the base shape), last:
    what the slot has left; compiled with each of --compile-scopes (the step stage's shape, the bars', compiles the
    whole forward only)."""
    for shape, batches in step_plan(c.args.step_plan)[1:]:
        if c.left() < 30:
            c.say(f"step_{shape}: skipped (budget spent)")
            continue
        bench_shape(c, shape, batches, c.args.compile_scopes)


def steady_rate(figures: dict, shape: str) -> float | None:
    """The compiled (else eager) toolkit step's tokens/s at the best batch of ``shape``, from bench_pretrain's JSON."""
    for key in (f"step_compiled_{shape}", f"step_{shape}"):
        for entry in (figures.get(key) or {}).get("shapes", []):
            best = (entry.get("summary") or entry).get("best") or {}
            batches = entry.get("batches") or []
            rate = best.get("tokens_per_s") or (batches[0].get("toolkit", {}).get("tokens_per_s") if batches else None)
            if entry.get("shape") == shape and rate:
                return rate
    return None


def stage_pretrain(c: Check) -> None:
    """The preset for --minutes on --prepared (or the sample, prepared here): its real tokens/s, learning?"""
    a = c.args
    prepared = a.prepared
    preset = str(ROOT / "configs" / "pretrain" / "tiny.yaml") if a.tiny else a.preset
    if not prepared:
        prepared = str(c.out / "prepared-sample")
        if not Path(prepared, "prepared.json").exists():
            c.run("prepare", kk("prepare", "--config", preset, f"corpus={SAMPLE / 'comments.txt'}",
                                f"out={prepared}", "presplit=none", "progress=false"), 120)
    run = c.out / "pretrain"
    budget = ["max_steps=6", "log_every=2"] if a.tiny else [f"max_minutes={a.minutes}", "max_steps=0"]
    code, text = c.run("pretrain", kk("pretrain", "--config", preset, f"prepared={prepared}", f"out={run}",
                                      f"device={a.device}", "progress=false", "overwrite=true", "plots=false",
                                      *budget, *a.pretrain_set), a.minutes * 60 + 240, grace_s=90,
                          # each recompile and its reason in the log: on the H100 the 2-minute run's step 510 took
                          # ~57 s (the corpus's one short row, fixed since), which its metrics rows did not show
                          env={"TORCH_LOGS": os.environ.get("TORCH_LOGS", PRETRAIN_LOGS)})
    summary = run / "summary.json"
    if not summary.exists():  # (cut by the budget, a run still ends its step and exports: kept, and said so)
        return
    s = json.loads(summary.read_text())
    rows = [json.loads(line) for line in (run / "metrics.jsonl").read_text().splitlines() if line.strip()]
    # the first window holds compiling and warm-up; the steady rate is the median of the others
    steady = sorted(r["tokens_per_s"] for r in rows[1:]) or [s["tokens_per_s"]]
    last = s.get("final") or {}
    rate = steady[len(steady) // 2]
    # the loop's time beyond its tokens at the steady rate: compiling (about 90 s of the whole forward on the H100)
    # and the first steps' warm-up, what compile_scope=layers is for
    overhead = s["tokens"] / s["tokens_per_s"] - s["tokens"] / rate if s["tokens_per_s"] and rate else None
    c.figures["pretrain"] = {"tokens_per_s_steady": rate, "tokens_per_s_overall": s["tokens_per_s"],
                             "compile_and_warmup_s": overhead, "steps": s["steps"], "tokens": s["tokens"],
                             "encoder_parameters": s.get("encoder_parameters"), "final": last,
                             "stopped": s.get("stopped", "completed"), "slow_steps": s.get("slow_steps", [])}
    if s.get("stopped") == "interrupted":
        c.say(f"pretrain: cut by the budget at step {s['steps']:,}, before the preset's end; its encoder is this step's")
    c.say(f"pretrain: {s['steps']:,} steps, {s['tokens']:,} tokens; steady {rate:,.0f} tokens/s (overall "
          f"{s['tokens_per_s']:,.0f} with compiling{f'; compiling and warm-up ~{overhead:.0f} s' if overhead else ''}"
          f"); last row: gen_acc {last.get('gen_acc')} vs unigram "
          f"{last.get('gen_unigram_acc')}, disc_auc {last.get('disc_auc')}")
    for step, seconds in s.get("slow_steps", []):
        c.say(f"pretrain: step {step} took {seconds:.1f} s (a recompile? its log has TORCH_LOGS' lines)")


def preset_minutes(preset: str) -> float | None:
    """The preset's own time budget (max_minutes; --minutes may have run it shorter): what a step budget for it is
    projected over. None when it has none or cannot be read here."""
    try:
        from koelectra_kit.config import read_yaml

        minutes = read_yaml(preset, "pretrain").get("max_minutes")
        return float(minutes) if minutes else None
    except Exception:  # noqa: BLE001 - a line of the report, never a reason to lose the others
        return None


def encoder_dir(c: Check) -> Path:
    """The encoder the fine-tune and quality stages use: --encoder (a fine-tune lease carries one brought back from
    an earlier lease), else the pretrain stage's."""
    return Path(c.args.encoder) if getattr(c.args, "encoder", None) else c.out / "pretrain" / "discriminator"


def encoder_problem(folder: Path) -> str | None:
    """Why ``folder`` cannot be --encoder, or None. A fine-tuned classifier has a config.json too, and the stages
    fine-tuned it without a word: the quality table then scored a model that had already seen labels (its own
    fine-tune's, any number) as the pretrained encoder at 1,000 rows."""
    try:
        config = json.loads((folder / "config.json").read_text(encoding="utf-8"))
    except OSError:
        return "not a model folder (no config.json)"
    except ValueError as e:
        return f"its config.json is not JSON ({e})"
    if not isinstance(config, dict):
        return "its config.json is not a model's config"
    if any("ForSequenceClassification" in str(x) for x in config.get("architectures") or []):
        kit = config.get("koelectra_kit")  # a koelectra-kit fine-tune's output names what it started from
        source = kit.get("source_model") if isinstance(kit, dict) else None
        return ("a fine-tuned classifier, not a pretrained encoder (the stages would fine-tune what has seen labels "
                f"already); pass the encoder it was fine-tuned from{f': {source}' if source else ''}")
    return None


def stage_finetune(c: Check) -> None:
    a = c.args
    encoder = encoder_dir(c)
    if not encoder.exists():
        c.say("finetune: skipped (no encoder from the pretrain stage)")
        return
    ft = c.out / "finetune"
    code, _ = c.run("finetune", finetune_argv(c, ft), a.finetune_s)
    result = ft / "eval.json"
    if code == 0 and result.exists():
        r = json.loads(result.read_text())
        enc = json.loads((encoder / "config.json").read_text())
        r["encoder_shape"] = f"{enc.get('num_hidden_layers')} x {enc.get('hidden_size')}"
        c.figures["finetune"] = r
        train = r.get("train", {})
        c.say(f"finetune ({r['encoder_shape']}): {train.get('examples_per_s')} examples/s at batch 32 (issue 39's "
              f"1,066 was a 6 x 256 encoder's); dev macro-F1 {r.get('macro_f1', r.get('dev', {}).get('macro_f1'))}")


def finetune_argv(c: Check, out: Path) -> list[str]:
    """The finetune stage's command, into ``out``."""
    a = c.args
    preset = str(ROOT / "configs" / "finetune" / "tiny.yaml") if a.tiny else "sentiment"
    rows = ["min_steps=4", "max_train_rows=64"] if a.tiny else [f"max_train_rows={a.rows}"]
    # token_cache=false: the cache is written with `datasets`, which GPU machines may lack (tokenizing 1,000 rows
    # without Kiwi takes a second, and is reported apart from training)
    return kk("finetune", "--config", preset, f"model={encoder_dir(c)}", f"train={a.train}", f"dev={a.dev}",
              f"out={out}", f"device={a.device}", "progress=false", "plots=false", "batch_size=32",
              "token_cache=false", *rows, *a.finetune_set)


def stage_resume(c: Check) -> None:
    """The finetune stage's run again, stopped with SIGTERM after its first dev evaluation (it checkpoints into
    OUT.work, the step and its evaluation done) and continued by the same command, beside the uninterrupted run's
    figures. On a GPU the checkpoint holds what only a GPU makes: CUDA graphs' optimizer state (device-tensor
    learning rates, capturable fused AdamW and its step counters on the device)."""
    a = c.args
    whole = c.out / "finetune" / "eval.json"
    if not whole.exists():
        c.say("resume: skipped (no uninterrupted run from the finetune stage)")
        return
    ft = c.out / "finetune-resume"
    argv = finetune_argv(c, ft) + (["epochs=200"] if a.tiny else [])  # (tiny: steps enough to stop part-way)
    c.say(f"$ {shlex.join(argv)}  # stopped with SIGTERM after its first dev evaluation")
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    metrics = ft.with_name(ft.name + ".work") / "metrics.jsonl"
    with open(c.out / "resume-stopped.log", "w", encoding="utf-8") as log:
        proc = subprocess.Popen(argv, cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT,
                                start_new_session=True)
        deadline = time.perf_counter() + max(5.0, min(a.finetune_s, c.left() - 5))
        while proc.poll() is None and time.perf_counter() < deadline:
            if metrics.exists() and '"kind": "eval"' in metrics.read_text(encoding="utf-8"):
                os.killpg(proc.pid, signal.SIGTERM)
                break
            time.sleep(0.1)
        try:
            code = proc.wait(timeout=max(5.0, deadline - time.perf_counter()))
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            code = proc.wait()
    stopped = json.loads((ft / "eval.json").read_text())["train"] if (ft / "eval.json").exists() else {}
    if code != 130 or stopped.get("stopped") != "interrupted":
        c.say(f"resume: the stopped run ended with exit {code} ({stopped.get('stopped', 'no eval.json')}), not "
              f"interrupted: nothing to resume (log {c.out / 'resume-stopped.log'})")
        return
    code, _ = c.run("resume", argv, a.finetune_s)
    if code != 0 or not (ft / "eval.json").exists():
        return
    r, w = json.loads((ft / "eval.json").read_text()), json.loads(whole.read_text())
    c.figures["resume"] = {"stopped_at": stopped["steps"], "steps": r["train"]["steps"], "best": r["best"],
                           "macro_f1": r["dev"]["macro_f1"], "uninterrupted": None if a.tiny else
                           {"steps": w["train"]["steps"], "best": w["best"], "macro_f1": w["dev"]["macro_f1"]}}
    # (tiny: the resumed run is epochs=200, the finetune stage's is not the same run)
    c.say(f"resume: stopped at step {stopped['steps']}, resumed to {r['train']['steps']}: dev macro-F1 "
          f"{r['dev']['macro_f1']:.4f} (best step {r['best']['step']})" + ("" if a.tiny else
          f"; uninterrupted {w['dev']['macro_f1']:.4f} (best step {w['best']['step']} of {w['train']['steps']})"))


def stage_finetune_bench(c: Check) -> None:
    """bench_finetune at the issue's shape (benchmarks/shapes/issue39-6x256: gpu-1h's encoder when the bar was set)
    and batch 32, against the straightforward loop; on a GPU with the cuda_graphs=true variant too."""
    a = c.args
    j = c.out / "finetune_bench.json"
    argv = [sys.executable, "benchmarks/bench_finetune.py", "--device", a.device, "--shape",
            "tiny" if a.tiny else "issue39-6x256", "--batch-size", "32", "--json", str(j)]
    if a.tiny:
        argv += ["--rows", "64", "--cache-rows", "0"]
    code, _ = c.run("finetune_bench", argv, a.finetune_s)
    if code == 0 and j.exists():
        c.figures["finetune_bench"] = json.loads(j.read_text())


def stage_label(c: Check) -> None:
    a = c.args
    model = c.out / "finetune"
    if not (model / "config.json").exists():
        c.say("label: skipped (no classifier from the finetune stage)")
        return
    j = c.out / "label.json"
    # bench_label reads nsmc3/dev.tsv under $KOELECTRA_SHARED_DATA: --dev's rows laid out that way
    shared = c.out / "label-data"
    write_nsmc_layout(Path(a.dev), shared / "nsmc3" / "dev.tsv")
    argv = [sys.executable, "benchmarks/bench_label.py", "--model", str(model), "--device", a.device, "--json", str(j),
            "--rows", "64" if a.tiny else str(a.label_rows), "--big-rows", "0", "--dup-rows", "0"]
    code, _ = c.run("label", argv, a.label_s, env={"KOELECTRA_SHARED_DATA": str(shared)})
    if code == 0 and j.exists():
        c.figures["label"] = figures = json.loads(j.read_text())
        acc = figures.get("acceptance") or {}
        c.say(f"label{no_dedupe(acc)}: {acc.get('ratio', 0):.2f}x transformers' pipeline at its best "
              f"({acc.get('against')}), {acc.get('ratio_fp32_batch32', 0):.2f}x at its fp32 batch 32 (bar 2x)")


def no_dedupe(acceptance: dict) -> str:
    """' --no-dedupe' where bench_label judged that run (a file that repeats texts: the same work as the pipeline)."""
    return " --no-dedupe" if "--no-dedupe" in acceptance.get("judged", "") else ""


def stage_export(c: Check) -> None:
    """The pretrain stage's run (encoder, metrics, summary, config) packed as --export.NN parts that the device tool
    brings back (gpu_bundle.py unpack puts them together here)."""
    run = c.out / "pretrain"
    if not (run / "discriminator" / "config.json").exists():
        c.say("export: skipped (no encoder from the pretrain stage)")
        return
    t = time.perf_counter()
    weights = travel_weights(run) if c.args.export_weights == "auto" else c.args.export_weights
    parts = pack(run, Path(c.args.export), weights=weights)
    size = sum(p.stat().st_size for p in parts)
    c.figures["export"] = {"parts": [str(p) for p in parts], "bytes": size, "weights": weights}
    c.say(f"export: {run} -> {len(parts)} part(s) {c.args.export}.00.. ({size / 2**20:.1f} MiB) in "
          f"{time.perf_counter() - t:.0f}s; here: python benchmarks/gpu_bundle.py unpack <files_at>/"
          f"{Path(c.args.export).name} runs/gpu/<name>")
    if weights == "bf16":
        c.say("  (the encoder's weights travel rounded to bf16"
              + (f": in fp32 the run is more than the {BACK_FILES} files or {BACK_BYTES // 2**20} MiB that come "
                 "back with the report" if c.args.export_weights == "auto" else "")
              + "; unpack writes them back as fp32)")


def stage_quality(c: Check) -> None:
    """Item 6 where the GPU is: examples/experiments/label_efficiency.py on the pretrain stage's encoder, for
    --quality-sizes x --quality-seeds x --quality-arms (150,000 rows takes a GPU; 1,000 and 10,000 also run on a
    CPU from the exported encoder). Its table comes back beside the report."""
    a = c.args
    encoder = encoder_dir(c)
    if not (encoder / "config.json").exists():
        c.say("quality: skipped (no encoder from the pretrain stage)")
        return
    data = c.out / "quality-data"  # the layout label_efficiency.py reads: KOELECTRA_SHARED_DATA/nsmc3/
    for name, table in (("train", Path(a.train)), ("dev", Path(a.dev))):
        dest = data / "nsmc3" / f"{name}{'.parquet' if table.suffix == '.parquet' else '.tsv'}"
        if table.suffix == ".parquet":
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(table.read_bytes())
        else:
            write_nsmc_layout(table, dest)
    table = c.out / "label-efficiency.md"
    # token_cache=false: GPU machines may lack `datasets`; the tiny dry run shortens the default fine-tune
    ft = ["token_cache=false", f"device={a.device}", *(["min_steps=4", "epochs=2"] if a.tiny else []),
          *a.finetune_set]
    argv = [sys.executable, "examples/experiments/label_efficiency.py", "--encoder", str(encoder), "--runs",
            str(c.out / "le"), "--sizes", *a.quality_sizes.split(","), "--seeds", *a.quality_seeds.split(","),
            "--arms", *a.quality_arms.split(","), "--out", str(table), "--ft", *ft]
    env = {"KOELECTRA_SHARED_DATA": str(data)}
    code, _ = c.run("quality", argv, c.left() - 5, tail=4, env=env)
    if not table.exists():  # killed by the budget: the runs that finished still make a table
        c.run("quality_table", [*argv, "--report-only"], 60, tail=2, env=env)
    if table.exists():
        c.figures["quality"] = {"table": table.read_text(encoding="utf-8"), "complete": code == 0}
        text = table.read_text(encoding="utf-8")
        for line in text[:text.find("## Accuracy")].splitlines():  # the macro-F1 table
            if line.startswith("|"):
                c.say(f"  {line}")


def quality_arms() -> list[str]:
    """label_efficiency.py's ARMS, read without importing it (it imports its own `common`, not ours)."""
    tree = ast.parse((ROOT / "examples" / "experiments" / "label_efficiency.py").read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and getattr(node.targets[0], "id", None) == "ARMS":
            return [k.value for k in node.value.keys]
    return []


def scope_line(figures: dict, shape: str) -> str:
    """compile_scope=layers beside the whole forward at ``shape``'s batches in one call: each one's step rate and the
    seconds of its first steps (compiling), from bench_pretrain's JSON."""
    def rows(key):
        return {r["batch"]: r["toolkit"] for e in (figures.get(key) or {}).get("shapes", [])
                for r in e.get("batches", []) if (r.get("toolkit") or {}).get("fits")}

    whole, layers = rows(f"step_compiled_{shape}"), rows(f"step_layers_{shape}")
    parts = [f"batch {b}: layers {layers[b]['tokens_per_s']:,.0f} tokens/s after {layers[b]['warmup_s']:.0f} s of "
             f"first steps, model {whole[b]['tokens_per_s']:,.0f} after {whole[b]['warmup_s']:.0f} s = "
             f"{layers[b]['tokens_per_s'] / whole[b]['tokens_per_s']:.2f}x the step, "
             f"{layers[b]['warmup_s'] / max(whole[b]['warmup_s'], 1e-9):.2f}x the compiling"
             for b in sorted(set(whole) & set(layers))]
    return (f"compile scope at {shape}: " + "; ".join(parts) if parts else
            f"compile scope at {shape}: not compared (both scopes did not run at one batch)")


def acceptance(c: Check) -> None:
    """Issue 39's bars, each from the figures this check measured (a stage that did not run says so)."""
    a = c.args
    # what this call did not measure, from an earlier call's figures (--earlier): e.g. a second call's compiled
    # step of the preset against the first call's pretrain run
    f = {**c.earlier, **c.figures}
    c.say("\n== acceptance (issue 39's bars; they are for an H100) ==")
    if c.earlier:
        c.say(f"(with {', '.join(sorted(set(c.earlier) - set(c.figures))) or 'nothing'} from --earlier "
              f"{a.earlier})")
    # the eager sweep's line too: at the base shape the uncompiled step was the faster (24.7% vs 20.9%)
    for key in [k for k in f if k.startswith("step_") and not k.startswith(("step_compiled_", "step_layers_"))] + \
            [k for k in f if k.startswith("step_compiled_")]:
        how = f"compiled ({a.compile_mode})" if key.startswith("step_compiled_") else "uncompiled"
        for entry in f[key].get("shapes", []):
            line = entry.get("acceptance")
            if line:
                c.say(f"step, {how}: {line['line'] if isinstance(line, dict) else line}")
    for key in [k for k in f if k.startswith("step_layers_")]:
        c.say(scope_line(f, key[len("step_layers_"):]))
    run, ref = (f.get("pretrain") or {}).get("tokens_per_s_steady"), steady_rate(f, a.preset)
    if not a.encoder:  # a fine-tune lease's encoder was pretrained elsewhere: no pretrain bar to report
        c.say(f"pretrain {a.preset}: {run / ref:.0%} of the step benchmark's {ref:,.0f} tokens/s at its shape "
              "(bar 90%)" if run and ref else f"pretrain {a.preset} against the step benchmark: not measured (stage "
              f"pretrain or {a.preset} in --step-plan did not run)")
    pre = f.get("pretrain") or {}
    if pre.get("steps") and pre.get("tokens_per_s_steady"):  # a step budget is the same run on any GPU
        per_step, own = pre["tokens"] / pre["steps"], preset_minutes(a.preset)
        minutes = own or 10
        c.say(f"{a.preset}: {'its ' if own else ''}{minutes:g} minutes at the steady "
              f"{pre['tokens_per_s_steady']:,.0f} tokens/s = "
              f"{pre['tokens_per_s_steady'] * 60 * minutes / per_step:,.0f} steps of {per_step:,.0f} tokens "
              f"({pre['tokens_per_s_steady'] * 60 * minutes / 1e6:,.0f}M tokens)")
    corpus = json.loads(Path(a.prepared, "meta.json").read_text())["tokens"] if a.prepared else None
    for shape in dict.fromkeys(k.split("_", 2)[-1] for k in f if k.startswith("step_")):
        rate = steady_rate(f, shape)  # the trade of model size against epochs (issue 39 item 4), from measurements
        if rate and corpus:
            c.say(f"size {shape}: {rate:,.0f} tokens/s in the step benchmark = {rate * 600 / corpus:,.1f} epochs of "
                  f"the {corpus / 1e6:,.1f}M-token corpus in 10 minutes")
    ft = ((f.get("finetune") or {}).get("train") or {}).get("examples_per_s")
    shape = (f.get("finetune") or {}).get("encoder_shape") or "the preset's encoder"
    # the bar's 1,066 was a 6 x 256 encoder; the preset's is 12 x 256 (twice the layers): the bench's line below
    # is the same model
    c.say(f"finetune ({shape}, batch 32): {ft:,.0f} examples/s = {ft / 1066:.1f}x the 1,066 before "
          "(the bar is 5x at 6 x 256: the bench line below)" if ft else "finetune: not measured")
    for key, how in (("acceptance", ""), ("acceptance_graphs", ", cuda_graphs=true"),
                     ("acceptance_compiled", ", compiled with CUDA graphs")):
        bench = (f.get("finetune_bench") or {}).get(key)
        if bench:
            c.say(f"finetune bench (6 x 256, batch 32{how}): {bench['examples_per_s']:,.0f} examples/s = "
                  f"{bench['ratio']:.2f}x the {bench['reference']:,.0f} before (bar 5x)")
    table = (f.get("quality") or {}).get("table", "")
    for line in table[:table.find("## Accuracy")].splitlines():  # | rows | TF-IDF | encoder | ...
        cells = [x.strip() for x in line.strip("|").split("|")]
        size = cells[0].split(" ")[0].replace(",", "")
        if size.isdigit() and cells[1] != "-" and cells[2] != "-":
            bar = {1000: " (bar +5)", 150000: " (bar +2)"}.get(int(size), "")
            c.say(f"quality at {int(size):,} rows{cells[0][len(cells[0].split(' ')[0]):]}: encoder {cells[2]} vs "
                  f"TF-IDF {cells[1]}: {(float(cells[2]) - float(cells[1])) * 100:+.1f} points{bar}; one "
                  "pretraining run (the claim needs two)")
        elif size.isdigit() and cells[2] != "-":  # --finetune-set ensemble=none: a lease short of time skips TF-IDF
            c.say(f"quality at {int(size):,} rows{cells[0][len(cells[0].split(' ')[0]):]}: encoder {cells[2]} "
                  "(no TF-IDF fitted in this run: compare with the same rows' figure in docs/RESULTS.md)")
    lab = (f.get("label") or {}).get("acceptance")
    c.say(f"label{no_dedupe(lab)}: {lab['ratio']:.2f}x transformers' pipeline at its best ({lab.get('against')}) "
          "(bar 2x)" if lab else "label: not measured")


def write_nsmc_layout(table: Path, dest: Path) -> None:
    """A labelled table as nsmc3's TSV (id, movie_id, rating, label, document; no quoting), which the label
    benchmark reads; an nsmc3 file is copied as it is."""
    from koelectra_kit.io.labelled import read_labelled

    dest.parent.mkdir(parents=True, exist_ok=True)
    if table.suffix == ".tsv" and table.read_text(encoding="utf-8").startswith("id\tmovie_id\trating\tlabel\tdocument"):
        dest.write_bytes(table.read_bytes())
        return
    data = read_labelled(table, ["negative", "neutral", "positive"])
    lines = ["id\tmovie_id\trating\tlabel\tdocument"]
    for i, (text, y) in enumerate(zip(data.texts, data.y)):
        text = " ".join(str(text).split())  # no tab or newline inside a TSV field
        lines.append(f"{i}\t0\t0\t{['negative', 'neutral', 'positive'][y]}\t{text}")
    dest.write_text("\n".join(lines) + "\n", encoding="utf-8")


def main() -> None:
    p = Parser(description=__doc__, formatter_class=__import__("argparse").RawDescriptionHelpFormatter)
    p.add_argument("--device", default="cuda", help="cuda (default) | cuda:N | cpu (a dry run)")
    p.add_argument("--tiny", action="store_true", help="tiny shapes and a few steps: checks every stage runs")
    p.add_argument("--prepared", default=None, help="a prepared-data folder (koelectra-kit prepare)")
    p.add_argument("--train", default=str(SAMPLE / "reviews_labelled.csv"), help="labelled table to fine-tune on")
    p.add_argument("--dev", default=str(SAMPLE / "reviews_labelled.csv"), help="labelled table to score and label")
    p.add_argument("--rows", type=int, default=1000, help="fine-tune on this many train rows (the issue's 1,000)")
    p.add_argument("--preset", default="gpu-10min", help="the pretraining preset of the pretrain stage")
    p.add_argument("--minutes", type=float, default=2.0, help="the pretrain stage's time budget")
    p.add_argument("--set", dest="pretrain_set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for the pretrain stage (repeatable), e.g. --set batch_size=512")
    p.add_argument("--finetune-set", action="append", default=[], metavar="KEY=VALUE",
                   help="an override for the fine-tune stage (repeatable), e.g. --finetune-set compile=true")
    p.add_argument("--step-plan", default=None,
                   help="bench_pretrain.py per shape, SHAPE:BATCHES: a sweep (eager), then compiled at its best batch; "
                        "the first shape runs early (stage step), the others last (stage step_more); default "
                        f"'{STEP_PLAN}' ('{TINY_STEP_PLAN}' with --tiny)")
    p.add_argument("--no-compile-step", dest="compile_step", action="store_false",
                   help="skip the compiled step benchmark")
    p.add_argument("--compile-mode", default="reduce-overhead")
    p.add_argument("--compile-scopes", default="model", help="stage step_more's compiled step: its compile_scope, "
                   "one or both (model,layers: each layer compiled too, beside the whole forward, each from an empty "
                   "inductor cache, for its step and its compiling)")
    p.add_argument("--stages", default=",".join(STAGES), help=f"a subset of {','.join(STAGES + EXTRA_STAGES)}")
    p.add_argument("--budget-s", type=float, default=570, help="stop starting stages after this many seconds")
    p.add_argument("--step-s", type=float, default=150, help="time limit of each step benchmark")
    p.add_argument("--finetune-s", type=float, default=180,
                   help="time limit of each fine-tune stage (the H100's 1,000-row fine-tune took 142 s)")
    p.add_argument("--label-s", type=float, default=180, help="time limit of the label stage (20,000 rows: the "
                   "pipeline at fp32 batch 32 alone labels them 4 times at ~1,800 rows/s on the H100, ~45 s; "
                   "with the best pipeline's, label's three and the sweep, ~2 minutes by the second lease's rates)")
    p.add_argument("--label-rows", type=int, default=20000, help="rows the label benchmark times (the second lease's "
                   "4,000 took 0.5-2 s a run: fixed costs decided; its batch sweep now runs on 2,048 rows)")
    p.add_argument("--out", default="runs/gpu-check", help="folder for the stages' runs and logs")
    p.add_argument("--export-weights", choices=("auto", "fp32", "bf16"), default="auto", help="stage export: the "
                   "encoder's weights as they are (fp32), rounded to bf16 for travel (half the bytes; unpack writes "
                   "them back as fp32), or auto: fp32 where the parts come back beside the report, else bf16")
    p.add_argument("--export", default=None, help="stage export: the parts' path without .NN (default "
                   "OUT/run.tar; on a lease $OUT/run.tar)")
    p.add_argument("--encoder", default=None, help="stages finetune and quality: this encoder folder instead of "
                   "the pretrain stage's (a fine-tune lease: one brought back by `gpu_bundle.py unpack`)")
    p.add_argument("--quality-sizes", default="150000,1000", help="stage quality: labelled rows, comma-separated")
    p.add_argument("--quality-seeds", default="1,2", help="stage quality: fine-tuning seeds")
    p.add_argument("--quality-arms", default="default", help="stage quality: label_efficiency.py arms (default "
                   "= encoder, TF-IDF, ensemble; random = random init)")
    p.add_argument("--make-bundle", metavar="DIR", default=None,
                   help="make the folder a GPU lease carries (prepared corpus, train sample, dev) and stop")
    p.add_argument("--corpus", action="append", default=None, help="--make-bundle: a corpus file (repeatable; "
                   "default the shared pretraining corpus)")
    p.add_argument("--bundle-train", default=None, help="--make-bundle: the train table (default shared nsmc3)")
    p.add_argument("--bundle-dev", default=None, help="--make-bundle: the dev table (default shared nsmc3)")
    p.add_argument("--bundle-rows", type=positive_int, default=None, help="--make-bundle: train rows kept (seeded; "
                   "default all: the quality stage's 150,000)")
    p.add_argument("--profile-plan", default=None, help="stage profile: SHAPE:BATCH ... (default: the first "
                   "--step-plan shape at its first batch), e.g. 'small:512 base:128'")
    p.add_argument("--earlier", default=None, help="an earlier call's gpu_check.json (its --out): the acceptance "
                   "takes from it what this call did not measure (e.g. the pretrain stage's rate)")
    p.add_argument("--report", default=None, help="where the printed report is written "
                   "(default: OUT/gpu_check.txt; keep it in docs/benchmarks/gpu_check-<GPU>.txt)")
    a = p.parse_args()
    if a.make_bundle:
        with input_errors(p):  # its refusals (a corpus not found): one line, exit 2
            return make_bundle(a)
    stages = [s.strip() for s in a.stages.split(",") if s.strip()]
    if unknown := [s for s in stages if s not in STAGES + EXTRA_STAGES]:
        p.error(f"--stages: unknown {', '.join(unknown)} (choose from {', '.join(STAGES + EXTRA_STAGES)})")
    for name in ("quality_sizes", "quality_seeds"):
        if not all(x.strip().isdigit() and int(x) > 0 for x in getattr(a, name).split(",")):
            p.error(f"--{name.replace('_', '-')}: positive whole numbers, comma-separated")
    if unknown := sorted(set(a.quality_arms.split(",")) - set(quality_arms())):
        p.error(f"--quality-arms: unknown {', '.join(unknown)} (choose from {', '.join(quality_arms())})")
    a.compile_scopes = [x.strip() for x in a.compile_scopes.split(",") if x.strip()]
    if not a.compile_scopes or set(a.compile_scopes) - {"model", "layers"}:
        p.error(f"--compile-scopes: model, layers or both (model,layers), not {','.join(a.compile_scopes) or 'nothing'}")
    if a.step_plan is None:  # (given empty: the error below, not the default)
        a.step_plan = TINY_STEP_PLAN if a.tiny else STEP_PLAN
    try:
        step_plan(a.step_plan)
        if a.profile_plan is not None:
            step_plan(a.profile_plan, "--profile-plan")
    except ValueError as e:
        p.error(str(e))
    if a.earlier:
        try:
            a.earlier_figures = json.loads(Path(a.earlier).read_text(encoding="utf-8"))
            # a gpu_check.json: the GPU's name, then one object of figures per stage
            if not isinstance(a.earlier_figures, dict) or not all(
                    isinstance(v, dict) for k, v in a.earlier_figures.items() if k != "gpu"):
                raise ValueError("not an object of stages' figures")
            # keys no stage writes (docs/benchmarks' two-call files hold call1 and call2): the acceptance would
            # take nothing from them and say it took "call1, call2"
            if unknown := sorted(k for k in a.earlier_figures if not is_figure_key(k)):
                raise ValueError(f"{', '.join(unknown)}: no stage's figures")
            if not set(a.earlier_figures) - {"gpu"}:
                raise ValueError("no stage's figures in it")
        except (OSError, ValueError) as e:
            p.error(f"--earlier {a.earlier}: not an earlier call's gpu_check.json ({e})")
    if not (0 < a.minutes < math.inf and a.rows >= 1 and 0 < a.budget_s < math.inf):  # (nan: none of these)
        p.error("--minutes, --rows and --budget-s must be positive")
    for name in ("step_s", "finetune_s", "label_s", "label_rows"):
        if not 0 < getattr(a, name) < math.inf:
            p.error(f"--{name.replace('_', '-')} must be positive, got {getattr(a, name):g}")
    for name in ("train", "dev"):
        if not Path(getattr(a, name)).is_file():
            p.error(f"--{name} {getattr(a, name)}: no such file")
    if a.encoder:
        if problem := encoder_problem(Path(a.encoder)):
            p.error(f"--encoder {a.encoder}: {problem}")
    if a.prepared and not Path(a.prepared, "prepared.json").is_file():
        p.error(f"--prepared {a.prepared}: not a prepared-data folder (koelectra-kit prepare makes one)")
    a.report = a.report or str(Path(a.out) / "gpu_check.txt")
    a.export = a.export or str(Path(a.out) / "run.tar")
    c = Check(a)
    c.say(f"koelectra-kit GPU check, {time.strftime('%Y-%m-%d %H:%M')}; stages {', '.join(stages)}; "
          f"budget {a.budget_s:.0f}s")
    funcs = {"env": stage_env, "step": stage_step, "pretrain": stage_pretrain, "finetune": stage_finetune,
             "finetune_bench": stage_finetune_bench, "label": stage_label, "step_more": stage_step_more,
             "export": stage_export, "quality": stage_quality, "profile": stage_profile, "resume": stage_resume}
    for name in stages:
        if c.left() < 10:
            c.say(f"{name}: skipped (budget spent)")
            continue
        c.say(f"\n== {name} ==")
        funcs[name](c)
        c.save()
    acceptance(c)
    c.say(f"\ndone in {time.perf_counter() - c.t0:.0f}s; figures in {c.out / 'gpu_check.json'}")
    c.save()


if __name__ == "__main__":
    main()
