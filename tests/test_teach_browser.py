"""Teach mode in a real headless Chromium against a real `koelectra-kit app` process: 30 reviews answered with the
keyboard, the app killed (SIGKILL) and restarted half-way, every answer found in LABELS.csv exactly once, a retrain
finishing and the next review coming from its model, then the whole pool labelled and downloaded. Screenshots go to
$KOELECTRA_APP_SCREENSHOTS (docs/app) when set."""
from __future__ import annotations

import csv
import io
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures_app import FAST_RETRAIN, appears, teach_pool
from tests.test_app import _chromium, _screenshot

LABELS = ["negative", "neutral", "positive"]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(model: Path, folder: Path, port: int) -> subprocess.Popen:
    """`koelectra-kit app` in teach mode as a user runs it; returns once it prints its address."""
    cmd = [sys.executable, "-m", "koelectra_kit", "app", "--model", str(model), "--teach", str(folder / "pool.csv"),
           "--labels", str(folder / "labels.csv"), "--port", str(port), "--retrain-every", "20", "--device", "cpu",
           "--precision", "fp32", "--workdir", str(folder / "work")]
    for override in FAST_RETRAIN:
        cmd += ["--retrain-set", override]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    for line in proc.stdout:
        if "koelectra-kit app: open" in line:
            return proc
    raise AssertionError(f"the app did not start (exit {proc.wait()})")


def _rows(path: Path) -> list[dict]:
    return list(csv.DictReader(io.StringIO(path.read_text(encoding="utf-8-sig"))))


def test_browser_teaches_with_the_keyboard_through_a_kill_and_a_retrain(tiny_classifier_dir, tmp_path, monkeypatch):
    pytest.importorskip("selenium", reason="selenium is in the dev extra: pip install -e '.[dev]'")
    pytest.importorskip("fastapi")
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    monkeypatch.setenv("SE_OFFLINE", "true")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    _, truth = teach_pool(tmp_path)
    port = _free_port()
    browser = _chromium(downloads)
    proc = _start(tiny_classifier_dir, tmp_path, port)
    try:
        wait = WebDriverWait(browser, 90)
        card = lambda: browser.find_element(By.ID, "teach-card")  # noqa: E731

        def shown() -> tuple[str, str]:
            wait.until(lambda b: card().is_displayed() and card().get_attribute("data-row"))
            return card().get_attribute("data-row"), browser.find_element(By.ID, "teach-text").get_attribute(
                "textContent")

        def answer_one() -> str:
            """Press the key of the shown review's true label; wait for the next review. The text answered."""
            row, text = shown()
            key = str(LABELS.index(truth[text]) + 1)
            browser.find_element(By.TAG_NAME, "body").send_keys(key)
            wait.until(lambda b: card().get_attribute("data-row") != row)
            return text

        browser.get(f"http://127.0.0.1:{port}/")
        answered = [answer_one() for _ in range(15)]
        # a skip and its undo: the same review comes back
        row, _ = shown()
        browser.find_element(By.TAG_NAME, "body").send_keys("s")
        wait.until(lambda b: card().get_attribute("data-row") != row)
        browser.find_element(By.TAG_NAME, "body").send_keys("u")
        wait.until(lambda b: card().get_attribute("data-row") == row)

        proc.kill()  # SIGKILL: no shutdown, no flush; the answers must already be on disk
        proc.wait()
        assert len([r for r in _rows(tmp_path / "labels.csv") if r["action"] == "answer"]) == 15
        proc = _start(tiny_classifier_dir, tmp_path, port)
        browser.refresh()  # reopening continues: the page asks only what was not answered
        wait.until(lambda b: b.find_element(By.ID, "teach-total").text == "15")
        while len(answered) < 30:
            text = answer_one()
            assert text not in answered
            answered.append(text)
        _screenshot(browser, "teach-mode.png", tmp_path)

        # a retrain after 20 labels (once each label has 2), in the background; answering goes on meanwhile
        rounds = lambda: browser.find_elements(By.CSS_SELECTOR, "#rounds-table tbody tr")  # noqa: E731
        while not rounds() and browser.find_element(By.ID, "retrain-progress").get_attribute("hidden") is not None \
                and len(answered) < 60:
            answered.append(answer_one())
        wait.until(lambda b: rounds())
        assert "failed" not in rounds()[0].text, rounds()[0].text
        assert browser.find_element(By.ID, "teach-serving").text == "r001"
        answered.append(answer_one())  # the review shown before the round came from the old model; the next not
        assert "(r001)" in browser.find_element(By.ID, "teach-confidence").text
        _screenshot(browser, "teach-after-retrain.png", tmp_path)

        kept = [r for r in _rows(tmp_path / "labels.csv") if r["action"] == "answer"]
        assert sorted(r["text"] for r in kept) == sorted(answered)  # every answer exactly once
        assert len({r["answer_id"] for r in kept}) == len(kept)
        assert all(r["label"] == truth[r["text"]] for r in kept)

        browser.find_element(By.ID, "label-pool-btn").click()
        wait.until(ec.visibility_of_element_located((By.ID, "results")))
        assert f"{len(truth)} rows labelled" in browser.find_element(By.ID, "summary-text").text
        fix = browser.find_elements(By.CSS_SELECTOR, "#review-table td.fix button")[0]
        fix.click()
        wait.until(lambda b: fix.text.startswith("saved"))
        assert _rows(tmp_path / "labels.csv")[-1]["source"] == "correction:pool.csv"
        _screenshot(browser, "teach-label-the-file.png", tmp_path)
        browser.find_element(By.ID, "download-csv").click()
        target = downloads / "pool.labelled.utf8.csv"
        assert appears(target), list(downloads.iterdir())
    finally:
        browser.quit()
        proc.kill()
        proc.wait()
    import pandas as pd

    got = pd.read_csv(target, encoding="utf-8-sig", dtype=str, keep_default_na=False)
    # (a few long unspaced reviews run past the tiny test model's max_length: labelled all the same, marked so)
    assert len(got) == len(truth) and set(got["label"]) <= set(LABELS)
    assert got["status"].isin(["ok", "truncated"]).all() and (got["status"] == "ok").mean() > 0.9
    assert os.path.exists(tmp_path / "pool.csv")
