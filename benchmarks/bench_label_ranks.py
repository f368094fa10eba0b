"""`label` as one process on every core vs under `torchrun` as N processes, the cores split between them (each rank
a shard, rank 0 joining them: label/torchrun.py), on the same file, as a user runs each command (process start and
model load included), in turns.

    python benchmarks/bench_label_ranks.py --model runs/quickstart/sentiment --shape cpu-30min --rows 20000

On one GPU per rank the split is the point; on a CPU the question is whether N processes with a share of the cores
each beat one process that already spreads its batches over every core (docs/scale-out.md). On one GPU shared by N
ranks (rank R takes GPU R mod their count), whether N processes' host work (reading, normalizing, tokenizing,
writing: one core each) outruns one process's on a file big enough to pay for their starts:

    python benchmarks/bench_label_ranks.py --shape gpu-10min-subword --tokenizer TOK --presplit none --device cuda \
        --ranks 4 --rows 150000 --precision auto

Rows: the first ``--rows`` texts of nsmc3 train. The outputs are compared row by row: every label the same in fp32 (a
shard's batches differ, so in bf16 a label may differ where two classes are within 0.01). Without --model, --shape
and --tokenizer make a random-init classifier (speed depends on the shape, not the weights; ``bench_label``'s
``random_model_like``), so no fine-tuned model and, with ``--presplit none``, no Kiwi are needed.
"""
from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from common import (NSMC_TRAIN, ROOT, Parser, check_model_options, input_errors, interleaved,  # noqa: E402
                    median, nsmc_texts, require)  # (benchmarks/common.py)


def label_command(model: str, src: Path, out: Path, ranks: int, precision: str, device: str = "auto") -> list[str]:
    label = ["-m", "koelectra_kit", "label", "--model", model, "--input", str(src), "--text-column", "review",
             "--output", str(out), "--overwrite", "--no-progress", "--precision", precision, "--device", device]
    if ranks == 1:
        return [sys.executable, *label]
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc_per_node={ranks}", *label]


def said(stderr: str, head: int = 3000, tail: int = 2000) -> str:
    """A failed command's stderr, shortened: its beginning (what the ranks said, torchrun's launcher writes last)
    and its end (the launcher's summary: which rank failed and how)."""
    if len(stderr) <= head + tail:
        return stderr
    return f"{stderr[:head]}\n[... {len(stderr) - head - tail:,} characters ...]\n{stderr[-tail:]}"


def labels_of(path: Path) -> list[str]:
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")["label"].tolist()


def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", help="a fine-tuned classifier folder (its tokenizer and labels)")
    ap.add_argument("--shape", help="time a random-init classifier of this pretrain preset's shape instead (speed "
                                    "depends on the shape, not the weights)")
    ap.add_argument("--tokenizer", help="with --shape: this tokenizer folder's vocabulary (instead of --model's; "
                                        "then --model may be left out: nsmc3's three labels)")
    ap.add_argument("--presplit", choices=["kiwi", "kiwi_word", "none"],
                    help="with --shape: the tokenizer's pre-split mode rewritten (none: no Kiwi needed)")
    ap.add_argument("--device", default="auto", help="label's --device (default auto: a GPU where there is one)")
    ap.add_argument("--rows", type=int, default=20_000)
    ap.add_argument("--ranks", type=int, default=2, help="torchrun processes (default 2)")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--precision", default="fp32", choices=["fp32", "bf16", "auto"])
    args = ap.parse_args(argv)
    if args.rows < 1 or args.ranks < 2 or args.rounds < 1:
        ap.error("--rows and --rounds must be at least 1, --ranks at least 2")
    if not args.model and not (args.shape and args.tokenizer):
        ap.error("give --model, or --shape with --tokenizer")
    if (args.tokenizer or args.presplit) and not args.shape:
        ap.error("--tokenizer and --presplit go with --shape (they make its random-init classifier)")
    check_model_options(ap, args.shape, args.tokenizer, args.presplit, [args.model])
    from koelectra_kit.runtime import resolve_device

    with input_errors(ap):
        resolve_device(args.device)  # here, before the model and the file are made (each command checks it again)
        require(NSMC_TRAIN)  # (the texts labelled: the real data)
    cores = os.cpu_count() or 1
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        model = args.model
        if args.shape:
            from bench_label import random_model_like

            model = random_model_like(args.model, args.shape, tmp / "model", tokenizer=args.tokenizer,
                                      presplit=args.presplit, labels=["negative", "neutral", "positive"])
        src = tmp / "reviews.csv"
        import pandas as pd

        pd.DataFrame({"review": nsmc_texts(NSMC_TRAIN, args.rows)}).to_csv(src, index=False)
        outs = {1: tmp / "one.csv", args.ranks: tmp / "ranks.csv"}
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
        env.pop("OMP_NUM_THREADS", None)  # each command picks its threads: all cores, or the cores split by rank
        env.setdefault("PYTHONFAULTHANDLER", "1")  # a rank killed by a signal (SIGABRT, SIGSEGV) says where it was

        def run(ranks):
            def go():
                command = label_command(model, src, outs[ranks], ranks, args.precision, args.device)
                proc = subprocess.run(command, env=env, capture_output=True, text=True, cwd=tmp)
                if proc.returncode:
                    raise SystemExit(f"error: {' '.join(proc.args[:8])} ... failed:\n{said(proc.stderr)}")
            return go

        names = {"one process, every core": 1, f"torchrun, {args.ranks} processes": args.ranks}
        times = interleaved({name: run(r) for name, r in names.items()}, args.rounds)
        one, many = labels_of(outs[1]), labels_of(outs[args.ranks])
        same = sum(a == b for a, b in zip(one, many))
        print(f"label, {args.rows:,} nsmc3 train reviews, {cores} cores, device {args.device}, {args.precision}; "
              f"model {args.shape or model}; "
              f"median of {args.rounds} rounds in turns (process start and model load included):")
        base = median(times["one process, every core"])
        for name, ts in times.items():
            t = median(ts)
            print(f"  {name:<28} {t:7.1f} s  {args.rows / t:8,.0f} rows/s  {base / t:5.2f}x")
        print(f"  labels: {same:,} of {len(one):,} rows the same in both outputs"
              + ("" if len(one) == len(many) == args.rows else f" (row counts {len(one)} vs {len(many)}: WRONG)"))


if __name__ == "__main__":
    main()
