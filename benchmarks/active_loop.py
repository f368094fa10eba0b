"""One chain of bench_active's simulated analyst: a strategy and a seed, rounds in order. Each round writes the
labels so far as the app's LABELS.csv would hold them, retrains with the app's recipe, scores every folder on the
real dev set, asks the best folder (on its own held-out 10%) for the next rows exactly as ``koelectra-kit suggest``
picks them, and appends one JSON line. The pool's labels answer for the analyst.

    rounds = run_chain(Chain("margin", 1), setup, Path("runs/active"), dev)

Resumable: a round's line is written only when the round is complete, and holds the labelled rows and the next
picks, so a killed chain continues with the round after its last line (a half-trained folder is redone). Only the
last round's model folder is kept (the one a longer ``--until`` would select from): an encoder per round at 20
rounds x 4 chains would fill a disk.
"""
from __future__ import annotations

import contextlib
import csv
import json
import os
import shutil
import time
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import numpy as np

from koelectra_kit.classify.predictions import Predictions

RECIPES = ("tfidf", "full")
FOLDERS = {"full": ("encoder", "tfidf", "ensemble"), "tfidf": ("tfidf",)}


@dataclass
class Setup:
    """What a run is: RUNS/settings.json holds it, and a resumed run must agree (``--until`` may grow)."""

    recipe: str
    encoder: str | None
    train: str
    dev: str
    pool_size: int
    pool_seed: int
    start: int
    step: int
    until: int
    dedupe_threshold: float
    start_rows: int = 0  # > 0: rounds start from a TF-IDF model fitted on this many --train rows outside the pool

    def differs(self, other: dict) -> list[str]:
        """Keys whose values would make finished rounds a different experiment than this one (a key an older
        settings.json lacks has its default)."""
        defaults = {f.name: f.default for f in fields(self)}
        return [k for k, v in asdict(self).items() if k != "until" and other.get(k, defaults[k]) != v]

    @property
    def sizes(self) -> list[int]:
        return list(range(self.start, self.until + 1, self.step))


@dataclass
class Chain:
    strategy: str
    seed: int

    @property
    def name(self) -> str:
        return f"{self.strategy}-s{self.seed}"


@dataclass
class Rows:
    """Labelled rows of a table: texts and class indices into ``labels``."""

    texts: list[str]
    y: np.ndarray
    labels: list[str]


def sentiment_config(overrides: list[str]):
    """The app's recipe: ``finetune``'s shipped ``sentiment`` defaults and only the overrides given."""
    from koelectra_kit.config import load_config
    from koelectra_kit.finetune import FinetuneConfig

    return load_config(FinetuneConfig, "sentiment", overrides)


def read_rows(path: str, limit: int | None = None, seed: int = 0, start: int = 0) -> Rows:
    """A labelled table (nsmc3's TSV, any table ``finetune`` reads) with the sentiment labels; ``limit``: a seeded
    sample of that many rows, kept in file order (the pool); ``start`` > 0: instead, ``start`` rows of the same draw
    that are not in the pool (what the starting model was fitted on)."""
    from koelectra_kit.finetune import read_labelled

    labels = sentiment_config([]).labels
    data = read_labelled(path, labels)
    texts, y = data.texts, data.y
    if limit is not None and limit < len(texts):
        keep = np.sort(np.random.default_rng(seed).choice(len(texts), limit, replace=False))
        if start:  # drawn from the rows the pool left (the pool's own draw is unchanged)
            rest = np.setdiff1d(np.arange(len(texts)), keep)
            keep = np.sort(np.random.default_rng(seed + 1).choice(rest, min(start, len(rest)), replace=False))
        texts, y = [texts[i] for i in keep], y[keep]
    return Rows(texts, y, labels)


class Unfitted:
    """No model yet (round 0): equal probabilities, so ``suggest_rows(strategy="random")`` draws the first labels
    with the same duplicate and near-duplicate rules as every later round."""

    def __init__(self, labels: list[str]):
        self.labels = labels

    def predict(self, texts, batch_size: int = 128, **_) -> Predictions:
        probs = np.full((len(texts), len(self.labels)), 1 / len(self.labels), dtype=np.float32)
        return Predictions([self.labels[0]] * len(texts), probs)


class Answered:
    """A member whose predictions on one text list are known: lets the ensemble be scored on dev from its members'
    predictions (the encoder runs once on dev, not twice) with the ensemble's own averaging code."""

    def __init__(self, clf, texts: list[str], probs: np.ndarray):
        self.labels, self.texts, self.probs = clf.labels, texts, probs

    def predict(self, texts, batch_size: int = 128, **_) -> Predictions:
        assert texts is self.texts or list(texts) == self.texts, "Answered knows one text list only"
        return Predictions([], self.probs)


def pick(clf, pool: Rows, labelled: list[int], n: int, strategy: str, seed: int, threshold: float):
    """The next ``n`` pool rows as ``koelectra-kit suggest`` picks them (labelled texts excluded)."""
    from koelectra_kit.suggest.rows import suggest_rows

    return suggest_rows(clf, pool.texts, n, strategy, exclude=[pool.texts[i] for i in labelled],
                        threshold=threshold, seed=seed)


def write_labels(path: Path, pool: Rows, rows: list[int]) -> None:
    """LABELS.csv as the app appends it: one row per answer, in the order answered."""
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f)
        w.writerow(["row", "review", "label"])
        for i in rows:
            w.writerow([i, pool.texts[i], pool.labels[pool.y[i]]])


def retrain(setup: Setup, labels: Path, out: Path, seed: int, device: str) -> tuple[str, dict]:
    """Train on ``labels`` with the recipe, writing ``out``; returns (the folder best on the held-out 10%, the
    held-out scores of each folder). Both recipes hold out ``dev=null``'s stratified 10%, as the app does."""
    common = [f"train={labels}", "dev=null", f"out={out}", f"seed={seed}", "plots=false"]
    if setup.recipe == "tfidf":
        from koelectra_kit.finetune.baseline import run_baseline

        result = run_baseline(sentiment_config(common))
        return "tfidf", {"tfidf": _scores(result["dev"])}
    from koelectra_kit.app.retrain import finetune_args
    from koelectra_kit.finetune import finetune

    # the app's own retrain arguments (teach mode), so the simulation cannot drift from what the page runs
    result = finetune(sentiment_config(finetune_args(setup.encoder, labels, out, seed=seed,
                                                     overrides=[f"device={device}"])))
    c = result["candidates"]
    return c["best"], {k: _scores(v) for k, v in c["scores"].items()}


def load_folders(recipe: str, out: Path, device: str) -> dict:
    """Each folder the round wrote, loaded as ``Classifier.load`` loads it for ``suggest`` and ``label``."""
    from koelectra_kit.classify.classifier import Classifier

    if recipe == "tfidf":
        return {"tfidf": Classifier.load(out)}
    ens = Classifier.load(out / "ensemble", device=device)  # its members are the encoder (..) and ../tfidf
    members = dict(zip(ens.paths, ens.members))
    return {"encoder": members[".."], "tfidf": members["../tfidf"], "ensemble": ens}


def score(folders: dict, dev: Rows) -> dict:
    """Dev accuracy and macro-F1 of each folder."""
    from koelectra_kit.classify.ensemble import EnsembleClassifier
    from koelectra_kit.classify.metrics import classification_report

    probs = {}
    for name, clf in folders.items():
        if isinstance(clf, EnsembleClassifier):
            answered = [Answered(m, dev.texts, probs[n]) for m, n in zip(clf.members, ("encoder", "tfidf"))]
            clf = EnsembleClassifier(answered, clf.weights, clf.labels)
        probs[name] = np.asarray(clf.predict(dev.texts).probs, dtype=np.float64)
    return {name: _scores(classification_report(dev.y, p.argmax(1), dev.labels, scores=p))
            for name, p in probs.items()}


def _scores(report: dict) -> dict:
    return {"macro_f1": round(float(report["macro_f1"]), 6), "accuracy": round(float(report["accuracy"]), 6)}


def read_rounds(path: Path) -> list[dict]:
    """The chain's finished rounds (a torn last line, from a kill mid-write, is not a round)."""
    if not path.exists():
        return []
    rounds = []
    for line in path.read_text(encoding="utf-8").splitlines():
        try:
            rounds.append(json.loads(line))
        except json.JSONDecodeError:
            break
    return rounds


def append_round(path: Path, record: dict) -> None:
    text = path.read_text(encoding="utf-8") if path.exists() else ""
    if text and not text.endswith("\n"):  # drop a torn line so the new one starts on its own
        path.write_text(text[:text.rfind("\n") + 1], encoding="utf-8")
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(record) + "\n")
        f.flush()
        os.fsync(f.fileno())


def rounds_to_run(setup: Setup, chain: Chain, done: int, labelled, say):
    """(round, labels) of the rounds after the ``done`` finished ones, while the pool has rows for them
    (``labelled()``: the rows labelled so far, read as the loop goes)."""
    for r, size in enumerate(setup.sizes):
        if r < done:
            continue
        if len(labelled()) < size:
            say(f"{chain.name}: the pool has no more distinct unlabelled rows ({len(labelled())} labelled); stopped")
            return
        yield r, size


def run_chain(chain: Chain, setup: Setup, runs: Path, dev: Rows, device: str = "cpu",
              say=print) -> list[dict]:
    """Every round of ``chain`` not yet in ``runs/<chain>.jsonl``; returns all its rounds."""
    if setup.start_rows:
        return run_start_chain(chain, setup, runs, dev, say)
    pool = read_rows(setup.train, setup.pool_size, setup.pool_seed)
    results, work, log = runs / f"{chain.name}.jsonl", runs / chain.name, runs / f"{chain.name}.log"
    work.mkdir(parents=True, exist_ok=True)
    rounds = read_rounds(results)
    if rounds:
        labelled = rounds[-1]["labelled"] + rounds[-1]["next"]
    else:  # the same first labels for every strategy of a seed: the draw depends on the seed only
        labelled = pick(Unfitted(pool.labels), pool, [], setup.start, "random", chain.seed,
                        setup.dedupe_threshold).indices.tolist()
    for r, size in rounds_to_run(setup, chain, len(rounds), lambda: labelled, say):
        out = work / f"n{size}"
        shutil.rmtree(out, ignore_errors=True)  # a round killed mid-training starts over
        write_labels(work / "labels.csv", pool, labelled)
        t0 = time.perf_counter()
        with open(log, "a", encoding="utf-8") as f, contextlib.redirect_stdout(f), contextlib.redirect_stderr(f):
            best, heldout = retrain(setup, work / "labels.csv", out, chain.seed, device)
        t1 = time.perf_counter()
        folders = load_folders(setup.recipe, out, device)
        dev_scores = score(folders, dev)
        t2 = time.perf_counter()
        # Round r's picks draw with their own seed, so a resumed chain picks what an unbroken one would have.
        picked = pick(folders[best], pool, labelled, setup.step, chain.strategy, chain.seed * 1000 + r + 1,
                      setup.dedupe_threshold)
        record = {"strategy": chain.strategy, "seed": chain.seed, "round": r, "labels": len(labelled),
                  "recipe": setup.recipe, "best": best, "dev": {**dev_scores, "best": dev_scores[best]},
                  "heldout": heldout, "class_counts": np.bincount(pool.y[labelled], minlength=len(pool.labels)).tolist(),
                  "seconds": {"train": round(t1 - t0, 1), "score": round(t2 - t1, 1),
                              "select": round(time.perf_counter() - t2, 1)},
                  "picked_margin": round(float(np.mean(picked.scores)), 4) if len(picked.scores) else None,
                  "skipped": picked.skipped, "labelled": labelled, "next": picked.indices.tolist()}
        append_round(results, record)
        rounds.append(record)
        for old in work.glob("n*"):  # only the newest folder stays: what a longer --until selects from
            if old != out and old.is_dir():
                shutil.rmtree(old)
        labelled = labelled + record["next"]
        say(f"{chain.name}: {size:,} labels, best {best}, dev macro-F1 {dev_scores[best]['macro_f1']:.4f} "
            f"(train {t1 - t0:.0f}s, score {t2 - t1:.0f}s)")
    return rounds


# ---------------------------------------------------------------------------------------------------------
# From a starting model (--start-rows, issue 41): teach mode's rule for which model serves
# ---------------------------------------------------------------------------------------------------------

class Serving:
    """The model teach mode serves in a chain from a start: the start itself until a round beats it (the app's
    ``serving.compare``), then the newest round that did. ``trained``: the analyst's labels it trained on."""

    def __init__(self, clf, name: str, trained: dict):
        self.clf, self.name, self.trained = clf, name, trained


def run_start_chain(chain: Chain, setup: Setup, runs: Path, dev: Rows, say=print) -> list[dict]:
    """Every round of ``chain`` from a TF-IDF start fitted on ``setup.start_rows`` rows outside the pool: each
    round refits TF-IDF on those rows plus the labels not held out, the app's ``compare`` decides whether it serves,
    and the serving model asks for the next rows. Each line holds the dev scores of the round, of the model serving
    after it and of the start."""
    from koelectra_kit.app.serving import HeldOut, StartData, compare, fit_tfidf

    cfg = sentiment_config([]).baseline  # the TF-IDF knobs of the app's rounds

    if setup.recipe != "tfidf":
        raise SystemExit("error: --start-rows runs the TF-IDF recipe (a TF-IDF start, TF-IDF rounds)")
    pool = read_rows(setup.train, setup.pool_size, setup.pool_seed)
    base = read_rows(setup.train, setup.pool_size, setup.pool_seed, start=setup.start_rows)
    names = pool.labels
    start_data = StartData(base.texts, [names[i] for i in base.y])
    start = fit_tfidf(start_data, {}, names, cfg)
    results, work = runs / f"{chain.name}.jsonl", runs / chain.name
    work.mkdir(parents=True, exist_ok=True)
    rounds = read_rounds(results)
    if not rounds:
        (work / "heldout.jsonl").unlink(missing_ok=True)  # a chain started afresh holds out afresh
    held_file = HeldOut(work / "heldout.jsonl")
    as_labels = lambda rows: {pool.texts[i]: names[pool.y[i]] for i in rows}  # noqa: E731
    serving = Serving(start, "start", {})
    if rounds:  # rebuild what served after the last finished round (rounds are deterministic given their labels)
        last = next((r for r in reversed(rounds) if r["served"]), None)
        labelled = rounds[-1]["labelled"] + rounds[-1]["next"]
        if last is not None:
            held = set(held_file.texts[:last["heldout_texts"]])
            train = {t: lab for t, lab in as_labels(last["labelled"]).items() if t not in held}
            serving = Serving(fit_tfidf(start_data, train, names, cfg), f"n{last['labels']}", train)
    else:  # the start model asks for the first rows, as the app does when it starts from a classifier
        labelled = pick(start, pool, [], setup.start, chain.strategy if chain.strategy == "random" else "margin",
                        chain.seed, setup.dedupe_threshold).indices.tolist()
    start_dev = score({"start": start}, dev)["start"]
    for r, size in rounds_to_run(setup, chain, len(rounds), lambda: labelled, say):
        t0 = time.perf_counter()
        labels = as_labels(labelled)
        held = held_file.update(labels, names)
        train = {t: lab for t, lab in labels.items() if t not in held}
        clf = fit_tfidf(start_data, train, names, cfg)
        verdict = compare(f"n{size}", clf, "tfidf", labels, held, names, incumbent=serving.clf,
                          incumbent_name=serving.name, incumbent_trained=serving.trained, incumbent_tfidf=True,
                          start=start, start_data=start_data, seed=chain.seed, baseline_cfg=cfg)
        if verdict.served:
            serving = Serving(clf, f"n{size}", train)
        t1 = time.perf_counter()
        dev_scores = score({"round": clf, "serving": serving.clf}, dev)
        picked = pick(serving.clf, pool, labelled, setup.step, chain.strategy, chain.seed * 1000 + r + 1,
                      setup.dedupe_threshold)
        record = {"strategy": chain.strategy, "seed": chain.seed, "round": r, "labels": len(labelled),
                  "recipe": "tfidf", "start_rows": setup.start_rows, "best": "tfidf",
                  "dev": {"tfidf": dev_scores["serving"], "best": dev_scores["serving"], "round": dev_scores["round"],
                          "start": start_dev},
                  "served": verdict.served, "serving": serving.name, "verdict": verdict.public(),
                  "heldout_texts": len(held_file.texts),
                  "class_counts": np.bincount(pool.y[labelled], minlength=len(names)).tolist(),
                  "seconds": {"round": round(t1 - t0, 1), "total": round(time.perf_counter() - t0, 1)},
                  "picked_margin": round(float(np.mean(picked.scores)), 4) if len(picked.scores) else None,
                  "skipped": picked.skipped, "labelled": labelled, "next": picked.indices.tolist()}
        append_round(results, record)
        rounds.append(record)
        labelled = labelled + record["next"]
        say(f"{chain.name}: {size:,} labels, {verdict.reason}; dev macro-F1 serving "
            f"{dev_scores['serving']['macro_f1']:.4f}, round {dev_scores['round']['macro_f1']:.4f}, start "
            f"{start_dev['macro_f1']:.4f}")
    return rounds
