"""Does the word-level pre-split cost accuracy? (issue 31) Two ``cpu-30min-subword`` pretraining runs per pre-split
mode (``kiwi``: Kiwi on each text whole; ``kiwi_word``: each word alone, memoized), the preset's 30-minute step
budget (10,023 steps), each tokenizer trained by its mode's first run and reused by the second; every encoder
fine-tuned on all 150,000 nsmc3 rows with 2 seeds (the encoder alone: ``ensemble=none``), scored on nsmc3 dev.

    python examples/experiments/presplit_quality.py --corpus runs/l30/corpus-general.txt --runs runs/gpu \\
        --parallel 4 --out docs/results/presplit-word.md

The table lists dev macro-F1 at every evaluation step, so runs stopped early (``--report-only`` on what exists)
are compared with the others at the same step. Finished runs are reused.
"""
from __future__ import annotations

import json
from pathlib import Path

from common import DEV, TRAIN, parser, run_many

STEPS = 10023  # cpu-30min-subword's 30 minutes on the 2-core AVX-512 machine (docs/results/recipe_cpu-30min-subword.md)
ENCODERS = {"k1": ("kiwi", 1), "k2": ("kiwi", 2), "w1": ("kiwi_word", 1), "w2": ("kiwi_word", 2)}


def pretrain_argv(runs: Path, name: str, corpus: str) -> list[str]:
    mode, seed = ENCODERS[name]
    first = f"{name[0]}1"
    tok = [f"presplit={mode}"] if name == first else [f"tokenizer={runs / 'pt' / first / 'tokenizer'}"]
    return ["pretrain", "--config", "cpu-30min-subword", f"corpus={corpus}", f"out={runs / 'pt' / name}",
            f"seed={seed}", f"max_steps={STEPS}", "max_minutes=0", "threads=1", "progress=false", "plots=false", *tok]


def finetune_argv(runs: Path, name: str, seed: int) -> list[str]:
    return ["finetune", "--config", "sentiment", f"model={runs / 'pt' / name / 'discriminator'}", f"train={TRAIN}",
            f"dev={DEV}", f"out={runs / 'ft' / f'{name}-s{seed}'}", f"seed={seed}", "ensemble=none",
            "references=false", "progress=false", "plots=false"]


def evals(runs: Path, run: str) -> tuple[dict[int, float], bool]:
    """{step: dev macro-F1} of a fine-tune, and whether it finished (a stopped one is read from its partial folder)."""
    done = runs / "ft" / run / "metrics.jsonl"
    paths = [done] if done.exists() else sorted((runs / "ft").glob(f".{run}.partial-*/metrics.jsonl"))
    if not paths:
        return {}, False
    rows = [json.loads(line) for line in paths[0].read_text().splitlines() if '"eval"' in line]
    return {r["step"]: r["macro_f1"] for r in rows}, done.exists()


def pretrain_row(runs: Path, name: str) -> str:
    log = (runs / "logs" / f"pt-{name}.log")
    last = [ln for ln in log.read_text().splitlines() if ln.startswith("step ")][-1] if log.exists() else ""
    s = json.loads((runs / "pt" / name / "summary.json").read_text())
    fields = dict(part.strip().split(" ", 1) for part in last.split("|")[2:4]) if last else {}
    return (f"| {name} | {ENCODERS[name][0]} | {ENCODERS[name][1]} | {s['steps']:,} | {s['tokens'] / 1e6:.1f}M | "
            f"{fields.get('gen', '-')} | {fields.get('disc', '-')} |")


def report(runs: Path) -> str:
    names = [f"{e}-s{s}" for e in ENCODERS for s in (1, 2)]
    curves = {n: evals(runs, n) for n in names}
    steps = sorted({st for c, _ in curves.values() for st in c})
    out = ["| fine-tune (encoder-seed) | pre-split | " + " | ".join(f"{st:,}" for st in steps) + " | best | finished |",
           "|---|---|" + "---:|" * (len(steps) + 1) + "---|"]
    for n, (c, fin) in curves.items():
        best = f"{max(c.values()):.4f}" if c else "-"
        out.append(f"| {n} | {ENCODERS[n[:2]][0]} | " + " | ".join(f"{c[st]:.4f}" if st in c else "-" for st in steps)
                   + f" | {best if fin else '(' + best + ')'} | {'yes' if fin else 'no'} |")
    for mode in ("kiwi", "kiwi_word"):
        ms = [n for n in names if ENCODERS[n[:2]][0] == mode]
        means = [sum(curves[n][0][st] for n in ms) / len(ms) if all(st in curves[n][0] for n in ms) else None
                 for st in steps]
        out.append(f"| **mean, {mode}** | | " + " | ".join("-" if m is None else f"{m:.4f}" for m in means) + " | | |")
    pre = ["| encoder | pre-split | pretraining seed | steps | tokens | generator loss, acc (last log) | "
           "discriminator loss, AUC (last log) |", "|---|---|---:|---:|---:|---|---|"]
    pre += [pretrain_row(runs, n) for n in ENCODERS if (runs / "pt" / n / "summary.json").exists()]
    return "\n".join(["**Fine-tuning: dev macro-F1 at each evaluation step** (150,000 rows, 3 epochs = 14,064 steps; "
                      "best: the checkpoint kept, in brackets when the run did not finish)", "", *out, "",
                      "**Pretraining**", "", *pre, ""])


def main() -> None:
    ap = parser(__doc__)
    ap.add_argument("--corpus", default="runs/l30/corpus-general.txt", help="the pretraining text")
    ap.set_defaults(runs="runs/presplit-quality")
    ap.add_argument("--out", help="write the markdown tables here")
    ap.add_argument("--report-only", action="store_true", help="run nothing: tables from what --runs holds")
    ap.add_argument("--note", default="", help="a line on where and how the runs were made, for the page")
    args = ap.parse_args()
    runs = Path(args.runs)
    if not args.report_only:
        firsts = [n for n in ENCODERS if n.endswith("1")]
        for group in (firsts, [n for n in ENCODERS if n not in firsts]):  # the second runs reuse the tokenizers
            run_many([(pretrain_argv(runs, n, args.corpus), runs / "logs" / f"pt-{n}.log") for n in group
                      if not (runs / "pt" / n / "summary.json").exists()], args.parallel)
        run_many([(finetune_argv(runs, n, s), runs / "ft" / f"{n}-s{s}.log") for n in ENCODERS for s in (1, 2)
                  if not (runs / "ft" / f"{n}-s{s}" / "eval.json").exists()], args.parallel)
    command = (f"python examples/experiments/presplit_quality.py --runs {args.runs}"
               + (" --report-only" if args.report_only else "") + (f" --out {args.out}" if args.out else ""))
    text = "\n".join(["# The word-level pre-split: pretraining quality (issue 31)", "",
                       f"_Generated by `{command}`._ {args.note}".rstrip(), "", report(runs)])
    print(text)
    if args.out:
        Path(args.out).write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
