"""Where Kiwi's morpheme pre-split runs fastest on these cores, and what each faster way changes.

    python benchmarks/bench_kiwi.py [--lines 10000] [--rounds 3]

Kiwi is the slowest step of labelling with a subword vocabulary (benchmarks/bench_label.py): every text it
analyses costs more than the model call. On the first --lines texts of nsmc3 dev (normalized as the default
tokenizer does), this times, in turns, the pre-split the tokenizer runs (Kiwi tokenize + the spans
tokenizer/kiwi.py cuts from its tokens) done the ways issue #19 lists:

- Kiwi's own worker threads: 1 and all cores (the toolkit's default is all cores);
- a process pool: one single-worker Kiwi per core in its own process, texts sent in chunks;
- Kiwi's option settings: without the multi-word dictionary, without the typo-ending dictionary, without
  Z_CODA splitting;
- a word-level cache: each distinct space-separated word analysed once, on its own (no sentence context).

Each row prints texts/s, its ratio to the default measured in the same run, and the share of texts whose
pieces are identical to the default's. A way below 100% changes token ids: a tokenizer trained one way and fed
the other sees different input, so it would have to be a recorded tokenizer setting, never a silent switch.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import time

from common import (NSMC_DEV, Parser, input_errors, interleaved, median, nsmc_texts,  # noqa: E402
                    positive_int, require)  # (benchmarks/common.py)

_WORKER_KIWI = None


def spans_of(kiwi, texts, **kw) -> list:
    """The pre-split spans of each text, by the tokenizer's own path, with a given Kiwi and options."""
    from koelectra_kit.tokenizer.kiwi import presplit_pairs

    return [spans for _, spans in presplit_pairs(texts, kiwi=kiwi, **kw)]


def _init_worker() -> None:
    global _WORKER_KIWI
    os.environ["OMP_NUM_THREADS"] = "1"
    from kiwipiepy import Kiwi

    _WORKER_KIWI = Kiwi(num_workers=1)


def _worker_spans(chunk: list[str]) -> list:
    return spans_of(_WORKER_KIWI, chunk)


def word_cached(kiwi, texts: list[str]) -> list:
    """Spans from analysing each distinct word once, without its sentence (a fresh cache per call)."""
    from koelectra_kit.tokenizer.kiwi import pieces_from_tokens

    cache: dict[str, list] = {}
    split = [t.split(" ") for t in texts]
    new = list(dict.fromkeys(w for ws in split for w in ws if w and w not in cache))
    for w, tokens in zip(new, kiwi.tokenize(iter(new))):
        cache[w] = pieces_from_tokens(w, tokens)
    out = []
    for t, ws in zip(texts, split):
        spans, pos = [], 0
        for w in ws:
            if w:
                spans.extend((pos + a, pos + b) for a, b in cache[w])
            pos += len(w) + 1
        out.append(spans)
    return out


def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--lines", type=positive_int, default=10000, help="texts of nsmc3 dev to time")
    ap.add_argument("--rounds", type=positive_int, default=3, help="rounds in turns (the median is printed)")
    args = ap.parse_args(argv)
    with input_errors(ap):
        require(NSMC_DEV)  # (the texts timed: the real data)
    try:
        import kiwipiepy
        from kiwipiepy import Kiwi
    except ImportError:
        ap.error("kiwipiepy is not installed here, and it is what this benchmark times (pip install kiwipiepy)")

    from koelectra_kit.tokenizer.normalize import NormalizeConfig, Normalizer
    from koelectra_kit.tokenizer.kiwi import kiwi_instance, kiwi_versions

    cores = os.cpu_count() or 1
    norm = Normalizer(NormalizeConfig())
    texts = [norm(t) for t in nsmc_texts(limit=args.lines)]
    print(f"{len(texts):,} normalized texts of nsmc3/dev ({sum(map(len, texts)):,} characters); {cores} cores; "
          f"{kiwi_versions()}; median of {args.rounds} rounds in turns\n")

    default = kiwi_instance(cores)
    one = Kiwi(num_workers=1)
    no_multi = Kiwi(num_workers=cores, load_multi_dict=False)
    no_typo = Kiwi(num_workers=cores, load_typo_dict=False)
    lean = Kiwi(num_workers=cores, load_multi_dict=False, load_typo_dict=False)
    pool = mp.get_context("spawn").Pool(cores, initializer=_init_worker)
    chunk = max(1, len(texts) // (cores * 8))
    chunks = [texts[i:i + chunk] for i in range(0, len(texts), chunk)]
    pool.map(_worker_spans, [texts[:50]] * cores)  # load every worker's Kiwi before the clock starts

    results: dict[str, list] = {}

    def keep(name, fn):
        def run():
            results[name] = fn()
        return run

    ways = {
        f"Kiwi worker threads, {cores} (the default)": lambda: spans_of(default, texts),
        "Kiwi worker threads, 1": lambda: spans_of(one, texts),
        f"process pool, {cores} processes x 1 worker": lambda: [s for c in pool.map(_worker_spans, chunks) for s in c],
        "option: load_multi_dict=False": lambda: spans_of(no_multi, texts),
        "option: load_typo_dict=False": lambda: spans_of(no_typo, texts),
        "option: z_coda=False": lambda: spans_of(default, texts, z_coda=False),
        "options: all three together": lambda: spans_of(lean, texts, z_coda=False),
        "word-level cache (each distinct word once)": lambda: word_cached(default, texts),
    }
    times = interleaved({k: keep(k, v) for k, v in ways.items()}, args.rounds)
    pool.close()
    base_name = next(iter(ways))
    base_t, base = median(times[base_name]), results[base_name]
    print(f"{'way':<48}{'texts/s':>10}{'vs default':>12}{'same pieces':>13}")
    for name in ways:
        t = median(times[name])
        same = sum(a == b for a, b in zip(results[name], base)) / len(base)
        print(f"{name:<48}{len(texts) / t:>10,.0f}{base_t / t:>11.2f}x{same:>12.2%}")
    words = [w for t in texts for w in t.split(" ") if w]
    print(f"\nwords: {len(words):,}, distinct {len(set(words)):,} ({1 - len(set(words)) / len(words):.0%} repeat "
          f"an earlier word); kiwipiepy {kiwipiepy.__version__}")


if __name__ == "__main__":
    t0 = time.perf_counter()
    main()
    print(f"({time.perf_counter() - t0:.0f} s in all)")
