"""How often does a corpus pre-split's word cache miss? (issue 31) Replays one pre-split process's words through
LRU caches of several sizes, as ``wordsplit.WordCache`` keeps them (batches of distinct words, most recent last),
and prints the share of words that would go to Kiwi. No Kiwi, no timing: counts only.

    python examples/experiments/word_cache_replay.py ~/.cache/koelectra-kit/bench-presplit/corpus-g1-s0-1024mb-*.txt \\
        --sizes 200000 1000000 2000000 --report-mb 128

The corpus is benchmarks/bench_presplit.py's (written there on its first run). A pre-split with two processes
gives each every other 16 MB piece; this replays process 0's pieces (--processes 1: every piece).
"""
from __future__ import annotations

import argparse
from collections import OrderedDict

PIECE = 16 << 20  # koelectra_kit.tokenizer.cache.PIECE_BYTES
BATCH = 20_000  # words per lookup, about a 2,048-text chunk of reviews


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("corpus")
    ap.add_argument("--sizes", type=int, nargs="+", default=[200_000, 1_000_000, 2_000_000])
    ap.add_argument("--processes", type=int, default=2)
    ap.add_argument("--report-mb", type=float, default=128, help="print the running miss share every N MB read")
    args = ap.parse_args()
    caches = [OrderedDict() for _ in args.sizes]
    misses, words = [0] * len(args.sizes), 0

    def feed(batch: list[str]) -> None:
        nonlocal words
        words += len(batch)
        for k, (cap, d) in enumerate(zip(args.sizes, caches)):
            for w in dict.fromkeys(batch):
                if w in d:
                    d.move_to_end(w)
                else:
                    misses[k] += 1
                    d[w] = None
                    if len(d) > cap:
                        d.popitem(last=False)

    def line(read: int) -> str:
        return f"{read / (1 << 20):>8,.0f} MB read, {words:>12,} words: " + ", ".join(
            f"{cap:,} -> {m / max(words, 1):.1%} missed" for cap, m in zip(args.sizes, misses))

    read = piece_bytes = piece = 0
    next_report = args.report_mb * (1 << 20)
    batch: list[str] = []
    with open(args.corpus, encoding="utf-8") as f:
        for text in f:
            n = len(text.encode("utf-8"))
            read += n
            piece_bytes += n
            if piece % args.processes == 0:
                batch.extend(text.split())
                if len(batch) >= BATCH:
                    feed(batch)
                    batch = []
            if piece_bytes >= PIECE:
                piece, piece_bytes = piece + 1, 0
            if read >= next_report:
                print(line(read), flush=True)
                next_report += args.report_mb * (1 << 20)
    feed(batch)
    print(line(read) + "  (the whole corpus)")


if __name__ == "__main__":
    main()
