"""Reports for any user's label set, not only the three sentiments: no "binary accuracy" (nor a sentiment-analysis
tag) for a 5-point scale or a topic set, Korean and long label names aligned in every printed table, a label holding
a comma listed as one, confusion.png's names drawn with a Korean font matplotlib's stale cache does not list (a key
where there is none), and TF-IDF's own advice when it does not beat the majority class."""
from __future__ import annotations

import json
import re
import unicodedata
from types import SimpleNamespace

import numpy as np
import pytest

from koelectra_kit.classify.metrics import classification_report, format_report

SCALE = ["very negative", "negative", "neutral", "positive", "very positive"]
HANGUL = ["기쁨", "슬픔", "웃김, 재미있음"]


def display_width(text: str) -> int:
    """Terminal columns (Hangul 2), counted here rather than by the helper under test."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def _report(labels, n=60, seed=0):
    rng = np.random.default_rng(seed)
    y = rng.integers(0, len(labels), n)
    scores = rng.random((n, len(labels)))
    return classification_report(y, scores.argmax(1), labels, scores=scores)


# -- 1. the binary figure: a sentiment set only --------------------------------------------------------------------


@pytest.mark.parametrize("labels", [SCALE, ["negative", "neutral", "positive", "mixed"], ["부정", "중립", "긍정", "혼합"]])
def test_no_binary_figure_for_a_scale_or_a_set_with_other_classes(labels):
    """On the 5-point scale 'binary accuracy on the negative/positive rows' dropped the 'very' rows unsaid."""
    report = _report(labels)
    assert "binary" not in report
    assert "binary accuracy" not in format_report(report)


def test_the_three_sentiments_keep_their_binary_figure_in_any_spelling():
    from koelectra_kit.classify.metrics import sentiment_roles

    for labels in (["negative", "neutral", "positive"], ["부정", "중립", "긍정"], ["neg", "pos", "neu"]):
        assert _report(labels)["binary"]["n"] > 0, labels
    assert "binary" not in _report(["negative", "positive"])  # the accuracy itself: no second figure
    assert sentiment_roles(["부정", "긍정"]) == {"negative": 0, "positive": 1}
    assert sentiment_roles(SCALE) is None and sentiment_roles(["positive", "negative", "negative"]) is None


# -- 3a. display width ------------------------------------------------------------------------------------------------


def _columns_before(line: str, marker: str) -> int:
    return display_width(line[:line.index(marker)])


def test_label_summary_aligns_korean_and_long_labels():
    from koelectra_kit.label.summary import LabelSummary, format_summary

    s = LabelSummary(rows=111, per_label={"기쁨": 1, "neutral": 10, "a much longer label name": 100}, output="o.csv")
    rows = format_summary(s).splitlines()[1:4]
    ends = {display_width(line[:line.rindex("%") + 1]) for line in rows}
    assert len(ends) == 1, rows  # each count and share ends in the same terminal column


def test_references_table_aligns_a_korean_majority_label():
    from koelectra_kit.classify.references import format_references

    report = {"accuracy": 0.5, "macro_f1": 0.4}
    refs = {"majority": {"name": "always '기쁨'", "accuracy": 0.3, "macro_f1": 0.1},
            "tfidf": {"name": "TF-IDF + logistic regression", "accuracy": 0.4, "macro_f1": 0.3}}
    lines = format_references(report, refs).splitlines()[2:5]
    assert len({_columns_before(line, "0.") for line in lines}) == 1, lines


# -- 3b. the text confusion matrix ----------------------------------------------------------------------------------


def test_a_confusion_matrix_of_long_labels_numbers_its_columns_and_the_sentiment_one_is_unchanged():
    long = [f"topic number {i} with a long descriptive name" for i in range(12)]
    text = format_report(_report(long, n=200))
    matrix = text[text.index("confusion matrix"):].splitlines()
    assert max(display_width(line) for line in matrix) <= 120, max(map(len, matrix))
    assert "numbered as the rows" in matrix[0]
    assert matrix[1].split() == [f"#{i}" for i in range(12)]
    assert matrix[2].strip().startswith(f"#0 {long[0]}") and matrix[13].strip().startswith(f"#11 {long[11]}")

    three = classification_report([0, 1, 2, 2, 0], [0, 2, 2, 2, 1], ["negative", "neutral", "positive"])
    assert format_report(three).splitlines()[-5:] == [  # as it was before numbered columns
        "  confusion matrix (rows = true label, columns = predicted)",
        "            negative   neutral  positive",
        "  negative         1         1         0",
        "  neutral          0         0         1",
        "  positive         0         0         2"]


# -- 3c. a label holding a comma ------------------------------------------------------------------------------------


def test_suggest_lists_a_label_with_a_comma_as_one():
    from koelectra_kit.suggest.file import SuggestSummary

    s = SuggestSummary(out="next.csv", strategy="margin", rows=10, picked=3, asked=3, skipped={}, malformed=0,
                       guesses={"기쁨": 2, "웃김, 재미있음": 1})
    line = next(x for x in s.lines() if x.startswith("the model's guesses"))
    assert line == 'the model\'s guesses: 기쁨 2, "웃김, 재미있음" 1'


def _card(labels):
    from koelectra_kit.classify.modelcard import classifier_card
    from koelectra_kit.finetune import FinetuneConfig

    cfg = FinetuneConfig(model="enc", train="topics.csv", labels=list(labels), out="runs/topics")
    report = _report(labels)
    result = {"dev": report, "best": {"step": 10},
              "train": {"rows": 100, "steps": 10, "epochs": 1, "stopped": "finished", "lr": 1e-4, "layer_decay": 0.8,
                        "device": "cpu", "precision": "fp32", "threads": 1, "train_time_s": 1.0,
                        "examples_per_s": 100.0, "parameters": 1e6}}
    tok = SimpleNamespace(hf=SimpleNamespace(), backend=SimpleNamespace(model=SimpleNamespace()), vocab_size=100)
    return classifier_card(cfg, result, list(labels), tok)


def test_the_model_card_lists_labels_unambiguously_and_tags_sentiment_only_for_a_sentiment_set():
    card = _card(HANGUL)
    assert '(기쁨, 슬픔, "웃김, 재미있음")' in card.text
    assert "sentiment-analysis" not in card.data.tags and card.data.pipeline_tag == "text-classification"
    assert "sentiment-analysis" not in _card(SCALE).data.tags
    for labels in (["negative", "neutral", "positive"], ["부정", "긍정"]):
        assert "sentiment-analysis" in _card(labels).data.tags, labels


# -- 3e. the TF-IDF baseline's advice -------------------------------------------------------------------------------


def test_a_tfidf_baseline_no_better_than_the_majority_gets_tfidf_advice(tmp_path, capsys):
    import pandas as pd

    from koelectra_kit.cli import main

    rng = np.random.default_rng(0)
    letters = list("가나다라마바사아자차카타파하")
    texts = ["".join(rng.choice(letters, 6)) for _ in range(200)]
    labels = ["기쁨"] * 150 + ["웃김, 재미있음"] * 50  # unrelated to the texts: nothing to learn
    pd.DataFrame({"text": texts, "label": labels}).to_csv(tmp_path / "t.csv", index=False)
    out = tmp_path / "tfidf"
    rc = main(["baseline", "--train", str(tmp_path / "t.csv"), "--out", str(out), "labels=[기쁨,'웃김, 재미있음']",
               "plots=false"])
    printed = capsys.readouterr().out
    assert rc == 0
    warning = next(line for line in printed.splitlines() if "learned nothing usable" in line)
    assert "more epochs" not in warning and "more labelled rows" in warning, warning
    assert 'Labels: 기쁨, "웃김, 재미있음".' in (out / "README.md").read_text(encoding="utf-8")
    assert json.loads((out / "eval.json").read_text(encoding="utf-8"))["dev"]["labels"] == ["기쁨", "웃김, 재미있음"]


# -- 2. a Korean font matplotlib's cache does not list ----------------------------------------------------------------


def _korean_files_installed() -> bool:
    import glob

    return bool(glob.glob("/usr/share/fonts/truetype/nanum/NanumGothic*.ttf")
                or glob.glob("/usr/share/fonts/opentype/noto/*CJK*"))


@pytest.fixture
def stale_font_cache(monkeypatch):
    """matplotlib's font list as a cache built before any Korean font was installed, and its lookups forgotten."""
    import matplotlib
    from matplotlib import font_manager

    from koelectra_kit.io import plots

    korean = re.compile("nanum|cjk|gothic|dotum|gulim|malgun|[가-힣]", re.I)
    fm = font_manager.fontManager
    monkeypatch.setattr(fm, "ttflist", [f for f in fm.ttflist if not korean.search(f"{f.name} {f.fname}")])
    monkeypatch.setitem(matplotlib.rcParams, "font.family", ["sans-serif"])
    search = getattr(plots, "_korean_font_files", None)  # (a test may replace it: this one is cleared after)
    for cache in (fm._findfont_cached, search):
        getattr(cache, "cache_clear", lambda: None)()
    yield fm
    for cache in (fm._findfont_cached, search):
        getattr(cache, "cache_clear", lambda: None)()


@pytest.mark.skipif(not _korean_files_installed(), reason="no Korean font file installed (fonts-nanum)")
def test_a_korean_font_missing_from_matplotlibs_cache_is_found_on_the_system(stale_font_cache):
    from koelectra_kit.io import plots

    assert plots._tick_labels(HANGUL) == ["#0", "#1", "#2"]  # the cache alone has no font for them
    plots.use_korean_font()
    assert plots._tick_labels(HANGUL) == HANGUL  # the names, not #0..#2


def test_without_any_korean_font_confusion_png_numbers_its_labels_with_a_key(stale_font_cache, monkeypatch, tmp_path):
    from koelectra_kit import runtime
    from koelectra_kit.io import plots

    monkeypatch.setattr(plots, "_korean_font_files", lambda: (), raising=False)
    said, figures = [], []
    monkeypatch.setattr(runtime, "log", said.append)
    monkeypatch.setattr(plots, "save_png", lambda fig, path, **_: figures.append(fig))
    plots.plot_confusion(_report(HANGUL), tmp_path / "confusion.png")
    (fig,) = figures
    ticks = [t.get_text() for t in fig.axes[0].get_xticklabels()]
    assert ticks == ["#0", "#1", "#2"]
    assert any("#i = labels[i]" in t.get_text() for t in fig.texts)  # the key, in the figure
    note = next(line for line in said if "confusion.png" in line)
    assert '#0 = 기쁨, #1 = 슬픔, #2 = "웃김, 재미있음"' in note and "fonts-nanum" in note and "fontlist" in note
    import matplotlib.pyplot as plt

    plt.close(fig)
