"""Shared pieces of the experiment scripts: run a CLI command (logged, timed), pretrain, fine-tune, baseline,
and write a markdown table whose every row carries its exact command, compute and seed. Every experiment has
the same shape, run by ``run_arms``: arms (pretraining runs) -> fine-tuning seeds of each -> the same
architecture from random initialization (the control) -> one table row per fine-tuning run.

Every number in docs/RESULTS.md comes from a script in this folder; nothing is typed by hand. Each script
caches finished runs (a run directory with summary.json / eval.json is reused), so a killed experiment resumes
where it stopped and a rerun only redoes what is missing. ``--fresh`` starts over.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the scripts import koelectra_kit even without `pip install -e .`
DATA = Path(os.environ.get("KOELECTRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
CORPUS = [DATA / "pretrain" / "nsmc_reviews.txt", DATA / "pretrain" / "comments_mix.txt"]


def nsmc3(name: str) -> Path:
    """nsmc3's table as the shared data has it (TSV), or as a GPU lease's bundle carries it (parquet: all
    150,000 rows within the device tool's 64 MiB; benchmarks/gpu_bundle.py)."""
    tsv = DATA / "nsmc3" / f"{name}.tsv"
    return tsv.with_suffix(".parquet") if not tsv.exists() and tsv.with_suffix(".parquet").exists() else tsv


TRAIN, DEV = nsmc3("train"), nsmc3("dev")


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import torch

        if torch.cuda.is_available():  # a lent GPU runs these scripts too (benchmarks/gpu_check.py --stages quality)
            return f"{torch.cuda.get_device_name(0)}, {os.cpu_count()} CPU cores ({cpu})"
    except ImportError:
        pass
    return f"{os.cpu_count()} cores ({cpu}), CPU only"


def parser(doc: str) -> argparse.ArgumentParser:
    ap = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(ROOT / "runs" / "experiments"), help="where run directories go")
    ap.add_argument("--minutes", type=float, default=30, help="pretraining budget per encoder (wall-clock)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="fine-tuning seeds")
    ap.add_argument("--ft", nargs="*", default=[], help="extra fine-tuning overrides (e.g. max_train_rows=30000)")
    ap.add_argument("--fresh", action="store_true", help="redo runs even when their results exist")
    ap.add_argument("--parallel", type=int, default=1,
                    help="run this many pretraining/fine-tuning jobs at once, 1 thread each (equal compute per arm "
                         "on a 2-core machine: --parallel 2)")
    ap.add_argument("--pretrain-parallel", type=int, default=None,
                    help="pretraining jobs at once (default: --parallel); e.g. --parallel 2 --pretrain-parallel 1 "
                         "pretrains one arm at a time on both cores and fine-tunes two at a time")
    return ap


def check_data(needs: list[Path] | None = None) -> None:
    missing = [p for p in (CORPUS + [TRAIN, DEV] if needs is None else needs) if not p.exists()]
    if missing:
        sys.exit(f"experiment data missing: {missing[0]} (the scripts need the real data folder; "
                 "set KOELECTRA_SHARED_DATA to its location)")


def show(argv: list[str]) -> str:
    """The command as a user types it from the repository root (paths relative, not this machine's)."""
    text = "koelectra-kit " + shlex.join(argv)
    return text.replace(f"{ROOT}/", "").replace(f"{ROOT.parent}/", "../")


def run(argv: list[str], log: Path) -> float:
    """``koelectra-kit ARGV`` in a subprocess (its own torch threads, a clean slate), output to ``log``."""
    cmd = [sys.executable, "-m", "koelectra_kit", *argv]
    log.parent.mkdir(parents=True, exist_ok=True)
    print(f"$ koelectra-kit {shlex.join(argv)}", flush=True)
    t0 = time.perf_counter()
    with open(log, "w", encoding="utf-8") as f:
        rc = subprocess.call(cmd, stdout=f, stderr=subprocess.STDOUT, cwd=ROOT)
    if rc:
        tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
        sys.exit(f"command failed (exit {rc}); last lines of {log}:\n" + "\n".join(tail))
    return time.perf_counter() - t0


def run_many(jobs: list[tuple[list[str], Path]], parallel: int) -> None:
    """Run ``koelectra-kit`` jobs, ``parallel`` at a time (each with threads=1 when parallel > 1)."""
    if parallel <= 1:
        for argv, log in jobs:
            run(argv, log)
        return
    procs: list[tuple[subprocess.Popen, Path, object]] = []
    queue = list(jobs)
    while queue or procs:
        while queue and len(procs) < parallel:
            argv, log = queue.pop(0)
            log.parent.mkdir(parents=True, exist_ok=True)
            print(f"$ koelectra-kit {shlex.join(argv)}   (in parallel)", flush=True)
            f = open(log, "w", encoding="utf-8")
            env = dict(os.environ, OMP_NUM_THREADS="1")
            procs.append((subprocess.Popen([sys.executable, "-m", "koelectra_kit", *argv], stdout=f,
                                           stderr=subprocess.STDOUT, cwd=ROOT, env=env), log, f))
        time.sleep(2)
        for item in list(procs):
            proc, log, f = item
            if proc.poll() is not None:
                f.close()
                procs.remove(item)
                if proc.returncode:
                    tail = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()[-5:]
                    sys.exit(f"job failed (exit {proc.returncode}); last lines of {log}:\n" + "\n".join(tail))


def pretrain_argv(out: Path, preset: str, overrides: list[str], minutes: float, parallel: int = 1) -> list[str]:
    return ["pretrain", "--config", f"configs/pretrain/{preset}.yaml",
            f"corpus=[{','.join(str(p) for p in CORPUS)}]", f"out={out}", f"max_minutes={minutes:g}",
            "progress=false", *overrides, *(["threads=1"] if parallel > 1 else [])]


def pretrain_all(specs: list[tuple[Path, str, list[str]]], minutes: float, fresh: bool, parallel: int = 1) -> list[dict]:
    """Pretrain (or reuse) encoders; returns their summaries, each with the command that made it."""
    jobs = []
    for out, preset, overrides in specs:
        if fresh and out.exists():
            shutil.rmtree(out)
        if not (out / "summary.json").exists():
            argv = pretrain_argv(out, preset, overrides, minutes, parallel)
            if (out / "checkpoints").exists():
                argv.append("resume=true")  # an interrupted run continues from its last checkpoint
            jobs.append((argv, out.parent / f"{out.name}.log"))
    run_many(jobs, parallel)
    result = []
    for out, preset, overrides in specs:
        summary = json.loads((out / "summary.json").read_text())
        # The command as the run was made (a reused run may have had both cores though this call has --parallel 2;
        # a run linked in from another experiment names the directory it was made in).
        threads = yaml.safe_load((out / "config.yaml").read_text()).get("threads")
        summary["command"] = show(pretrain_argv(out.resolve(), preset, overrides, minutes, 2 if threads == 1 else 1))
        result.append(summary)
    return result


def pretrain(out: Path, preset: str, overrides: list[str], minutes: float, fresh: bool) -> dict:
    return pretrain_all([(out, preset, overrides)], minutes, fresh)[0]


def tail_mean(run_dir: Path, key: str, n: int = 5) -> float | None:
    """Mean of the last ``n`` logged values of a metric (single rows are noisy: one micro-batch each)."""
    rows = [json.loads(line) for line in (run_dir / "metrics.jsonl").read_text().splitlines() if line.strip()]
    vals = [r[key] for r in rows[-n:] if r.get(key) is not None]
    return sum(vals) / len(vals) if vals else None


def first_reach(run_dir: Path, key: str, threshold: float) -> str:
    """When a metric first logs ``threshold`` or more: "step N (M min)", or "not reached"."""
    for line in (run_dir / "metrics.jsonl").read_text().splitlines():
        r = json.loads(line) if line.strip() else {}
        if r.get(key) is not None and r[key] >= threshold:
            return f"step {r['step']:,} ({r['elapsed_s'] / 60:.1f} min)"
    return "not reached"


def finetune_argv(out: Path, model: Path, seed: int, init: str, extra: list[str], parallel: int = 1) -> list[str]:
    return ["finetune", "--config", "configs/finetune/sentiment.yaml", f"model={model}", f"train={TRAIN}",
            f"dev={DEV}", f"out={out}", f"seed={seed}", f"init={init}", "progress=false", *extra]


def finetune_all(specs: list[tuple[Path, Path, int, str]], extra: list[str], fresh: bool, parallel: int = 1) -> list[dict]:
    """Fine-tune (or reuse) each (out, model, seed, init); returns eval.json contents with their commands."""
    jobs = []
    for out, model, seed, init in specs:
        if fresh and out.exists():
            shutil.rmtree(out)
        if not (out / "eval.json").exists():
            jobs.append((finetune_argv(out, model, seed, init, extra), out.parent / f"{out.name}.log"))
    run_many(jobs, parallel)
    results = []
    for out, model, seed, init in specs:
        r = json.loads((out / "eval.json").read_text())
        r["command"] = show(finetune_argv(out.resolve(), model.resolve(), seed, init, extra))
        results.append(r)
    return results


def finetune(out: Path, model: Path, seed: int, init: str, extra: list[str], fresh: bool) -> dict:
    return finetune_all([(out, model, seed, init)], extra, fresh)[0]


def baseline(out: Path, fresh: bool) -> dict:
    argv = ["baseline", "--config", "configs/finetune/sentiment.yaml", f"train={TRAIN}", f"dev={DEV}",
            f"out={out}"]
    if fresh and out.exists():
        shutil.rmtree(out)
    if not (out / "eval.json").exists():
        secs = run(argv, out.parent / f"{out.name}.log")
        (out / "wall_s.txt").write_text(f"{secs:.1f}")
    result = json.loads((out / "eval.json").read_text())
    result["command"] = show(argv)
    wall = out / "wall_s.txt"
    result["wall_s"] = float(wall.read_text()) if wall.exists() else None
    return result


def baseline_row(out: Path, fresh: bool) -> dict:
    """The TF-IDF baseline as a table row (fitted, or reused from ``out``)."""
    base = baseline(out, fresh)
    return {"encoder": "TF-IDF char 1-3-grams + logistic regression", "seed": "-",
            "accuracy": base["dev"]["accuracy"], "macro_f1": base["dev"]["macro_f1"],
            "compute": f"fit {base['train']['train_time_s']:.0f}s on {base['train']['rows']:,} rows",
            "command": base["command"]}


def ft_setting(args) -> str:
    """How the encoders were fine-tuned, for a table's introduction."""
    return "configs/finetune/sentiment.yaml" + (f" plus `{' '.join(args.ft)}`" if args.ft else "")


@dataclass
class Arm:
    """One pretraining run of an experiment and the fine-tuning runs made from its discriminator."""

    label: str  # the table's encoder name for its fine-tuning rows
    out: Path  # the pretraining run directory
    ft: Path  # fine-tuning run directories: f"{ft}-s{seed}"
    overrides: list[str] = field(default_factory=list)  # pretraining overrides on top of the preset
    preset: str = "cpu-30min"
    minutes: float | None = None  # pretraining budget (None: --minutes)
    seeds: list[int] | None = None  # fine-tuning seeds (None: --seeds)


@dataclass
class Control:
    """The random-init control: ``arch``'s architecture and tokenizer, fine-tuned from random weights."""

    label: str
    arch: Path  # a discriminator directory
    ft: Path  # fine-tuning run directories: f"{ft}-s{seed}"


def run_arms(args, arms: list[Arm], control: Control | None = None, init: str = "pretrained",
             pretrain_parallel: int | None = None) -> tuple[list[dict], list[dict]]:
    """Pretrain (or reuse) every arm, fine-tune each on its seeds, then the control on --seeds; returns (the
    arms' pretraining summaries, one table row per fine-tuning run). ``init="random"`` fine-tunes the arms
    themselves from random weights (their pretraining run only gives the architecture and tokenizer)."""
    parallel = pretrain_parallel or args.pretrain_parallel or args.parallel
    summaries: dict[Path, dict] = {}
    for minutes in dict.fromkeys(a.minutes or args.minutes for a in arms):  # one batch per budget, in order
        group = [a for a in arms if (a.minutes or args.minutes) == minutes]
        for arm, pre in zip(group, pretrain_all([(a.out, a.preset, a.overrides) for a in group], minutes,
                                                args.fresh, parallel)):
            summaries[arm.out] = pre
    pres = [summaries[a.out] for a in arms]
    specs, names = [], []
    for arm, pre in zip(arms, pres):
        for seed in arm.seeds or args.seeds:
            specs.append((Path(f"{arm.ft}-s{seed}"), arm.out / "discriminator", seed, init))
            names.append((arm.label, pre, seed))
    if control is not None:
        for seed in args.seeds:
            specs.append((Path(f"{control.ft}-s{seed}"), control.arch, seed, "random"))
            names.append((control.label, None, seed))
    rows = []
    for (label, pre, seed), ft in zip(names, finetune_all(specs, args.ft, args.fresh, args.parallel)):
        rows.append(ft_row(label, pre if init == "pretrained" else None, ft, seed))
        if pre is not None and init == "random":
            rows[-1]["pretrain_command"] = pre["command"]  # the run that made its config and tokenizer
    return pres, rows


def md_table(columns: list[str], rows: list[list[str]]) -> list[str]:
    """A markdown table's lines: header, separator, one line per row of cells."""
    return ["| " + " | ".join(columns) + " |", "|" + "---|" * len(columns),
            *("| " + " | ".join(cells) + " |" for cells in rows)]


def curve_images(runs: dict[str, Path], docs: Path, tag: str) -> list[str]:
    """Each pretraining run's learning curves redrawn from its metrics into ``docs/<tag>-<run dir>.png``
    (``runs``: what the run is -> its dir); returns the markdown lines that show them."""
    from koelectra_kit.pretrain import plot_curves

    lines = []
    for what, run_dir in runs.items():
        png = f"{tag}-{run_dir.name}.png"
        plot_curves(run_dir, docs / png)
        lines.append(f"![{what} learning curves]({png})")
    return lines


def ft_row(name: str, pre: dict | None, ft: dict, seed: int) -> dict:
    tr = ft["train"]
    compute = f"fine-tune {tr['train_time_s'] / 60:.1f} min, {tr['rows']:,} rows x {tr['epochs']:g} epochs"
    if pre is not None:
        compute = (f"pretrain {pre['elapsed_s'] / 60:.1f} min, {pre['tokens'] / 1e6:.1f}M tokens; " + compute)
    return {"encoder": name, "seed": seed, "accuracy": ft["dev"]["accuracy"], "macro_f1": ft["dev"]["macro_f1"],
            "compute": compute, "command": ft["command"], "pretrain_command": pre["command"] if pre else None}


def write_table(path: Path, title: str, intro: str, rows: list[dict], extra_sections: list[str] = ()) -> None:
    """Markdown: a results table (mean over seeds per encoder, then every run) and the commands."""
    lines = [f"# {title}", "", f"_Generated by `{Path(sys.argv[0]).relative_to(ROOT) if Path(sys.argv[0]).is_absolute() else sys.argv[0]}`"
             f" on {time.strftime('%Y-%m-%d')}, {machine()}._", "", intro, ""]
    by: dict[str, list[dict]] = {}
    for r in rows:
        by.setdefault(r["encoder"], []).append(r)
    lines += ["| encoder | dev accuracy | dev macro-F1 | seeds | compute (per run) |", "|---|---|---|---|---|"]
    for name, rs in by.items():
        acc = sum(r["accuracy"] for r in rs) / len(rs)
        f1 = sum(r["macro_f1"] for r in rs) / len(rs)
        spread = f" (±{(max(r['macro_f1'] for r in rs) - min(r['macro_f1'] for r in rs)) / 2:.3f})" if len(rs) > 1 else ""
        lines.append(f"| {name} | {acc:.4f} | {f1:.4f}{spread} | {', '.join(str(r['seed']) for r in rs)} | "
                     f"{rs[0]['compute']} |")
    lines += ["", "Every run, with its exact command:", ""]
    lines += ["| encoder | seed | accuracy | macro-F1 | command |", "|---|---|---|---|---|"]
    for r in rows:
        cmd = r["command"].replace("|", "\\|")
        pre = f"<br>pretrained by: `{r['pretrain_command']}`" if r.get("pretrain_command") else ""
        lines.append(f"| {r['encoder']} | {r['seed']} | {r['accuracy']:.4f} | {r['macro_f1']:.4f} | `{cmd}`{pre} |")
    lines += ["", *extra_sections]
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {path}")
