"""Which model teach mode serves: a round replaces the serving model only when it scores at least as well on
labels neither of them trained on, and a started-from model keeps what it knew.

    held = HeldOut(teach / "heldout.jsonl").update(labels)            # texts no round ever trains on
    verdict = judge(candidate, incumbent, ...)                          # serve it, or say why not

**The held-out labels** (``HeldOut``): without ``--dev``, about 10% of the analyst's labels of each class (at least
one) are held out, chosen by a hash of their text so the choice does not depend on the order they came in, and
kept in ``heldout.jsonl``: a text once held out stays held out, so no round ever trains on it and every round, the
serving one and the starting model are scored on the same texts. With ``--dev`` that file is the held-out set.

**How a round is compared** (``compare``, then ``judge``):

- a TF-IDF round against a TF-IDF model (the start, or an earlier round; seconds to fit): by paired ``k``-fold
  cross-validation over all the analyst's labels. In each fold both recipes are refitted without that fold's labels
  (the round's: start rows plus every other label; the serving model's: start rows plus the labels it trained on,
  less the fold's; the starting model trained on none of them and answers as it is) and both predict the fold, so
  each label is scored by two fits that never saw it, and every answer counts. Why not the held-out labels alone:
  2-3 of them (17 answers) decide nothing, and the answers teach mode collects are the ones the serving model was
  least sure of, a sample that flatters the model that picked it (a first version compared on those; in its
  nsmc3 simulation it kept off nearly every round from 300 labels on while they scored higher on dev; that
  version is not kept, see docs/RESULTS.md §8). A start of more than ``CV_START_ROWS`` rows is sampled to that
  many for these refits (``cv_start``), the same sample on both sides, and the starting model's recipe is then
  refitted on it too. With a 145,000-row start on 2 cores, judging took 280-490 s and takes 36-48 s
  (``benchmarks/bench_teach_round.py``);
- otherwise (a round that fine-tunes an encoder: minutes, no cross-validation; a fine-tuned start; ``--dev``): on
  the held-out labels the serving model never trained on (or the dev file). Those lean toward the serving model
  where it picked them: a round is kept off rather than a worse one served.

A round that scores below the serving model is kept on disk and in the history, marked not served, with the
reason; the page shows it. Ties serve the round (it has seen more of the analyst's labels).

**What a round starts from** (``StartData``): a TF-IDF starting folder records the file it was fitted on
(``baseline_config.yaml``); when that file is still there, TF-IDF rounds fit on its rows plus the analyst's labels
(the analyst's label wins for a text in both), so a round knows what the starting model knew. Fine-tuned starts
keep their knowledge in their weights: every full round starts from them.
"""
from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HELDOUT_SHARE = 0.1
CV_FOLDS = 5
# Start rows a cross-validation refits on. Each fold fits TF-IDF twice, and one fit on 145,000 nsmc3 rows takes
# about 53 s on 2 cores (logistic regression is 3/4 of it): judging a round took up to 8 minutes. Above this many,
# a seeded sample of them stands in for the start in both recipes (cv_start).
CV_START_ROWS = 20_000


def _rank(text: str) -> str:
    return hashlib.sha1(text.encode("utf-8")).hexdigest()


class HeldOut:
    """The held-out texts, appended to a file as they are chosen (one JSON string per line)."""

    def __init__(self, path: Path):
        self.path = path
        self.texts: list[str] = []
        if path.exists():
            # split at "\n" alone: json.dumps(ensure_ascii=False) leaves U+2028, U+0085 and the like bare, and
            # splitlines() cut a held-out review there, so after a restart it was no longer held out
            for line in path.read_text(encoding="utf-8").split("\n"):
                try:
                    text = json.loads(line)
                except json.JSONDecodeError:  # a torn last line (a kill mid-write): that text is chosen again
                    continue
                if isinstance(text, str):
                    self.texts.append(text)
        self._set = set(self.texts)

    def update(self, labels: dict, names: list[str]) -> dict:
        """Hold out more texts where a class has fewer than its share; the held-out labels now (text -> label)."""
        new = []
        for name in names:
            texts = [t for t, lab in labels.items() if lab == name]
            want = max(1, round(HELDOUT_SHARE * len(texts))) if len(texts) >= 2 else 0
            have = sum(t in self._set for t in texts)
            for text in sorted((t for t in texts if t not in self._set), key=_rank)[:max(0, want - have)]:
                new.append(text)
                self._set.add(text)
        if new:
            self.texts += new
            with open(self.path, "a", encoding="utf-8") as f:
                f.write("".join(json.dumps(t, ensure_ascii=False) + "\n" for t in new))
                f.flush()
                os.fsync(f.fileno())
        return {t: labels[t] for t in self.texts if t in labels}


@dataclass
class StartData:
    """The rows a TF-IDF starting folder was fitted on (empty when it records none, or the file is gone: then
    ``note`` says so, since rounds then fit on the analyst's labels alone)."""

    texts: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    note: str = ""

    @classmethod
    def of(cls, folder: str | Path, names: list[str]) -> "StartData":
        from ..config import load_config
        from ..errors import KitError
        from ..finetune.config import FinetuneConfig
        from ..finetune.data import read_configured

        recorded = Path(folder) / "baseline_config.yaml"
        if not recorded.is_file():
            return cls()
        try:
            cfg = load_config(FinetuneConfig, str(recorded), [])
            if not cfg.train or list(cfg.labels) != list(names):
                return cls()
            data = read_configured(cfg, cfg.train)
        except (KitError, OSError) as e:  # the file moved or no longer reads: rounds fit on the analyst's labels alone
            why = str(e).splitlines()[0] if str(e) else type(e).__name__
            return cls(note=f"{Path(folder).name} was fitted on {cfg.train}, which can't be read here ({why}): "
                            "TF-IDF rounds fit on your labels alone, not on those rows too")
        return cls(list(data.texts), [names[i] for i in data.y])

    def rows(self, labels: dict) -> list[tuple[str, str]]:
        """The start's rows, then the analyst's labels; a text in both keeps the analyst's label."""
        return [(t, lab) for t, lab in zip(self.texts, self.labels) if t not in labels] + list(labels.items())


def macro_f1(clf, labels: dict, names: list[str]) -> float | None:
    """Macro-F1 of ``clf`` on ``labels`` (text -> label), or None when there is nothing to score."""
    if not labels or clf is None:
        return None
    texts = list(labels)
    probs = np.asarray(clf.predict(texts).probs)
    return _f1([names.index(labels[t]) for t in texts], probs.argmax(1), names)


def cv_start(start: StartData, seed: int) -> StartData:
    """The start rows a round's cross-validation refits both recipes on: all of them up to ``CV_START_ROWS``, else
    that many drawn with ``seed`` (the same for both recipes, so the comparison stays paired)."""
    if len(start.texts) <= CV_START_ROWS:
        return start
    idx = np.sort(np.random.default_rng(seed).choice(len(start.texts), CV_START_ROWS, replace=False))
    return StartData([start.texts[i] for i in idx], [start.labels[i] for i in idx])


def fit_tfidf(start: StartData, labels: dict, names: list[str], baseline_cfg=None):
    """A TF-IDF round as teach mode fits it: on the start's rows plus ``labels`` (the fit ``baseline`` makes)."""
    from ..classify.tfidf import TfidfClassifier

    rows = start.rows(labels)
    return TfidfClassifier.fit([t for t, _ in rows], np.array([names.index(lab) for _, lab in rows]), names,
                               baseline_cfg)


def cv_paired(start: StartData, labels: dict, names: list[str], seed: int, incumbent_train: dict | None,
              start_clf=None, baseline_cfg=None) -> tuple[float, float] | None:
    """(the round recipe's out-of-fold macro-F1, the serving model's) over ``labels``: in each fold TF-IDF is
    refitted on the start's rows plus the other folds (the round) and on the start's rows plus ``incumbent_train``
    less the fold (the serving model; ``incumbent_train`` None: it is ``start_clf``, which trained on no label and
    predicts as it is). None when a class has under 2 labels."""
    from sklearn.model_selection import StratifiedKFold

    texts = list(labels)
    y = np.array([names.index(labels[t]) for t in texts])
    k = int(min(CV_FOLDS, np.bincount(y, minlength=len(names)).min()))
    if k < 2:
        return None
    ours, theirs = np.zeros(len(texts), dtype=np.int64), np.zeros(len(texts), dtype=np.int64)
    fits = {}  # the serving recipe's fits by training labels: with none of the fold's among them, one fit serves all
    for train, test in StratifiedKFold(k, shuffle=True, random_state=seed).split(texts, y):
        fold = [texts[i] for i in test]
        others = {texts[i]: labels[texts[i]] for i in train}
        ours[test] = fit_tfidf(start, others, names, baseline_cfg).predict(fold).probs.argmax(1)
        if incumbent_train is None:
            theirs[test] = start_clf.predict(fold).probs.argmax(1)
        else:
            out = set(fold)
            kept = {t: lab for t, lab in incumbent_train.items() if t not in out}
            key = frozenset(kept.items())
            if key not in fits:
                fits[key] = fit_tfidf(start, kept, names, baseline_cfg)
            theirs[test] = fits[key].predict(fold).probs.argmax(1)
    return _f1(y.tolist(), ours, names), _f1(y.tolist(), theirs, names)


def _f1(y_true: list, y_pred, names: list[str]) -> float | None:
    from ..classify.metrics import classification_report

    if not len(y_true):
        return None
    return round(float(classification_report(y_true, y_pred, names)["macro_f1"]), 4)


@dataclass
class Verdict:
    served: bool
    method: str  # "held-out" | "dev" | "cross-validation"
    n: int  # labels scored
    score: float | None  # the round's
    incumbent: str | None  # the model serving when the round ended
    incumbent_score: float | None
    start_score: float | None  # the starting model's, on the same labels (None: it has no classifier)
    reason: str

    def public(self) -> dict:
        return dict(self.__dict__)


def compare(name: str, clf, recipe: str, labels: dict, held: dict, names: list[str], *, incumbent,
            incumbent_name: str | None, incumbent_trained: dict, incumbent_tfidf: bool, start, start_data: StartData,
            seed: int, baseline_cfg=None, dev: bool = False, incumbent_answers: dict | None = None) -> Verdict:
    """Round ``name`` (``clf``, trained by ``recipe`` on ``labels`` minus ``held``) against the model serving now
    (``incumbent``, None for none; it trained on the analyst's labels ``incumbent_trained``, text -> label, and is a
    TF-IDF fit of the start's rows plus those when ``incumbent_tfidf``), as the module doc says. ``start`` (None: an
    encoder) is scored on the same labels for the page. ``incumbent_trained`` is every row it trained on (never
    scored on); ``incumbent_answers`` the analyst's labels among them, what its recipe is refitted with (None: the
    same)."""
    if incumbent is not None and recipe == "tfidf" and incumbent_tfidf and not dev:
        rows = cv_start(start_data, seed)
        sampled = rows is not start_data
        # the starting model answers as it is, unless its rows are sampled: then its recipe is refitted on the
        # sample too (on no label), so both sides know the same start rows
        answers = incumbent_trained if incumbent_answers is None else incumbent_answers
        refit = None if incumbent is start and not sampled else answers
        got = cv_paired(rows, labels, names, seed, refit, start, baseline_cfg)
        if got is not None:
            score, inc = got
            start_score = inc if refit is None else (macro_f1(start, labels, names) if start else None)
            note = (f", both recipes refitted on {len(rows.texts):,} of the start's {len(start_data.texts):,} rows"
                    if sampled else "")
            return judge(name, score, incumbent_name, inc, start_score, "cross-validation", len(labels), note)
    fair = held if dev else {t: lab for t, lab in held.items() if t not in incumbent_trained}
    inc = macro_f1(incumbent, fair, names)
    start_score = inc if incumbent is start else macro_f1(start, fair, names)
    return judge(name, macro_f1(clf, fair, names), incumbent_name if incumbent is not None else None, inc,
                 start_score, "dev" if dev else "held-out", len(fair))


def judge(name: str, score: float | None, incumbent: str | None, incumbent_score: float | None,
          start_score: float | None, method: str, n: int, note: str = "") -> Verdict:
    """Serve ``name`` unless the model serving now scored higher on the same labels (``note``: said after where)."""
    where = {"held-out": f"{n} held-out labels", "dev": f"{n} --dev rows",
             "cross-validation": f"{n} labels, cross-validated"}[method] + note
    if incumbent is None:
        return Verdict(True, method, n, score, incumbent, incumbent_score, start_score,
                       f"{name} serves: the first classifier (macro-F1 {_f(score)} on {where})")
    if incumbent_score is None or score is None:
        # no label to score both on (every held-out one was trained on by the serving model, e.g. after the first
        # held-out answers were undone): this served the round unseen, as "the first classifier"
        return Verdict(False, method, n, score, incumbent, incumbent_score, start_score,
                       f"not served: no label to compare it with {incumbent} on ({where} that {incumbent} never "
                       f"trained on); {incumbent} keeps serving")
    if score is not None and score >= incumbent_score:
        return Verdict(True, method, n, score, incumbent, incumbent_score, start_score,
                       f"{name} serves: macro-F1 {_f(score)} >= {incumbent} {_f(incumbent_score)} on {where}")
    return Verdict(False, method, n, score, incumbent, incumbent_score, start_score,
                   f"not served: macro-F1 {_f(score)} < {incumbent} {_f(incumbent_score)} on {where}; "
                   f"{incumbent} keeps serving")


def _f(x) -> str:
    return "n/a" if x is None or x != x else f"{x:.4f}"
