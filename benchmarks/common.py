"""What every benchmark shares: where the repository and the real data are, and one way to time competitors.

Timings on a shared, noisy machine: each competitor runs in turns (A B A B ...), so a neighbour that slows the
machine slows both, and the median of the turns is reported; read the ratios, not the absolute figures."""
from __future__ import annotations

import argparse
import contextlib
import math
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Callable

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:  # the repository's package, also without an install
    sys.path.insert(0, str(ROOT))
SHARED = Path(os.environ.get("KOELECTRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
NSMC_DEV = SHARED / "nsmc3" / "dev.tsv"
NSMC_TRAIN = SHARED / "nsmc3" / "train.tsv"
if not NSMC_TRAIN.exists() and NSMC_TRAIN.with_suffix(".parquet").exists():  # a GPU lease's bundle (gpu_bundle.py)
    NSMC_TRAIN = NSMC_TRAIN.with_suffix(".parquet")
PRETRAIN = SHARED / "pretrain"


class Parser(argparse.ArgumentParser):
    """A benchmark's options: bad input answered in one ``error:`` line, exit 2, as every koelectra-kit command."""

    def error(self, message: str):
        self.exit(2, f"error: {message}\n")


def positive_int(text: str) -> int:
    """An option's whole number >= 1 (rows, rounds, repeats): 0 or less gave a traceback (a median of no rounds) or
    timed another run than asked (--lines -5 timed every text) in the scripts that took any int."""
    return _whole(text, 1)


def non_negative_int(text: str) -> int:
    """An option's whole number >= 0 (where 0 means none or all, as its help says)."""
    return _whole(text, 0)


def _whole(text: str, least: int) -> int:
    try:
        n = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number >= {least}") from None
    if n < least:
        raise argparse.ArgumentTypeError(f"{text!r}: a whole number >= {least}")
    return n


def positive_float(text: str) -> float:
    """An option's number > 0 (a reference rate, minutes): 0, a negative number, nan or inf were taken, and a
    ratio to them printed as a figure (or divided by zero at the end of the run)."""
    return _number(text, "a number > 0", lambda x: x > 0)


def non_negative_float(text: str) -> float:
    """An option's number >= 0 (where 0 means none or all, as its help says); nan and inf are no number here."""
    return _number(text, "a number >= 0", lambda x: x >= 0)


def _number(text: str, what: str, ok: Callable[[float], bool]) -> float:
    try:
        x = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: {what}") from None
    if not math.isfinite(x) or not ok(x):
        raise argparse.ArgumentTypeError(f"{text!r}: {what}")
    return x


def output_file(text: str) -> str:
    """A file a benchmark writes when it is done (--json PATH): its folder must exist and be writable now, not be
    found missing after the whole run (the figures lost with it); a folder is no file to write."""
    path = Path(text)
    folder = path.parent
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: a folder; give a file path")
    if not folder.is_dir():
        raise argparse.ArgumentTypeError(f"{text}: no folder {folder} to write it in (make it first)")
    if not os.access(folder, os.W_OK | os.X_OK) or (path.exists() and not os.access(path, os.W_OK)):
        raise argparse.ArgumentTypeError(f"{text}: not writable by this user")
    return text


@contextlib.contextmanager
def input_errors(ap: argparse.ArgumentParser, what: str = ""):
    """The toolkit's input errors (koelectra_kit.errors.KitError: a folder that is no model or tokenizer, a table
    without its label column, a device that is none) and a helper's one-line ``SystemExit("error: ...")`` as the
    benchmark's one ``error:`` line, exit 2 (``ap.error``), not a traceback or exit 1; ``what`` (an option and its
    value) goes first. A multi-line SystemExit (a child command's output) passes as it is."""
    from koelectra_kit.errors import KitError

    try:
        yield
    except KitError as e:
        ap.error(f"{what}: {e}" if what else str(e))
    except SystemExit as e:
        if isinstance(e.code, str) and "\n" not in e.code.strip():
            ap.error(e.code.strip().removeprefix("error: "))
        raise


def check_classifiers(ap: argparse.ArgumentParser, folders: list[tuple[str, object]]) -> None:
    """Each option's classifier folder loaded as `label` loads it (``Classifier.load``), before anything is timed: a
    folder that is no classifier (no config.json, a tokenizer alone, a damaged weights file) is one ``error:`` line
    naming the option, not a traceback at the first labelling, after the others' warm-up."""
    from koelectra_kit.classify.classifier import Classifier

    for option, folder in folders:  # (option, folder): --model runs/x, --model runs/x/tfidf
        with input_errors(ap, f"{option} {folder}"):
            Classifier.load(folder, device="cpu")


def shape_file(shape: str) -> Path | None:
    """The YAML a ``--shape`` names: a path ending in .yaml, a pretraining preset (configs/pretrain/<shape>.yaml), or
    a benchmark-only shape (benchmarks/shapes/<shape>.yaml: a bar's shape that no preset keeps); None when none is."""
    candidates = [Path(shape)] if shape.endswith(".yaml") else [ROOT / "configs" / "pretrain" / f"{shape}.yaml",
                                                                 ROOT / "benchmarks" / "shapes" / f"{shape}.yaml"]
    return next((p for p in candidates if p.is_file()), None)


def check_model_options(ap, shape: str | None, tokenizer: str | None = None, presplit: str | None = None,
                        folders=()) -> None:
    """--shape, --tokenizer, --presplit and the model folders a benchmark was given, checked before anything is
    built: one ``error:`` line (``ap.error``) for a shape that is none, a folder without a tokenizer, or a
    --presplit whose tokenizer has no koelectra_tokenizer.json to rewrite (``bench_label.random_model_like``)."""
    if shape and shape_file(shape) is None:
        ap.error(f"--shape {shape}: no such YAML, preset or benchmark shape ({', '.join(shape_names())})")
    for d in [tokenizer, *folders]:
        if d and not Path(d, "koelectra_tokenizer.json").exists() and not Path(d, "tokenizer.json").exists():
            ap.error(f"{d}: not a model or tokenizer folder (no tokenizer.json)")
    source = tokenizer or next((d for d in folders if d), None)
    if presplit and source and not Path(source, "koelectra_tokenizer.json").exists():
        ap.error(f"--presplit rewrites a koelectra-kit tokenizer's pre-split mode, and {source} has no "
                 "koelectra_tokenizer.json")


def shape_names() -> list[str]:
    """What ``--shape`` takes by name: the pretraining presets and the benchmark-only shapes."""
    return sorted(p.stem for folder in (ROOT / "configs" / "pretrain", ROOT / "benchmarks" / "shapes")
                  for p in folder.glob("*.yaml"))


def require(path: Path) -> Path:
    """A data file a benchmark cannot run without: a clear exit when it is absent (a clone without the data)."""
    if not path.exists():
        raise SystemExit(f"{path} not found: benchmarks read the real data beside the repository "
                         "(set KOELECTRA_SHARED_DATA to its folder)")
    return path


def nsmc_texts(path: Path = NSMC_DEV, limit: int | None = None) -> list[str]:
    """The review texts of an nsmc3 split (TSV, unquoted: a quote is text; or a GPU bundle's Parquet of it)."""
    if Path(path).suffix == ".parquet":
        import pyarrow.parquet as pq

        texts = pq.read_table(require(path), columns=["document"]).column("document").to_pylist()
        return [t or "" for t in texts[:limit]]
    texts = []
    with open(require(path), encoding="utf-8") as f:
        next(f)
        for line in f:
            texts.append(line.rstrip("\n").split("\t")[4])
            if limit and len(texts) == limit:
                break
    return texts


def interleaved(competitors: dict[str, Callable[[], object]], rounds: int, sync: Callable[[], None] = lambda: None,
                warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each competitor, run in turns for ``rounds`` rounds after ``warmup`` untimed calls."""
    for _ in range(warmup):
        for fn in competitors.values():
            fn()
    times: dict[str, list[float]] = {name: [] for name in competitors}
    for _ in range(rounds):
        for name, fn in competitors.items():
            sync()
            t = time.perf_counter()
            fn()
            sync()
            times[name].append(time.perf_counter() - t)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)
