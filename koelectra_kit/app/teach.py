"""Teach mode (``koelectra-kit app --teach POOL --labels LABELS.csv``): the model asks, the analyst answers, and
the model is retrained on the answers as they come.

``Teacher`` joins the parts: the pool's queue (``pool.py``), the append-only LABELS.csv (``labelstore.py``), the
retrain rounds (``retrain.py``), and the one classifier the whole app serves (``jobs.SharedClassifier``: the review
box, the file jobs and the queue all use the newest round's best folder once it is ready). One worker thread runs
a retrain and then scores the pool with its model; the page reads ``public()``.

What a retrain starts from, and what ties a round to that start: ``start.py``.
"""
from __future__ import annotations

import logging
import shutil
import subprocess
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from ..errors import InputError, KitError
from .labelstore import Event, LabelLog
from .pool import Pool, Queue, score
from .jobs import Busy
from .retrain import (Progress, Round, answers_of, append_round, baseline_args, best_folder, failure_line,
                      finetune_args, now, read_dev, read_rounds, read_table_rows, recipe_for, run_finetune,
                      trained_on, write_rows)
from .serving import HeldOut, StartData, compare
from .start import StartModel, model_identity, start_digest

logger = logging.getLogger("koelectra_kit.app")
MAX_ID = 100  # characters of a client-made answer id


class Teacher:
    def __init__(self, settings, shared, start: StartModel, pool: Pool, log: LabelLog):
        self.s, self.shared, self.start, self.pool, self.log = settings, shared, start, pool, log
        self.labels = start.labels
        self.dir = teach_dir(settings.labels)
        (self.dir / "rounds").mkdir(parents=True, exist_ok=True)
        # the --model as a resolved path: `--model enc/` from another folder is the same start (a round history
        # dropped for a spelling served the start model again, in place of a better round)
        self.model_id = model_identity(settings.model)
        self.start_digest = start_digest(start)  # and by content: a folder refitted in place is another start
        self.rounds = [r for r in read_rounds(self.dir / "rounds.jsonl")
                       if self.model_id in (r.start_model, model_identity(r.start_model))
                       and r.start_digest in ("", self.start_digest)]
        self.heldout = HeldOut(self.dir / "heldout.jsonl")
        # a TF-IDF start's recorded training rows: TF-IDF rounds refit on them plus the answers (serving.py)
        self.start_data = StartData.of(settings.model, start.labels) if start.kind == "tfidf" else StartData()
        if self.start_data.note:
            logger.warning(self.start_data.note)
        self.start_name = Path(settings.model).name
        self.start_score = None  # the starting model on the latest round's labels (the page shows it)
        self.queue = Queue(pool, self.labels, settings.strategy, settings.seed)
        self.empty_rows = sum(1 for t in pool.texts if not t)  # empty or malformed: never asked (the page says so)
        self.lock = threading.RLock()
        # each page's (client's) answers and skips this session, in order: its undo takes back its own latest, not
        # another tab's (the page's undo names no target)
        self.sent: dict[str, list[str]] = {}
        self.worker = ThreadPoolExecutor(max_workers=1, thread_name_prefix="koelectra-teach")
        self.closing = False
        self.retrain = {"state": "idle", "message": "", "progress": 0.0, "round": None}
        self.scoring: dict | None = None
        self.serving = None  # the name of the model the queue and the app serve
        self.labels_at_last_round = self.rounds[-1].labels if self.rounds else 0
        self._record_interrupted()
        self._resume()

    # -- start-up
    def _record_interrupted(self) -> None:
        """A round folder with no line in rounds.jsonl was cut off (the app killed mid-round): record it as
        interrupted, so the history says so and its number is not reused, and drop its half-written model."""
        known = {r.round for r in read_rounds(self.dir / "rounds.jsonl")}
        for folder in sorted((self.dir / "rounds").iterdir()):
            n = _number(folder)
            if n and n not in known and folder.is_dir():
                _drop_unfinished(folder)
                rnd = Round(round=n, labels=len(read_table_rows(folder / "train.csv")), per_class={},
                            state="interrupted", start_model=self.model_id, start_digest=self.start_digest,
                            message="the app stopped while this round trained; its labels are in the next round")
                append_round(self.dir / "rounds.jsonl", rnd)
                self.rounds.append(rnd)
        self.rounds.sort(key=lambda r: r.round)

    def _resume(self) -> None:
        """Serve the newest served round of an earlier session with this --model, else the model given."""
        done = [r for r in self.rounds if r.state == "done" and r.served and Path(r.folder).is_dir()]
        if done:
            from ..classify.classifier import Classifier

            try:
                clf = Classifier.load(done[-1].folder, device=self.s.device, precision=self.s.precision)
                if list(clf.labels) != list(self.labels):  # another --classes: its columns read as these names
                    raise KitError(f"it answers {', '.join(clf.labels)}, not {', '.join(self.labels)}")
                self.shared.swap(clf)
                self.serving = done[-1].name
            except KitError as e:
                logger.warning("round %s can't be loaded (%s): serving %s", done[-1].name, e, self.s.model)
        if self.serving is None and self.start.classifier is not None:
            self.serving = self.start_name
        scored = [r for r in self.rounds if r.verdict.get("start_score") is not None]
        if scored:
            self.start_score = scored[-1].verdict["start_score"]
        if self.serving is not None:
            self.queue.waiting = True
            self.worker.submit(self._first_score)
        self.worker.submit(self.maybe_retrain)

    def _first_score(self) -> None:
        try:
            self._score(self.serving)
        except Exception:  # noqa: BLE001 - the app still serves: it asks from a random sample instead
            logger.error("scoring the pool failed:\n%s", traceback.format_exc())
            self.queue.use_model(None, "random")

    # -- answering
    def next_item(self, client: str, first: int | None = None) -> dict | None:
        st = self.log.state()
        return self.queue.next(client, set(st.labels) | st.skipped, first)

    def answer(self, client: str, body: dict) -> dict:
        """One page event (answer, skip or undo); returns the next item and the state."""
        action, answer_id = body.get("action"), body.get("answer_id")
        if action not in ("answer", "skip", "undo"):
            raise InputError("action must be answer, skip or undo")
        if not isinstance(answer_id, str) or not 0 < len(answer_id) <= MAX_ID:
            raise InputError(f"answer_id: a string of 1-{MAX_ID} characters made by the page")
        first = None
        if action == "undo":
            first = self._undo(answer_id, body.get("target"), client)
        else:
            row = body.get("row")  # the file's row number, 1-based (the header is not a row), as everywhere
            if isinstance(row, bool) or not isinstance(row, int) or not 1 <= row <= len(self.pool.texts) \
                    or not self.pool.texts[row - 1]:
                raise InputError(f"row {row!r} is not a review of {self.pool.name}")
            label = body.get("label") if action == "answer" else ""
            if action == "answer" and label not in self.labels:
                raise InputError(f"label {label!r} is not one of {', '.join(self.labels)}")
            with self.log.lock:  # one step with the log: an undo in flight from this tab sees both or neither
                text = self.pool.texts[row - 1]
                kept, new = self.log.append(Event(text=text, label=label, action=action, row=str(row),
                                                  source="teach", answer_id=answer_id))
                if not new and kept.text != text:
                    # a retry sends the same card's answer again (kept once, as the page's second key press on a card
                    # is); another review's answer under a used id was dropped with a 200, so its client never knew
                    raise InputError(f"answer_id {answer_id!r} is already the id of another review's answer (row "
                                     f"{kept.row}); each answer needs an id of its own")
                self.sent.setdefault(client, []).append(answer_id)
            self.queue.release(row - 1)
            if action == "answer":
                self.worker.submit(self.maybe_retrain)
        return {"item": self.next_item(client, first), "state": self.public()}

    def _undo(self, answer_id: str, target, client: str) -> int | None:
        if target is not None and not isinstance(target, str):
            raise InputError("target: the answer_id of the answer to undo, or none for this page's latest")
        with self.log.lock:
            kept = self.log.find(answer_id)
            if kept is not None:  # this undo was already applied (a retry): show its row again
                return self._pool_index(kept)
            if target is None and self.sent.get(client):  # this page's latest answer that still stands
                live = {e.answer_id for e in self.log.state().events}
                target = next((a for a in reversed(self.sent[client]) if a in live), None)
                if target is None:
                    raise InputError("nothing to undo")
            elif target is None and any(self.sent.values()):  # another tab answered, this one nothing yet
                raise InputError("nothing to undo in this tab (its undo takes back its own answers, not another's)")
            # else: no page has answered since the app started: the latest teach answer in the file
            undone = self.log.undo_target(target)
            if undone is None:
                raise InputError("nothing to undo")
            self.log.append(Event(text=undone.text, label="", action="undo", row=undone.row, source="teach",
                                  answer_id=answer_id, undoes=undone.answer_id))
        return self._pool_index(undone)

    def _pool_index(self, event: Event) -> int | None:
        """The pool index of the review ``event`` names (its 1-based row, checked against the text: a LABELS.csv
        written before rows were 1-based, or edited by hand, may name another row), else where the text is."""
        if event.source != "teach":
            return None
        row = int(event.row) - 1 if event.row.isdigit() else -1
        if 0 <= row < len(self.pool.texts) and self.pool.texts[row] == event.text:
            return row
        return self.queue.row_of.get(event.text)

    # -- retraining
    def missing(self) -> str | None:
        """Why a retrain can't run on the labels so far (None: it can)."""
        need = 1 if self.s.dev else 2  # the held-out split needs one per class beside one to train on
        counts = self.log.counts()  # (re-reads a hand edit)
        if self.log.problem:  # a round would train on the labels last read well, without the analyst's edit
            return self.log.problem
        short = [f"{lab} {n}" for lab, n in counts.items() if n < need]
        if short:
            return (f"a retrain needs at least {need} labelled reviews of each label "
                    f"({'as --dev scores it' if self.s.dev else 'one of them held out to score it'}); so far: "
                    + ", ".join(short))
        return None

    def request_retrain(self) -> None:
        with self.lock:
            if self.retrain["state"] == "running":
                raise Busy(f"round {self.retrain['round']} is still training")
            why = self.missing()
            if why:
                raise Busy(why)
            self.retrain.update(state="running", message="queued", progress=0.0)
        self.worker.submit(self._run_round)

    def maybe_retrain(self) -> None:
        """After an answer: a round when --retrain-every answers have come since the last one started."""
        with self.lock:
            labelled = sum(self.log.counts().values())
            if self.retrain["state"] == "running" or labelled - self.labels_at_last_round < self.s.retrain_every:
                return
            if self.missing():
                return
            self.retrain.update(state="running", message="queued", progress=0.0)
        self._run_round()

    def _run_round(self) -> None:
        if self.closing:
            return
        n = 1 + max([r.round for r in self.rounds] + [_number(p) for p in (self.dir / "rounds").iterdir()], default=0)
        folder = self.dir / "rounds" / f"r{n:03d}"
        labels = self.log.state().labels
        per_class = {lab: sum(v == lab for v in labels.values()) for lab in self.labels}
        rnd = Round(round=n, labels=len(labels), per_class=per_class, start_model=self.model_id,
                    start_digest=self.start_digest,
                    dev=self.s.dev or "held-out labels")
        with self.lock:
            self.labels_at_last_round = rnd.labels
            self.retrain.update(state="running", round=rnd.name, message="starting", progress=0.0)
        t0 = now()
        try:
            folder.mkdir(parents=True)  # (in here: on a full disk it fails the round, not the worker thread)
            self._train(rnd, folder, labels)
            rnd.state, status = "done", {"state": "idle", "message": "" if rnd.served else rnd.reason}
        except KitError as e:
            rnd.state, rnd.message = "failed", str(e)
            status = {"state": "failed",
                      "message": f"{rnd.name} failed: {e} (still serving {self.serving or 'no model'})"}
        except Exception as e:  # noqa: BLE001 - a retrain must never take the app down; the log keeps the trace
            logger.error("retrain %s failed:\n%s", rnd.name, traceback.format_exc())
            rnd.state, rnd.message = "failed", f"internal error ({type(e).__name__}: {e})"[:300]
            status = {"state": "failed", "message": f"{rnd.name} failed: {rnd.message}"}
        rnd.seconds = round(now() - t0, 1)
        if rnd.state == "failed":
            _drop_unfinished(folder, model=self.closing)  # (a failed round's model folder tells what it got to)
        if self.closing and rnd.state == "failed":  # stopped by the shutdown: said so, not blamed on the labels
            rnd.state, rnd.message = "interrupted", "the app stopped while this round trained"
        try:
            append_round(self.dir / "rounds.jsonl", rnd)
        except OSError as e:  # a full disk: escaping the worker, it left the page saying "running" for ever
            status = {"state": "failed", "message": f"{rnd.name}: rounds.jsonl can't be written ({e.strerror or e})"}
        with self.lock:  # the round is in the history before the page (or a test) can read "idle"
            self.rounds.append(rnd)
            self.retrain.update(progress=1.0 if rnd.state == "done" else 0.0, **status)
        if not self.closing:
            self.maybe_retrain()  # answers that came in while it trained may already call for the next round

    def _split(self, folder: Path, labels: dict, recipe: str) -> tuple[dict, str]:
        """Write the round's train.csv (and heldout.csv); (the labels it is scored on, the dev file for the run)."""
        if self.s.dev:
            held, dev = read_dev(self.s.dev, self.labels), self.s.dev
        else:
            held = self.heldout.update(labels, self.labels)
            dev = str(folder / "heldout.csv")
            write_rows(folder / "heldout.csv", list(held.items()))
        train = {t: lab for t, lab in labels.items() if t not in held}
        rows = self.start_data.rows(train) if recipe == "tfidf" else list(train.items())
        write_rows(folder / "train.csv", rows)
        write_rows(folder / "answers.csv", list(train.items()))  # the analyst's part of it (_answers_of)
        return held, dev

    def _train(self, rnd: Round, folder: Path, labels: dict) -> None:
        from ..classify.classifier import Classifier

        out = folder / "model"
        rnd.recipe = recipe_for(self.s.retrain_recipe, rnd.labels, not self.start.fine_tuned, self.s.dev)
        held, dev = self._split(folder, labels, rnd.recipe)
        rnd.heldout = len(held)
        if rnd.recipe == "tfidf":  # `baseline`: seconds, and no steps in its log to follow
            command, progress = "baseline", None
            args = baseline_args(folder / "train.csv", out, dev, self.s.seed, self.labels, self.s.retrain_overrides)
        else:
            # dev=null: finetune picks its step and its best folder on a share of the round's own training labels.
            # Picking them on the labels that then judge the round (held-out or --dev) flattered it: 0.5556 vs 0.2778
            # on 6 held-out labels its ensemble had been chosen on. Until each label has 2 training answers there is
            # no such share, and the judging labels stay its dev
            command, progress = "finetune", Progress(folder / "log.txt")
            trained = [lab for t, lab in labels.items() if t not in held]
            own_dev = all(trained.count(lab) >= 2 for lab in self.labels)
            args = finetune_args(self.start.encoder, folder / "train.csv", out, None if own_dev else dev, self.s.seed,
                                 self.labels, self.s.retrain_overrides)
            if own_dev:
                rnd.dev = "10% of the round's own training labels (finetune's dev)"
        if self.s.device != "auto":
            args.append(f"device={self.s.device}")
        proc = run_finetune(args, folder / "log.txt", command=command)
        while True:
            try:
                code = proc.wait(timeout=0.5)
                break
            except subprocess.TimeoutExpired:
                if self.closing:  # Ctrl-C: the round is abandoned, not half-published
                    proc.kill()
                    proc.wait()
                    raise KitError("the app stopped") from None
                phrase, frac = progress.read() if progress else ("fitting TF-IDF", 0.5)
                self.retrain.update(message=phrase, progress=frac)
        if code != 0:
            raise KitError(failure_line(folder / "log.txt", code))
        best, best_dir, scores = best_folder(out)
        self.retrain.update(message=f"loading {best}", progress=0.96)
        clf = Classifier.load(best_dir, device=self.s.device, precision=self.s.precision)
        rnd.best, rnd.folder, rnd.scores = best, str(best_dir.resolve()), scores
        self.retrain.update(message="comparing it with the model serving now", progress=0.98)
        verdict = self._judge(rnd, clf, labels, held)
        rnd.verdict = verdict.public()
        self.start_score = verdict.start_score
        if verdict.served:
            self._score(rnd.name, clf)

    def _judge(self, rnd: Round, clf, labels: dict, held: dict):
        """The round against the model serving now (serving.compare): paired cross-validation of the two TF-IDF
        recipes, or the held-out labels the serving model never saw."""
        from ..config import load_config
        from ..finetune.config import FinetuneConfig

        cfg = load_config(FinetuneConfig, "sentiment", list(self.s.retrain_overrides))  # the round's TF-IDF knobs
        serving = next((r for r in self.rounds if r.name == self.serving), None)
        tfidf = serving.recipe == "tfidf" if serving is not None else self.start.kind == "tfidf"
        return compare(rnd.name, clf, rnd.recipe, labels, held, self.labels, incumbent=self.shared.current(),
                       incumbent_name=self.serving, incumbent_trained=trained_on(self.dir, serving),
                       incumbent_answers=answers_of(self.dir, serving, self.start_data),
                       incumbent_tfidf=tfidf, start=self.start.classifier, start_data=self.start_data,
                       seed=self.s.seed, baseline_cfg=cfg.baseline, dev=bool(self.s.dev))

    def _score(self, name: str, clf=None) -> None:
        """Score the pool with ``clf`` (default: the one serving), then serve it and ask from it."""
        target = clf if clf is not None else self.shared.current()
        self.scoring = {"model": name, "done": 0, "total": len(set(self.pool.texts) - {""})}  # what score() predicts

        def progress(done: int, total: int) -> None:
            self.scoring = {"model": name, "done": done, "total": total}
            if self.closing:
                raise KitError("the app stopped")

        try:
            probs = score(target, self.pool.texts, progress, batch_size=self.s.batch_size)
        finally:
            self.scoring = None
        if clf is not None:
            self.shared.swap(clf)
        self.serving = name
        self.queue.use_model(probs, name)

    # -- the page
    def public(self) -> dict:
        st = self.log.state()
        counts = self.log.counts()
        labelled = sum(counts.values())
        return {"pool": self.pool.name, "rows": len(self.pool.texts), "distinct": len(self.queue.distinct),
                "empty_rows": self.empty_rows, "text_column": self.pool.column,
                "labels": self.labels, "counts": counts, "labelled": labelled, "skipped": len(st.skipped),
                "remaining": self.queue.remaining(set(st.labels) | st.skipped), "labels_file": self.log.path.name,
                "problem": self.log.problem, "source": self.queue.source, "serving": self.serving,
                "strategy": self.s.strategy, "scoring": self.scoring, "retrain": dict(self.retrain),
                "retrain_every": self.s.retrain_every,
                "next_retrain_in": max(0, self.s.retrain_every - (labelled - self.labels_at_last_round)),
                "waiting_for": self.missing(), "dev": self.s.dev and Path(self.s.dev).name,
                "start_model": self.start_name if self.start.classifier is not None else None,
                "start_score": self.start_score, "start_note": self.start_data.note or None,
                "heldout": len(self.heldout.texts) if not self.s.dev else None,
                "rounds": [r.public() for r in self.rounds]}

    def close(self) -> None:
        self.closing = True
        self.worker.shutdown(wait=True, cancel_futures=True)


def teach_dir(labels: str) -> Path:
    """LABELS.teach/ beside LABELS.csv: the rounds of this labels file."""
    path = Path(labels)
    return path.with_name(path.stem + ".teach")


def _drop_unfinished(folder: Path, model: bool = True) -> None:
    """A round that will never finish: its half-written model (``model``) and the fine-tune's checkpoints beside it
    (model.work: round folders are never trained in again, so nothing would resume them or remove them)."""
    if model:
        shutil.rmtree(folder / "model", ignore_errors=True)
    shutil.rmtree(folder / "model.work", ignore_errors=True)


def _number(path: Path) -> int:
    name = path.name
    return int(name[1:]) if name.startswith("r") and name[1:].isdigit() else 0

