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
        import time

        up = self.upload(name, data)
        assert up.status == 200, up.body
        job_id = up.json["id"]
        started = self.call("POST", f"/api/jobs/{job_id}/start",
                            json_body={"text_column": column or up.json["guessed"]})
        assert started.status == 200, started.body
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
