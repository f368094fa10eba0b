"""Teach mode's and the corrections' routes (beside ``server.py``'s, behind the same guard: they write to disk).

    GET  /api/teach                         counts, rounds, retrain progress, the labels file's problem if any
    POST /api/teach/next    {"client"}      the review this tab should answer next (leased to the tab)
    POST /api/teach/answer  {"client", "action": answer|skip|undo, "answer_id", "row", "label", "target"}
    POST /api/teach/retrain                 a round now
    POST /api/teach/label-pool              the file job on the whole pool with the latest model
    POST /api/corrections   {"job", "row", "label", "answer_id"}   fix a reviewed row's label (-> LABELS.csv)

Answers carry an ``answer_id`` the page makes, so a retried request is kept once (labelstore.py).
"""
from __future__ import annotations

import shutil

from fastapi import Request
from starlette.concurrency import run_in_threadpool

from ..errors import InputError, KitError
from .jobs import Busy, JobStore
from .labelstore import Event, LabelLog
from .teach import MAX_ID, Teacher
from .uploads import inspect, upload_kind


def teach_routes(app, teacher: Teacher, store: JobStore, json_body) -> None:
    @app.get("/api/teach")
    def state():
        return teacher.public()

    @app.post("/api/teach/next")
    async def next_item(request: Request):
        client = _client(await json_body(request))
        return {"item": await run_in_threadpool(teacher.next_item, client), "state": teacher.public()}

    @app.post("/api/teach/answer")
    async def answer(request: Request):
        body = await json_body(request)
        return await run_in_threadpool(teacher.answer, _client(body), body)

    @app.post("/api/teach/retrain")
    def retrain():
        teacher.request_retrain()
        return teacher.public()

    @app.post("/api/teach/label-pool")
    def label_pool():
        if teacher.shared.current() is None:
            raise Busy("no classifier yet: the first retrain makes one, then the whole file can be labelled")
        pool = teacher.pool
        if not pool.path.is_file():  # moved or deleted since the start: a 500 that blamed the disk space
            raise InputError(f"{pool.path} is no longer there (moved or deleted since the app started): put it back "
                             "to label it")
        up = store.new_upload(pool.name, upload_kind(pool.name))
        try:
            shutil.copyfile(pool.path, up.original)  # a copy: the job deletes its input after a download
            inspect(up, store.settings.preview_rows)
            job = store.add(up)
            store.start(up.id, pool.column)
        except BaseException:
            store.discard(up.folder)
            store.jobs.pop(up.id, None)
            raise
        return {**up.public(), "job": job.public()}


def correction_routes(app, log: LabelLog, store: JobStore, json_body) -> None:
    @app.post("/api/corrections")
    async def correct(request: Request):
        body = await json_body(request)
        job = store.get(str(body.get("job", "")))
        row, label, answer_id = body.get("row"), body.get("label"), body.get("answer_id")
        if not isinstance(answer_id, str) or not 0 < len(answer_id) <= MAX_ID:
            raise InputError(f"answer_id: a string of 1-{MAX_ID} characters made by the page")
        if isinstance(row, bool) or not isinstance(row, int) or row not in job.full_texts:  # 6.0 == 6 in a dict
            raise InputError(f"row {row!r} of {job.upload.name} is not among the rows to review")
        if label not in log.labels:
            raise InputError(f"label {label!r} is not one of {', '.join(log.labels)}")
        event, new = await run_in_threadpool(log.append, Event(
            text=job.full_texts[row], label=label, action="answer", row=str(row),
            source=f"correction:{job.upload.name}", answer_id=answer_id))
        return {"row": row, "label": event.label, "new": new, "labels_file": log.path.name, "counts": log.counts()}


def _client(body: dict) -> str:
    client = body.get("client")
    if not isinstance(client, str) or not 0 < len(client) <= MAX_ID:
        raise KitError(f"client: a string of 1-{MAX_ID} characters made by the page (one per tab)")
    return client
