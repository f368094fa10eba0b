"""The web app (`koelectra-kit app`): its JSON API, every bad upload answered with one clear line while the
server keeps answering, files deleted after download and at shutdown, and a real headless Chromium driving the
page (type a review, label a 500-row cp949 CSV, download the result)."""
from __future__ import annotations

import io
import os
import shutil
import time
from pathlib import Path

import pandas as pd
import pytest

from tests.fixtures_app import UPLOAD_LIMIT, appears, start_app

LABELS = ["negative", "neutral", "positive"]
TEXTS = ["배송 빠르고 좋아요ㅋㅋㅋ", "별로에요.. 다신 안삼", "그냥 그럭저럭 쓸만함", "재밋어요 강추!!", "노잼ㅠㅠ 시간아까움",
         "가격대비 괜찮네여", "포장이 엉망이네 ㅡㅡ", "완전 대박 ㅎㅎ 또 살께요"]
MALFORMED = {100: '100,"따옴표가 안 닫힌 리뷰,3', 250: "250,쉼표가,너무,많은 리뷰,5", 400: "400"}


def reviews_csv(n: int = 500, malformed: dict = MALFORMED) -> str:
    """``n`` rows (id, review, rating); the rows numbered in ``malformed`` are broken lines."""
    lines = ["id,review,rating"]
    for i in range(1, n + 1):
        lines.append(malformed.get(i, f"{i},{TEXTS[i % len(TEXTS)]} {i}번,{i % 5 + 1}"))
    return "\n".join(lines) + "\n"


def check_labelled(df: pd.DataFrame, n: int = 500, malformed: dict = MALFORMED) -> None:
    """Every input row once, in order, labelled (or flagged with its line kept whole)."""
    assert len(df) == n
    assert list(df.columns) == ["id", "review", "rating", "label", "confidence", *[f"prob_{l}" for l in LABELS],
                                "status"]
    for i, row in enumerate(df.itertuples(index=False), 1):
        if i in malformed:
            assert row.status.startswith(f"error: malformed line {i + 1}"), (i, row.status)
            assert row.review == malformed[i] and row.label == ""
        else:
            assert (str(row.id), row.status) == (str(i), "ok"), i
            assert row.review == f"{TEXTS[i % len(TEXTS)]} {i}번" and row.label in LABELS


# ---------------------------------------------------------------------------------------------------------
# API
# ---------------------------------------------------------------------------------------------------------


def test_one_review_gets_a_label_and_three_probabilities(app_client, tiny_classifier):
    r = app_client.call("POST", "/api/predict", json_body={"text": "배송 빠르고 좋아요ㅋㅋㅋ 👍"})
    assert r.status == 200, r.body
    got = r.json
    expected = tiny_classifier.predict(["배송 빠르고 좋아요ㅋㅋㅋ 👍"])
    assert got["label"] == expected.labels[0] and got["labels"] == LABELS
    assert got["probs"] == pytest.approx(expected.probs[0].tolist(), abs=1e-3)
    assert got["confidence"] == max(got["probs"])
    for body, message in [({"text": "   "}, "type a review first"), ({"text": "\u200b\u2060"}, "type a review first"),
                          ({"text": "가" * 20_001}, "20,000"),
                          ({}, "type a review first")]:
        bad = app_client.call("POST", "/api/predict", json_body=body)
        assert bad.status == 400 and message in bad.json["error"]
    assert app_client.call("POST", "/api/predict", body=b"not json").json["error"] == "the request body is not JSON"


def test_page_and_info_are_served_offline(app_client):
    page = app_client.call("GET", "/").body.decode()
    assert 'id="file-input"' in page and "http" not in page.split("<body>")[1]  # nothing from a CDN
    assert app_client.call("GET", "/static/app.js").status == 200
    info = app_client.call("GET", "/api/info").json
    assert info["labels"] == LABELS and info["max_upload_bytes"] == UPLOAD_LIMIT and len(info["examples"]) >= 3


def test_upload_reads_cp949_and_guesses_the_korean_text_column(app_client):
    data = "번호,리뷰,평점\n1,재밋어요ㅋㅋ,5\n2,별로,1\n".encode("cp949")
    r = app_client.upload("후기.csv", data)
    assert r.status == 200, r.body
    up = r.json
    assert (up["encoding"], up["columns"], up["guessed"], up["rows"]) == ("cp949", ["번호", "리뷰", "평점"], "리뷰", 2)
    assert up["preview"][0] == ["1", "재밋어요ㅋㅋ", "5"] and up["note"] == ""


def test_upload_without_a_named_text_column_guesses_by_content(app_client):
    up = app_client.upload("x.csv", b"id,memo,score\n1,good product really,3\n2,bad,1\n").json
    assert up["guessed"] == "memo" and "guessed 'memo'" in up["note"]


@pytest.mark.parametrize("kind", ["csv-bom", "csv-cp949", "tsv", "xlsx", "parquet", "jsonl"])
def test_file_is_labelled_with_the_labellers_columns_and_downloads_in_its_format(app_client, tmp_path, kind):
    # spreadsheets have no malformed lines; CSV keeps two (lines 101 and 251), TSV one (a quote is text there)
    bad = {k: v for k, v in MALFORMED.items() if k <= 300}
    bad = {"xlsx": {}, "parquet": {}, "jsonl": {}, "tsv": {250: bad[250].replace(",", "\t")}}.get(kind, bad)
    text, n_bad = reviews_csv(300, malformed=bad), len(bad)
    frame = pd.read_csv(io.StringIO(reviews_csv(300, malformed={})), dtype=str)
    name, data = {
        "csv-bom": ("리뷰.csv", text.encode("utf-8-sig")),
        "csv-cp949": ("reviews.csv", text.encode("cp949")),
        "tsv": ("reviews.tsv", text.replace(",", "\t").encode("utf-8")),
        "xlsx": ("reviews.xlsx", _xlsx(frame)),
        "parquet": ("reviews.parquet", _parquet(frame)),
        "jsonl": ("reviews.jsonl", frame.to_json(orient="records", lines=True, force_ascii=False).encode()),
    }[kind]
    job = app_client.label(name, data)
    assert job["state"] == "done", job["message"]
    s = job["summary"]
    assert s["rows"] == 300 and sum(s["per_label"].values()) == 300 - n_bad
    assert s["status"].get("error", 0) == n_bad and len(s["malformed"]) == n_bad
    assert len(job["review"]) == 20 and len(job["flagged"]) == n_bad
    conf = [r["confidence"] for r in job["review"]]
    assert conf == sorted(conf)  # least confident first
    kinds = [d["kind"] for d in job["downloads"]]
    # an .xlsx upload's own-format download is its workbook for Excel; every other file gets one made for Excel
    assert kinds == {"csv-bom": ["csv", "excel"], "xlsx": ["same", "csv"]}.get(kind, ["same", "csv", "excel"])

    bom = app_client.call("GET", f"/api/jobs/{job['id']}/download/csv")
    assert bom.status == 200 and bom.body.startswith(b"\xef\xbb\xbf")  # Excel needs the BOM for Korean
    expected = pd.read_csv(io.BytesIO(bom.body), encoding="utf-8-sig", dtype=str, keep_default_na=False)
    check_labelled(expected, 300, bad)
    excel = app_client.call("GET", f"/api/jobs/{job['id']}/download/excel")  # an .xlsx upload: its own-format one
    assert excel.status == 200, excel.body
    assert _read_back("xlsx", excel.body)["label"].tolist() == expected["label"].tolist()
    up = app_client.store.get(job["id"]).upload
    # the upload is gone once a result is downloaded (a task run just after the answer is sent); a JSONL, Parquet
    # or .xlsx upload stays with its results, as its own-format download is made from it (a workbook's CSV copy goes)
    typed = kind in ("xlsx", "parquet", "jsonl")
    assert _eventually(lambda: up.original.exists() == typed and (up.source == up.original or not up.source.exists()))
    if kind == "csv-bom":
        return
    same = app_client.call("GET", f"/api/jobs/{job['id']}/download/same")
    assert same.status == 200
    assert job["downloads"][0]["filename"] == f"{Path(name).stem}.labelled{Path(name).suffix}"
    got = _read_back(kind, same.body)
    assert got["label"].tolist() == expected["label"].tolist()
    assert got["id"].astype(str).tolist() == expected["id"].tolist()


def _eventually(condition, seconds: float = 5) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.02)
    return True


def _xlsx(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.assign(id=df["id"].astype(int)).to_excel(buf, index=False, engine="openpyxl")  # numbers as Excel numbers
    return buf.getvalue()


def _parquet(df: pd.DataFrame) -> bytes:
    buf = io.BytesIO()
    df.to_parquet(buf, index=False)
    return buf.getvalue()


def _read_back(kind: str, data: bytes) -> pd.DataFrame:
    opts = {"dtype": str, "keep_default_na": False}
    if kind == "csv-cp949":
        data.decode("cp949")  # the same encoding as the input
        return pd.read_csv(io.BytesIO(data), encoding="cp949", **opts)
    if kind == "tsv":
        return pd.read_csv(io.BytesIO(data), sep="\t", **opts)
    if kind == "jsonl":
        return pd.read_json(io.BytesIO(data), lines=True, dtype=False)
    if kind == "xlsx":
        return pd.read_excel(io.BytesIO(data), engine="openpyxl", dtype=str, keep_default_na=False)
    return pd.read_parquet(io.BytesIO(data))


BAD_UPLOADS = {
    "empty": ("empty.csv", b"", "empty.csv is empty (0 bytes)"),
    "wrong encoding": ("latin.csv", "review\ncafé crème\n".encode("latin-1"), "is not UTF-8 or cp949/EUC-KR text"),
    "no text column": ("numbers.csv", b"id,score\n1,5\n2,3\n", "no column holds review text"),
    "zero rows": ("header.csv", "리뷰,평점\n".encode(), "has a header row but no rows"),
    "blank rows only": ("blank.csv", b"review\n\n\n", "has a header row but no rows"),
    "unknown format": ("notes.docx", b"PK\x03\x04", "can't tell the format"),
    "old excel": ("old.xls", b"\xd0\xcf\x11\xe0", "old Excel (.xls)"),
    "broken xlsx": ("broken.xlsx", b"not a zip", "not a readable .xlsx workbook"),
    "broken parquet": ("broken.parquet", b"PAR1 nope", "not a readable Parquet file"),
    "empty jsonl": ("empty.jsonl", b"\n\n", "holds no JSON object"),
    # saved as .csv with other separators: its one column was guessed as the text, and 'review;label' rows labelled
    "semicolons in a .csv": ("semi.csv", "review;label\n배송 빨라요;positive\n".encode(),
                             "semi.csv: the header is one column, 'review;label', holding semicolons: the fields are "
                             "separated by semicolons, not commas as csv is read; save it with commas (Excel: 'CSV "
                             "UTF-8') or with tabs as a .tsv, and give it again"),
    "tabs in a .csv": ("tabs.csv", "review\tlabel\n배송 빨라요\tpositive\n".encode(),
                       "holding tabs: the fields are separated by tabs, not commas as csv is read; name the file "
                       ".tsv, and give it again"),
}


@pytest.mark.parametrize("case", list(BAD_UPLOADS))
def test_bad_upload_gets_one_clear_line_and_the_server_keeps_answering(app_client, case):
    name, data, message = BAD_UPLOADS[case]
    before = set(app_client.store.root.iterdir())
    r = app_client.upload(name, data)
    assert r.status == 400, r.body
    error = r.json["error"]
    assert message in error and "\n" not in error and "Traceback" not in error
    assert str(app_client.store.root) not in error  # the user's file name, never the server's temp path
    assert set(app_client.store.root.iterdir()) == before  # nothing of a refused upload is kept
    assert app_client.call("GET", "/api/info").status == 200


def test_too_large_upload_is_refused_by_content_length_before_reading(app_client):
    import http.client

    conn = http.client.HTTPConnection(app_client.host, app_client.port, timeout=10)
    conn.putrequest("POST", "/api/upload?name=big.csv")
    conn.putheader("Content-Length", str(200 * (1 << 20)))  # announced, never sent
    conn.endheaders()
    conn.send(b"review\n")
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    assert r.status == 413 and "big.csv is 200.0 MB; the limit is 64 KB" in body
    assert app_client.call("GET", "/api/info").status == 200


def test_too_large_upload_without_length_is_cut_off_while_streaming(app_client):
    import http.client

    before = set(app_client.store.root.iterdir())
    conn = http.client.HTTPConnection(app_client.host, app_client.port, timeout=10)
    blocks = (b"review\n" + "좋아요\n".encode() * 1000 for _ in range(10))  # ~100 KB, chunked: no length given
    conn.request("POST", "/api/upload?name=stream.csv", body=blocks, encode_chunked=True)
    r = conn.getresponse()
    body = r.read().decode()
    conn.close()
    assert r.status == 413 and "the limit is 64 KB" in body
    assert set(app_client.store.root.iterdir()) == before
    assert app_client.call("GET", "/api/info").status == 200


def test_a_full_or_read_only_disk_is_one_line_naming_the_apps_folders(app_client, monkeypatch, tmp_path):
    """An upload or a labelling on a full disk answered "internal error (OSError ...)" with a traceback in the log."""
    import errno

    from koelectra_kit.app import AppSettings, jobs, server
    from koelectra_kit.app.jobs import JobStore
    from koelectra_kit.errors import ConfigError, InputError

    def full(*_a, **_k):
        raise OSError(errno.ENOSPC, "No space left on device", "/work/uploads/x.csv")

    with monkeypatch.context() as m:
        m.setattr(server, "receive", full)
        r = app_client.call("POST", "/api/upload?name=a.csv", body="review\n좋아요\n".encode())
    assert r.status == 507 and r.json["error"].startswith("No space left on device (/work/uploads/x.csv): the app's "
                                                          "files are in --workdir ")
    with monkeypatch.context() as m:
        m.setattr(jobs.JobStore, "_label", full)
        job = app_client.label("b.csv", "review\n좋아요\n".encode())
    assert job["state"] == "error" and job["message"].startswith("No space left on device") and "\n" not in \
        job["message"]
    # found at start, not at the first answer or upload: a labels file or a workdir that can't be written
    monkeypatch.setattr(os, "access", lambda *_a: False)
    with pytest.raises(ConfigError, match="--labels .*l.csv: can't be written here"):
        AppSettings(model="m", labels=str(tmp_path / "l.csv")).validate()
    monkeypatch.setattr(jobs.tempfile, "mkdtemp", lambda **_k: full())
    with pytest.raises(InputError, match=f"--workdir {tmp_path}: can't make the app's folder there \\(No space"):
        JobStore(AppSettings(model="m", workdir=str(tmp_path)), None)


def test_a_labelling_refusal_gives_the_page_advice_not_command_line_flags(app_client):
    mostly_empty = ("id,review\n1,좋아요\n" + "".join(f"{i},\n" for i in range(2, 40))).encode()
    job = app_client.label("sparse.csv", mostly_empty, column="review")
    assert job["state"] == "error" and "'review' is empty in 38 of its first 39 rows" in job["message"]
    assert "--" not in job["message"] and "label it anyway" in job["message"]
    assert job["retry"] == "allow_mostly_empty"  # the page offers its button
    # the page's "label it anyway": the export where few rows carry a comment is labelled, the empty rows flagged
    r = app_client.call("POST", f"/api/jobs/{job['id']}/start",
                        json_body={"text_column": "review", "allow_mostly_empty": True})
    assert r.status == 200
    done = app_client.wait_job(job["id"])
    assert done["state"] == "done" and done["summary"]["status"].get("empty") == 38 and done["retry"] is None
    r = app_client.call("POST", f"/api/jobs/{job['id']}/start", json_body={"text_column": "review",
                                                                            "allow_mostly_empty": "yes"})
    assert r.status == 400 and "allow_mostly_empty: true or false" in r.json["error"]
    bad_bytes = "\ufeffreview\n좋아요\n".encode() + "별로\n".encode("cp949") * 3
    r = app_client.call("POST", "/api/upload?name=bom.csv", body=bad_bytes)
    assert r.status == 400 and r.json["error"] == ("bom.csv is not UTF-8 or cp949/EUC-KR text (starts with a UTF-8 BOM "
                                                   "but line 3 is not UTF-8): save it as 'CSV UTF-8' in Excel, or "
                                                   "convert it to UTF-8, and upload it again")
    from koelectra_kit.app.jobs import page_message  # what labelling says when the bytes go bad after the check
    said = page_message("bom.csv: bytes invalid in utf-8 (invalid start byte); pass the right --encoding or "
                        "--encoding-errors replace; finished chunks are kept: rerun with --resume")
    assert said == ("bom.csv: bytes invalid in utf-8 (invalid start byte): save it as 'CSV UTF-8' in Excel, or "
                    "convert it to UTF-8, and upload it again")


def test_an_unknown_route_or_method_answers_in_the_apis_shape(app_client):
    r = app_client.call("GET", "/api/nosuch")
    assert r.status == 404 and r.json == {"error": "Not Found: GET /api/nosuch"}
    r = app_client.call("DELETE", "/api/info")
    assert r.status == 405 and r.json["error"].startswith("Method Not Allowed")


def test_start_and_download_refusals(app_client):
    up = app_client.upload("a.csv", "review\n좋아요\n".encode()).json
    for body, message in [({"text_column": "nope"}, "has no column 'nope'"), ({}, "choose the column")]:
        r = app_client.call("POST", f"/api/jobs/{up['id']}/start", json_body=body)
        assert r.status == 400 and message in r.json["error"]
    early = app_client.call("GET", f"/api/jobs/{up['id']}/download/csv")
    assert early.status == 404 and "not labelled yet" in early.json["error"]
    assert app_client.call("GET", "/api/jobs/0000/download/csv").status == 404
    assert app_client.call("DELETE", f"/api/jobs/{up['id']}").status == 200
    assert not (app_client.store.root / up["id"]).exists()
    assert app_client.call("GET", f"/api/jobs/{up['id']}").status == 404


def test_a_file_the_labeller_refuses_ends_the_job_with_its_message(app_client):
    job = app_client.label("dup.csv", "review,review\n좋아요,별로\n".encode(), column="review")
    assert job["state"] == "error" and job["downloads"] == []
    assert job["message"] == ("dup.csv: 2 columns are named 'review'; rename them so the text column is "
                              "unambiguous")
    assert app_client.call("POST", "/api/predict", json_body={"text": "좋아요"}).status == 200


def test_stopping_the_app_deletes_uploads_and_results(tiny_classifier, tiny_classifier_dir, tmp_path):
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path) as client:
        done = client.label("r.csv", reviews_csv(50, {}).encode())
        pending = client.upload("p.csv", reviews_csv(20, {}).encode()).json  # uploaded, never labelled
        root = client.store.root
        assert done["state"] == "done" and (root / done["id"] / "labelled.csv").exists()
        assert (root / pending["id"]).exists()
    assert not root.exists() and list(tmp_path.iterdir()) == []


def test_cli_app_help_and_bad_model(capsys):
    from koelectra_kit.cli import main

    assert main(["app", "--help"]) == 0
    assert "--max-upload-mb" in capsys.readouterr().out
    assert main(["app", "--model", "/nonexistent/model"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "/nonexistent/model" in err and len(err.splitlines()) == 1


# ---------------------------------------------------------------------------------------------------------
# The page in a real browser
# ---------------------------------------------------------------------------------------------------------


def _chromium(download_dir: Path):
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not (chromium and driver):
        pytest.skip("no chromium + chromedriver on PATH: apt-get install -y chromium chromium-driver")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1280,1000", "--lang=ko-KR"):
        opts.add_argument(arg)
    opts.add_experimental_option("prefs", {"download.default_directory": str(download_dir),
                                           "download.prompt_for_download": False})
    return webdriver.Chrome(service=Service(driver), options=opts)  # a driver path given: nothing downloaded


def _screenshot(browser, name: str, tmp_path: Path) -> None:
    """Whole-page PNG into tmp_path, and into $KOELECTRA_APP_SCREENSHOTS (docs/app for the README) when set."""
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1280, min(height + 120, 2400))
    for folder in filter(None, [tmp_path, os.environ.get("KOELECTRA_APP_SCREENSHOTS")]):
        Path(folder).mkdir(parents=True, exist_ok=True)
        browser.save_screenshot(str(Path(folder) / name))
    browser.set_window_size(1280, 1000)


@pytest.fixture
def browser_app(app_client, tmp_path):
    """The module's app; for the README's screenshots, $KOELECTRA_APP_MODEL swaps in a trained classifier
    (e.g. runs/quickstart/sentiment) so the pictures show real labels."""
    model = os.environ.get("KOELECTRA_APP_MODEL")
    if not model:
        yield app_client
        return
    from koelectra_kit.classify.classifier import Classifier

    with start_app(Classifier.load(model), Path(model), tmp_path / "work") as client:
        yield client


def test_browser_labels_a_review_and_a_cp949_file(browser_app, tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    monkeypatch.setenv("SE_OFFLINE", "true")  # selenium never fetches a browser or driver
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    src = tmp_path / "고객리뷰.csv"
    src.write_bytes(reviews_csv().encode("cp949"))
    browser = _chromium(downloads)
    try:
        wait = WebDriverWait(browser, 30)
        browser.get(browser_app.url)
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#examples .example"))
        browser.find_element(By.ID, "review-text").send_keys("배송 빠르고 좋아요ㅋㅋㅋ 또 살께요~")
        browser.find_element(By.ID, "predict-btn").click()
        wait.until(ec.visibility_of_element_located((By.ID, "predict-result")))
        assert browser.find_element(By.ID, "predict-label").text in LABELS
        assert len(browser.find_elements(By.CSS_SELECTOR, "#predict-bars .fill")) == 3
        _screenshot(browser, "try-one-review.png", tmp_path)

        empty = tmp_path / "empty.csv"
        empty.write_bytes(b"")
        browser.find_element(By.ID, "file-input").send_keys(str(empty))
        wait.until(ec.visibility_of_element_located((By.ID, "upload-error")))
        assert browser.find_element(By.ID, "upload-error").text == "empty.csv is empty (0 bytes): nothing to label"

        browser.find_element(By.ID, "file-input").send_keys(str(src))
        wait.until(ec.visibility_of_element_located((By.ID, "setup")))
        assert not browser.find_element(By.ID, "upload-error").is_displayed()
        assert "cp949" in browser.find_element(By.ID, "file-info").text
        assert browser.find_element(By.ID, "column-select").get_attribute("value") == "review"
        browser.find_element(By.ID, "start-btn").click()
        wait.until(ec.visibility_of_element_located((By.ID, "results")))
        assert browser.find_element(By.ID, "progress").get_attribute("value") == "100"
        assert "500 rows labelled" in browser.find_element(By.ID, "summary-text").text
        assert "error 3" in browser.find_element(By.ID, "flag-text").text
        assert len(browser.find_elements(By.CSS_SELECTOR, "#review-table tbody tr")) == 20
        _screenshot(browser, "label-a-file.png", tmp_path)

        browser.find_element(By.ID, "download-csv").click()
        target = downloads / "고객리뷰.labelled.utf8.csv"
        deadline = time.monotonic() + 20
        while not target.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert target.exists(), list(downloads.iterdir())

        excel = browser.find_element(By.ID, "download-excel")  # the one to open in Excel: reviews stay text
        assert excel.text.startswith("고객리뷰.labelled.xlsx · Excel (.xlsx")
        excel.click()
        workbook = downloads / "고객리뷰.labelled.xlsx"
        assert appears(workbook), list(downloads.iterdir())

        # a file longer than a worksheet (the limit made small): one line in place of the .xlsx button, no link
        from koelectra_kit.io import workbook as sheets

        monkeypatch.setattr(sheets, "EXCEL_MAX_ROWS", 3)
        browser.find_element(By.ID, "again-btn").click()
        short = tmp_path / "short.csv"
        short.write_text("review\n" + "".join(f"리뷰 {i} 좋아요\n" for i in range(5)), encoding="utf-8")
        browser.find_element(By.ID, "file-input").send_keys(str(short))
        wait.until(lambda b: "short.csv" in b.find_element(By.ID, "file-info").text)
        wait.until(ec.element_to_be_clickable((By.ID, "start-btn"))).click()
        wait.until(lambda b: "5 rows labelled" in b.find_element(By.ID, "summary-text").text)
        refused = browser.find_element(By.ID, "download-excel")
        assert refused.tag_name == "span" and "has no .xlsx download" in refused.text
    finally:
        browser.quit()
    check_labelled(pd.read_csv(target, encoding="utf-8-sig", dtype=str, keep_default_na=False))
    assert pd.read_excel(workbook, dtype=str, keep_default_na=False)["label"].tolist() == \
        pd.read_csv(target, encoding="utf-8-sig", dtype=str, keep_default_na=False)["label"].tolist()


def test_browser_shows_a_download_the_server_refuses_in_one_line_and_saves_nothing(app_client, tmp_path,
                                                                                   monkeypatch):
    """A download refused only while it is made (a control character a worksheet can't store) is the server's one
    line beside its button, no file saved and the upload kept; the next download still saves its file."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    monkeypatch.setenv("SE_OFFLINE", "true")
    downloads = tmp_path / "downloads"
    downloads.mkdir()
    src = tmp_path / "제어문자.csv"  # a Korean name: the saved file takes the server's (RFC 5987) name
    src.write_text("review\n좋아요 ㅋㅋ\n탭은 되지만\x0b이건 안 됨\n별로에요\n", encoding="utf-8")
    browser = _chromium(downloads)
    try:
        wait = WebDriverWait(browser, 20)
        browser.get(app_client.url)
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#examples .example"))
        browser.find_element(By.ID, "file-input").send_keys(str(src))
        wait.until(ec.element_to_be_clickable((By.ID, "start-btn"))).click()
        wait.until(ec.visibility_of_element_located((By.ID, "results")))
        excel = browser.find_element(By.ID, "download-excel")
        job_id = excel.get_attribute("href").split("/")[-3]
        upload = app_client.store.get(job_id).upload
        refused = app_client.call("GET", f"/api/jobs/{job_id}/download/excel")
        assert refused.status == 400
        line = refused.json["error"]
        assert line.startswith("제어문자.csv: row 2 holds the control character U+000B") and "\n" not in line

        excel.click()
        wait.until(ec.visibility_of_element_located((By.ID, "download-error-excel")))
        assert browser.find_element(By.ID, "download-error-excel").text == line
        time.sleep(1)  # what a failed download would have left: a file, or a .crdownload
        assert list(downloads.iterdir()) == []
        assert upload.original.exists()  # a refused download is not a downloaded result: the upload stays

        browser.find_element(By.ID, "download-csv").click()
        saved = downloads / "제어문자.labelled.utf8.csv"
        assert appears(saved), list(downloads.iterdir())
        assert browser.find_element(By.ID, "download-excel").is_displayed()  # still a button to try again
    finally:
        browser.quit()
    body = saved.read_bytes()
    assert body == app_client.call("GET", f"/api/jobs/{job_id}/download/csv").body
    assert body.startswith(b"\xef\xbb\xbf") and "\x0b이건 안 됨" in body.decode("utf-8-sig")
    assert _eventually(lambda: not upload.original.exists())  # a download that answers forgets the upload, as before


def test_a_chosen_column_of_dates_is_refused_before_labelling(app_client):
    """Issue 41: the column picked in the dropdown is checked at start, in one line naming the file's columns."""
    data = "review,date\n" + "".join(f"리뷰 {i} 좋아요,2024-01-{i + 1:02d}\n" for i in range(10))
    up = app_client.upload("dated.csv", data.encode())
    assert up.status == 200 and up.json["guessed"] == "review"
    r = app_client.call("POST", f"/api/jobs/{up.json['id']}/start", json_body={"text_column": "date"})
    assert r.status == 400 and "'date' holds numbers, dates or ids" in r.json["error"] and "review" in r.json["error"]
    assert app_client.call("GET", f"/api/jobs/{up.json['id']}").json["state"] == "uploaded"
