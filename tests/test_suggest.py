"""`koelectra-kit suggest` and `suggest_rows`: the pool rows to label next, least confident first (checked against
probabilities computed here), each text once, near-duplicates and labelled texts skipped, random seeded; with an
encoder, a TF-IDF folder and a fixed stand-in model; bad input is one error line and no file."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.classify.predictions import Predictions
from koelectra_kit.errors import InputError
from koelectra_kit.suggest.rows import NearDuplicates, jaccard, shingles, suggest_rows
from tests.test_bad_input import assert_one_line_error, run_cli

LABELS = ["negative", "neutral", "positive"]


class Fixed:
    """A stand-in classifier: each text's probabilities from a table (confident 'negative' for the rest); it
    records what it was asked to predict."""

    labels = LABELS

    def __init__(self, table: dict):
        self.table, self.asked = table, []

    def predict(self, texts, batch_size: int = 128, **_):
        texts = list(texts)
        self.asked += texts
        probs = np.array([self.table.get(t, [0.9, 0.05, 0.05]) for t in texts], dtype=np.float32).reshape(-1, 3)
        return Predictions([LABELS[i] for i in probs.argmax(1)], probs, [False] * len(texts))


@pytest.fixture(scope="module")
def pool_texts(sample_dir) -> list[str]:
    texts = pd.read_csv(sample_dir / "reviews_unlabelled.csv", dtype=str, keep_default_na=False).review.tolist()
    return [t for t in texts if t.strip()]  # the sample's one empty review left out: every text here is a candidate


@pytest.fixture(scope="module")
def tfidf_dir(tmp_path_factory, sample_dir):
    out = tmp_path_factory.mktemp("suggest-tfidf") / "tfidf"
    assert main(["baseline", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={out}", "baseline.min_df=1",
                 "plots=false"]) == 0
    return out


@pytest.fixture(scope="module")
def tfidf(tfidf_dir):
    from koelectra_kit.classify.classifier import Classifier

    return Classifier.load(tfidf_dir)


def _margin(probs: np.ndarray) -> np.ndarray:
    top = np.sort(probs.astype(np.float64), axis=1)
    return top[:, -1] - top[:, -2]


def _entropy(probs: np.ndarray) -> np.ndarray:
    p = probs.astype(np.float64)
    return -(p * np.log(np.clip(p, 1e-12, 1))).sum(1)


# ---------------------------------------------------------------------------------------------------------
# suggest_rows
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("model", ["tfidf", "tiny_classifier"])
def test_margin_picks_the_smallest_top1_minus_top2_first(request, model, pool_texts):
    clf = request.getfixturevalue(model)
    margin = _margin(clf.predict(pool_texts).probs)
    got = suggest_rows(clf, pool_texts, n=10, threshold=1.0)
    assert got.skipped == {"empty": 0, "labelled": 0, "duplicate": 0, "near_duplicate": 0}
    assert len(got.indices) == 10 == len(set(got.indices.tolist()))
    np.testing.assert_allclose(got.scores, margin[got.indices], atol=1e-5)
    assert np.all(np.diff(got.scores) >= -1e-6)  # least confident first
    rest = np.setdiff1d(np.arange(len(pool_texts)), got.indices)
    assert margin[rest].min() >= got.scores.max() - 1e-5  # no row left out was less confident
    if model == "tfidf":  # deterministic to the last bit: exactly the stable argsort
        assert got.indices.tolist() == np.argsort(margin, kind="stable")[:10].tolist()
    np.testing.assert_allclose(got.probs, clf.predict(pool_texts).probs[got.indices], atol=1e-5)
    assert got.guesses == [clf.labels[i] for i in got.probs.argmax(1)]


def test_entropy_picks_the_largest_entropy_first(tfidf, pool_texts):
    entropy = _entropy(tfidf.predict(pool_texts).probs)
    got = suggest_rows(tfidf, pool_texts, n=12, strategy="entropy", threshold=1.0)
    np.testing.assert_allclose(got.scores, entropy[got.indices], atol=1e-6)
    assert np.all(np.diff(got.scores) <= 1e-9)
    rest = np.setdiff1d(np.arange(len(pool_texts)), got.indices)
    assert entropy[rest].max() <= got.scores.min() + 1e-9


def test_margin_and_entropy_disagree_where_the_docstring_says():
    # a coin toss between two labels vs mass spread over three: margin asks about the first, entropy the second
    clf = Fixed({"둘 중 하나": [0.45, 0.45, 0.10], "셋에 퍼짐": [0.40, 0.30, 0.30]})
    texts = ["둘 중 하나", "셋에 퍼짐"]
    assert suggest_rows(clf, texts, n=1).indices.tolist() == [0]
    assert suggest_rows(clf, texts, n=1, strategy="entropy").indices.tolist() == [1]


def test_a_text_is_picked_once_and_near_duplicates_are_passed_over():
    unsure = [0.34, 0.33, 0.33]
    texts = ["배송 빠르고 좋아요ㅋㅋㅋ",  # 0
             "배송  빠르고   좋아요ㅋㅋㅋㅋㅋ",  # 1: the same after normalization (spaces, ㅋ runs cut to 2)
             "배송 빠르고 좋아요ㅋㅋ!!",  # 2: a near-duplicate of 0 (3-gram Jaccard 0.8)
             "완전 별로에요 환불각",  # 3
             "",  # 4: empty
             "그럭저럭 쓸만함"]  # 5
    clf = Fixed({t: unsure for t in texts[:3]} | {texts[3]: [0.5, 0.3, 0.2], texts[5]: [0.2, 0.2, 0.6]})
    assert jaccard(shingles("배송 빠르고 좋아요ㅋㅋ"), shingles("배송 빠르고 좋아요ㅋㅋ!!")) == pytest.approx(0.8)
    got = suggest_rows(clf, texts, n=10)
    assert got.indices.tolist() == [0, 3, 5]
    assert got.copies.tolist() == [2, 1, 1]
    assert got.skipped == {"empty": 1, "labelled": 0, "duplicate": 1, "near_duplicate": 1}
    assert "" not in clf.asked and texts[1] not in clf.asked  # the repeat and the empty text are not predicted
    # at threshold 1.0 the near-duplicate is a text of its own; the exact repeat never is
    assert suggest_rows(clf, texts, n=10, threshold=1.0).indices.tolist() == [0, 2, 3, 5]


def test_labelled_texts_are_skipped_after_normalization():
    texts = ["재밋어요 강추!!", "노잼ㅠㅠ 시간아까움", "가격대비 괜찮네여"]
    clf = Fixed({t: [0.34, 0.33, 0.33] for t in texts})
    got = suggest_rows(clf, texts, n=3, exclude=["  재밋어요   강추!!!!  ", "다른 리뷰"])
    assert got.indices.tolist() == [1, 2] and got.skipped["labelled"] == 1
    assert texts[0] not in clf.asked


def test_random_is_seeded_and_reproducible(tfidf, pool_texts):
    a = suggest_rows(tfidf, pool_texts, n=15, strategy="random", seed=3)
    b = suggest_rows(tfidf, pool_texts, n=15, strategy="random", seed=3)
    c = suggest_rows(tfidf, pool_texts, n=15, strategy="random", seed=4)
    assert a.indices.tolist() == b.indices.tolist() != c.indices.tolist()
    assert len(set(a.indices.tolist())) == 15
    np.testing.assert_allclose(a.scores, _margin(tfidf.predict(pool_texts).probs)[a.indices], atol=1e-6)
    margin_order = suggest_rows(tfidf, pool_texts, n=15).indices.tolist()
    assert a.indices.tolist() != margin_order


def test_prefix_filter_finds_exactly_what_comparing_with_every_set_finds():
    rng = random.Random(0)
    alphabet = "가나다라마바"
    texts = ["".join(rng.choice(alphabet) for _ in range(rng.randint(1, 9))) for _ in range(400)]
    sets = [shingles(t) for t in texts]
    for threshold in (0.2, 0.5, 0.7, 0.9, 1.0):
        near, picked = NearDuplicates(threshold), []
        for s in sets:
            brute = any(jaccard(s, p) >= threshold - 1e-12 for p in picked)
            assert near.near(s) == brute, (threshold, s)
            if not brute:
                near.add(s)
                picked.append(s)


@pytest.mark.parametrize("n", [0, -1, True, 2.5])
def test_n_below_one_or_not_a_count_is_refused(n):
    from koelectra_kit.errors import ConfigError

    with pytest.raises(ConfigError, match="n="):
        suggest_rows(Fixed({}), ["좋아요"], n=n)


# ---------------------------------------------------------------------------------------------------------
# koelectra-kit suggest
# ---------------------------------------------------------------------------------------------------------


def _pool_csv(path, pool_texts, encoding="utf-8-sig"):
    rows = [{"id": i + 1, "review": t} for i, t in enumerate(pool_texts)]
    pd.DataFrame(rows).to_csv(path, index=False, encoding=encoding)
    return path


@pytest.mark.parametrize("kind", ["csv-utf8-bom", "csv-cp949", "jsonl", "tsv"])
def test_cli_writes_the_rows_with_the_models_guess_and_their_pool_position(capsys, tmp_path, tfidf_dir, tfidf,
                                                                           pool_texts, kind):
    if kind == "csv-cp949":  # cp949 has no emoji
        pool_texts = [t.encode("cp949", errors="ignore").decode("cp949") for t in pool_texts]
    if kind == "tsv":  # a record a line
        pool_texts = [t.replace("\n", " ") for t in pool_texts]
    frame = pd.DataFrame({"id": range(1, len(pool_texts) + 1), "review": pool_texts, "date": "2026-08-01"})
    pool = tmp_path / {"jsonl": "pool.jsonl", "tsv": "pool.tsv"}.get(kind, "pool.csv")
    if kind == "jsonl":
        frame.to_json(pool, orient="records", lines=True, force_ascii=False)
    elif kind == "tsv":  # unquoted, as NLP corpora write it (a quote is text)
        lines = ["\t".join(map(str, row)) for row in frame.itertuples(index=False)]
        pool.write_text("id\treview\tdate\n" + "\n".join(lines) + "\n", encoding="utf-8")
    else:
        frame.to_csv(pool, index=False, encoding="cp949" if kind == "csv-cp949" else "utf-8-sig")
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=8")
    assert rc == 0, err
    assert "wrote 8 rows to label next" in stdout and "top-1 minus top-2" in stdout
    got = pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert list(got.columns) == ["rank", "row", "id", "review", "date", "label", "confidence",
                                 *[f"prob_{lab}" for lab in LABELS], "margin", "entropy", "copies"]
    assert got["rank"].tolist() == [str(i) for i in range(1, 9)]
    rows = got["row"].astype(int).to_numpy()
    assert got.review.tolist() == [pool_texts[i] for i in rows]  # row joins back to the pool
    assert got.id.tolist() == [str(i + 1) for i in rows]
    probs = tfidf.predict(pool_texts).probs
    np.testing.assert_allclose(got[[f"prob_{lab}" for lab in LABELS]].astype(float), probs[rows], atol=1e-4)
    assert got.label.tolist() == [LABELS[i] for i in probs[rows].argmax(1)]
    margin = got.margin.astype(float).to_numpy()
    np.testing.assert_allclose(margin, _margin(probs)[rows], atol=1e-4)
    assert np.all(np.diff(margin) >= 0)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temporary file left behind


def test_cli_with_an_encoder_and_a_labelled_file(capsys, tmp_path, tiny_classifier_dir, pool_texts):
    repeat = "  " + pool_texts[25].replace(" ", "   ")  # the same text once normalized
    pool = _pool_csv(tmp_path / "pool.csv", pool_texts + [repeat, "", pool_texts[1]])
    done = pool_texts[:20]
    labels = tmp_path / "labels.csv"
    pd.DataFrame({"review": [f"  {t}  " for t in done], "label": "positive"}).to_csv(labels, index=False)
    out = tmp_path / "next.jsonl"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tiny_classifier_dir}", f"pool={pool}", f"out={out}",
                              "n=100", f"labelled={labels}", "precision=fp32", "dedupe_threshold=1.0")
    assert rc == 0, err
    got = pd.read_json(out, lines=True, dtype=False)
    picked = set(got.review)
    assert not picked & set(done)  # labelled rows (spaced differently) are never suggested
    assert len(got) == len(pool_texts) - 20 and len(picked) == len(got)  # the rest, each text once
    assert got.loc[got.review == pool_texts[25], "copies"].tolist() == [2]
    assert "passed over: already labelled 21, repeated text 1, empty 1" in stdout
    assert f"only {len(pool_texts) - 20} distinct unlabelled texts left" in stdout


@pytest.mark.parametrize("ext", [".csv", ".parquet"])
def test_cli_a_labelled_table_row_with_an_empty_label_is_not_labelled(capsys, tmp_path, tfidf_dir, pool_texts, ext):
    """A sheet labelled half-way: its blank rows have no answer (as `label --human-labels` and `finetune` read
    them) and are suggested again; a table with no label column counts every row."""
    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    sheet = pd.DataFrame({"text": pool_texts[:6], "label": ["positive", "", "  ", None, "negative", "neutral"]})
    labels = tmp_path / f"labels{ext}"
    sheet.to_csv(labels, index=False) if ext == ".csv" else sheet.to_parquet(labels)
    sent = tmp_path / "sent.csv"
    pd.DataFrame({"text": pool_texts[6:8]}).to_csv(sent, index=False)
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=100",
                              f"labelled=[{labels},{sent}]", "dedupe_threshold=1.0")
    assert rc == 0, err
    picked = set(pd.read_csv(out, dtype=str, keep_default_na=False).review)
    assert picked == set(pool_texts[:12]) - {pool_texts[i] for i in (0, 4, 5, 6, 7)}
    assert "already labelled 5" in stdout


def test_cli_labelled_app_log_is_read_for_its_meaning_an_undone_answer_is_asked_again(capsys, tmp_path, tfidf_dir,
                                                                                      pool_texts):
    from koelectra_kit.io.labellog import COLUMNS

    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = tmp_path / "LABELS.csv"
    events = [[pool_texts[0], "positive", "answer", "1", "teach", "a1", "", ""],
              [pool_texts[1], "negative", "answer", "2", "teach", "a2", "", ""],
              ["", "", "undo", "", "teach", "u1", "a2", ""],  # the analyst took back the answer to text 1
              [pool_texts[2], "", "skip", "3", "teach", "s1", "", ""],
              [pool_texts[3], "neutral", "answer", "4", "teach", "a3", "", ""],
              [pool_texts[3], "positive", "answer", "4", "teach", "a4", "", ""]]  # changed, still answered
    pd.DataFrame(events, columns=COLUMNS).to_csv(log, index=False)
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={log.parent / 'pool.csv'}",
                              f"out={out}", "n=100", f"labelled={log}", "dedupe_threshold=1.0")
    assert rc == 0, err
    picked = set(pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False).review)
    assert pool_texts[1] in picked  # undone: no answer any more, so it is asked again
    assert not picked & {pool_texts[0], pool_texts[2], pool_texts[3]}  # answered, skipped, answered twice
    assert "already labelled 3" in stdout


def _line(*fields) -> str:
    """One CSV line as the app writes it (a text with a comma quoted), without its line end."""
    import csv
    import io

    buf = io.StringIO()
    csv.writer(buf, lineterminator="").writerow(fields)
    return buf.getvalue()


def _app_log(path, pool_texts, tail: str | bytes):
    """A LABELS.csv as the app writes it: text 0 answered, text 1 skipped, then ``tail`` (no line end after it)."""
    from koelectra_kit.io.labellog import COLUMNS

    lines = [_line(*COLUMNS), _line(pool_texts[0], "positive", "answer", "1", "teach", "a1", "", "2025-01-02T10:11:12"),
             _line(pool_texts[1], "", "skip", "2", "teach", "a2", "", "2025-01-02T10:11:15")]
    tail = tail if isinstance(tail, bytes) else tail.encode()
    path.write_bytes("\ufeff".encode() + "".join(line + "\n" for line in lines).encode() + tail)
    return path


TORN_TAILS = {  # the app killed while it appended an answer to text 5: the line cut off where it was
    "label cut": lambda t: _line(t, "posi").encode(),
    "text cut inside a quote": lambda t: f'"{t[:6]}'.encode(),  # the csv module reads on to the end of the file
    "character cut in two": lambda t: _line(t, "부정").encode()[:-1],
}


@pytest.mark.parametrize("tail", TORN_TAILS.values(), ids=TORN_TAILS.keys())
def test_cli_labelled_app_log_torn_mid_write_is_read_without_its_last_line_and_left_as_it_is(capsys, tmp_path,
                                                                                            tfidf_dir, pool_texts,
                                                                                            tail):
    """As `label --human-labels` reads it: the torn answer never counts (the app sets that line aside and the page
    asks it again), one warning line, the file not touched; a line cut in a UTF-8 character is no error."""
    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = _app_log(tmp_path / "LABELS.csv", pool_texts, tail(pool_texts[5]))
    data = log.read_bytes()
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=100",
                              f"labelled={log}", "dedupe_threshold=1.0")
    assert rc == 0, err
    warned = [line for line in err.splitlines() if line.strip()]
    assert len(warned) == 1 and warned[0].startswith(f"warning: {log}: line 4 was cut off mid-write"), err
    assert warned[0].endswith("read without it (the file is left as it is)")
    picked = set(pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False).review)
    assert pool_texts[5] in picked and not picked & {pool_texts[0], pool_texts[1]}
    assert "already labelled 2" in stdout
    assert log.read_bytes() == data and sorted(p.name for p in tmp_path.iterdir()) == ["LABELS.csv", "next.csv",
                                                                                       "pool.csv"]


@pytest.mark.parametrize("label", ["positive", "긍정"])
def test_cli_labelled_app_log_whose_complete_last_line_lacks_a_line_end_reads_as_before(capsys, tmp_path, tfidf_dir,
                                                                                     pool_texts, label):
    """Every field there, no final newline (typed by hand, or saved so): an answer, as ever (a label outside the
    model's on such a line is the file's error: the test below)."""
    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = _app_log(tmp_path / "LABELS.csv", pool_texts,
                   _line(pool_texts[5], label, "answer", "6", "teach", "a3", "", "2025-01-02T10:11:20"))
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=100",
                              f"labelled={log}", "dedupe_threshold=1.0")
    assert rc == 0 and not err.strip(), err
    picked = set(pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False).review)
    assert not picked & {pool_texts[0], pool_texts[1], pool_texts[5]}
    assert "already labelled 3" in stdout


@pytest.mark.parametrize("typo", [
    _line("좋아요", "posi") + "\n",  # typed by hand under the app's header
    _line("좋아요", "posi", "answer", "6", "teach", "a3", "", "2025-01-02T10:11:20"),  # every field, no line end
], ids=["hand-typed", "complete, no line end"])
def test_cli_labelled_app_log_with_a_typo_label_is_the_error_line_label_and_finetune_give(capsys, tmp_path, tfidf_dir,
                                                                                         tfidf, pool_texts, typo):
    """A label outside the model's (``posi``) is a file the app, ``label --human-labels`` and ``finetune train=``
    refuse, naming the line and the label. Suggest counted that text as answered, exit 0: the analyst learned of the
    typo only after labelling the next batch. Now the same line, before anything is written."""
    from koelectra_kit.app.labelstore import LabelLog
    from koelectra_kit.io.labelled import read_labelled
    from koelectra_kit.label.human import read_human_labels

    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = _app_log(tmp_path / "LABELS.csv", pool_texts, typo)
    data = log.read_bytes()
    out = tmp_path / "next.csv"
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", f"labelled={log}")
    said = "line 4: label 'posi': not one of the labels negative, neutral, positive; fix the file"
    assert_one_line_error(rc, err, f"error: {log}: {said}")
    assert err.strip() == f"error: {log}: {said}" and not out.exists()
    with pytest.raises(InputError) as label:
        read_human_labels(log, list(tfidf.labels))
    with pytest.raises(InputError) as finetune:
        read_labelled(log, list(tfidf.labels))
    assert str(label.value) == f"human_labels {log}: {said}"
    assert str(finetune.value) == f"{log}: {said}, or map them with label_map="
    assert LabelLog(log, list(tfidf.labels)).problem.startswith(f"LABELS.csv: {said} (the app has not changed it")
    assert log.read_bytes() == data


def test_cli_labelled_app_log_error_names_the_line_an_editor_shows(capsys, tmp_path, tfidf_dir, pool_texts):
    """A review with a line end in it (lines 3-4) and a blank line (5) above a mistyped action on line 7: counted as
    pandas' rows, which know neither, the message said line 5, where the analyst's editor shows another answer."""
    from koelectra_kit.io.labellog import COLUMNS

    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = tmp_path / "LABELS.csv"
    log.write_text("\n".join([_line(*COLUMNS), _line(pool_texts[0], "positive", "answer", "1", "teach", "a1", "", ""),
                              '"배송 빨라요\n포장도 좋고",positive,answer,,,,,', "",
                              _line(pool_texts[1], "", "skip", "2", "teach", "s1", "", ""),
                              _line(pool_texts[5], "positive", "answr", "6", "teach", "a3", "", "")]) + "\n",
                   encoding="utf-8")
    out = tmp_path / "next.csv"
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", f"labelled={log}")
    assert_one_line_error(rc, err, f"{log}: line 7: action 'answr' (answer, skip or undo); fix the file")
    assert not out.exists()


def test_cli_labelled_app_log_with_a_bad_action_is_one_error_line(capsys, tmp_path, tfidf_dir, pool_texts):
    """A mistyped action alone names no label set (read with its labels unchecked, it was a traceback, TypeError)."""
    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = _app_log(tmp_path / "LABELS.csv", pool_texts,
                   _line(pool_texts[5], "positive", "answr", "6", "teach", "a3", "", "") + "\n")
    out = tmp_path / "next.csv"
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", f"labelled={log}")
    assert_one_line_error(rc, err, "LABELS.csv: line 4: action 'answr' (answer, skip or undo); fix the file")
    assert not out.exists()


def _suggested(capsys, tmp_path, tfidf_dir, pool_texts, lines: list[str], end: str = "\n") -> tuple[set, str]:
    """The reviews suggest picks from ``pool_texts[:12]`` with a LABELS.csv of the app's header and ``lines`` (each
    ended by a line end, the last by ``end``), and its stdout."""
    from koelectra_kit.io.labellog import COLUMNS

    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = tmp_path / "LABELS.csv"
    log.write_bytes(("\ufeff" + "\n".join([_line(*COLUMNS), *lines]) + end).encode())
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=100",
                              f"labelled={log}", "dedupe_threshold=1.0")
    assert rc == 0 and not err.strip(), err
    return set(pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False).review), stdout


# A label typed by hand the way `finetune` reads one: the app, `label --human-labels` and `finetune` take all of them
HAND_LABELS = ["positive", "긍정", "Neg", "pos"]


@pytest.mark.parametrize("label", HAND_LABELS)
@pytest.mark.parametrize("end", ["\n", ""], ids=["line end", "no final line end"])
def test_cli_labelled_app_log_counts_rows_typed_by_hand_with_only_text_and_label(capsys, tmp_path, tfidf_dir,
                                                                                 pool_texts, label, end):
    """docs/app.md invites hand-typed rows such as ``좋아요,positive`` under the app's 8-column header. Read row by
    row, such a row was a malformed line, dropped: the text the analyst labelled by hand was suggested again. Now
    read as the app and ``label --human-labels`` read it: an answer (``text,`` with no label: a skip), beside the
    app's own full-width answer, skip and undo."""
    t = pool_texts
    lines = [_line(t[0], "positive", "answer", "1", "teach", "a1", "", "2025-01-02T10:11:12"),  # full width
             _line(t[1], "", "skip", "2", "teach", "s1", "", "2025-01-02T10:11:13"),  # skipped: labelled
             _line(t[2], "negative", "answer", "3", "teach", "a2", "", "2025-01-02T10:11:14"),
             _line("", "", "undo", "", "teach", "u1", "a2", "2025-01-02T10:11:15"),  # text 2 asked again
             _line(t[3], ""),  # typed by hand, no label: a skip (two fields of eight)
             _line(t[4], label)]  # typed by hand: an answer, last (without a line end: still an answer)
    picked, stdout = _suggested(capsys, tmp_path, tfidf_dir, pool_texts, lines, end)
    assert not picked & {t[0], t[1], t[3], t[4]}
    assert picked == set(t[:12]) - {t[0], t[1], t[3], t[4]}  # text 2 among them: its answer was undone
    assert "already labelled 4" in stdout


def test_cli_labelled_app_log_a_hand_typed_answer_after_an_undo_stands_and_a_later_undo_of_it_is_none(
        capsys, tmp_path, tfidf_dir, pool_texts):
    """Short rows take their place in the log's order: an answer typed by hand after the app's undone one is the
    text's latest answer; a hand-typed row has no ``answer_id``, so no undo retracts it; a later app skip of a
    hand-answered text still counts it as labelled (a skip is labelled for suggest)."""
    t = pool_texts
    lines = [_line(t[0], "neutral", "answer", "1", "teach", "a1", "", ""),
             _line("", "", "undo", "", "teach", "u1", "a1", ""),
             _line(t[0], "중립"),  # answered again by hand after the undo
             _line(t[1], "positive"),
             _line("", "", "undo", "", "teach", "u2", "", ""),  # names no answer: retracts nothing
             _line(t[2], "negative"),
             _line(t[2], "", "skip", "3", "teach", "s1", "", "")]
    picked, stdout = _suggested(capsys, tmp_path, tfidf_dir, pool_texts, lines)
    assert picked == set(t[:12]) - {t[0], t[1], t[2]}
    assert "already labelled 3" in stdout


def test_cli_labelled_app_log_with_a_row_wider_than_its_header_is_one_error_line(capsys, tmp_path, tfidf_dir,
                                                                                  pool_texts):
    """More fields than the header (a text with an unquoted comma, typed by hand): its text can't be told, so, as
    ``label --human-labels`` and ``finetune`` do, one error line; row by row, it was dropped without a word."""
    from koelectra_kit.io.labellog import COLUMNS

    pool = _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    log = tmp_path / "LABELS.csv"
    log.write_text("\n".join([_line(*COLUMNS), _line(pool_texts[0], "positive", "answer", "1", "teach", "a1", "", ""),
                              "배송 빨라요, 포장도 좋고,positive,answer,2,teach,a2,,2025-01-02T10:11:12"]) + "\n",
                   encoding="utf-8")
    out = tmp_path / "next.csv"
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", f"labelled={log}")
    assert_one_line_error(rc, err, f"{log}: could not parse as csv")
    assert "Expected 8 fields in line 3, saw 9" in err
    assert not out.exists()


def test_cli_malformed_and_empty_rows_are_never_suggested_and_rows_count_them(capsys, tmp_path, tfidf_dir):
    pool = tmp_path / "pool.csv"
    pool.write_text('id,review\n1,배송 빠르고 좋아요\n2,"닫히지 않은 따옴표\n3,\n4,별로에요 다신 안삼\n', encoding="utf-8")
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=5")
    assert rc == 0, err
    got = pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert sorted(zip(got.row, got.id)) == [("0", "1"), ("3", "4")]  # rows as label writes them: malformed included
    assert "passed over: empty 1, malformed line 1" in stdout


def test_cli_a_json_object_or_binary_text_is_never_suggested_and_utf8_bytes_are_read(capsys, tmp_path, tfidf_dir):
    """A JSONL text that is an object or array, or Parquet bytes that are not UTF-8, were scored as their Python repr
    and suggested ("{'t': '별로예요'}" to label next)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    pool = tmp_path / "pool.jsonl"
    pool.write_text('{"id": 1, "review": "배송 빠르고 좋아요"}\n{"id": 2, "review": {"t": "별로예요"}}\n'
                    '{"id": 3, "review": ["별로", "예요"]}\n', encoding="utf-8")
    out = tmp_path / "next.csv"
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=5")
    assert rc == 0, err
    got = pd.read_csv(out, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert got.row.tolist() == ["0"]
    pq.write_table(pa.table({"review": ["별로에요 다신 안삼".encode(), b"\xff\xfe"]}), tmp_path / "b.parquet")
    rc, stdout, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={tmp_path / 'b.parquet'}",
                              f"out={out}", "n=5", "overwrite=true", "text_column=review")
    assert rc == 0, err
    assert pd.read_csv(out, encoding="utf-8-sig", dtype=str).row.tolist() == ["0"]


def test_cli_pool_column_named_like_an_output_column_gets_prefixed_columns(capsys, tmp_path, tfidf_dir):
    pool = tmp_path / "pool.csv"
    pd.DataFrame({"review": ["좋아요 최고", "별로에요"], "label": ["?", "?"]}).to_csv(pool, index=False)
    out = tmp_path / "next.csv"
    assert run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}")[0] == 0
    cols = pd.read_csv(out, encoding="utf-8-sig").columns.tolist()
    assert cols[:4] == ["suggest_rank", "suggest_row", "review", "label"] and "suggest_label" in cols


BAD = {
    "pool without a text column": (lambda p: p.write_text("id,score\n1,5\n2,3\n"), [], "no text column"),
    "unknown text column": (None, ["text_column=nope"], "no column 'nope'"),
    "n below one": (None, ["n=0"], "n=0: ask for at least 1 row"),
    "n not a number": (None, ["n=many"], "n: expected an integer"),
    "unknown strategy": (None, ["strategy=confidence"], "strategy: expected one of"),
    "threshold out of range": (None, ["dedupe_threshold=1.5"], "dedupe_threshold=1.5"),
    "labelled without a text column": (None, ["labelled=LABELS"], "labels.csv: no text column"),
    "labelled missing": (None, ["labelled=MISSING"], "file not found"),
    "header only": (lambda p: p.write_text("review\n"), [], "no rows under it"),
    "numbers for text": (lambda p: p.write_text("review\n1\n2\n3\n"), [], "holds only numbers"),
    "out is the pool": (None, ["out=POOL", "overwrite=true"], "is also the pool file"),
    "out not a table": (None, ["out=OUTDIR/next.xlsx"], "out="),
    "model missing": (None, ["model=MISSINGMODEL"], "nomodel"),
    "unknown key": (None, ["stratgy=margin"], "did you mean strategy"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_bad_input_is_one_error_line_and_writes_nothing(capsys, tmp_path, tfidf_dir, pool_texts, case):
    write_pool, extra, needle = BAD[case]
    pool = tmp_path / "pool.csv"
    if write_pool:
        write_pool(pool)
    else:
        _pool_csv(pool, pool_texts[:10])
    labels = tmp_path / "labels.csv"
    labels.write_text("id,label\n1,positive\n")
    subst = {"LABELS": str(labels), "MISSINGMODEL": str(tmp_path / "nomodel"), "MISSING": str(tmp_path / "none.csv"),
             "POOL": str(pool), "OUTDIR": str(tmp_path)}
    extra = [k + "=" + next((subst[w] + v[len(w):] for w in subst if v.startswith(w)), v)
             for k, v in (e.split("=", 1) for e in extra)]
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    out = tmp_path / "next.csv"
    args = {"model": str(tfidf_dir), "pool": str(pool), "out": str(out)} | dict(e.split("=", 1) for e in extra)
    rc, _, err = run_cli(capsys, "suggest", *(f"{k}={v}" for k, v in args.items()))
    assert_one_line_error(rc, err, needle)
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # nothing written, nothing changed


def test_an_existing_out_is_kept_unless_overwrite(capsys, tmp_path, tfidf_dir, pool_texts):
    pool = _pool_csv(tmp_path / "pool.csv", pool_texts)
    out = tmp_path / "next.csv"
    out.write_text("rank,row,review,my_label\n1,0,x,positive\n")
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}")
    assert_one_line_error(rc, err, "exists; pass overwrite=true")
    assert out.read_text().endswith("positive\n")
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", "n=3",
                         "overwrite=true")
    assert rc == 0, err
    assert len(pd.read_csv(out, encoding="utf-8-sig")) == 3


def test_help_lists_the_command(capsys):
    assert main(["--help"]) == 0
    assert "suggest" in capsys.readouterr().out
    assert main(["suggest", "--help"]) == 0
    assert "strategy (margin | entropy | random" in capsys.readouterr().out


def test_combinations_of_strategy_and_threshold_never_repeat_a_text(tfidf, pool_texts):
    texts = pool_texts + pool_texts[:10] + [t + "!!" for t in pool_texts[10:20]]
    for strategy, threshold in itertools.product(["margin", "entropy", "random"], [0.5, 0.7, 1.0]):
        got = suggest_rows(tfidf, texts, n=len(texts), strategy=strategy, threshold=threshold)
        keys = [shingles(texts[i]) for i in got.indices]
        assert all(jaccard(a, b) < threshold for a, b in itertools.combinations(keys, 2)), (strategy, threshold)


SEPARATED = {  # a table saved as .csv with other separators: read with commas, its header is one column
    "semicolons": ("review;label\n배송 빨라요;positive\n별로예요;negative\n",
                   "holding semicolons: the fields are separated by semicolons, not commas as csv is read; save it "
                   "with commas (Excel: 'CSV UTF-8') or with tabs as a .tsv"),
    "tabs": ("review\tlabel\n배송 빨라요\tpositive\n별로예요\tnegative\n",
             "holding tabs: the fields are separated by tabs, not commas as csv is read; "),
}


@pytest.mark.parametrize("where", ["pool", "pool text_column=", "labelled", "teach pool"])
@pytest.mark.parametrize("sep", list(SEPARATED))
def test_a_csv_separated_by_semicolons_or_tabs_says_so_as_label_does(capsys, tmp_path, tfidf_dir, pool_texts, where,
                                                                      sep):
    """It was "no text column ...; columns present: review;label" (or a raw tab in the line), not what is wrong."""
    from koelectra_kit.app.pool import Pool

    content, message = SEPARATED[sep]
    odd = tmp_path / "odd.csv"
    odd.write_text(content, encoding="utf-8")
    out = tmp_path / "next.csv"
    if where == "teach pool":  # the app's --teach POOL: no format option there, so the way past it is the file's name
        with pytest.raises(InputError) as said:
            Pool.read(str(odd))
        assert message in str(said.value) and str(said.value).endswith("and give it again"), said.value
        assert (sep == "tabs") == ("name the file .tsv" in str(said.value))
        return
    pool = odd if where.startswith("pool") else _pool_csv(tmp_path / "pool.csv", pool_texts[:12])
    extra = {"pool": [], "pool text_column=": ["text_column=review"], "labelled": [f"labelled={odd}"]}[where]
    rc, _, err = run_cli(capsys, "suggest", f"model={tfidf_dir}", f"pool={pool}", f"out={out}", *extra)
    assert_one_line_error(rc, err, f"{odd}: the header is one column", message,
                          *(["read it as TSV: format=tsv, or name the file .tsv"] if sep == "tabs" else []))
    assert not out.exists()


def test_a_label_typo_in_a_plain_labelled_file_is_refused(tmp_path, capsys, tiny_classifier_dir, sample_dir):
    """docs/label.md: a label typo in labelled= is refused; only the app's log was checked, and a plain table's
    `posi` row counted as answered (exit 0), in a file finetune and baseline refuse. A column of another scheme
    (all ratings, none of the model's names) is no typo: its rows count as answered, as before."""
    from koelectra_kit.cli import main

    pool = sample_dir / "reviews_unlabelled.csv"
    texts = pd.read_csv(pool, dtype=str, keep_default_na=False)["review"].tolist()
    typo = tmp_path / "typo.csv"
    pd.DataFrame({"review": texts[:2], "label": ["negative", "posi"]}).to_csv(typo, index=False)
    argv = ["suggest", f"model={tiny_classifier_dir}", f"pool={pool}", "n=3", "overwrite=true"]
    assert main([*argv, f"out={tmp_path / 'a.csv'}", f"labelled={typo}"]) == 2
    assert "typo.csv line 3: label 'posi' is none of the model's" in capsys.readouterr().err
    ratings = tmp_path / "ratings.csv"
    pd.DataFrame({"review": texts[:2], "label": ["1", "9"]}).to_csv(ratings, index=False)
    assert main([*argv, f"out={tmp_path / 'b.csv'}", f"labelled={ratings}"]) == 0
