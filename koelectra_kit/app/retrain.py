"""Teach mode's retrain: the ``finetune`` recipe on the labels so far, in a subprocess, one round at a time.

    overrides = finetune_args("runs/pretrain/discriminator", "snap.csv", "rounds/r001/model")
    cfg = load_config(FinetuneConfig, "sentiment", overrides)      # what the subprocess runs

**The recipe** (``finetune_args``, the one place it is written; benchmarks/bench_active.py can reuse it): the
shipped ``sentiment`` defaults (auto epochs with the 4,000-step floor, dropout 0.1, early stopping), ``ensemble=tfidf``
so each round also fits TF-IDF and the encoder + TF-IDF ensemble, and the folder best on dev serves; dev is
``--dev`` when given, else ``finetune``'s stratified 10% of the labels (seeded). From a bare encoder with no
``--dev``, rounds fit TF-IDF alone (``baseline_args``) until ``TFIDF_UNTIL`` labels (``--retrain-recipe``, see
``recipe_for``). Every round starts from the same
encoder and trains on all the labels so far: a round's model never depends on the rounds before it, only on the
labels, so a bad round leaves no trace.

**A subprocess**, not a thread: training takes every core and most of the memory for minutes; in its own process
it cannot stall the page's requests on the GIL, a crash in it (out of memory included) cannot take the app down,
and its log is the command's own output. On Linux it dies with the app (PR_SET_PDEATHSIG), so a killed app leaves
no orphan training on.

Files, under the teach folder beside LABELS.csv (``LABELS.teach/``):

    rounds/r001/train.csv    what the round trained on (review,label: the labels not held out, and a TF-IDF start's
                             rows for a TF-IDF round; a snapshot: LABELS.csv keeps growing)
    rounds/r001/heldout.csv  the held-out labels it was scored on (without --dev)
    rounds/r001/model/       finetune's output: the encoder, tfidf/, ensemble/, eval.json
    rounds/r001/log.txt      the subprocess's output (the progress is read from it and from metrics.jsonl)
    rounds.jsonl             one line per finished round (done or failed): the history the page charts
"""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path


RECIPES = ("auto", "full", "tfidf")
# auto's switch: below this many labels, from a bare encoder and with no --dev, a round fits TF-IDF alone. Simulated
# on nsmc3 (docs/RESULTS.md §7, benchmarks/bench_active.py, 2 seeds), TF-IDF alone with margin sampling scored above
# the full recipe's best folder at every size measured, 500 to 2,000 labels (0.4582 vs 0.4192 dev macro-F1 at 1,000):
# a held-out 10% of so few labels (50-200 rows) is too small to stop the encoder's training or to choose between
# encoder, TF-IDF and ensemble. And a TF-IDF round takes seconds where the encoder's takes minutes on a CPU.
TFIDF_UNTIL = 2000


def recipe_for(recipe: str, labels: int, from_encoder: bool, dev) -> str:
    """The recipe one round runs: ``full`` or ``tfidf`` (``recipe`` auto decided, see ``TFIDF_UNTIL``).
    ``from_encoder``: the rounds start from a bare encoder, not from a fine-tuned classifier's weights. auto keeps the
    full recipe for the latter (its head already knows the task: TF-IDF on a few hundred labels would replace it with
    something worse) and with a ``--dev`` file (a real dev set can choose)."""
    if recipe != "auto":
        return recipe
    return "tfidf" if from_encoder and not dev and labels < TFIDF_UNTIL else "full"


def baseline_args(train_csv: str | Path, out: str | Path, dev: str | Path | None = None, seed: int = 42,
                  labels: list[str] | None = None, overrides=()) -> list[str]:
    """The TF-IDF round: ``koelectra-kit baseline --config sentiment *baseline_args(...)``, the same labels, held-out
    split and seed as ``finetune_args`` (``baseline`` reads the fine-tuning config; its encoder keys go unused)."""
    args = [f"train={train_csv}", f"dev={dev if dev else 'null'}", f"out={out}", f"seed={seed}", "plots=false"]
    if labels:
        args.append("labels=" + json.dumps(list(labels), ensure_ascii=False))
    return args + list(overrides)


def finetune_args(encoder: str | Path, train_csv: str | Path, out: str | Path, dev: str | Path | None = None,
                  seed: int = 42, labels: list[str] | None = None, overrides=()) -> list[str]:
    """The ``key=value`` overrides of the ``sentiment`` preset that make one retrain: ``koelectra-kit finetune
    --config sentiment *finetune_args(...)``, or ``load_config(FinetuneConfig, "sentiment", finetune_args(...))``.
    ``overrides`` come last, so they win (tests use ``epochs=1 min_steps=1``). No checkpoints: a round the app
    stops is abandoned (the next round trains in a folder of its own), so one would only be left behind."""
    args = [f"model={encoder}", f"train={train_csv}", f"dev={dev if dev else 'null'}", f"out={out}", f"seed={seed}",
            "ensemble=tfidf", "progress=false", "plots=false", "save_every_minutes=0"]
    if labels:
        args.append("labels=" + json.dumps(list(labels), ensure_ascii=False))  # a YAML flow list, quoted names
    return args + list(overrides)


@dataclass
class Round:
    """One retrain, as rounds.jsonl keeps it."""

    round: int
    labels: int  # effective labels it trained on
    per_class: dict
    state: str = "running"  # running -> done | failed | interrupted (the app stopped while it trained)
    message: str = ""  # the one-line error of a failed round
    best: str = ""  # encoder | tfidf | ensemble
    folder: str = ""  # the folder that serves (absolute)
    scores: dict = field(default_factory=dict)  # name -> macro-F1 on dev (finetune's choice between its folders)
    dev: str = ""  # what the scores are on: the --dev file, or the held-out labels
    seconds: float = 0.0
    start_model: str = ""  # the --model the app ran with (a later app run with another --model starts afresh)
    # ... and what it held (start.start_digest): the same folder refitted in place is another start too. "" in
    # rounds.jsonl written before it was recorded (those rounds go by the path alone)
    start_digest: str = ""
    recipe: str = ""  # full | tfidf (what auto chose); "" in rounds.jsonl written before there was a choice
    heldout: int = 0  # held-out labels (or --dev rows) it was scored on
    verdict: dict = field(default_factory=dict)  # serving.Verdict: how it was compared, the scores, served or not

    @property
    def name(self) -> str:
        return f"r{self.round:03d}"

    @property
    def served(self) -> bool:
        """Whether it replaced the serving model (rounds from before the rule have no verdict: they all did). A
        failed or interrupted round never did (its verdict, if any, came before it failed: it said "served": true)."""
        return self.state not in ("failed", "interrupted") and bool(self.verdict.get("served", True))

    @property
    def reason(self) -> str:
        """Why it serves, or why not (one line, shown on the page)."""
        return self.verdict.get("reason", "")

    def public(self) -> dict:
        return ({k: v for k, v in asdict(self).items() if k not in ("start_model", "start_digest")}
                | {"name": self.name, "served": self.served, "reason": self.reason})


def read_rounds(path: Path) -> list[Round]:
    """The finished rounds in rounds.jsonl (a torn last line, from a kill mid-write, is skipped)."""
    rounds = []
    if path.exists():
        for line in path.read_text(encoding="utf-8").split("\n"):  # not splitlines(): see serving.HeldOut
            try:
                data = json.loads(line)
                rounds.append(Round(**{k: v for k, v in data.items() if k in Round.__dataclass_fields__}))
            except (json.JSONDecodeError, TypeError, AttributeError):
                continue
    return rounds


def append_round(path: Path, rnd: Round) -> None:
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(asdict(rnd), ensure_ascii=False) + "\n")
        f.flush()
        os.fsync(f.fileno())


class Progress:
    """Where a running finetune is, from its log (the total steps line, the metrics.jsonl path) and metrics.jsonl."""

    TOTAL = re.compile(r"; (\d+) steps \(")
    METRICS = re.compile(r"metrics: (\S+metrics\.jsonl)")

    def __init__(self, log: Path):
        self.log = log

    def read(self) -> tuple[str, float]:
        """(a short phrase, fraction done 0-1)."""
        try:
            text = self.log.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return "starting", 0.0
        total, metrics = self.TOTAL.search(text), self.METRICS.search(text)
        if not total:
            return "reading the labels and loading the encoder", 0.02
        steps = int(total.group(1))
        step = _last_step(Path(metrics.group(1))) if metrics else 0
        if step >= steps:
            return f"fitting TF-IDF and the ensemble ({steps} steps trained)", 0.97
        return f"training: step {step} of {steps}", 0.05 + 0.9 * step / max(steps, 1)


def _last_step(metrics: Path) -> int:
    try:
        with open(metrics, "rb") as f:
            f.seek(max(0, f.seek(0, os.SEEK_END) - 4096))
            lines = f.read().decode("utf-8", "replace").splitlines()
    except OSError:  # moved into the output folder when the run ends
        return 1 << 30
    for line in reversed(lines):
        try:
            return int(json.loads(line)["step"])
        except (json.JSONDecodeError, KeyError, TypeError, ValueError):
            continue
    return 0


def _die_with_parent() -> None:  # runs in the child between fork and exec: async-signal-safe calls only
    if _PRCTL is not None:
        _PRCTL(1, 9)  # PR_SET_PDEATHSIG, SIGKILL


def _prctl():
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    try:
        return ctypes.CDLL("libc.so.6", use_errno=True).prctl  # resolved here: the child only calls it
    except (OSError, AttributeError):
        return None


_PRCTL = _prctl()


def run_finetune(overrides: list[str], log: Path, env: dict | None = None,
                 command: str = "finetune") -> subprocess.Popen:
    """Start ``python -m koelectra_kit COMMAND --config sentiment OVERRIDES`` (finetune, or baseline for a TF-IDF
    round) with its output into ``log``."""
    cmd = [sys.executable, "-m", "koelectra_kit", command, "--config", "sentiment", *overrides]
    out = open(log, "w", encoding="utf-8")
    try:
        return subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                env={**os.environ, **(env or {})}, preexec_fn=_die_with_parent)
    finally:
        out.close()  # the child holds its own copy


def failure_line(log: Path, code: int) -> str:
    """The one line that says why a finetune ended with ``code``: its ``error:`` line, else its last line."""
    try:
        lines = [ln.strip() for ln in log.read_text(encoding="utf-8", errors="replace").splitlines() if ln.strip()]
    except OSError:
        lines = []
    errors = [ln for ln in lines if ln.startswith("error:")]
    line = (errors or lines or [f"exit status {code}"])[-1]
    return line[:300]


def best_folder(out: Path) -> tuple[str, Path, dict]:
    """(name, folder, dev macro-F1 per candidate) from a finished round's eval.json."""
    result = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    c = result.get("candidates")
    if not c:  # a TF-IDF round (baseline's eval.json), or ensemble=none (an override): one folder
        name = "tfidf" if (out / "classifier.json").is_file() else "encoder"
        return name, out, {name: round(float(result["dev"]["macro_f1"]), 4)}
    folder = out if c["folder"] == "." else out / c["folder"]
    return c["best"], folder, {k: round(float(v["macro_f1"]), 4) for k, v in c["scores"].items()}


def write_rows(path: Path, rows: list) -> None:
    """A round's table as ``finetune`` and ``baseline`` read it: review,label."""
    from ..io.csvlines import csv_line  # a review with a lone "\r" quoted: read back whole, not as two rows

    with open(path, "w", encoding="utf-8", newline="") as f:
        f.write(csv_line(["review", "label"]))
        f.writelines(csv_line(row) for row in rows)


def read_table_rows(path: Path) -> list[tuple[str, str]]:
    """The (review, label) rows ``write_rows`` wrote; none when the file is missing or torn."""
    import csv

    try:
        with open(path, encoding="utf-8", newline="") as f:
            return [(r["review"], r["label"]) for r in csv.DictReader(f)]
    except (OSError, KeyError, csv.Error):
        return []


def read_dev(path: str, names: list[str]) -> dict:
    """--dev as text -> label, read as ``finetune`` reads it."""
    from ..io.labelled import read_labelled

    data = read_labelled(path, names)
    return {t: names[i] for t, i in zip(data.texts, data.y)}


def now() -> float:
    return time.perf_counter()


def trained_on(teach_dir: Path, rnd: Round | None) -> dict:
    """Every row the round ``rnd`` trained on (its train.csv: text -> label; a TF-IDF round's holds the start's rows
    too); nothing for the starting model (None). What it is never scored on."""
    if rnd is None:
        return {}
    return dict(read_table_rows(teach_dir / "rounds" / rnd.name / "train.csv"))


def answers_of(teach_dir: Path, rnd: Round | None, start_data) -> dict:
    """The analyst's labels the round ``rnd`` trained on (its answers.csv), what the cross-validation refits its
    recipe with: the start's rows come from ``start_data`` there (``serving.StartData``), sampled for a big start on
    both sides alike. Taken from train.csv, the serving side was refitted on every start row and the round on 20,000
    of them, and rounds lost for it while the verdict said both were sampled. A round written before answers.csv:
    its train.csv less the start's own rows."""
    if rnd is None:
        return {}
    answers = teach_dir / "rounds" / rnd.name / "answers.csv"
    if answers.is_file():
        return dict(read_table_rows(answers))
    rows = trained_on(teach_dir, rnd)
    if rnd.recipe == "tfidf" and start_data.texts:
        start = set(zip(start_data.texts, start_data.labels))
        rows = {t: lab for t, lab in rows.items() if (t, lab) not in start}
    return rows
