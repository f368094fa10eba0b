"""Only the analyst drives the web app (koelectra_kit/app/guard.py): a request naming another host is refused (DNS
rebinding), a cross-site POST/DELETE is refused, and off loopback every request needs the per-run token (query,
header or the cookie the first visit sets). Each refusal is 403 with one JSON error line and changes nothing."""
from __future__ import annotations

import pytest

from tests.fixtures_app import start_app

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")


def _refused(answer, needle: str) -> None:
    assert answer.status == 403, answer.body
    error = answer.json["error"]
    assert needle in error and "\n" not in error


@pytest.fixture(scope="module")
def remote(tiny_classifier, tiny_classifier_dir, tmp_path_factory):
    """The app as `--host 0.0.0.0` would serve it (a wildcard bind: token required, any host name); the test server
    itself listens on 127.0.0.1."""
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path_factory.mktemp("remote"), host="0.0.0.0") as c:
        yield c


# ---------------------------------------------------------------------------------------------------------
# Host
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("host", ["attacker.example", "attacker.example:{port}", "127.0.0.1.attacker.example",
                                  "192.168.0.10:{port}", "localhost.:{port}", "[::2]:{port}", "", "bad host:x"])
def test_a_loopback_app_refuses_a_request_naming_another_host(app_client, host):
    host = host.format(port=app_client.port)
    _refused(app_client.call("GET", "/api/info", headers={"Host": host}), "refused: this app answers to")
    _refused(app_client.call("GET", "/", headers={"Host": host}), "refused")


@pytest.mark.parametrize("host", ["127.0.0.1:{port}", "localhost:{port}", "LOCALHOST:{port}", "[::1]:{port}",
                                  "localhost:8000", "127.0.0.1"])
def test_a_loopback_app_answers_to_its_own_names_on_any_port(app_client, host):
    # any port: an SSH tunnel (ssh -L 8000:localhost:PORT) changes it, and a rebinding page cannot choose the name
    assert app_client.call("GET", "/api/info", headers={"Host": host.format(port=app_client.port)}).status == 200


def test_a_rebound_page_can_neither_upload_nor_read_results(app_client):
    evil = {"Host": f"attacker.example:{app_client.port}"}
    before = set(app_client.store.root.iterdir())
    _refused(app_client.call("POST", "/api/upload?name=x.csv", body="review\n좋아요\n".encode(), headers=evil),
             "attacker.example")
    assert set(app_client.store.root.iterdir()) == before  # nothing stored
    job = app_client.label("mine.csv", "review\n좋아요\n별로\n".encode())
    assert job["state"] == "done"
    _refused(app_client.call("GET", f"/api/jobs/{job['id']}", headers=evil), "refused")
    _refused(app_client.call("GET", f"/api/jobs/{job['id']}/download/csv", headers=evil), "refused")
    _refused(app_client.call("DELETE", f"/api/jobs/{job['id']}", headers=evil), "refused")
    assert app_client.call("GET", f"/api/jobs/{job['id']}").json["state"] == "done"  # still there, still the analyst's


# ---------------------------------------------------------------------------------------------------------
# Origin
# ---------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("origin", ["http://attacker.example", "http://127.0.0.1:{other}", "null",
                                    "http://localhost:{port}", "not a url"])
def test_a_cross_origin_post_or_delete_is_refused(app_client, origin):
    origin = origin.format(port=app_client.port, other=app_client.port + 1)
    r = app_client.call("POST", "/api/predict", json_body={"text": "좋아요"}, headers={"Origin": origin})
    _refused(r, "another site than this app's")
    up = app_client.upload("a.csv", "review\n좋아요\n".encode()).json
    _refused(app_client.call("DELETE", f"/api/jobs/{up['id']}", headers={"Origin": origin}), "refused")
    _refused(app_client.call("POST", f"/api/jobs/{up['id']}/start", json_body={"text_column": "review"},
                             headers={"Origin": origin}), "refused")
    assert app_client.call("GET", f"/api/jobs/{up['id']}").json["state"] == "uploaded"  # neither started nor deleted
    assert app_client.call("DELETE", f"/api/jobs/{up['id']}").status == 200


def test_same_origin_or_no_origin_may_change_things_and_reads_are_not_shared(app_client):
    own = {"Origin": f"http://127.0.0.1:{app_client.port}"}
    assert app_client.call("POST", "/api/predict", json_body={"text": "좋아요"}, headers=own).status == 200
    assert app_client.call("POST", "/api/predict", json_body={"text": "좋아요"}).status == 200  # curl, scripts
    # a GET from another origin passes the guard (the Host check stops rebinding), but the browser keeps the answer
    # from that page: no CORS header lets it read
    r = app_client.call("GET", "/api/info", headers={"Origin": "http://attacker.example"})
    assert r.status == 200 and "access-control-allow-origin" not in r.headers


# ---------------------------------------------------------------------------------------------------------
# Token
# ---------------------------------------------------------------------------------------------------------


def test_off_loopback_every_request_needs_the_per_run_token(remote):
    token = remote.app.state.token
    assert token and len(token) >= 20
    for path in ("/", "/api/info", "/static/app.js", f"/api/info?token={token}x"):
        _refused(remote.call("GET", path), "needs its token")
    _refused(remote.call("POST", "/api/predict", json_body={"text": "좋아요"}), "needs its token")
    _refused(remote.call("GET", "/api/info", headers={"Authorization": "token wrong"}), "needs its token")
    _refused(remote.call("GET", "/api/info", headers={"Cookie": f"koelectra_kit_token_{remote.port}=wrong"}),
             "needs its token")
    assert remote.call("GET", f"/api/info?token={token}").status == 200
    assert remote.call("GET", "/api/info", headers={"Authorization": f"token {token}"}).status == 200
    # a wildcard bind answers to any name this computer has, which is why the token is required
    assert remote.call("GET", f"/?token={token}", headers={"Host": f"my-laptop.lan:{remote.port}"}).status == 200


def test_the_printed_urls_first_visit_sets_the_cookie_the_page_then_sends(remote):
    token = remote.app.state.token
    first = remote.call("GET", f"/?token={token}")
    assert first.status == 200 and b'id="file-input"' in first.body
    cookie = first.headers["set-cookie"]
    assert cookie.startswith(f"koelectra_kit_token_{remote.port}={token};")
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    jar = {"Cookie": cookie.split(";")[0]}
    assert remote.call("GET", "/static/app.js", headers=jar).status == 200
    assert "set-cookie" not in remote.call("GET", f"/api/info?token={token}", headers=jar).headers  # set once
    own = {**jar, "Origin": f"http://127.0.0.1:{remote.port}"}
    assert remote.call("POST", "/api/predict", json_body={"text": "좋아요"}, headers=own).status == 200
    # the token does not open the door to another site's page
    _refused(remote.call("POST", "/api/predict", json_body={"text": "좋아요"},
                         headers={**jar, "Origin": "http://attacker.example"}), "another site")


def test_each_run_gets_its_own_token_and_loopback_none_unless_set(tiny_classifier, tiny_classifier_dir, tmp_path,
                                                                  remote, app_client):
    assert app_client.app.state.token is None
    assert app_client.call("GET", "/api/info").status == 200
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "a", host="0.0.0.0") as other:
        assert other.app.state.token != remote.app.state.token
        _refused(other.call("GET", f"/api/info?token={remote.app.state.token}"), "needs its token")
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "b", token="chosen-token-1") as local:
        _refused(local.call("GET", "/api/info"), "needs its token")
        assert local.call("GET", "/api/info?token=chosen-token-1").status == 200


def test_a_named_remote_bind_answers_to_that_name_with_the_token(tiny_classifier, tiny_classifier_dir, tmp_path):
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path, host="192.0.2.7") as client:
        token = client.app.state.token
        named = {"Host": f"192.0.2.7:{client.port}"}
        assert client.call("GET", f"/api/info?token={token}", headers=named).status == 200
        _refused(client.call("GET", "/api/info", headers=named), "needs its token")
        for host in (f"127.0.0.1:{client.port}", "attacker.example"):
            _refused(client.call("GET", f"/api/info?token={token}", headers={"Host": host}), "answers to 192.0.2.7")


# ---------------------------------------------------------------------------------------------------------
# The rules as functions, and the printed address
# ---------------------------------------------------------------------------------------------------------


def test_host_names_same_origin_and_the_printed_url():
    import socket

    from koelectra_kit.app.guard import LOOPBACK_NAMES, host_names, is_loopback, same_origin
    from koelectra_kit.app.server import app_url

    assert all(is_loopback(h) for h in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost", "LocalHost"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "192.168.0.3", "example.com", "localhost.example"))
    assert host_names("127.0.0.1") == host_names("localhost") == LOOPBACK_NAMES
    assert host_names("127.0.0.2") == LOOPBACK_NAMES | {"127.0.0.2"}  # its own printed URL answers too
    assert host_names("0.0.0.0") is None and host_names("::") is None
    assert host_names("Box.LAN") == {"box.lan"} and host_names("[fd00::1]") == {"fd00::1"}
    assert same_origin("http://127.0.0.1:7860", "127.0.0.1:7860") and same_origin("http://box", "box:80")
    assert same_origin("https://box", "box") and same_origin("http://[::1]:7860", "[::1]:7860")
    assert not same_origin("http://box:81", "box") and not same_origin("https://box:7860", "box:7861")
    assert not same_origin("null", "box") and not same_origin("ftp://box", "box")
    assert app_url("127.0.0.1", 7860, None) == "http://127.0.0.1:7860/"
    assert app_url("::1", 7860, None) == "http://[::1]:7860/"
    assert app_url("0.0.0.0", 7860, "abc") == f"http://{socket.gethostname()}:7860/?token=abc"


def test_a_short_token_is_a_config_error():
    from koelectra_kit.app import AppSettings
    from koelectra_kit.errors import ConfigError

    with pytest.raises(ConfigError, match="token: at least 8"):
        AppSettings(model="m", token="abc").validate()


def test_browser_opens_the_printed_url_and_the_page_works_through_the_cookie(remote, tmp_path, monkeypatch):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    from tests.test_app import LABELS, _chromium

    monkeypatch.setenv("SE_OFFLINE", "true")
    browser = _chromium(tmp_path)
    try:
        wait = WebDriverWait(browser, 30)
        browser.get(f"{remote.url}/?token={remote.app.state.token}")
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#examples .example"))  # /api/info by the cookie
        browser.get(f"{remote.url}/")  # the address bar without the token: the cookie still opens it
        wait.until(lambda b: b.find_elements(By.CSS_SELECTOR, "#examples .example"))
        browser.find_element(By.ID, "review-text").send_keys("배송 빠르고 좋아요ㅋㅋㅋ")
        browser.find_element(By.ID, "predict-btn").click()  # a same-origin POST with the cookie
        wait.until(ec.visibility_of_element_located((By.ID, "predict-result")))
        assert browser.find_element(By.ID, "predict-label").text in LABELS
        browser.delete_all_cookies()
        browser.get(f"{remote.url}/")
        assert "needs its token" in browser.find_element(By.TAG_NAME, "body").text
    finally:
        browser.quit()
