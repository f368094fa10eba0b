"""Teach mode (`koelectra-kit app --teach POOL --labels LABELS.csv`) through its JSON API: every answer appended once
(retries, two tabs at once, undo as a retraction), a restart continues, a hand-edited LABELS.csv is re-read and never
overwritten, bad input is one line, a failed retrain keeps the old model, a retrain swaps in the new one, fixes in a
file's results go to the same LABELS.csv, and the guard refuses other sites. The browser test: test_teach_browser.py."""
from __future__ import annotations

import csv
import io
import os
import threading
import uuid
from pathlib import Path

import pytest

from tests.fixtures_app import start_app, start_teach, teach_pool

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")

LABELS = ["negative", "neutral", "positive"]


def lines(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def answer_n(c, truth: dict, n: int, client: str = "tab1") -> list[dict]:
    """Answer ``n`` reviews with their true labels; the items answered."""
    done, item = [], c.next(client)
    for _ in range(n):
        r = c.act("answer", uuid.uuid4().hex, item["row"], truth[item["text"]], client=client)
        assert r.status == 200, r.body
        done.append(item)
        item = r.json["item"]
    return done


def answer_until_ready(c, truth: dict, at_least: int = 12) -> int:
    """Answer until a retrain could run (2 labels of each class) and ``at_least`` answers are in; how many."""
    item = c.next()
    for n in range(1, 200):
        r = c.act("answer", uuid.uuid4().hex, item["row"], truth[item["text"]])
        item = r.json["item"]
        if n >= at_least and r.json["state"]["waiting_for"] is None:
            return n
    raise AssertionError("the pool ran out before each label had 2 answers")


@pytest.fixture
def pool(tmp_path):
    return teach_pool(tmp_path)


def test_answers_are_appended_at_once_and_a_retry_is_kept_once(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        s = c.state()
        assert s["labels"] == LABELS and s["rows"] == len(truth) and s["labelled"] == 0
        item = c.next()
        assert item["text"] in truth and item["guess"] in LABELS + [None]
        aid = uuid.uuid4().hex
        first = c.act("answer", aid, item["row"], "positive")
        assert first.status == 200
        assert lines(tmp_path / "labels.csv")[-1]["answer_id"] == aid  # on disk before the answer came back
        again = c.act("answer", aid, item["row"], "positive")  # the page retrying after a lost response
        assert again.status == 200
        rows = lines(tmp_path / "labels.csv")
        assert [r["answer_id"] for r in rows] == [aid]
        assert rows[0] == {**rows[0], "text": item["text"], "label": "positive", "action": "answer",
                           "row": str(item["row"]), "source": "teach"}
        assert first.json["item"]["row"] != item["row"]  # an answered review is not asked again
        assert c.state()["counts"] == {"negative": 0, "neutral": 0, "positive": 1}
        # another review's answer under a used id was dropped with a 200: the client never knew it was not kept
        other = c.act("answer", aid, first.json["item"]["row"], "negative")
        assert other.status == 400 and f"answer_id '{aid}' is already the id of another review's answer (row " \
            f"{item['row']})" in other.json["error"]
        assert [r["label"] for r in lines(tmp_path / "labels.csv")] == ["positive"]
        for body, message in [({"action": "answer", "row": item["row"], "label": "great"}, "not one of"),
                              ({"action": "answer", "row": 10 ** 6, "label": "positive"}, "is not a review"),
                              ({"action": "maybe", "row": 0}, "answer, skip or undo")]:
            r = c.act(answer_id=uuid.uuid4().hex, **body)
            assert r.status == 400 and message in r.json["error"] and "\n" not in r.json["error"]
        assert len(lines(tmp_path / "labels.csv")) == 1


def test_skip_and_undo_append_and_the_undone_review_comes_back(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        a = c.next()
        b = c.act("answer", "a1", a["row"], truth[a["text"]]).json["item"]
        skipped = c.act("skip", "s1", b["row"]).json
        assert skipped["state"]["skipped"] == 1 and skipped["item"]["row"] not in (a["row"], b["row"])
        undo = c.act("undo", "u1").json  # undoes the skip: the skipped review is shown again
        assert undo["item"]["row"] == b["row"] and undo["state"]["skipped"] == 0
        undo2 = c.act("undo", "u2").json  # then the answer
        assert undo2["item"]["row"] == a["row"] and undo2["state"]["labelled"] == 0
        assert c.act("undo", "u2").json["item"]["row"] == a["row"]  # a retried undo undoes nothing more
        rows = lines(tmp_path / "labels.csv")
        assert [(r["action"], r["answer_id"], r["undoes"]) for r in rows] == [
            ("answer", "a1", ""), ("skip", "s1", ""), ("undo", "u1", "s1"), ("undo", "u2", "a1")]
        c.act("answer", "a2", a["row"], "negative")
        assert c.state()["counts"]["negative"] == 1
        assert c.act("undo", "u3", target="nope").json["error"] == "nothing to undo"


def test_undo_in_one_tab_takes_back_that_tabs_answer_not_another_tabs(tiny_classifier_dir, tmp_path, pool):
    """The page's undo names no target: it took back the latest answer of any tab, so B's undo retracted A's answer
    and left B's own standing."""
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        b = c.next("B")
        c.act("answer", "b1", b["row"], truth[b["text"]], client="B")
        a = c.next("A")
        c.act("answer", "a1", a["row"], truth[a["text"]], client="A")
        undo = c.act("undo", "b-undo", client="B").json
        assert undo["item"]["row"] == b["row"]  # B's own review is shown again
        assert [(r["action"], r["undoes"]) for r in lines(tmp_path / "labels.csv")][-1] == ("undo", "b1")
        assert c.act("undo", "b-undo2", client="B").json["error"] == "nothing to undo"  # A's answer stands
        assert c.state()["labelled"] == 1
        # a tab that answered nothing takes back nobody's answer (it took the latest of any tab: A's)
        assert "nothing to undo in this tab" in c.act("undo", "c-undo", client="C").json["error"]
        assert c.state()["labelled"] == 1
        assert c.act("undo", "x", target=5).status == 400


def test_a_restart_continues_where_it_was(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        asked = answer_n(c, truth, 8)
        skipped = c.next()
        c.act("skip", "skip-1", skipped["row"])
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        s = c.state()
        assert s["labelled"] == 8 and s["skipped"] == 1
        seen = {i["text"] for i in asked} | {skipped["text"]}
        for _ in range(20):
            item = c.next()
            assert item["text"] not in seen
            seen.add(item["text"])
            c.act("answer", uuid.uuid4().hex, item["row"], truth[item["text"]])
    assert len(lines(tmp_path / "labels.csv")) == 8 + 1 + 20


def test_a_hand_edit_is_read_and_a_bad_label_pauses_answers_without_touching_the_file(tiny_classifier_dir, tmp_path,
                                                                                      pool):
    _, truth = pool
    path = tmp_path / "labels.csv"
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        asked = answer_n(c, truth, 3)
        text = path.read_text(encoding="utf-8-sig")
        # the analyst fixes the first label by hand and adds a row of their own (text and label only), no newline
        edited = text.replace(f",{truth[asked[0]['text']]},answer,", ",neutral,answer,", 1)
        edited = edited.replace(f"{truth[asked[0]['text']]},answer", "neutral,answer", 1)
        edited += "손으로 넣은 리뷰 최고,positive,,,,,,\n한국어로 적은 라벨,긍정,,,,,,\n대문자 라벨, Negative ,,,,,,"
        path.write_text(edited, encoding="utf-8")
        s = c.state()
        assert s["problem"] is None and s["labelled"] == 6
        got = c.teacher.log.state().labels
        # typed as finetune reads a training file: the Korean name and another case are the model's labels
        assert got["손으로 넣은 리뷰 최고"] == "positive" and got["한국어로 적은 라벨"] == "positive"
        assert got["대문자 라벨"] == "negative"
        item = c.next()
        assert c.act("answer", "after-edit", item["row"], "negative").status == 200
        after = path.read_text(encoding="utf-8")
        assert after.startswith(edited) and after[len(edited)] == "\n"  # appended on a new line, the edit kept

        bad = after.replace(",negative,answer,", ",negatve,answer,")
        path.write_text(bad, encoding="utf-8")
        s = c.state()
        assert "labels.csv: line" in s["problem"] and "'negatve'" in s["problem"] and "\n" not in s["problem"]
        r = c.act("answer", "while-bad", c.next()["row"], "positive")
        assert r.status == 409 and "negatve" in r.json["error"]
        # nor a round on the labels last read well, without the analyst's edit
        r = c.call("POST", "/api/teach/retrain")
        assert r.status == 409 and "negatve" in r.json["error"] and c.state()["retrain"]["state"] == "idle"
        assert path.read_text(encoding="utf-8") == bad  # untouched
        path.write_text(after, encoding="utf-8")  # fixed
        assert c.state()["problem"] is None
        assert c.act("answer", "while-bad", c.next()["row"], "positive").status == 200


def test_a_labels_file_torn_mid_write_is_set_aside_and_teach_mode_goes_on(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    path = tmp_path / "labels.csv"
    text = next(iter(truth))
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([["text", "label", "action", "row", "source", "answer_id",
                                                     "undoes", "time"], [text, truth[text], "answer", "", "teach",
                                                                         "a1", "", ""]])
    complete = buf.getvalue().encode()
    path.write_bytes(complete + '"배송이 빨라요,\n그리고'.encode())  # killed inside a quoted text: no line end
    with start_teach(tiny_classifier_dir, tmp_path) as c:  # read before as a skip nobody made
        s = c.state()
        assert s["problem"] is None and s["labelled"] == 1 and s["skipped"] == 0
        assert path.read_bytes() == complete
        assert (tmp_path / "labels.csv.torn").read_bytes() == '"배송이 빨라요,\n그리고\n'.encode()
        item = c.next()
        assert c.act("answer", "after-torn", item["row"], "negative").status == 200
        got = lines(path)
        assert [r["answer_id"] for r in got] == ["a1", "after-torn"] and got[1]["text"] == item["text"]


def test_bad_input_at_start_is_one_line_and_exit_2(tiny_classifier_dir, tmp_path, capsys, pool):
    from koelectra_kit.cli import main

    bad_labels = tmp_path / "bad.csv"
    bad_labels.write_text("text,label\n좋아요,great\n", encoding="utf-8")
    no_text = tmp_path / "numbers.csv"
    no_text.write_text("id,score\n1,5\n2,3\n", encoding="utf-8")
    base = ["app", "--model", str(tiny_classifier_dir), "--port", "0"]
    cases = [
        (["--teach", str(no_text), "--labels", str(tmp_path / "l.csv")], "no text column"),
        (["--teach", str(tmp_path / "pool.csv"), "--labels", str(bad_labels)], "'great'"),
        (["--teach", str(tmp_path / "pool.csv")], "--teach needs --labels"),
        (["--teach", str(tmp_path / "pool.csv"), "--labels", str(tmp_path / "l.csv"), "--retrain-every", "0"],
         "--retrain-every 0"),
        (["--teach", str(tmp_path / "pool.csv"), "--labels", str(tmp_path / "l.csv"), "--retrain-set", "epoch=1"],
         "--retrain-set: unknown config key 'epoch'"),
        (["--teach", str(tmp_path / "pool.csv"), "--labels", str(tmp_path / "l.csv"), "--classes", "a,b"],
         "--classes a,b"),
        (["--labels", str(tmp_path / "l.txt")], "give a .csv file"),
        (["--teach", str(tmp_path / "pool.csv"), "--labels", str(tmp_path / "l.csv"), "--retrain-recipe", "svm"],
         "--retrain-recipe"),
    ]
    for extra, message in cases:
        assert main(base + extra) == 2, extra
        err = capsys.readouterr().err.strip()
        assert err.startswith("error:") and message in err and len(err.splitlines()) == 1, (extra, err)
    assert bad_labels.read_text(encoding="utf-8") == "text,label\n좋아요,great\n"


def test_two_tabs_answering_at_once_keep_every_answer_once(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        sent: dict[str, list] = {"tab1": [], "tab2": []}
        shown: dict[str, list] = {"tab1": [], "tab2": []}

        def tab(client: str) -> None:
            item = c.next(client)
            for k in range(15):
                aid = f"{client}-{k}"
                shown[client].append(item["row"])
                r = c.act("answer", aid, item["row"], truth[item["text"]], client=client)
                c.act("answer", aid, item["row"], truth[item["text"]], client=client)  # and its retry
                sent[client].append(aid)
                item = r.json["item"]

        threads = [threading.Thread(target=tab, args=(name,)) for name in sent]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        ids = [r["answer_id"] for r in lines(tmp_path / "labels.csv")]
        assert sorted(ids) == sorted(sent["tab1"] + sent["tab2"])  # each once
        assert not set(shown["tab1"]) & set(shown["tab2"])  # the two tabs were shown different reviews
        assert c.state()["labelled"] == 30


def test_a_failed_retrain_keeps_the_old_model_serving(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    # a knob the app's start-up check accepts but the run refuses: the retrain fails in its subprocess
    from tests.fixtures_app import FAST_RETRAIN

    with start_teach(tiny_classifier_dir, tmp_path, retrain_overrides=FAST_RETRAIN + ["max_length=4096"]) as c:
        answer_until_ready(c, truth)
        r = c.call("POST", "/api/teach/retrain")
        assert r.status == 200, r.body
        assert c.call("POST", "/api/teach/retrain").status == 409  # one at a time
        s = c.wait_retrain()
        assert s["retrain"]["state"] == "failed" and "max_length=4096" in s["retrain"]["message"]
        assert "\n" not in s["retrain"]["message"] and "still serving clf" in s["retrain"]["message"]
        assert s["serving"] == "clf" and s["rounds"][-1]["state"] == "failed"
        assert c.call("POST", "/api/predict", json_body={"text": "좋아요"}).status == 200
        item = c.next()
        assert item["source"] == "clf" and c.act("answer", "after", item["row"], "neutral").status == 200


def test_a_retrain_serves_the_best_folder_and_the_suggestions_come_from_it(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path, retrain_every=12) as c:
        item = c.next()
        assert item["source"] == "clf"
        for n in range(1, 80):  # from the 12th answer on, once each label has 2, a round starts in the background
            r = c.act("answer", f"a{n}", item["row"], truth[item["text"]])
            item = r.json["item"]
            if r.json["state"]["retrain"]["state"] == "running" or c.teacher.rounds:
                break
        assert n >= 12 and r.json["state"]["waiting_for"] is None
        s = c.wait_retrain()
        rnd = s["rounds"][-1]
        assert rnd["state"] == "done", rnd
        assert s["serving"] == "r001" and n - 1 <= rnd["labels"] <= n and set(rnd["scores"]) == {"encoder", "tfidf", "ensemble"}
        assert rnd["best"] in rnd["scores"] and Path(rnd["folder"]).is_dir()
        assert (tmp_path / "labels.teach" / "rounds" / "r001" / "train.csv").exists()
        item = c.next("tab-after")
        assert item["source"] == "r001"
        info = c.call("GET", "/api/info").json
        assert info["model"] == "r001"
    with start_teach(tiny_classifier_dir, tmp_path) as c:  # a restart serves the newest round
        assert c.state()["serving"] == "r001" and c.state()["rounds"][-1]["name"] == "r001"


def test_an_encoder_alone_starts_with_a_random_sample_and_no_classifier(tiny_encoder_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_encoder_dir, tmp_path) as c:
        s = c.state()
        assert s["source"] == "random" and s["serving"] is None and s["labels"] == LABELS
        item = c.next()
        assert item["guess"] is None and item["source"] == "random"
        info = c.call("GET", "/api/info").json
        assert info["classifier"] is False and "no classifier yet" in info["model"]
        r = c.call("POST", "/api/predict", json_body={"text": "좋아요"})
        assert r.status == 409 and "no classifier yet" in r.json["error"]
        assert c.call("POST", "/api/teach/label-pool").status == 409
        r = c.call("POST", "/api/teach/retrain")
        assert r.status == 409 and "at least 2 labelled reviews of each label" in r.json["error"]


def test_from_an_encoder_rounds_fit_tfidf_until_2000_labels_unless_asked_for_the_full_recipe(tiny_encoder_dir,
                                                                                              tiny_classifier_dir,
                                                                                              tmp_path, pool):
    from koelectra_kit.app.retrain import TFIDF_UNTIL, recipe_for

    _, truth = pool
    with start_teach(tiny_encoder_dir, tmp_path) as c:  # auto, the default
        answer_until_ready(c, truth)
        assert c.call("POST", "/api/teach/retrain").status == 200
        s = c.wait_retrain()
        rnd = s["rounds"][-1]
        assert rnd["state"] == "done" and rnd["recipe"] == "tfidf" and rnd["best"] == "tfidf", rnd
        assert set(rnd["scores"]) == {"tfidf"} and (Path(rnd["folder"]) / "classifier.json").is_file()
        assert s["serving"] == "r001" and s["source"] == "r001"
        item = c.next()
        assert item["source"] == "r001" and item["guess"] in LABELS  # asked from the TF-IDF model
    (tmp_path / "full").mkdir()
    teach_pool(tmp_path / "full")
    with start_teach(tiny_encoder_dir, tmp_path / "full", retrain_recipe="full") as c:
        answer_until_ready(c, truth, at_least=40)
        assert c.call("POST", "/api/teach/retrain").status == 200
        rnd = c.wait_retrain()["rounds"][-1]
        assert rnd["recipe"] == "full" and set(rnd["scores"]) == {"encoder", "tfidf", "ensemble"}, rnd
        # it picked its step and folder on its own training labels, not on the held-out ones that judged it
        assert rnd["dev"].startswith("10% of the round's own training labels"), rnd
        report = (tmp_path / "full" / "labels.teach" / "rounds" / "r001" / "log.txt").read_text(encoding="utf-8")
        assert "heldout.csv" not in report
    # where the rounds start: a bare encoder (also as --encoder beside a classifier) or a classifier's own weights
    from koelectra_kit.app.start import start_point

    def fine_tuned(model, encoder=None):
        return start_point(str(model), encoder and str(encoder), None, "cpu", "fp32").fine_tuned

    assert not fine_tuned(tiny_encoder_dir) and not fine_tuned(tiny_classifier_dir, tiny_encoder_dir)
    assert fine_tuned(tiny_classifier_dir) and fine_tuned(tiny_classifier_dir, tiny_classifier_dir)
    # the rule itself: a fine-tuned --model, a --dev file or enough labels keep the full recipe
    assert recipe_for("auto", TFIDF_UNTIL - 1, True, None) == "tfidf"
    assert recipe_for("auto", TFIDF_UNTIL, True, None) == "full"
    assert recipe_for("auto", 100, False, None) == "full" and recipe_for("auto", 100, True, "dev.csv") == "full"
    assert recipe_for("tfidf", 10_000, False, "dev.csv") == "tfidf" and recipe_for("full", 100, True, None) == "full"


def test_label_the_whole_pool_and_fix_a_reviewed_row(tiny_classifier_dir, tmp_path, pool):
    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        r = c.call("POST", "/api/teach/label-pool")
        assert r.status == 200, r.body
        job = c.wait_job(r.json["id"], "pool.csv")
        assert job["state"] == "done" and job["summary"]["rows"] == len(truth)
        row = job["review"][0]
        fix = c.call("POST", "/api/corrections", json_body={"job": job["id"], "row": row["row"], "label": "neutral",
                                                             "answer_id": "fix-1"})
        assert fix.status == 200, fix.body
        got = lines(tmp_path / "labels.csv")[-1]
        assert (got["label"], got["source"], got["row"]) == ("neutral", "correction:pool.csv", str(row["row"]))
        assert got["text"] in truth  # the whole text, not the page's shortened one
        assert c.call("GET", f"/api/jobs/{job['id']}/download/csv").status == 200
        assert (tmp_path / "pool.csv").exists()  # the user's pool is never deleted with the job's copy


def test_corrections_with_labels_alone(tiny_classifier, tiny_classifier_dir, tmp_path):
    from tests.test_app import reviews_csv

    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "w", labels=str(tmp_path / "fixes.csv")) as c:
        assert c.call("GET", "/api/info").json["corrections"] is True
        job = c.label("r.csv", reviews_csv(40, {}).encode())
        row = job["review"][0]
        body = {"job": job["id"], "row": row["row"], "label": "negative", "answer_id": "f1"}
        assert c.call("POST", "/api/corrections", json_body=body).json["new"] is True
        assert c.call("POST", "/api/corrections", json_body=body).json["new"] is False
        for row_value in (10 ** 6, float(row["row"])):  # a float row was written as "6.0" into LABELS.csv
            bad = c.call("POST", "/api/corrections", json_body={**body, "row": row_value, "answer_id": "f2"})
            assert bad.status == 400 and "not among the rows to review" in bad.json["error"]
        assert [r["answer_id"] for r in lines(tmp_path / "fixes.csv")] == ["f1"]
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "w2") as c:  # without --labels: no fixes
        assert c.call("POST", "/api/corrections", json_body=body).status == 404


@pytest.mark.parametrize("headers", [{"Host": "attacker.example"}, {"Origin": "http://attacker.example"}])
def test_the_guard_refuses_teach_writes_from_another_site(tiny_classifier_dir, tmp_path, pool, headers):
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        item = c.next()
        bodies = {"/api/teach/answer": {"client": "x", "action": "answer", "answer_id": "evil", "row": item["row"],
                                        "label": "positive"},
                  "/api/teach/next": {"client": "x"}, "/api/teach/retrain": {}, "/api/teach/label-pool": {},
                  "/api/corrections": {"job": "x", "row": 1, "label": "positive", "answer_id": "evil"}}
        for path, body in bodies.items():
            r = c.call("POST", path, json_body=body, headers=headers)
            assert r.status == 403 and "refused" in r.json["error"], (path, r.body)
        if "Host" in headers:
            assert c.call("GET", "/api/teach", headers=headers).status == 403
        assert not (tmp_path / "labels.csv").exists() and c.store.jobs == {}
        assert c.state()["retrain"]["state"] == "idle"



# ---------------------------------------------------------------------------------------------------------
# Issue 41: a round serves only when it is at least as good; a TF-IDF start keeps its data; the analyst's labels
# reach the downloads; an interrupted round is said
# ---------------------------------------------------------------------------------------------------------

def test_a_round_worse_than_the_starting_model_is_not_served(tiny_encoder_dir, tmp_path):
    from tests.fixtures_app import FAST_RETRAIN, tfidf_start

    start, _, truth = tfidf_start(tmp_path)
    # a round that can only be worse: its TF-IDF so regularized it answers one label (the start's C is 1)
    with start_teach(start, tmp_path, encoder=str(tiny_encoder_dir),
                     retrain_overrides=FAST_RETRAIN + ["baseline.C=0.00001"]) as c:
        s = c.state()
        assert s["serving"] == "tfidf" and s["start_model"] == "tfidf" and s["start_score"] is None
        answer_until_ready(c, truth, at_least=17)
        assert c.call("POST", "/api/teach/retrain").status == 200
        s = c.wait_retrain()
        rnd = s["rounds"][-1]
        v = rnd["verdict"]
        assert rnd["state"] == "done" and rnd["recipe"] == "tfidf" and rnd["served"] is False, rnd
        assert v["method"] == "cross-validation" and v["n"] == rnd["labels"] and v["incumbent"] == "tfidf"
        assert v["score"] < v["incumbent_score"] == v["start_score"] == s["start_score"]
        assert rnd["reason"].startswith("not served") and "tfidf keeps serving" in rnd["reason"]
        assert s["serving"] == "tfidf" and c.next()["source"] == "tfidf"  # still asked from the start
        assert s["retrain"]["message"] == rnd["reason"] and s["heldout"] == rnd["heldout"] >= 3
        # the round trained on the start's 300 rows plus the answers not held out
        train = lines(tmp_path / "labels.teach" / "rounds" / "r001" / "train.csv")
        assert len(train) == 300 + rnd["labels"] - rnd["heldout"]
    with start_teach(start, tmp_path, encoder=str(tiny_encoder_dir)) as c:  # a restart serves what served
        assert c.state()["serving"] == "tfidf" and c.state()["rounds"][-1]["served"] is False


def test_a_tfidf_start_keeps_what_it_knew_and_the_held_out_labels_stay_held_out(tiny_encoder_dir, tmp_path):
    from koelectra_kit.app.serving import HeldOut
    from tests.fixtures_app import tfidf_start

    start, _, truth = tfidf_start(tmp_path)
    with start_teach(start, tmp_path, encoder=str(tiny_encoder_dir)) as c:
        answer_until_ready(c, truth, at_least=12)
        assert c.call("POST", "/api/teach/retrain").status == 200
        first = c.wait_retrain()["rounds"][-1]
        answer_n(c, truth, 10)
        assert c.call("POST", "/api/teach/retrain").status == 200
        s = c.wait_retrain()
    second = s["rounds"][-1]
    assert first["state"] == second["state"] == "done"
    for rnd in (first, second):  # compared to whatever served when it ended, on every label (cross-validated)
        assert rnd["verdict"]["method"] == "cross-validation" and rnd["verdict"]["start_score"] is not None
        assert rnd["served"] == (rnd["verdict"]["score"] >= rnd["verdict"]["incumbent_score"])
    held = HeldOut(tmp_path / "labels.teach" / "heldout.jsonl").texts
    assert held and len(held) == len(set(held)) == second["heldout"] >= first["heldout"]
    for name in ("r001", "r002"):  # no round trains on a held-out text; each trains on the start's rows too
        trained = {r["review"] for r in lines(tmp_path / "labels.teach" / "rounds" / name / "train.csv")}
        assert not trained & set(held) and len(trained) > 300


def test_answers_and_fixes_win_in_every_download(tiny_classifier_dir, tmp_path, pool):
    import pandas as pd

    _, truth = pool
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        answered = answer_n(c, truth, 6)
        c.act("skip", "skip-1", c.next()["row"])  # a skip is not a label
        r = c.call("POST", "/api/teach/label-pool")
        job = c.wait_job(r.json["id"], "pool.csv")
        assert job["summary"]["human"] == 6 and job["state"] == "done"
        assert not {r["row"] for r in job["review"]} & {a["row"] for a in answered}  # not offered again

        def download() -> pd.DataFrame:
            got = c.call("GET", f"/api/jobs/{job['id']}/download/csv")
            assert got.status == 200, got.body
            return pd.read_csv(io.BytesIO(got.body), encoding="utf-8-sig", dtype=str, keep_default_na=False)

        df = download()
        assert len(df) == len(truth) and list(df.columns)[-2:] == ["label_source", "model_label"]
        for a in answered:
            row = df.iloc[a["row"] - 1]  # row numbers are 1-based, as in LABELS.csv
            assert row["review"] == a["text"] and row["label"] == truth[a["text"]] and row["label_source"] == "human"
        assert (df["label_source"] == "human").sum() == 6 and set(df["label_source"]) <= {"human", "model", ""}
        model_rows = df[df["label_source"] == "model"]
        assert (model_rows["label"] == model_rows["model_label"]).all()
        # a fix saved in the results table after the file was labelled: in the next download
        fix = job["review"][0]
        new = next(lab for lab in LABELS if lab != fix["label"])
        assert c.call("POST", "/api/corrections", json_body={"job": job["id"], "row": fix["row"], "label": new,
                                                             "answer_id": "fix-1"}).status == 200
        df = download()
        assert df.iloc[fix["row"] - 1]["label"] == new and df.iloc[fix["row"] - 1]["label_source"] == "human"
        assert lines(tmp_path / "labels.csv")[-1]["row"] == str(fix["row"])  # one row convention
        assert c.call("GET", f"/api/jobs/{job['id']}").json["summary"]["human"] == 7


def test_an_interrupted_round_is_recorded_and_its_number_not_reused(tiny_classifier_dir, tmp_path, pool):
    folder = tmp_path / "labels.teach" / "rounds" / "r001"
    (folder / "model").mkdir(parents=True)  # a round killed mid-training: its half-written model
    (folder / "train.csv").write_text("review,label\n좋아요,positive\n별로,negative\n", encoding="utf-8")
    with start_teach(tiny_classifier_dir, tmp_path) as c:
        s = c.state()
        rnd = s["rounds"][0]
        assert (rnd["name"], rnd["state"]) == ("r001", "interrupted") and "stopped" in rnd["message"]
        assert s["serving"] == "clf" and not (folder / "model").exists()
    with start_teach(tiny_classifier_dir, tmp_path) as c:  # recorded once
        assert [r["name"] for r in c.state()["rounds"]] == ["r001"]
    # the same --model spelled another way (relative, from another folder) keeps the history: dropped, the app served
    # the start model again in place of a round better than it
    with start_teach(os.path.relpath(tiny_classifier_dir), tmp_path) as c:
        assert [r["name"] for r in c.state()["rounds"]] == ["r001"]


def test_the_analysts_labels_are_laid_over_the_models_and_never_offered_for_review(tmp_path):
    """results.with_human_labels + review_rows on a small labelled file: the least confident row, answered by the
    analyst, carries their label, keeps the model's in model_label, and is not among the rows to review; an input
    that has a label_source column of its own gets pred_ names, as label's columns do."""
    import pandas as pd

    from koelectra_kit.app.results import review_rows, with_human_labels
    from koelectra_kit.label.human import human_columns
    from koelectra_kit.label import output_columns

    for columns in (["id", "review"], ["id", "review", "label_source"]):
        names = output_columns(LABELS, columns) | human_columns(columns)
        rows = [{"id": str(i), "review": f"리뷰 {i}", "label_source": "x", names["label"]: "positive",
                 names["confidence"]: str(0.4 + i / 100), **{names[f"prob_{lab}"]: "0.3" for lab in LABELS},
                 names["status"]: "ok"} for i in range(5)]
        model_csv = tmp_path / "model.csv"
        pd.DataFrame(rows)[[*columns, *output_columns(LABELS, columns).values()]].to_csv(
            model_csv, index=False, encoding="utf-8-sig")
        got = with_human_labels(model_csv, tmp_path / "out.csv", "review", names, {"리뷰 0": "negative"})
        assert got == {"per_label": {"negative": 1, "positive": 4}, "human": 1}
        out = pd.read_csv(tmp_path / "out.csv", encoding="utf-8-sig", dtype=str, keep_default_na=False)
        assert out.loc[0, names["label"]] == "negative" and out.loc[0, names["label_source"]] == "human"
        assert out.loc[0, names["model_label"]] == "positive" and (out[names["label_source"]][1:] == "model").all()
        review, _ = review_rows(tmp_path / "out.csv", names, "review", LABELS, 3)
        assert [r["row"] for r in review] == [2, 3, 4] and review[0]["id"] == "1"  # row 1 (answered) left out


def test_a_big_start_is_sampled_for_the_cross_validation_on_both_sides(monkeypatch, sample_dir):
    """A start above CV_START_ROWS: every refit of both recipes knows the same seeded sample of its rows (not all
    of them), the verdict says so, and the starting model's score is its own on every label. Under the cap nothing
    changes: the starting model answers as it is, never refitted."""
    import pandas as pd

    from koelectra_kit.app import serving

    df = pd.read_csv(sample_dir / "reviews_labelled.csv", dtype=str, keep_default_na=False)
    rows = list(zip(df["review"], df["label"]))
    start = serving.StartData([t for t, _ in rows[:300]], [lab for _, lab in rows[:300]])
    labels = {t: lab for t, lab in rows[300:]}
    start_clf = serving.fit_tfidf(start, {}, LABELS)
    clf = serving.fit_tfidf(start, labels, LABELS)
    fitted = []
    real_fit = serving.fit_tfidf

    def fit(data, extra, names, cfg=None):
        fitted.append({t for t in data.texts if t not in extra})
        return real_fit(data, extra, names, cfg)

    monkeypatch.setattr(serving, "fit_tfidf", fit)

    def judge():
        fitted.clear()
        return serving.compare("r001", clf, "tfidf", labels, {}, LABELS, incumbent=start_clf, incumbent_name="tfidf",
                               incumbent_trained={}, incumbent_tfidf=True, start=start_clf, start_data=start, seed=3)

    whole = judge()  # 300 rows, under the cap: only the round's recipe is refitted, on all the start's rows
    assert len(fitted) == serving.CV_FOLDS and all(len(f) == len(set(start.texts) - set(labels)) for f in fitted)
    assert "of the start's" not in whole.reason and whole.start_score == whole.incumbent_score
    monkeypatch.setattr(serving, "CV_START_ROWS", 120)
    sampled = judge()
    assert len(fitted) == serving.CV_FOLDS + 1  # the start's recipe on the sample alone: one fit serves every fold
    assert len({frozenset(f) for f in fitted}) == 1 and len(fitted[0]) <= 120 < len(set(start.texts))
    assert fitted[0] == {t for t in serving.cv_start(start, 3).texts if t not in labels}  # seeded: the same again
    assert "both recipes refitted on 120 of the start's 300 rows" in sampled.reason
    assert sampled.method == "cross-validation"
    assert sampled.start_score == serving.macro_f1(start_clf, labels, LABELS)  # the start as it is, every label
    assert sampled.served == (sampled.score >= sampled.incumbent_score)


def test_a_tfidf_round_is_refitted_with_the_analysts_labels_not_its_start_rows(tmp_path):
    """A TF-IDF round's train.csv holds the start's rows too. Taken as the serving round's labels, they made the
    cross-validation refit the serving side on every start row and the round on a 20,000-row sample of them, and
    rounds lost for it while the verdict said both sides were refitted on the sample. Its answers.csv is what the
    refit takes; every train.csv row stays out of the held-out scoring."""
    from koelectra_kit.app.retrain import Round, answers_of, trained_on, write_rows
    from koelectra_kit.app.serving import StartData

    start = StartData(["시작 하나", "시작 둘", "시작 셋"], ["positive", "negative", "neutral"])
    answers = {"답 하나": "positive", "시작 둘": "positive", "시작 셋": "neutral"}  # one relabelled, one agreeing
    folder = tmp_path / "rounds" / "r001"
    folder.mkdir(parents=True)
    write_rows(folder / "train.csv", start.rows(answers))
    rnd = Round(round=1, labels=3, per_class={}, recipe="tfidf")
    assert trained_on(tmp_path, rnd) == {"시작 하나": "positive", **answers}  # never scored on
    # a round from before answers.csv: its train.csv less the start's rows (an answer the start agrees with is
    # that row)
    assert answers_of(tmp_path, rnd, start) == {"답 하나": "positive", "시작 둘": "positive"}
    write_rows(folder / "answers.csv", list(answers.items()))
    assert answers_of(tmp_path, rnd, start) == answers
    assert trained_on(tmp_path, None) == answers_of(tmp_path, None, start) == {}  # the starting model


def test_a_pool_row_of_spaces_or_invisible_characters_is_an_empty_row_never_asked(tmp_path):
    """textcheck.is_blank decides "empty" for label and finetune; the pool kept "   " and zero-width texts as reviews to
    ask about (and a pool of only those was no error)."""
    from koelectra_kit.app.pool import Pool
    from koelectra_kit.errors import InputError

    path = tmp_path / "pool.csv"
    path.write_text("review\n좋아요\n\"   \"\n\u200b\u200b\n별로\n", encoding="utf-8")
    assert Pool.read(str(path)).texts == ["좋아요", "", "", "별로"]
    path.write_text("review\n\"  \"\n\ufeff\u200b\n", encoding="utf-8")
    with pytest.raises(InputError, match="no review to ask about"):
        Pool.read(str(path))


def test_a_tfidf_start_finds_its_training_rows_from_any_folder_and_says_when_they_are_gone(tmp_path, sample_dir,
                                                                                           monkeypatch):
    """baseline_config.yaml recorded train= as typed (relative): the app started from another folder found 0 of the
    start's rows, and its TF-IDF rounds fit on the answers alone without a word."""
    import shutil

    from koelectra_kit.app.serving import StartData
    from koelectra_kit.cli import main

    work = tmp_path / "work"
    work.mkdir()
    shutil.copy(sample_dir / "reviews_labelled.csv", work / "train.csv")
    monkeypatch.chdir(work)
    assert main(["baseline", "train=train.csv", "out=tfidf", "plots=false", "progress=false"]) == 0
    monkeypatch.chdir(tmp_path)
    names = ["negative", "neutral", "positive"]
    start = StartData.of(work / "tfidf", names)
    assert len(start.texts) > 100 and start.note == ""
    (work / "train.csv").unlink()
    gone = StartData.of(work / "tfidf", names)
    assert gone.texts == [] and "tfidf was fitted on" in gone.note and "your labels alone" in gone.note
