"""The web app served from a thread on a free port (the tiny classifier; a small upload limit so the size
check is tested without writing 200 MB), and a small HTTP client for its JSON API."""
from __future__ import annotations

import http.client
import json
import urllib.parse
from dataclasses import dataclass
from pathlib import Path

import pytest

UPLOAD_LIMIT = 64 * 1024  # the 500-row test CSV is ~25 KB


@dataclass
class Answer:
    status: int
    body: bytes
    headers: dict

    @property
    def json(self) -> dict:
        return json.loads(self.body)


class AppClient:
    def __init__(self, url: str, app):
        self.url, self.app = url, app
        parts = urllib.parse.urlsplit(url)
        self.host, self.port = parts.hostname, parts.port

    @property
    def store(self):
        return self.app.state.store

    def call(self, method: str, path: str, body: bytes | None = None, json_body=None, headers=None) -> Answer:
        if json_body is not None:
            body = json.dumps(json_body).encode()
        conn = http.client.HTTPConnection(self.host, self.port, timeout=60)
        try:
            conn.request(method, path, body=body, headers=headers or {})
            r = conn.getresponse()
            return Answer(r.status, r.read(), {k.lower(): v for k, v in r.getheaders()})
        finally:
            conn.close()

    def upload(self, name: str, data: bytes) -> Answer:
        return self.call("POST", f"/api/upload?name={urllib.parse.quote(name)}", body=data)

    def label(self, name: str, data: bytes, column: str | None = None, timeout: float = 60) -> dict:
        """Upload, start, wait until done; the job's final state."""
        up = self.upload(name, data)
        assert up.status == 200, up.body
        job_id = up.json["id"]
        started = self.call("POST", f"/api/jobs/{job_id}/start",
                            json_body={"text_column": column or up.json["guessed"]})
        assert started.status == 200, started.body
        return self.wait_job(job_id, name, timeout)

    def wait_job(self, job_id: str, name: str = "the file", timeout: float = 60) -> dict:
        """The job's state once it is done (or failed)."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            job = self.call("GET", f"/api/jobs/{job_id}").json
            if job["state"] in ("done", "error"):
                return job
            time.sleep(0.05)
        raise AssertionError(f"{name} was not labelled within {timeout}s")


def start_app(classifier, classifier_dir: Path, workdir: Path, **settings):
    """(context manager yielding an AppClient) for the app on a free port."""
    from contextlib import contextmanager

    from koelectra_kit.app import AppSettings, create_app
    from koelectra_kit.app.server import serve_in_thread

    @contextmanager
    def running():
        cfg = AppSettings(model=str(classifier_dir), workdir=str(workdir), **settings)
        app = create_app(cfg, classifier=classifier)
        with serve_in_thread(app) as url:
            yield AppClient(url, app)

    return running()


@pytest.fixture(scope="module")
def app_client(tiny_classifier, tiny_classifier_dir, tmp_path_factory):
    pytest.importorskip("fastapi")
    pytest.importorskip("uvicorn")
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path_factory.mktemp("app"),
                   max_upload_bytes=UPLOAD_LIMIT, chunk_rows=100) as client:
        yield client


# ---------------------------------------------------------------------------------------------------------
# Teach mode (tests/test_teach*.py)
# ---------------------------------------------------------------------------------------------------------

# a retrain in seconds: one short epoch of the tiny model, no references, no plots (the recipe is otherwise the app's)
FAST_RETRAIN = ["epochs=1", "max_length=32", "batch_size=32", "references=false", "precision=fp32", "device=cpu"]


def teach_pool(folder: Path, rows: int | None = None) -> tuple[Path, dict]:
    """(pool.csv with id,review from the bundled labelled sample, its true labels by text: the tests' analyst)."""
    import pandas as pd

    from tests.conftest import SAMPLE

    df = pd.read_csv(SAMPLE / "reviews_labelled.csv", dtype=str, keep_default_na=False)
    df = df.drop_duplicates("review").head(rows) if rows else df.drop_duplicates("review")
    path = folder / "pool.csv"
    df.assign(id=range(1, len(df) + 1))[["id", "review"]].to_csv(path, index=False)
    return path, dict(zip(df["review"], df["label"]))


def start_teach(model_dir: Path, folder: Path, **settings):
    """(context manager yielding an AppClient) teach mode on ``folder/pool.csv`` -> ``folder/labels.csv``."""
    from contextlib import contextmanager

    from koelectra_kit.app import AppSettings, create_app
    from koelectra_kit.app.server import serve_in_thread

    @contextmanager
    def running():
        opts = {"teach": str(folder / "pool.csv"), "labels": str(folder / "labels.csv"), "retrain_every": 1000,
                "retrain_overrides": FAST_RETRAIN, "workdir": str(folder / "work"), "device": "cpu",
                "precision": "fp32", **settings}
        app = create_app(AppSettings(model=str(model_dir), **opts))
        with serve_in_thread(app) as url:
            yield TeachClient(url, app)

    return running()


class TeachClient(AppClient):
    @property
    def teacher(self):
        return self.app.state.teacher

    def next(self, client: str = "tab1", timeout: float = 60) -> dict | None:
        """The next review for ``client`` (waiting while the model reads the pool)."""
        import time

        deadline = time.monotonic() + timeout
        while True:
            # "nothing to ask" only counts when the queue was not waiting for the pool's scores before the request and
            # is not after it: read after alone, a request answered while waiting (item None) whose scoring ended
            # just before the check looked final (a flake of the two-tabs test)
            waited = self.teacher.queue.waiting
            r = self.call("POST", "/api/teach/next", json_body={"client": client})
            assert r.status == 200, r.body
            settled = not waited and r.json["state"]["scoring"] is None and not self.teacher.queue.waiting
            if r.json["item"] is not None or settled or time.monotonic() > deadline:
                return r.json["item"]
            time.sleep(0.1)

    def act(self, action: str, answer_id: str, row: int | None = None, label: str | None = None,
            client: str = "tab1", **extra) -> Answer:
        return self.call("POST", "/api/teach/answer", json_body={"client": client, "action": action,
                                                                  "answer_id": answer_id, "row": row,
                                                                  "label": label, **extra})

    def state(self) -> dict:
        return self.call("GET", "/api/teach").json

    def wait_retrain(self, timeout: float = 90) -> dict:
        """The state once no retrain is queued or running (and the pool is scored)."""
        import time

        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            s = self.state()
            if s["retrain"]["state"] != "running" and s["scoring"] is None:
                return s
            time.sleep(0.2)
        raise AssertionError(f"no retrain ended within {timeout}s: {s['retrain']}")


def appears(path: Path, seconds: float = 30) -> bool:
    """Whether ``path`` exists within ``seconds`` (a browser download finishing)."""
    import time

    deadline = time.monotonic() + seconds
    while not path.exists():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def tfidf_start(folder: Path, start_rows: int = 300) -> tuple[Path, Path, dict]:
    """The analyst of issue 41: a TF-IDF folder fitted (``baseline``) on the first ``start_rows`` bundled labelled
    reviews, which records them, and pool.csv of the other reviews (id, review). (the folder, the pool, the pool's true
    labels by text)."""
    import pandas as pd

    from koelectra_kit.finetune.baseline import run_baseline
    from koelectra_kit.config import load_config
    from koelectra_kit.finetune import FinetuneConfig
    from tests.conftest import SAMPLE

    df = pd.read_csv(SAMPLE / "reviews_labelled.csv", dtype=str, keep_default_na=False).drop_duplicates("review")
    folder.mkdir(parents=True, exist_ok=True)
    df.head(start_rows)[["review", "label"]].to_csv(folder / "start.csv", index=False)
    rest = df.iloc[start_rows:]
    rest.assign(id=[f"R{i:04d}" for i in range(1, len(rest) + 1)])[["id", "review"]].to_csv(folder / "pool.csv",
                                                                                            index=False)
    run_baseline(load_config(FinetuneConfig, "sentiment", [f"train={folder / 'start.csv'}", "dev=null",
                                                           f"out={folder / 'tfidf'}", "plots=false"]))
    return folder / "tfidf", folder / "pool.csv", dict(zip(rest["review"], rest["label"]))
