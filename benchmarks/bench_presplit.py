"""Corpus pre-split at scale (issue 31 item 3): today's mode (``kiwi``, each text analysed whole) against the word-level
one (``kiwi_word``, each word alone through the per-process word cache) on a ~1 GB corpus, through the real
``presplit_file`` path (pieces, one process per core), and optionally a kill at a random point and a rerun.

    python benchmarks/bench_presplit.py                        # 1 GB, both modes on all of it (kiwi: ~50 min on 2 AVX-512 cores, ~2 h on AVX2)
    python benchmarks/bench_presplit.py --old-mb 128           # kiwi on the first 128 MB only, see below
    python benchmarks/bench_presplit.py --size-mb 20 --kill    # a quick check, with the kill

The corpus: lines drawn at random (with replacement, seeded) from the shared pretrain/*.txt and lightly perturbed
(a space dropped or added, a syllable's final consonant changed, a ㅋ run, a repeated mark), so it is not one file
repeated, and any prefix of it reads like the whole. Written once under the cache folder ($KOELECTRA_CACHE or
~/.cache/koelectra-kit, or --work), never in the repository, and reused by later runs with the same seed and size.

Each pre-split runs in a child process from a cold start (its own empty cache folder, so no finished pieces and no
words cached), timed there around ``presplit_file``; this process samples the child's process tree (the pre-split
and its worker processes) every 0.1 s for the peak of their summed RSS (copy-on-write pages shared with the parent
count in every process: an upper bound). MB are 2^20 bytes, as in --size-mb. Printed per run: wall time, MB/s, peak RSS, the cache's size; then the
ratio kiwi_word / kiwi in MB/s from the same run.

--old-mb N: today's mode runs on the first N MB of the corpus only (at 0.35 MB/s on 2 AVX-512 cores, 1 GB takes ~50 min;
0.15 MB/s, ~2 hours, on 2 AVX2 cores);
the new mode then runs on that same slice too, for the ratio, and on the whole corpus for its own figures.

--kill: after the timed runs, the new mode again on the whole corpus, killed (SIGKILL of the process; its worker
processes end on their own) at a random point between 15% and 85% of the timed run's wall time, then rerun, and
the cache compared byte for byte with the timed run's (tests/test_presplit_word.py does the same on ~3 MB). Exit
status: 0 when the caches are the same; 1 with one ``error:`` line when they differ (the check failed: a finding
about the pre-split, not about the options); 2 with one ``error:`` line when the run to kill finished before the
kill (nothing was checked: a corpus too small to kill mid-way, raise --size-mb).

Every pre-split child runs with the word file off (``KOELECTRA_WORD_FILE=0``, tokenizer/wordfile.py): with it, a
kiwi_word run started with the words an earlier run (this benchmark's previous call, or the timed run itself) left,
so it was not cold, and the run to kill, warm from the timed run's words, finished before the kill (exit 1, nothing
said).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

from common import PRETRAIN, ROOT, Parser, non_negative_float  # noqa: E402  (benchmarks/common.py)

GENERATOR = 1  # part of the corpus file's name: raise it when ``perturb`` or the drawing changes


def options() -> Parser:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--size-mb", type=float, default=1024, help="corpus size in MB (2^20 bytes)")
    ap.add_argument("--old-mb", type=non_negative_float, default=0, help="time today's mode (kiwi) on the first N "
                    "MB only (0: the whole corpus); the ratio then compares that slice")
    ap.add_argument("--seed", type=int, default=0, help="which lines and perturbations")
    ap.add_argument("--workers", type=int, default=None, help="processes of the pre-split (default: all cores)")
    ap.add_argument("--word-cache", type=int, default=None, help="kiwi_word: words each process keeps (default: "
                    "presplit_file's, a million)")
    ap.add_argument("--kill", action="store_true", help="also kill a kiwi_word pre-split at a random point, rerun "
                    "it, and compare the cache with the timed run's")
    ap.add_argument("--work", default=None, help="folder for the corpus and the caches (default: "
                    "<cache folder>/bench-presplit)")
    ap.add_argument("--keep", action="store_true", help="keep the pre-split caches (the corpus is always kept)")
    ap.add_argument("--progress", action="store_true", help="the pre-split's progress bar (MB/s, ETA) on stderr")
    return ap


def check(ap: Parser, args) -> None:
    if not 1 <= args.size_mb <= 1 << 20:
        ap.error(f"--size-mb must be between 1 and {1 << 20}, got {args.size_mb:g}")
    if args.old_mb < 0 or args.old_mb > args.size_mb:
        ap.error(f"--old-mb must be between 0 (the whole corpus) and --size-mb ({args.size_mb:g}), got "
                 f"{args.old_mb:g}")
    if args.workers is not None and args.workers < 1:
        ap.error(f"--workers must be at least 1, got {args.workers}")
    if args.word_cache is not None and args.word_cache < 0:
        ap.error(f"--word-cache must be >= 0 (0: no cache), got {args.word_cache}")
    if args.work and ROOT in Path(args.work).resolve().parents:
        ap.error(f"--work {args.work} is inside the repository: the corpus and caches are GBs, put them elsewhere")


# -- the corpus
def sources() -> list[Path]:
    found = sorted(PRETRAIN.glob("*.txt"))
    if not found:
        raise SystemExit(f"no {PRETRAIN}/*.txt: benchmarks read the real data beside the repository "
                         "(set KOELECTRA_SHARED_DATA to its folder)")
    return found


def perturb(line: str, rng: random.Random) -> str:
    """The line with each light change applied with probability 0.1: the noise a comment corpus has, and new words
    for the word cache (a changed syllable, two words glued)."""
    if rng.random() < 0.1 and " " in line:  # a space dropped: two words glued
        i = rng.choice([i for i, c in enumerate(line) if c == " "])
        line = line[:i] + line[i + 1:]
    if rng.random() < 0.1 and len(line) > 2:  # a space added inside the line
        i = rng.randrange(1, len(line) - 1)
        line = line[:i] + " " + line[i:]
    if rng.random() < 0.1:  # a typo: a Hangul syllable's final consonant changed (0 of 28: none)
        hangul = [i for i, c in enumerate(line) if "가" <= c <= "힣"]
        if hangul:
            i = rng.choice(hangul)
            base = ord(line[i]) - 0xAC00
            line = line[:i] + chr(0xAC00 + base - base % 28 + rng.randrange(28)) + line[i + 1:]
    if rng.random() < 0.1:  # a ㅋ (or ㅎ, ㅠ) run, glued or after a space
        line += rng.choice(("", " ")) + rng.choice("ㅋㅋㅎㅠ") * rng.randint(2, 12)
    if rng.random() < 0.1:  # a repeated mark
        line += rng.choice("!?.~^") * rng.randint(2, 6)
    return line


def make_corpus(work: Path, size_mb: float, seed: int) -> Path:
    """The seeded corpus of ``size_mb`` MB (whole lines), built once: a line at a time, drawn at random from the
    shared text and perturbed."""
    files = sources()
    stamp = hashlib.sha256(json.dumps([[f.name, f.stat().st_size] for f in files]).encode()).hexdigest()[:8]
    out = work / f"corpus-g{GENERATOR}-s{seed}-{size_mb:g}mb-{stamp}.txt"
    if out.exists():
        return out
    lines = [ln for f in files for ln in f.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    rng = random.Random(seed)
    limit, size = int(size_mb * (1 << 20)), 0
    print(f"writing the {size_mb:g} MB corpus from {len(lines):,} lines of {', '.join(f.name for f in files)} "
          f"-> {out}", flush=True)
    tmp = out.with_name(out.name + ".tmp")
    with open(tmp, "w", encoding="utf-8") as f:
        while True:
            line = perturb(lines[rng.randrange(len(lines))], rng) + "\n"
            n = len(line.encode("utf-8"))
            if size + n > limit:
                break
            f.write(line)
            size += n
    tmp.replace(out)
    return out


def head(path: Path, mb: float) -> Path:
    """The first ``mb`` MB of ``path`` (whole lines), as a file beside it."""
    out = path.with_name(f"{path.stem}.head{mb:g}mb.txt")
    if out.exists():
        return out
    limit, size = int(mb * (1 << 20)), 0
    tmp = out.with_name(out.name + ".tmp")
    with open(path, "rb") as src, open(tmp, "wb") as dst:
        for line in src:
            if size + len(line) > limit:
                break
            dst.write(line)
            size += len(line)
    tmp.replace(out)
    return out


# -- one pre-split in a child process
def child_code(corpus: Path, mode: str, cache: Path, workers: int | None, word_cache: int | None,
               progress: bool) -> str:
    extra = f", word_cache={word_cache}" if word_cache is not None else ""
    return ("import json, sys, time; from koelectra_kit.tokenizer.normalize import NormalizeConfig; "
            "from koelectra_kit.tokenizer import presplit_file; t = time.perf_counter(); "
            f"p = presplit_file({str(corpus)!r}, text_column=None, normalize=NormalizeConfig(), presplit={mode!r}, "
            f"cache_dir={str(cache)!r}, num_workers={workers!r}, progress={progress!r}{extra}); "
            "print(json.dumps({'seconds': time.perf_counter() - t, 'cache': str(p)}))")


def tree_rss(root: int) -> int:
    """Summed RSS in bytes of ``root`` and its descendants, from /proc (Linux)."""
    parents: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/stat", "rb") as f:
                    parents[int(d)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):  # gone meanwhile
                pass
    tree, todo = set(), [root]
    while todo:
        p = todo.pop()
        tree.add(p)
        todo += [c for c, pp in parents.items() if pp == p and c not in tree]
    total = 0
    for p in tree:
        try:
            with open(f"/proc/{p}/statm") as f:
                total += int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
        except (OSError, IndexError, ValueError):
            pass
    return total


class Run:
    """A pre-split child process, its process tree's peak RSS sampled meanwhile."""

    def __init__(self, code: str, progress: bool):
        self.peak = 0
        env = {**os.environ, "KOELECTRA_WORD_FILE": "0"}  # cold: no words from an earlier process (the docstring)
        self.proc = subprocess.Popen([sys.executable, "-c", code], cwd=ROOT, stdout=subprocess.PIPE, text=True,
                                     stderr=None if progress else subprocess.PIPE, env=env)
        self.t0 = time.perf_counter()
        self._sampler = threading.Thread(target=self._sample, daemon=True)
        self._sampler.start()

    def _sample(self) -> None:
        while self.proc.poll() is None:
            self.peak = max(self.peak, tree_rss(self.proc.pid))
            time.sleep(0.1)

    def finish(self) -> dict:
        out, err = self.proc.communicate()
        self.wall = time.perf_counter() - self.t0
        self._sampler.join()
        if self.proc.returncode:
            raise SystemExit(f"the pre-split failed (exit {self.proc.returncode}):\n{(err or '')[-3000:]}")
        return json.loads(out.strip().splitlines()[-1])


def presplit(corpus: Path, mode: str, cache: Path, args) -> dict:
    """One cold pre-split of ``corpus`` in ``mode``: its figures, and the cache file."""
    shutil.rmtree(cache, ignore_errors=True)
    run = Run(child_code(corpus, mode, cache, args.workers, args.word_cache, args.progress), args.progress)
    res = run.finish()
    mb = corpus.stat().st_size / (1 << 20)  # MB as in --size-mb
    res.update(mode=mode, mb=mb, peak=run.peak, wall=run.wall, mbps=mb / res["seconds"],
               cache_bytes=Path(res["cache"]).stat().st_size)
    print(f"  {mode:<10} {mb:>9,.1f} MB  {res['seconds']:>8.1f} s  {res['mbps']:>7.2f} MB/s  peak RSS "
          f"{run.peak / 1e9:>5.2f} GB  cache {res['cache_bytes'] / (1 << 20):>9,.1f} MB   ({corpus.name}; "
          f"{run.wall:.1f} s with the child's start)", flush=True)
    return res


def kill_check(corpus: Path, cache: Path, whole: dict, args, rng: random.Random) -> bool | None:
    """kiwi_word on ``corpus`` killed at a random point, rerun, compared with the uninterrupted run's cache: whether
    the caches are the same, or None when the run finished before the kill (nothing checked)."""
    from koelectra_kit.tokenizer.cache import file_digest

    shutil.rmtree(cache, ignore_errors=True)
    at = rng.uniform(0.15, 0.85) * whole["wall"]
    code = child_code(corpus, "kiwi_word", cache, args.workers, args.word_cache, False)
    run = Run(code, False)
    deadline = run.t0 + at
    while run.proc.poll() is None and time.perf_counter() < deadline:
        time.sleep(0.05)
    if run.proc.poll() is not None:
        print(f"  kill: the run finished before the kill at {at:.1f}s; nothing to check")
        return None
    os.kill(run.proc.pid, signal.SIGKILL)
    run.proc.wait()
    finished = len(list(cache.glob("presplit/.*.parts-*/*.json")))
    print(f"  killed at {at:.1f}s ({at / whole['wall']:.0%} of the timed run) with {finished} piece(s) finished; "
          "rerunning ...", flush=True)
    time.sleep(2)  # the orphaned workers notice their parent is gone within a second (cache._worker_start)
    res = _rerun(corpus, cache, args)  # (its cache folder kept: it continues from the finished pieces)
    same = Path(res["cache"]).name == Path(whole["cache"]).name \
        and file_digest(Path(res["cache"])) == file_digest(Path(whole["cache"]))
    print(f"  rerun: {res['seconds']:.1f}s; cache identical to the uninterrupted run's, byte for byte: "
          f"{'yes' if same else 'NO'}")
    return same


def _rerun(corpus: Path, cache: Path, args) -> dict:
    run = Run(child_code(corpus, "kiwi_word", cache, args.workers, args.word_cache, args.progress), args.progress)
    return run.finish()


def load() -> str:
    return "load average {:.2f} {:.2f} {:.2f}".format(*os.getloadavg())


def main(argv=None) -> int:
    ap = options()
    args = ap.parse_args(argv)
    check(ap, args)
    from koelectra_kit.io.fileio import cache_dir

    work = Path(args.work) if args.work else cache_dir() / "bench-presplit"
    work.mkdir(parents=True, exist_ok=True)
    rng = random.Random(args.seed)
    corpus = make_corpus(work, args.size_mb, args.seed)
    slice_ = head(corpus, args.old_mb) if 0 < args.old_mb < args.size_mb else corpus
    cores = os.cpu_count() or 1
    print(f"start: {load()}; {cores} cores; pre-split processes: {args.workers or 'all cores'}; each run cold "
          "(empty cache folder, fresh processes)", flush=True)
    caches = work / "caches"
    runs = {"old": presplit(slice_, "kiwi", caches / "kiwi", args)}
    if slice_ != corpus:
        runs["new slice"] = presplit(slice_, "kiwi_word", caches / "kiwi_word-slice", args)
    runs["new"] = presplit(corpus, "kiwi_word", caches / "kiwi_word", args)
    same_slice = runs.get("new slice", runs["new"])
    ratio = same_slice["mbps"] / runs["old"]["mbps"]
    if slice_ != corpus:
        print(f"\nkiwi_word / kiwi: {ratio:.2f}x on the same {args.old_mb:g} MB slice (the first {args.old_mb:g} MB "
              f"of the corpus, where kiwi_word's cache is coldest)")
        print(f"kiwi_word on the whole {args.size_mb:g} MB / kiwi on the slice: "
              f"{runs['new']['mbps'] / runs['old']['mbps']:.2f}x ({runs['new']['mbps']:.2f} vs "
              f"{runs['old']['mbps']:.2f} MB/s; kiwi has no cache, so its MB/s does not grow with the corpus)   "
              "(target >= 4x)")
    else:
        print(f"\nkiwi_word / kiwi: {ratio:.2f}x on the whole {args.size_mb:g} MB   (target >= 4x)")
    peak = max(r["peak"] for r in runs.values())
    print(f"peak RSS of any run's process tree: {peak / 1e9:.2f} GB   (target < 3 GB)")
    same = True
    if args.kill:
        same = kill_check(corpus, caches / "kiwi_word-killed", runs["new"], args, rng)
    print(f"end: {load()} (figures from a machine with load above ~{cores + 0.5:g} on {cores} cores are provisional)")
    if not args.keep:
        shutil.rmtree(caches, ignore_errors=True)
    if same is None:
        print(f"error: --kill checked nothing: the run to kill finished before the kill (the {args.size_mb:g} MB "
              "corpus pre-splits too fast to kill mid-way; raise --size-mb)", file=sys.stderr)
        return 2
    if not same:  # the check's own finding (exit 1, as the docstring says): the rerun's cache is not the timed run's
        print("error: --kill: the cache of the killed and rerun pre-split differs from the uninterrupted run's",
              file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
