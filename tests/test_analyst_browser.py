"""Issue 41 in a real headless Chromium against a real `koelectra-kit app` process, as the analyst who filed it
worked: teach mode from a TF-IDF folder fitted on 300 reviews (`--model TFIDF --encoder ENC`), the pool the other
reviews. Each test is one item of the issue, in the order an analyst meets them (one app and one browser for the
module; the last test kills the app):

1. Enter never answers: after a click on an answer button, Enter does nothing.
2. A round worse than the starting model is not served, and the page says so, with the scores and the held-out size.
3. The analyst's answers, and a fix saved in the results table, are in the downloaded file (label_source = human).
   The table of rows to review fits a 1280-px window: nothing scrolls sideways, no column name breaks (item 7).
4. A file with no text column is refused in one line naming its columns.
5. A .txt file is one review per line: 40 lines are 40 rows.
6. Pressing a key twice on one card while the app is down is one answer after the restart; undo takes it back.
"""
from __future__ import annotations

import csv
import io
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures_app import FAST_RETRAIN, appears, tfidf_start
from tests.test_app import _chromium, _screenshot
from tests.test_teach_browser import _free_port

LABELS = ["negative", "neutral", "positive"]
pytest.importorskip("selenium", reason="selenium is in the dev extra: pip install -e '.[dev]'")
pytest.importorskip("fastapi")


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig")))) if path.exists() else []


class Analyst:
    """The app process, the browser on its page, and what the analyst knows (the pool's true labels)."""

    def __init__(self, folder: Path, encoder: Path):
        self.folder = folder
        self.model, self.pool, self.truth = tfidf_start(folder)
        self.labels = folder / "labels.csv"
        self.downloads = folder / "downloads"
        self.downloads.mkdir()
        self.port = _free_port()
        self.cmd = [sys.executable, "-m", "koelectra_kit", "app", "--model", str(self.model), "--encoder",
                    str(encoder), "--teach", str(self.pool), "--labels", str(self.labels), "--port", str(self.port),
                    "--retrain-every", "12", "--device", "cpu", "--precision", "fp32", "--workdir",
                    str(folder / "work")]
        # every round's TF-IDF so regularized that it answers one label: worse than the start, never served
        for override in FAST_RETRAIN + ["baseline.C=0.00001"]:
            self.cmd += ["--retrain-set", override]
        self.proc = None
        self.start()
        self.browser = _chromium(self.downloads)
        from selenium.webdriver.support.ui import WebDriverWait

        self.wait = WebDriverWait(self.browser, 90)
        self.browser.get(self.url)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/"

    def start(self) -> None:
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        for line in self.proc.stdout:
            if "koelectra-kit app: open" in line:
                return
        raise AssertionError(f"the app did not start (exit {self.proc.wait()})")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait()

    def find(self, element_id: str):
        from selenium.webdriver.common.by import By

        return self.browser.find_element(By.ID, element_id)

    def card(self) -> tuple[str, str]:
        """(row, text) of the review shown, once one is."""
        self.wait.until(lambda b: self.find("teach-card").is_displayed() and self.find("teach-card").get_attribute(
            "data-row"))
        return self.find("teach-card").get_attribute("data-row"), self.find("teach-text").get_attribute("textContent")

    def press(self, key: str) -> None:
        from selenium.webdriver.common.action_chains import ActionChains

        ActionChains(self.browser).send_keys(key).perform()  # to whatever holds the focus, as a keyboard does

    def answer_with_key(self) -> str:
        row, text = self.card()
        self.press(str(LABELS.index(self.truth[text]) + 1))
        self.wait.until(lambda b: self.find("teach-card").get_attribute("data-row") != row)
        return text

    def answers(self) -> list[dict]:
        return [r for r in _rows(self.labels) if r["action"] == "answer"]

    def close(self) -> None:
        self.browser.quit()
        if self.proc.poll() is None:
            self.kill()


@pytest.fixture(scope="module")
def analyst(tmp_path_factory, tiny_encoder_dir):
    a = Analyst(tmp_path_factory.mktemp("analyst"), tiny_encoder_dir)
    yield a
    a.close()


def test_1_enter_after_a_click_never_answers_the_next_review(analyst):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys

    row, text = analyst.card()
    button = analyst.browser.find_element(By.CSS_SELECTOR,
                                          f"#teach-keys button[data-label='{analyst.truth[text]}']")
    button.click()  # with the mouse
    analyst.wait.until(lambda b: analyst.find("teach-card").get_attribute("data-row") != row)
    shown, _ = analyst.card()
    analyst.press(Keys.ENTER)
    analyst.press(Keys.SPACE)
    time.sleep(1.5)
    assert analyst.find("teach-card").get_attribute("data-row") == shown  # the next review was not answered
    assert len(analyst.answers()) == 1
    assert analyst.browser.execute_script("return document.activeElement.tagName") != "BUTTON"


def test_2_a_worse_round_is_not_served_and_the_page_says_why(analyst, tmp_path):
    def first_round() -> str:  # read in one script: the page redraws the table on every poll
        return analyst.browser.execute_script(
            "const tr = document.querySelector('#rounds-table tbody tr'); return tr ? tr.innerText : ''")

    while not first_round() and len(analyst.answers()) < 60:
        analyst.answer_with_key()
    analyst.wait.until(lambda b: "no:" in first_round())
    row = first_round()
    assert "cross-validation" in row and "tfidf 0." in row, row  # how it was scored, and the serving model's score
    assert "not served" in analyst.find("retrain-note").text
    assert analyst.find("teach-serving").text == "tfidf"
    note = analyst.find("retrain-note")
    assert note.is_displayed() and "not served" in note.text and "tfidf keeps serving" in note.text
    assert "Starting model tfidf: macro-F1 0." in analyst.find("teach-start").text
    assert "held-out labels" in analyst.find("teach-dev").text
    _screenshot(analyst.browser, "teach-round-not-served.png", tmp_path)


def test_3_answers_and_a_fix_are_in_the_downloaded_file(analyst, tmp_path):
    import pandas as pd
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import Select

    analyst.find("label-pool-btn").click()
    analyst.wait.until(ec.visibility_of_element_located((By.ID, "results")))
    answered = {r["text"]: r["label"] for r in analyst.answers()}
    assert f"{len(answered)} rows carry your own label" in analyst.find("summary-text").text
    first = analyst.browser.find_elements(By.CSS_SELECTOR, "#review-table tbody tr")[0]
    cells = first.find_elements(By.TAG_NAME, "td")
    assert cells[1].text.startswith("R")  # the file's id column shown beside the row number
    picker = Select(first.find_element(By.TAG_NAME, "select"))
    fixed = next(lab for lab in LABELS if lab != picker.first_selected_option.get_attribute("value"))
    picker.select_by_value(fixed)
    save = first.find_element(By.CSS_SELECTOR, "button.fix-btn")
    save.click()
    analyst.wait.until(lambda b: save.text.startswith("saved"))
    fix = _rows(analyst.labels)[-1]
    assert (fix["label"], fix["source"], fix["row"]) == (fixed, "correction:pool.csv", cells[0].text)
    # readable at 1280 px: the table fits its box (no sideways scroll), no header breaks inside a word
    fits = analyst.browser.execute_script("const t = document.getElementById('review-table'); "
                                          "return t.scrollWidth <= t.parentElement.clientWidth")
    lines = analyst.browser.execute_script(  # the lines each header and number cell is drawn on
        "return [...document.querySelectorAll('#review-table th, #review-table td.num')].map((c) => {"
        "const r = document.createRange(); r.selectNodeContents(c); return r.getClientRects().length; })")
    assert fits and set(lines) == {1}, lines
    _screenshot(analyst.browser, "teach-human-labels.png", tmp_path)
    analyst.find("download-csv").click()
    target = analyst.downloads / "pool.labelled.utf8.csv"
    assert appears(target), list(analyst.downloads.iterdir())
    time.sleep(0.5)
    got = pd.read_csv(target, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    assert len(got) == len(analyst.truth)
    human = got[got["label_source"] == "human"]
    assert dict(zip(human["review"], human["label"])) == {**answered, fix["text"]: fixed}
    assert got.iloc[int(fix["row"]) - 1]["label"] == fixed


def test_4_a_file_with_no_text_column_is_refused_in_one_line(analyst, tmp_path):
    path = tmp_path / "ratings.csv"
    path.write_text("id,rating,date\n" + "".join(f"{i},{i % 5 + 1},2024-0{i % 9 + 1}-1{i % 10}\n"
                                                 for i in range(1, 61)), encoding="utf-8")
    analyst.find("again-btn").click()
    analyst.find("file-input").send_keys(str(path))
    analyst.wait.until(lambda b: analyst.find("upload-error").is_displayed())
    error = analyst.find("upload-error").text
    assert "no column holds review text" in error and "id, rating, date" in error and "\n" not in error
    assert not analyst.find("setup").is_displayed()


def test_5_a_txt_file_is_one_review_per_line(analyst, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    reviews = list(analyst.truth)[:40]
    path = tmp_path / "reviews.txt"
    path.write_text("\n".join(r.replace("\n", " ") for r in reviews) + "\n", encoding="utf-8")
    analyst.find("file-input").send_keys(str(path))
    analyst.wait.until(lambda b: analyst.find("setup").is_displayed())
    assert analyst.find("start-btn").text == "Label 40 rows"
    analyst.find("start-btn").click()
    analyst.wait.until(ec.visibility_of_element_located((By.ID, "results")))
    assert analyst.find("summary-text").text.startswith("40 rows labelled")


def test_5b_a_mostly_empty_review_column_is_labelled_when_the_analyst_says_so(analyst, tmp_path):
    """An export where few rows carry a comment: refused as a column picked by mistake, with no way past but
    filtering the file; the page now offers "label it anyway" (its empty rows get status empty)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec

    path = tmp_path / "export.csv"
    path.write_text("id,review\n1,배송 빠르고 좋아요\n" + "".join(f"{i},\n" for i in range(2, 41)), encoding="utf-8")
    analyst.find("again-btn").click()
    analyst.find("file-input").send_keys(str(path))
    analyst.wait.until(lambda b: analyst.find("setup").is_displayed())
    analyst.find("start-btn").click()
    analyst.wait.until(lambda b: analyst.find("anyway-btn").is_displayed())
    error = analyst.find("job-error").text
    assert "'review' is empty in 39 of its first 40 rows" in error and "label it anyway" in error and "--" not in error
    analyst.find("anyway-btn").click()
    analyst.wait.until(ec.visibility_of_element_located((By.ID, "results")))
    assert analyst.find("summary-text").text.startswith("40 rows labelled")
    assert not analyst.find("anyway-btn").is_displayed() and not analyst.find("job-error").is_displayed()


def test_6_a_double_press_while_the_app_is_down_is_one_answer_and_undo_takes_it_back(analyst):
    analyst.browser.get(analyst.url)
    row, text = analyst.card()
    before = len(analyst.answers())
    analyst.kill()  # SIGKILL
    key = str(LABELS.index(analyst.truth[text]) + 1)
    analyst.press(key)
    analyst.wait.until(lambda b: "not answering" in analyst.find("teach-error").text)
    analyst.press(key)  # nothing on the card moved: pressed again
    time.sleep(0.5)
    analyst.start()
    analyst.browser.refresh()  # reopening sends what the app never heard
    analyst.wait.until(lambda b: len(analyst.answers()) > before)
    time.sleep(1)
    mine = [r for r in analyst.answers() if r["text"] == text]
    assert len(mine) == 1 and len(analyst.answers()) == before + 1, mine
    total = int(analyst.find("teach-total").text)
    analyst.card()
    analyst.press("u")
    analyst.wait.until(lambda b: int(analyst.find("teach-total").text) == total - 1)
    last = _rows(analyst.labels)[-1]
    assert last["action"] == "undo" and last["undoes"] == mine[0]["answer_id"]
