"""Teach mode driven with odd pools and label sets (an audit): the page's count of reviews left follows the reviews
it asks (a review spelled with other spacing is asked once, so it is answered once); a round that can't be scored
against the serving model is not served; a restart with other --classes never serves a round trained on the old
ones; a failed or interrupted round is never reported as served; "Label the whole file" after the pool moved is one
4xx line; and a review holding a lone carriage return keeps its answer across a restart."""
from __future__ import annotations

import csv
import json
import uuid
from pathlib import Path

import numpy as np
import pytest

from tests.fixtures_app import start_teach, teach_pool

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

LABELS = ["negative", "neutral", "positive"]


def write_pool(folder: Path, texts: list[str]) -> Path:
    """pool.jsonl (JSONL keeps every character of a text as it is, a lone \\r included)."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "pool.jsonl"
    path.write_text("".join(json.dumps({"review": t}, ensure_ascii=False) + "\n" for t in texts), encoding="utf-8")
    return path


def answer_all(c, label: str = "positive", client: str = "tab1") -> list[dict]:
    """Answer every review the queue asks until it has none; the items answered."""
    done, item = [], c.next(client)
    while item is not None:
        assert len(done) < 100
        r = c.act("answer", uuid.uuid4().hex, item["row"], label, client=client)
        assert r.status == 200, r.body
        done.append(item)
        item = r.json["item"]
    return done


def test_remaining_counts_the_reviews_the_queue_asks_so_an_answered_file_reaches_zero(tiny_classifier_dir, tmp_path):
    """The queue asks each review once after normalization (spacing, NFC), but the page's "remaining" and
    "distinct" counted raw texts: with " 좋아요 " beside "좋아요" every review was answered, the page said 3 of 6 not
    yet answered and waited on "Fetching the next review" for ever."""
    texts = ["좋아요", " 좋아요 ", "좋아요  ", "\u1100\u1161\u11a8 맛있어요", "\uac01 맛있어요", "별로", "   "]
    pool = write_pool(tmp_path, texts)
    with start_teach(tiny_classifier_dir, tmp_path, teach=str(pool)) as c:
        s = c.state()
        assert (s["rows"], s["distinct"], s["empty_rows"], s["remaining"]) == (7, 3, 1, 3)
        assert len(answer_all(c)) == 3
        s = c.state()
        assert s["labelled"] == 3 and s["remaining"] == 0
        r = c.call("POST", "/api/teach/label-pool")  # every spelling carries the analyst's label
        job = c.wait_job(r.json["id"])
        assert job["summary"]["human"] == 6


class Always:
    """A classifier stand-in that answers one label for every text."""

    def __init__(self, label: str):
        self.labels, self.label = LABELS, label

    def predict(self, texts, **_):
        from koelectra_kit.classify.predictions import Predictions

        probs = np.zeros((len(texts), len(LABELS)))
        probs[:, LABELS.index(self.label)] = 1.0
        return Predictions([self.label] * len(texts), probs)


def test_a_round_with_no_label_to_compare_it_on_is_not_served():
    """Every held-out label was one the serving round trained on (the first held-out answers undone, new ones held
    out among the trained texts): nothing scored either model, and the round served as "the first classifier"."""
    from koelectra_kit.app import serving

    held = {"하나": "positive", "둘": "negative", "셋": "neutral"}
    start, incumbent, worse = Always("positive"), Always("negative"), Always("neutral")
    v = serving.compare("r002", worse, "full", {**held, "넷": "positive"}, held, LABELS, incumbent=incumbent,
                        incumbent_name="r001", incumbent_trained=dict(held), incumbent_tfidf=False, start=start,
                        start_data=serving.StartData(), seed=1)
    assert v.served is False and v.n == 0 and v.incumbent == "r001"
    assert v.reason.startswith("not served") and "r001 keeps serving" in v.reason
    # with no model serving yet it is the first classifier, as ever
    first = serving.compare("r001", worse, "full", held, held, LABELS, incumbent=None, incumbent_name=None,
                            incumbent_trained={}, incumbent_tfidf=False, start=None, start_data=serving.StartData(),
                            seed=1)
    assert first.served and "first classifier" in first.reason


@pytest.mark.extended
def test_undoing_the_held_out_answers_never_serves_the_next_round_unscored(tiny_classifier_dir, tmp_path):
    """The same through the app: two full rounds from a fine-tuned start (about a minute on 2 cores)."""
    from koelectra_kit.app.serving import _rank

    _, truth = teach_pool(tmp_path)
    rows = {t: i + 1 for i, t in enumerate(truth)}
    with start_teach(tiny_classifier_dir, tmp_path, retrain_recipe="full") as c:
        ids, want = {}, {lab: 2 for lab in LABELS}
        for t, lab in truth.items():
            if want[lab]:
                want[lab] -= 1
                ids[t] = uuid.uuid4().hex
                assert c.act("answer", ids[t], rows[t], lab).status == 200
        assert c.call("POST", "/api/teach/retrain").status == 200
        assert c.wait_retrain(300)["serving"] == "r001"
        held = [json.loads(x) for x in (tmp_path / "labels.teach" / "heldout.jsonl").read_text().splitlines()]
        for t in held:
            assert c.act("undo", uuid.uuid4().hex, target=ids[t]).status == 200
        # one new answer per label, each ranked after the trained one, so the trained one is held out
        kept = {truth[t]: t for t in ids if t not in held}
        for lab in LABELS:
            t = next(t for t in truth if truth[t] == lab and t not in ids and _rank(t) > _rank(kept[lab]))
            ids[t] = uuid.uuid4().hex
            assert c.act("answer", ids[t], rows[t], lab).status == 200
        assert c.call("POST", "/api/teach/retrain").status == 200
        s = c.wait_retrain(300)
        rnd = s["rounds"][-1]
        assert rnd["state"] == "done" and rnd["verdict"]["n"] == 0 and rnd["served"] is False, rnd
        assert s["serving"] == "r001"


def test_a_restart_with_other_classes_does_not_serve_a_round_of_the_old_ones(tiny_encoder_dir, tmp_path):
    """--classes reordered on a restart (same labels file, every answer still valid): the newest round, trained on
    negative,neutral,positive, was served and its probability columns read as positive,negative,neutral, so the
    page showed another label than the model's as its guess and rounds were judged against wrong scores."""
    _, truth = teach_pool(tmp_path)
    rows = {t: i + 1 for i, t in enumerate(truth)}
    with start_teach(tiny_encoder_dir, tmp_path) as c:
        for t in list(truth)[:30]:
            assert c.act("answer", uuid.uuid4().hex, rows[t], truth[t]).status == 200
        assert c.call("POST", "/api/teach/retrain").status == 200
        assert c.wait_retrain()["serving"] == "r001"
    with start_teach(tiny_encoder_dir, tmp_path, classes=["positive", "negative", "neutral"]) as c:
        s = c.state()
        assert s["labels"] == ["positive", "negative", "neutral"] and s["labelled"] == 30
        assert s["serving"] is None and s["source"] == "random"  # the encoder, until a round of these classes
        assert c.next()["guess"] is None
    with start_teach(tiny_encoder_dir, tmp_path) as c:  # the classes it was trained on: served again
        assert c.state()["serving"] == "r001"


def test_a_failed_or_interrupted_round_is_never_reported_served():
    """A round judged "served" whose scoring then failed (or the app stopped) kept "served": true in /api/teach."""
    from koelectra_kit.app.retrain import Round

    verdict = {"served": True, "reason": "r002 serves: ..."}
    assert Round(round=2, labels=9, per_class={}, state="done", verdict=verdict).served
    assert Round(round=2, labels=9, per_class={}, state="done").served  # from before verdicts: all served
    for state in ("failed", "interrupted"):
        rnd = Round(round=2, labels=9, per_class={}, state=state, verdict=verdict)
        assert rnd.served is False and rnd.public()["served"] is False


def test_label_the_whole_file_after_the_pool_moved_is_one_4xx_line(tiny_classifier_dir, tmp_path):
    path, _ = teach_pool(tmp_path, rows=30)
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        path.rename(tmp_path / "moved.csv")
        r = c.call("POST", "/api/teach/label-pool")  # was a 500 blaming the disk space
        assert r.status == 400 and "no longer there" in r.json["error"] and "\n" not in r.json["error"]
        assert c.store.jobs == {}
        (tmp_path / "moved.csv").rename(path)
        assert c.call("POST", "/api/teach/label-pool").status == 200


def test_a_review_with_a_lone_carriage_return_keeps_its_answer_after_a_restart(tiny_classifier_dir, tmp_path):
    """csv.writer quotes only its line terminator's characters: "좋아\\r요" went into LABELS.csv unquoted, and read
    back as two records, a skip of "좋아" and the answer given to "요", a text not in the pool: the analyst's label
    was lost on a restart (and the review asked again). The rounds' train.csv the same."""
    from koelectra_kit.app.retrain import read_table_rows, write_rows

    texts = ["좋아\r요", "별로\r\n예요", "그냥\n그래요", "평범"]
    pool = write_pool(tmp_path, texts)
    with start_teach(tiny_classifier_dir, tmp_path, teach=str(pool)) as c:
        assert len(answer_all(c, "neutral")) == 4
    with start_teach(tiny_classifier_dir, tmp_path, teach=str(pool)) as c:
        s = c.state()
        assert s["problem"] is None and s["labelled"] == 4 and s["skipped"] == 0 and s["remaining"] == 0
        assert c.teacher.log.state().labels == {t: "neutral" for t in texts}
    rows = [(t, "neutral") for t in texts]
    write_rows(tmp_path / "train.csv", rows)
    assert read_table_rows(tmp_path / "train.csv") == rows
    with open(tmp_path / "train.csv", encoding="utf-8", newline="") as f:
        assert len(list(csv.reader(f))) == 5
    import pandas as pd  # as finetune and baseline read it

    assert pd.read_csv(tmp_path / "train.csv", dtype=str, keep_default_na=False)["review"].tolist() == texts


def test_a_full_disk_during_a_round_ends_it_failed_not_running_for_ever(tiny_classifier_dir, tmp_path, monkeypatch):
    """The round's folder made, or its line appended to rounds.jsonl, on a full disk: the OSError left the worker
    thread with the state "running", so the page said "Retraining" for ever and refused every retrain after it."""
    from koelectra_kit.app import teach

    def full(*_a, **_k):
        raise OSError(28, "No space left on device")

    _, truth = teach_pool(tmp_path)
    rows = {t: i + 1 for i, t in enumerate(truth)}
    monkeypatch.setattr(teach.Teacher, "_train", full)
    monkeypatch.setattr(teach, "append_round", full)
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        for t in list(truth)[:20]:
            assert c.act("answer", uuid.uuid4().hex, rows[t], truth[t]).status == 200
        assert c.call("POST", "/api/teach/retrain").status == 200
        s = c.wait_retrain(timeout=15)
        assert s["retrain"]["state"] == "failed" and "No space left" in s["retrain"]["message"], s["retrain"]
        assert s["serving"] == "clf" and s["labelled"] == 20
        real_mkdir = Path.mkdir

        def mkdir(path, *a, **k):  # the next round's folder can't be made either
            return full() if path.parent.name == "rounds" else real_mkdir(path, *a, **k)

        monkeypatch.setattr(Path, "mkdir", mkdir)
        assert c.call("POST", "/api/teach/retrain").status == 200
        s = c.wait_retrain(timeout=15)
        assert s["retrain"]["state"] == "failed" and "No space left" in s["retrain"]["message"], s["retrain"]


def test_held_out_reviews_with_a_unicode_line_separator_stay_held_out_after_a_restart(tmp_path):
    """heldout.jsonl and rounds.jsonl keep U+2028, U+0085 (...) bare (json.dumps, ensure_ascii=False), and reading
    them with splitlines() cut those lines apart: after a restart such a review was no longer held out, so the next
    rounds trained on the labels that judge them."""
    from koelectra_kit.app.retrain import Round, append_round, read_rounds
    from koelectra_kit.app.serving import HeldOut

    texts = {"좋아\u2028요": "positive", "최고\u2029다": "positive", "나빠\x85요": "negative", "별로\x1e다": "negative"}
    held = HeldOut(tmp_path / "heldout.jsonl")
    held.update(texts, ["positive", "negative"])
    assert held.texts and HeldOut(tmp_path / "heldout.jsonl").texts == held.texts
    append_round(tmp_path / "rounds.jsonl", Round(round=1, labels=4, per_class={}, start_model="m",
                                                  message="failed on '좋아\u2028요'"))
    assert [r.message for r in read_rounds(tmp_path / "rounds.jsonl")] == ["failed on '좋아\u2028요'"]


def test_a_start_folder_refitted_in_place_is_another_start(tiny_encoder_dir, tmp_path):
    """`baseline out=` the --model folder again on more rows kept its path, so a restart served the old start's round
    (0.4648 dev macro-F1) in place of the refitted start (0.4867) and judged new rounds against it. Rounds are now
    tied to what the start folder held; the same folder as it was serves its round again."""
    import shutil

    from safetensors.torch import load_file, save_file

    _, truth = teach_pool(tmp_path)
    rows = {t: i + 1 for i, t in enumerate(truth)}
    encoder = tmp_path / "encoder"
    shutil.copytree(tiny_encoder_dir, encoder)
    with start_teach(encoder, tmp_path) as c:
        for t in list(truth)[:30]:
            assert c.act("answer", uuid.uuid4().hex, rows[t], truth[t]).status == 200
        assert c.call("POST", "/api/teach/retrain").status == 200
        assert c.wait_retrain()["serving"] == "r001"
    weights = load_file(encoder / "model.safetensors")
    shutil.copy(encoder / "model.safetensors", tmp_path / "before.safetensors")
    save_file({k: v + 0.01 for k, v in weights.items()}, encoder / "model.safetensors")  # retrained in place
    with start_teach(encoder, tmp_path) as c:
        s = c.state()
        assert s["serving"] is None and s["source"] == "random" and s["labelled"] == 30  # answers kept; no round
    shutil.copy(tmp_path / "before.safetensors", encoder / "model.safetensors")
    with start_teach(encoder, tmp_path) as c:  # the start as it was: its round serves again
        assert c.state()["serving"] == "r001"


def test_a_round_that_never_finishes_leaves_no_checkpoints(tmp_path):
    """A round's fine-tune checkpoints into model.work (with --retrain-set save_every=N); round folders are never
    trained in again, so a stopped round's checkpoints were left for good beside its removed model."""
    from koelectra_kit.app.teach import _drop_unfinished

    for name in ("model", "model.work/checkpoints/step-00000170"):
        (tmp_path / "r001" / name).mkdir(parents=True)
    _drop_unfinished(tmp_path / "r001", model=False)  # a failed round: its model folder stays, for its log
    assert (tmp_path / "r001" / "model").is_dir() and not (tmp_path / "r001" / "model.work").exists()
    _drop_unfinished(tmp_path / "r001")
    assert not (tmp_path / "r001" / "model").exists()
