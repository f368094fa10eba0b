"""Labelling speed against transformers' pipeline, quantization accuracy, and memory on a 1M-row file.

    python benchmarks/bench_label.py --model runs/experiments/recipe/ft-cpu30-s1 [--rows 20000] [--big-rows 1000000]

One run, one machine:
(a) ``transformers.pipeline("text-classification")`` on the same model, fed the tokenizer's pre-split text
    (so it gets the same ids), batch size 32 (pre-splitting is done beforehand and NOT counted for it);
(b) ``koelectra-kit label`` with default settings (Kiwi pre-split included in its time), and (c) with --quantize;
rows/s and ratios; quantized vs unquantized accuracy on nsmc3 dev; peak RSS of ``koelectra-kit label`` on a
generated --big-rows CSV (a subprocess, its ru_maxrss).
"""
from __future__ import annotations

import argparse
import csv
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
DEV = ROOT.parent / "shared" / "data" / "nsmc3" / "dev.tsv"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="a fine-tuned model dir (koelectra-kit finetune output)")
    ap.add_argument("--rows", type=int, default=20000)
    ap.add_argument("--big-rows", type=int, default=1_000_000, help="rows of the memory test file (0: skip)")
    args = ap.parse_args()
    if not DEV.exists():
        sys.exit(f"needs {DEV}")
    import pandas as pd
    import torch
    from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast, pipeline

    from koelectra_kit.label import label_file
    from koelectra_kit.tokenizer import KoTokenizer

    dev = pd.read_csv(DEV, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False)
    reps = -(-args.rows // len(dev))
    data = pd.concat([dev] * reps, ignore_index=True).iloc[:args.rows]
    tmp = Path(tempfile.mkdtemp())
    src = tmp / "reviews.csv"
    data[["id", "document", "label"]].to_csv(src, index=False)
    print(f"{len(data):,} reviews from nsmc3/dev; torch {torch.__version__}, {torch.get_num_threads()} threads")

    # (a) transformers pipeline on pre-split text
    tok = KoTokenizer.from_pretrained(args.model)
    presplit = tok.presplit_batch(data["document"].tolist())
    hf_tok = PreTrainedTokenizerFast.from_pretrained(args.model)
    model = AutoModelForSequenceClassification.from_pretrained(args.model)
    pipe = pipeline("text-classification", model=model, tokenizer=hf_tok, device=-1, truncation=True,
                    max_length=128)
    pipe(presplit[:64], batch_size=32)  # warm
    t0 = time.perf_counter()
    pipe_out = pipe(presplit, batch_size=32)
    t_pipe = time.perf_counter() - t0

    # (b), (c) koelectra-kit label
    timings = {}
    for name, q in (("label", False), ("label --quantize", True)):
        t0 = time.perf_counter()
        label_file(args.model, src, tmp / f"out{int(q)}.csv", "document", quantize=q, progress=False)
        timings[name] = time.perf_counter() - t0
    n = len(data)
    print(f"\n{'method':<58}{'rows/s':>10}{'vs pipeline':>13}")
    print(f"{'transformers pipeline, batch 32 (pre-split not timed)':<58}{n / t_pipe:>10,.0f}{1.0:>12.2f}x")
    for name, t in timings.items():
        print(f"{'koelectra-kit ' + name + ' (Kiwi included)':<58}{n / t:>10,.0f}{t_pipe / t:>12.2f}x")

    # accuracy: unquantized vs quantized vs pipeline, on nsmc3 dev labels
    a = pd.read_csv(tmp / "out0.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    b = pd.read_csv(tmp / "out1.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
    m = min(len(dev), n)
    acc_a = (a["pred_label"][:m] == a["label"][:m]).mean()  # the input's own "label" column -> pred_*
    acc_b = (b["pred_label"][:m] == b["label"][:m]).mean()
    agree = (a["pred_label"] == b["pred_label"]).mean()
    pipe_agree = (pd.Series([o["label"] for o in pipe_out]) == a["pred_label"]).mean()
    print(f"\nnsmc3 dev accuracy ({m:,} rows): unquantized {acc_a:.4f}, quantized {acc_b:.4f} "
          f"({(acc_b - acc_a) * 100:+.2f} points); quantized agrees on {agree:.2%} of rows; "
          f"pipeline agrees with label on {pipe_agree:.2%}")

    # memory on a big generated file
    if args.big_rows:
        big = tmp / "big.csv"
        texts = dev["document"].tolist()
        with open(big, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "review"])
            for i in range(args.big_rows):
                w.writerow([i, texts[i % len(texts)]])
        code = ("import resource,sys,time;from koelectra_kit.label import label_file;t=time.time();"
                f"s=label_file({args.model!r},{str(big)!r},{str(tmp / 'big_out.csv')!r},'review',progress=False);"
                "print(s.rows, time.time()-t, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            sys.exit(out.stderr[-2000:])
        rows, secs, rss_kb = out.stdout.split()[-3:]
        print(f"\n{int(rows):,}-row file: {float(secs):.0f}s ({int(rows) / float(secs):,.0f} rows/s), "
              f"peak RSS {int(rss_kb) / 1024 ** 2:.2f} GB (target < 2 GB)")
    print(f"(this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GB)")


if __name__ == "__main__":
    main()
