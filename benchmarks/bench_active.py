"""Does the analyst's loop pay? (issue 33) Uncertainty sampling (margin, as `koelectra-kit suggest` picks) against
random sampling on nsmc3, its labels playing the analyst: the same first labels, then rounds of more, each round
retrained with the app's recipe and scored on nsmc3 dev; the gap measured in the same run, at 1,000 labels against
the bar (>= +2 points of macro-F1, mean of seeds).

    nice -n 15 python benchmarks/bench_active.py --recipe tfidf --runs runs/active-tfidf --seeds 1 2
    python benchmarks/bench_active.py --recipe full --encoder runs/l30/sub/discriminator --runs runs/active-full \\
        --device cuda --parallel 4 --train ../shared/data/nsmc3/train.tsv --dev ../shared/data/nsmc3/dev.tsv
    python benchmarks/bench_active.py --runs runs/active-tfidf --report-only     # page + plot from the JSON lines
    python benchmarks/bench_active.py --recipe tfidf --start-rows 3000 --runs runs/active-start --seeds 1 2

Recipes: ``full`` (the default) is `finetune`'s sentiment defaults from --encoder with ensemble=tfidf and dev=null,
as the app's teach mode retrains: the encoder, TF-IDF and their ensemble, the next rows chosen by the one best on the
held-out 10%. ``tfidf`` is TF-IDF + logistic regression alone (`baseline` with dev=null): seconds a round on a CPU.

``--start-rows N`` (issue 41) starts teach mode from a TF-IDF model fitted on N --train rows outside the pool, as an
analyst starts from a model they already have: each round refits TF-IDF on those rows plus the labels not held out,
and the app's own rule (``koelectra_kit.app.serving.compare``) decides whether it replaces the model serving; the
serving model asks for the next rows. The run prints, per round, the dev macro-F1 of the model serving against the
start's: the bar is that no round serves below the start.

Each strategy x seed is a chain of rounds run in order; chains are separate processes with --parallel > 1 (each
with --threads torch threads). RUNS holds settings.json, a JSON line per finished round of each chain
(RUNS/<strategy>-s<seed>.jsonl), its log and the last round's model folder; a killed run continues after its
last finished round, and a longer --until extends it.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import asdict
from pathlib import Path

from common import NSMC_DEV, NSMC_TRAIN, ROOT, Parser, input_errors, non_negative_int

from active_loop import RECIPES, Chain, Setup, read_rows, run_chain  # noqa: E402  (after common puts ROOT on the path)
from active_report import AT, Figures, plot, section, section_key, start_verdict, verdict, table, write_page  # noqa: E402

STRATEGIES = ("margin", "entropy", "random")  # random is the baseline every other strategy is measured against
PAGE = ROOT / "docs" / "results" / "active-learning.md"


def options() -> Parser:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--recipe", default="full", help="full (the app's finetune recipe) | tfidf (TF-IDF alone)")
    ap.add_argument("--encoder", help="the pretrained encoder folder the full recipe fine-tunes each round")
    ap.add_argument("--train", default=str(NSMC_TRAIN), help="labelled table the pool is drawn from (nsmc3 train)")
    ap.add_argument("--dev", default=str(NSMC_DEV), help="labelled table every round is scored on (nsmc3 dev)")
    ap.add_argument("--pool-size", type=int, default=20000, help="rows of --train in the unlabelled pool (at most "
                    "its rows, less --start-rows)")
    ap.add_argument("--pool-seed", type=non_negative_int, default=0, help="which rows (the same pool for every chain)")
    ap.add_argument("--start", type=int, default=100, help="random labels before the first round")
    ap.add_argument("--start-rows", type=int, default=0,
                    help="start from a TF-IDF model fitted on this many --train rows outside the pool (tfidf recipe)")
    ap.add_argument("--step", type=int, default=100, help="labels added a round")
    ap.add_argument("--until", type=int, default=2000, help="labels of the last round")
    ap.add_argument("--strategies", nargs="+", default=["margin", "random"], help="of " + ", ".join(STRATEGIES))
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="one chain per strategy and seed")
    ap.add_argument("--dedupe-threshold", type=float, default=0.7, help="suggest's near-duplicate 3-gram Jaccard")
    ap.add_argument("--runs", help="work folder (default runs/active-<recipe>)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N (the full recipe)")
    ap.add_argument("--parallel", type=int, default=1, help="chains at once, each its own process")
    ap.add_argument("--threads", type=int, help="torch threads per chain (default: cores / --parallel)")
    ap.add_argument("--report-only", action="store_true", help="run nothing: page, plot and figures from RUNS")
    ap.add_argument("--out", default=str(PAGE), help="the markdown page (the recipe's section is replaced)")
    ap.add_argument("--chain", help=argparse.SUPPRESS)  # STRATEGY:SEED, one chain in this process (--parallel)
    return ap


def check(ap: Parser, args) -> None:
    """Every option before anything runs: one ``error:`` line and exit 2 for the first bad one."""
    if args.recipe not in RECIPES:
        ap.error(f"--recipe {args.recipe}: use one of {', '.join(RECIPES)}")
    bad = [s for s in args.strategies if s not in STRATEGIES]
    if bad or len(set(args.strategies)) != len(args.strategies):
        ap.error(f"--strategies {' '.join(args.strategies)}: distinct names of {', '.join(STRATEGIES)}")
    if "random" not in args.strategies:
        ap.error("--strategies: include random, the baseline the others are measured against in the same run")
    if len(set(args.seeds)) != len(args.seeds) or min(args.seeds) < 0:
        ap.error(f"--seeds {' '.join(map(str, args.seeds))}: distinct seeds >= 0")
    if args.start_rows < 0 or (args.start_rows and args.recipe != "tfidf"):
        ap.error(f"--start-rows {args.start_rows}: a count >= 0, with --recipe tfidf (a TF-IDF start)")
    for key in ("start", "step", "until", "pool_size", "parallel"):
        if getattr(args, key) < 1:
            ap.error(f"--{key.replace('_', '-')} {getattr(args, key)}: must be at least 1")
    if args.start < 6:  # dev=null holds out a 10% with each label at least once: 2 rows of each of 3 labels
        ap.error(f"--start {args.start}: at least 6 labels, so the held-out 10% can hold each label")
    if args.until < args.start or (args.until - args.start) % args.step:
        ap.error(f"--until {args.until}: --start {args.start} plus a whole number of --step {args.step}")
    if args.pool_size <= args.until:
        ap.error(f"--pool-size {args.pool_size}: more rows than --until {args.until} labels")
    if args.threads is not None and args.threads < 1:
        ap.error(f"--threads {args.threads}: at least 1")
    if not 0 < args.dedupe_threshold <= 1:
        ap.error(f"--dedupe-threshold {args.dedupe_threshold}: a Jaccard similarity in (0, 1]")
    if not re.fullmatch(r"auto|cpu|cuda(:\d+)?", args.device):
        ap.error(f"--device {args.device}: auto, cpu, cuda or cuda:N")
    for key in ("train", "dev"):
        if not Path(getattr(args, key)).is_file():
            ap.error(f"--{key} {getattr(args, key)}: no such file (the real data: set KOELECTRA_SHARED_DATA, or "
                     f"pass --{key})")
    if args.recipe == "full":
        if not args.encoder or not (Path(args.encoder) / "config.json").is_file():
            ap.error(f"--encoder {args.encoder}: the full recipe needs a pretrained encoder folder (config.json)")
        if args.device.startswith("cuda"):
            import torch

            if not torch.cuda.is_available():
                ap.error(f"--device {args.device}: torch sees no CUDA GPU here")
    if args.recipe == "tfidf" and args.encoder:
        ap.error("--encoder: the tfidf recipe trains no encoder; drop it or use --recipe full")
    if args.chain and not re.fullmatch(r"[a-z]+:\d+", args.chain):
        ap.error(f"--chain {args.chain}: STRATEGY:SEED")


def settings(ap: Parser, args, runs: Path) -> Setup:
    """This run's Setup; a RUNS folder made with another one is refused (its rounds are another experiment)."""
    setup = Setup(args.recipe, args.encoder, args.train, args.dev, args.pool_size, args.pool_seed, args.start,
                  args.step, args.until, args.dedupe_threshold, args.start_rows)
    path = runs / "settings.json"
    if path.exists():
        old = json.loads(path.read_text(encoding="utf-8"))
        differ = setup.differs(old)
        if differ:
            ap.error(f"--runs {runs} holds rounds made with other settings ("
                     + ", ".join(f"{k} {old.get(k)} there, {getattr(setup, k)} here" for k in differ)
                     + "); use another --runs or delete it")
    return setup


def save_settings(runs: Path, setup: Setup, command: str) -> None:
    """settings.json: the Setup and every command that ran rounds in RUNS (the report quotes them)."""
    path = runs / "settings.json"
    old = json.loads(path.read_text(encoding="utf-8")) if path.exists() else {}
    commands = old.get("commands", [])
    if command not in commands:
        commands.append(command)
    runs.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({**asdict(setup), "until": max(setup.until, old.get("until", 0)),
                                "commands": commands}, indent=1), encoding="utf-8")


def relative(text: str) -> str:
    """This machine's paths as seen from the repository root (``../shared/data/...``)."""
    return text.replace(f"{ROOT}/", "").replace(f"{ROOT.parent}/", "../")


def shown(argv: list[str]) -> str:
    """The command as typed from the repository root."""
    return relative("python benchmarks/bench_active.py " + shlex.join(argv))


def one_chain(args, setup: Setup, runs: Path, chain: Chain) -> None:
    """A chain in this process, with --threads torch threads."""
    if setup.recipe == "full":
        import torch

        torch.set_num_threads(args.threads or max(1, (os.cpu_count() or 1) // args.parallel))
    dev = read_rows(setup.dev)
    run_chain(chain, setup, runs, dev, device=args.device, say=lambda m: print(m, flush=True))


def spawn_chains(args, argv: list[str], runs: Path, chains: list[Chain]) -> None:
    """Each chain in its own process (this script with --chain), --parallel at a time; a failed chain stops the run
    (the others finish their round first: their lines are kept) and its log's tail is shown."""
    threads = args.threads or max(1, (os.cpu_count() or 1) // args.parallel)
    queue, running, failed = list(chains), [], None
    while (queue and failed is None) or running:
        while queue and failed is None and len(running) < args.parallel:
            chain = queue.pop(0)
            env = dict(os.environ, OMP_NUM_THREADS=str(threads))
            out = open(runs / f"{chain.name}.out", "a", encoding="utf-8")
            cmd = [sys.executable, __file__, *argv, "--chain", f"{chain.strategy}:{chain.seed}",
                   "--threads", str(threads)]
            running.append((subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=env), chain, out))
            print(f"started {chain.name} ({threads} threads; progress in {runs / chain.name}.out)", flush=True)
        time.sleep(1)
        for item in list(running):
            proc, chain, out = item
            if proc.poll() is None:
                continue
            out.close()
            running.remove(item)
            if proc.returncode:
                failed = failed or chain
                tail = (runs / f"{chain.name}.out").read_text(encoding="utf-8", errors="replace").splitlines()[-8:]
                print(f"{chain.name} failed (exit {proc.returncode}); see {runs / chain.name}.log:\n"
                      + "\n".join(tail), file=sys.stderr)
            else:
                print(f"{chain.name} done", flush=True)
    if failed:
        sys.exit(1)


def report(args, runs: Path) -> None:
    """The figures (printed) and the page's recipe section and plot, from RUNS' JSON lines."""
    fig = Figures.read(runs)
    if not fig.rounds:
        sys.exit(f"error: {runs}: no finished rounds yet")
    print("\n".join(table(fig)))
    print(verdict(fig))
    if fig.settings.get("start_rows"):
        print(start_verdict(fig))
    page, key = Path(args.out), section_key(fig.settings)
    png = page.parent / f"{page.stem}-{key}.png"
    plot(fig, png)
    runs_arg = os.path.relpath(runs.resolve(), ROOT)
    text = section(fig, png.name, fig.settings.get("commands", []),
                   shown(["--runs", runs_arg, "--report-only", "--out", os.path.relpath(page.resolve(), ROOT)]),
                   relative)
    write_page(page, text, key)
    print(f"wrote {page} ({key} section) and {png}")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else list(argv)
    ap = options()
    args = ap.parse_args(argv)
    if args.report_only:  # everything but --runs and --out comes from RUNS/settings.json
        if args.runs is None or not (Path(args.runs) / "settings.json").is_file():
            ap.error(f"--report-only needs --runs, a folder a run wrote (no settings.json in {args.runs})")
        with input_errors(ap):  # (RUNS with no finished round: one line, exit 2)
            return report(args, Path(args.runs))
    runs = Path(args.runs or ROOT / "runs" / f"active-{args.recipe}")
    check(ap, args)
    setup = settings(ap, args, runs)
    if args.chain:
        strategy, seed = args.chain.split(":")
        return one_chain(args, setup, runs, Chain(strategy, int(seed)))
    with input_errors(ap):  # the data's own problems (a missing label column, an unknown label) before any chain
        rows = len(read_rows(setup.train).texts)
        read_rows(setup.dev)
    # a pool of more rows than --train has was all of them, recorded as the size asked; the start's rows then came
    # from the pool itself (none is left outside it)
    if setup.pool_size + setup.start_rows > rows:
        ap.error(f"--pool-size {setup.pool_size}" + (f" + --start-rows {setup.start_rows}" if setup.start_rows else "")
                 + f": more than the {rows:,} rows of --train {setup.train}")
    save_settings(runs, setup, shown(argv))
    chains = [Chain(s, seed) for seed in args.seeds for s in args.strategies]
    if args.parallel == 1:
        for chain in chains:
            one_chain(args, setup, runs, chain)
    else:
        spawn_chains(args, argv, runs, chains)
    fig = Figures.read(runs)
    print("\n".join(table(fig)))
    print(verdict(fig))
    if setup.start_rows:
        print(start_verdict(fig))
    print(f"(--report-only --runs {runs} writes the page and the plot; bar measured at {AT:,} labels)")


if __name__ == "__main__":
    main()
