"""The web app's routes: one static page (``static/``, no build step, nothing from a CDN) and a small JSON API.

    GET  /                              the page
    GET  /api/info                      model, labels, examples, upload limit
    POST /api/predict  {"text": ...}    one review -> label, confidence, probabilities
    POST /api/upload?name=FILE          the file's bytes as the body -> columns, first rows, guessed text column
    POST /api/jobs/ID/start {"text_column": ...}
    GET  /api/jobs/ID                   progress, then summary, rows to review, downloads (the page polls this)
    GET  /api/jobs/ID/download/KIND     same | csv | excel (the uploaded file is deleted after a download)
    DELETE /api/jobs/ID                 forget the upload and its results
    /api/teach..., /api/corrections     teach mode and label fixes (teach_routes.py), with --teach / --labels

The upload is the raw body, not a multipart form: the server streams it to disk and stops reading at the size
limit (a form is parsed whole into a spooled file before any handler sees it), and python-multipart is not needed.
Every error answers ``{"error": "one line"}`` with a 4xx/5xx status; nothing a request does stops the server.
Every request first passes ``guard.Guard`` (its Host, its Origin, the token off loopback): only the analyst drives
the app.
"""
from __future__ import annotations

import logging
import traceback
import threading
from contextlib import asynccontextmanager, contextmanager
from pathlib import Path

from fastapi import FastAPI, Request
from fastapi.responses import FileResponse, JSONResponse
from fastapi.staticfiles import StaticFiles
from starlette.background import BackgroundTask
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect

from ..errors import InputError, KitError
from ..io.textcheck import is_blank
from .guard import Guard, host_names
from .jobs import Busy, JobStore, NotFound, SharedClassifier, disk_message
from .labelstore import LabelFileProblem
from .settings import APP_OVERRIDE, AppSettings
from .teach_routes import correction_routes, teach_routes
from .uploads import TooLarge, inspect, receive, upload_kind

STATIC = Path(__file__).parent / "static"
MAX_TEXT_CHARS = 20_000
# one click away in the page: the noise Korean comments really have (ㅋㅋ, emoji, typos, no spaces)
EXAMPLES = [
    "배송 빠르고 포장도 꼼꼼해요ㅋㅋㅋ 완전 만족👍👍",
    "이걸 돈주고 삼?? 한번쓰고 고장남ㅡㅡ 환불각",
    "그냥저냥 쓸만함.. 가격생각하면 나쁘진않은듯",
    "재밋어요!!! 배우들 연기 짱짱 ㅎㅎ 또 볼꺼임",
    "노잼ㅠㅠ 시간아까움 비추합니다",
]
STATUS = {NotFound: 404, Busy: 409, TooLarge: 413, LabelFileProblem: 409}
logger = logging.getLogger("koelectra_kit.app")


def create_app(settings: AppSettings, classifier=None):
    """The FastAPI app. ``classifier``: an already loaded ``Classifier`` (else ``settings.model`` is loaded now,
    so a bad model folder is an error before the port opens)."""
    settings.validate()
    shared, teacher, log = _models(settings, classifier)
    store = JobStore(settings, shared, log)  # with a labels file, its answers win in every download

    @asynccontextmanager
    async def lifespan(_app):
        yield
        if teacher is not None:
            teacher.close()  # a running retrain is stopped; its round is not recorded
        store.close()  # uvicorn's shutdown (Ctrl-C included): uploads and results go with the app

    app = FastAPI(title="koelectra-kit", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.store, app.state.settings, app.state.token = store, settings, settings.run_token()
    app.state.teacher, app.state.labels_log = teacher, log
    app.add_middleware(Guard, hosts=host_names(settings.host), token=app.state.token)  # only the analyst: guard.py

    @app.exception_handler(KitError)
    async def kit_error(_request, exc: KitError):
        return JSONResponse({"error": str(exc)}, status_code=STATUS.get(type(exc), 400))

    @app.exception_handler(HTTPException)
    async def http_error(request, exc: HTTPException):  # an unknown route or method: the API's one shape of error
        return JSONResponse({"error": f"{exc.detail}: {request.method} {request.url.path}"},
                            status_code=exc.status_code, headers=getattr(exc, "headers", None))

    @app.exception_handler(OSError)
    async def disk_error(_request, exc: OSError):  # a full or read-only disk: not an "internal error" + traceback
        return JSONResponse({"error": disk_message(exc, settings)}, status_code=507 if exc.errno == 28 else 500)

    @app.exception_handler(Exception)
    async def any_error(_request, exc: Exception):
        logger.error("request failed:\n%s", "".join(traceback.format_exception(exc)))
        line = (str(exc).strip().splitlines() or [""])[0][:200]
        return JSONResponse({"error": f"internal error ({type(exc).__name__}: {line})"}, status_code=500)

    _page_routes(app, store, settings)
    _file_routes(app, store, settings)
    if teacher is not None:
        teach_routes(app, teacher, store, _json)
    if log is not None:
        correction_routes(app, log, store, _json)
    app.mount("/static", StaticFiles(directory=STATIC), name="static")
    return app


def _models(settings: AppSettings, classifier):
    """(the shared classifier, the Teacher or None, the LABELS.csv log or None). Teach mode may start from an encoder
    alone (no classifier until the first retrain); every other mode needs a trained classifier."""
    from ..label import check_trained_head

    teacher = log = None
    if settings.teach:
        from .pool import Pool
        from .start import start_point
        from .teach import Teacher

        pool = Pool.read(settings.teach, settings.text_column)  # a pool without a text column: refused before loading
        start = start_point(settings.model, settings.encoder, settings.classes, settings.device, settings.precision)
        if start.classifier is not None:
            check_trained_head(start.classifier, override=APP_OVERRIDE)
        log = _labels_log(settings, start.labels)
        shared = SharedClassifier(start.classifier, start.labels)
        teacher = Teacher(settings, shared, start, pool, log)
        return shared, teacher, log
    if classifier is None:
        from ..classify.classifier import Classifier

        classifier = Classifier.load(settings.model, device=settings.device, precision=settings.precision)
    check_trained_head(classifier, override=APP_OVERRIDE)
    if settings.labels:
        log = _labels_log(settings, list(classifier.labels))
    return SharedClassifier(classifier), teacher, log


def _labels_log(settings: AppSettings, labels: list[str]):
    from .labelstore import LabelLog

    log = LabelLog(settings.labels, labels)
    if log.problem:  # at start-up: refuse, one line, the file untouched
        raise InputError(log.problem)
    return log


def _page_routes(app, store: JobStore, settings: AppSettings) -> None:
    @app.get("/")
    def index():
        return FileResponse(STATIC / "index.html")

    @app.get("/api/info")
    def info():
        clf, teacher = store.clf.current(), app.state.teacher
        model = teacher.serving if teacher is not None else Path(str(clf.source or settings.model)).name
        return {"model": model or f"{Path(settings.model).name} (an encoder: no classifier yet)",
                "labels": store.clf.labels, "examples": EXAMPLES, "max_upload_bytes": settings.max_upload_bytes,
                "classifier": clf is not None, "teach": teacher is not None,
                "corrections": app.state.labels_log is not None,
                "labels_file": settings.labels and Path(settings.labels).name}

    @app.post("/api/predict")
    async def predict(request: Request):
        text = _text_field(await _json(request))
        pred = await run_in_threadpool(store.clf.predict, [text])
        probs = [round(float(p), 4) for p in pred.probs[0]]
        return {"label": pred.labels[0], "confidence": max(probs), "labels": store.clf.labels,
                "probs": probs, "status": "truncated" if pred.truncated[0] else "ok"}


def _file_routes(app, store: JobStore, settings: AppSettings) -> None:
    @app.post("/api/upload")
    async def upload(request: Request, name: str = ""):
        name = Path(name.replace("\\", "/")).name.strip()
        if not name:
            raise KitError("no file name given: upload with ?name=FILE.csv")
        up = store.new_upload(name, upload_kind(name))
        try:
            declared = request.headers.get("content-length")
            await receive(request.stream(), up.original, name, settings.max_upload_bytes,
                          int(declared) if declared and declared.isdigit() else None)
            await run_in_threadpool(inspect, up, settings.preview_rows)
        except ClientDisconnect:
            store.discard(up.folder)
            raise KitError(f"the upload of {name} was interrupted: upload it again") from None
        except BaseException:
            store.discard(up.folder)  # a refused upload leaves nothing behind
            raise
        return {**up.public(), "job": store.add(up).public()}

    @app.post("/api/jobs/{job_id}/start")
    async def start(job_id: str, request: Request):
        body = await _json(request)
        return store.start(job_id, body.get("text_column"), body.get("allow_mostly_empty", False)).public()

    @app.get("/api/jobs/{job_id}")
    def job_state(job_id: str):
        return store.get(job_id).public()

    @app.get("/api/jobs/{job_id}/download/{kind}")
    def download(job_id: str, kind: str):
        path, filename = store.download(job_id, kind)
        # octet-stream: a download, whatever the encoding (a text/csv answer would claim charset=utf-8 for cp949)
        return FileResponse(path, filename=filename, media_type="application/octet-stream",
                            background=BackgroundTask(store.forget_input, job_id))

    @app.delete("/api/jobs/{job_id}")
    def remove(job_id: str):
        store.remove(job_id)
        return {"removed": job_id}


async def _json(request) -> dict:
    try:
        body = await request.json()
    except ValueError:
        raise KitError("the request body is not JSON") from None
    if not isinstance(body, dict):
        raise KitError("the request body must be a JSON object")
    return body


def _text_field(body: dict) -> str:
    text = body.get("text")
    if not isinstance(text, str) or is_blank(text):  # (only zero-width characters: as empty as spaces)
        raise KitError("type a review first")
    if len(text) > MAX_TEXT_CHARS:
        raise KitError(f"that text is {len(text):,} characters; the box takes up to {MAX_TEXT_CHARS:,} "
                       "(label long files with the upload below)")
    return text


def serve(settings: AppSettings, classifier=None) -> None:
    """Load the model, then serve until Ctrl-C (which deletes every upload and result)."""
    import uvicorn

    sock = bind_socket(settings.host, settings.port)  # before the model loads: a busy port or bad host says so at once
    app = None
    try:
        app = create_app(settings, classifier)
        print(f"koelectra-kit app: open {app_url(settings.host, sock.getsockname()[1], app.state.token)} (Ctrl-C "
              "stops it and deletes the uploads)")
        uvicorn.Server(uvicorn.Config(app, log_level="warning")).run(sockets=[sock])
    finally:
        sock.close()
        if app is not None:  # a second Ctrl-C makes uvicorn skip the app's shutdown, and with it the cleanup
            app.state.store.close()


def app_url(host: str, port: int, token: str | None) -> str:
    """The address to open: a wildcard bind (0.0.0.0, ::) as this computer's name, the token as Jupyter's URL has it."""
    import socket

    if host in ("0.0.0.0", "::", ""):
        host = socket.gethostname()
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{port}/" + (f"?token={token}" if token else "")


def bind_socket(host: str, port: int):
    """A listening socket on ``host``:``port``, or a one-line ``InputError`` (unknown host, port in use, no right to
    it) instead of uvicorn's own log line and exit status."""
    import socket

    try:
        family, kind, proto, _, addr = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                          flags=socket.AI_PASSIVE)[0]
    except (socket.gaierror, UnicodeError) as e:
        raise InputError(f"--host {host}: not an address of this computer ({e})") from None
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(addr)
        sock.listen(2048)
    except OSError as e:
        sock.close()
        raise InputError(f"cannot serve on {host}:{port}: {e.strerror or e} (another app on that port? try --port)") \
            from None
    sock.set_inheritable(True)
    return sock


@contextmanager
def serve_in_thread(app, host: str = "127.0.0.1", port: int = 0):
    """Serve ``app`` from a background thread (tests, benchmarks); yields its base URL (``port=0``: a free one).
    Leaving the block shuts it down as Ctrl-C would, uploads and results deleted."""
    import uvicorn

    server = uvicorn.Server(uvicorn.Config(app, host=host, port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name="koelectra-app", daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise RuntimeError(f"the app did not start on {host}:{port}")
        thread.join(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://{host}:{bound}"
    finally:
        server.should_exit = True
        thread.join(30)
