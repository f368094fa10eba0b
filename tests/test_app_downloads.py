"""The web app's "same format" downloads keep the upload's own columns as it had them: the names verbatim (a
repeated name, an empty one) and, for JSONL, Parquet and .xlsx, the values with their types (the labelled CSV the
job keeps holds only text); the label columns come after, and an upload and a labelled file that no longer line up
are refused, never paired row by row askew."""
from __future__ import annotations

import csv
import datetime as dt
import io
import json

import pytest

from koelectra_kit.errors import InputError
from tests.fixtures_app import start_app

LABELS = ["negative", "neutral", "positive"]
ADDED = ["label", "confidence", *[f"prob_{lab}" for lab in LABELS], "status"]
REVIEWS = ["배송 빠르고 좋아요ㅋㅋㅋ", "별로에요.. 다신 안삼", "그냥 그럭저럭 쓸만함", "재밋어요 강추!!", "노잼ㅠㅠ 시간아까움"]


def _download(client, job: dict, kind: str) -> bytes:
    r = client.call("GET", f"/api/jobs/{job['id']}/download/{kind}")
    assert r.status == 200, r.body
    return r.body


def _check_added(row: dict) -> None:
    """The columns the job added: text, and numbers for the confidence and the probabilities."""
    assert row["label"] in LABELS and row["status"] == "ok"
    assert isinstance(row["confidence"], float) and row["confidence"] == max(row[f"prob_{lab}"] for lab in LABELS)


def test_a_jsonl_download_keeps_the_uploads_values_and_their_types(app_client):
    objects = [{"id": i, "review": REVIEWS[i], "score": i + 0.125, "ok": i % 2 == 0, "gone": None,
                "meta": {"tags": ["a", i], "deep": {"x": None, "y": 1.5}}, "": f"empty key {i}"}
               for i in range(len(REVIEWS))]
    lines = [json.dumps(o, ensure_ascii=False) for o in objects]
    # a blank line is no row; a line that is not JSON is a row, flagged, its text kept whole (as `label` writes it)
    broken = '{"id": 9, "review": "따옴표가 안 닫힌'
    data = "\n".join([*lines[:2], "", broken, *lines[2:]]) + "\n"
    job = app_client.label("typed.jsonl", data.encode())
    assert job["state"] == "done", job["message"]
    _download(app_client, job, "csv")  # the upload is kept past a first download: this one is made from it
    got = [json.loads(line) for line in _download(app_client, job, "same").decode().splitlines()]
    assert len(got) == len(objects) + 1
    flagged = got.pop(2)
    assert flagged["review"] == broken and flagged["id"] == "" and flagged["status"].startswith("error: malformed")
    assert flagged["label"] == "" and flagged["confidence"] is None
    for row, obj in zip(got, objects):
        assert list(row) == [*obj, *ADDED]
        assert {k: row[k] for k in obj} == obj  # ints, floats, booleans, null, nested values and the "" key
        assert type(row["id"]) is int and type(row["ok"]) is bool
        _check_added(row)


def test_a_parquet_download_keeps_the_uploads_arrow_types(app_client):
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    n = len(REVIEWS)
    table = pa.table({
        "id": pa.array(range(n), pa.int32()),
        "review": pa.array(REVIEWS, pa.large_string()),
        "score": pa.array([i / 3 for i in range(n)], pa.float64()),
        "ok": pa.array([i % 2 == 0 for i in range(n)]),
        "when": pa.array([dt.datetime(2024, 1, i + 1, 12, 30) for i in range(n)], pa.timestamp("ms")),
        "tags": pa.array([[i, i + 1] for i in range(n)], pa.list_(pa.int64())),
        "maybe": pa.array([None, 1, None, 3, None], pa.int64()),
    })
    # a repeated name and an empty one, as Arrow allows them
    table = table.append_column(pa.field("id", pa.string()), pa.array([f"r{i}" for i in range(n)]))
    table = table.append_column(pa.field("", pa.float32()), pa.array([0.5] * n, pa.float32()))
    buf = io.BytesIO()
    pq.write_table(table, buf)
    job = app_client.label("typed.parquet", buf.getvalue(), column="review")
    assert job["state"] == "done", job["message"]
    got = pq.ParquetFile(io.BytesIO(_download(app_client, job, "same"))).read()
    assert got.schema.names == [*table.schema.names, *ADDED]
    for i, field in enumerate(table.schema):
        assert got.schema.field(i).type == field.type, field.name
        assert got.column(i).to_pylist() == table.column(i).to_pylist(), field.name
    assert got.schema.field("label").type == pa.string() and got.schema.field("confidence").type == pa.float64()
    for row in got.select(list(range(table.num_columns, got.num_columns))).to_pylist():
        _check_added(row)


def test_an_xlsx_download_keeps_the_workbooks_cell_types_and_names(app_client):
    openpyxl = pytest.importorskip("openpyxl")

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["id", "review", "price", "day", "memo", "memo", None])
    rows = [[i, REVIEWS[i], i * 1.5, dt.datetime(2024, 3, i + 1), f"a{i}", f"b{i}", i % 2 == 0]
            for i in range(len(REVIEWS))]
    rows[0][4] = "=_= 별로"  # an emoticon, text: openpyxl writes a str that starts with "=" as a formula
    for r in rows:
        ws.append(r)
    ws.cell(row=2, column=5).data_type = "s"
    buf = io.BytesIO()
    wb.save(buf)
    job = app_client.label("typed.xlsx", buf.getvalue(), column="review")
    assert job["state"] == "done", job["message"]
    got = openpyxl.load_workbook(io.BytesIO(_download(app_client, job, "same")), read_only=True)
    header, *values = list(got.worksheets[0].iter_rows(values_only=True))
    # the empty header cell is named as the labelling named it (the page showed that name too)
    assert list(header) == ["id", "review", "price", "day", "memo", "memo", "column_7", *ADDED]
    assert [list(v[:7]) for v in values] == rows  # numbers, dates and booleans as cells of their type
    memo = openpyxl.load_workbook(io.BytesIO(_download(app_client, job, "same"))).worksheets[0].cell(row=2, column=5)
    assert (memo.value, memo.data_type) == ("=_= 별로", "s")  # text, not a formula Excel shows as an error
    for v in values:
        _check_added(dict(zip(header[7:], v[7:])))


def _header(data: bytes, encoding: str, sep: str) -> list[str]:
    return next(csv.reader(io.StringIO(data.decode(encoding)), delimiter=sep))


def test_repeated_and_empty_names_stay_in_tsv_downloads_and_after_the_analysts_labels(tiny_classifier,
                                                                                       tiny_classifier_dir, tmp_path):
    columns = ["id", "", "review", "note", "note"]
    lines = ["\t".join(columns)] + [f"{i}\tx{i}\t{REVIEWS[i]}\tn{i}\tm{i}" for i in range(len(REVIEWS))]
    tsv = ("\n".join(lines) + "\n").encode()
    csv_bytes = tsv.decode().replace("\t", ",").encode("utf-8-sig")  # the download is the labelled CSV itself
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "w", labels=str(tmp_path / "fixes.csv")) as c:
        for name, data in (("dup.tsv", tsv), ("dup.csv", csv_bytes)):
            job = c.label(name, data, column="review")
            assert job["state"] == "done", job["message"]
            added = [*ADDED, "label_source", "model_label"]
            kind, encoding, sep = ("same", "utf-8", "\t") if name.endswith(".tsv") else ("csv", "utf-8-sig", ",")
            assert _header(_download(c, job, kind), encoding, sep) == [*columns, *added]
            row = job["review"][0]  # the analyst fixes one row: the download is made again, with it
            fix = {"job": job["id"], "row": row["row"], "label": "negative", "answer_id": f"fix-{name}"}
            assert c.call("POST", "/api/corrections", json_body=fix).status == 200
            body = _download(c, job, kind)
            assert _header(body, encoding, sep) == [*columns, *added]
            got = list(csv.DictReader(io.StringIO(body.decode(encoding)), delimiter=sep))
            fixed = got[row["row"] - 1]
            assert (fixed["label"], fixed["label_source"]) == ("negative", "human")
            assert [r["note"] for r in got] == [f"m{i}" for i in range(len(REVIEWS))]  # DictReader: the last "note"


# ---------------------------------------------------------------------------------------------------------
# results.convert on its own: an upload and a labelled file that do not line up
# ---------------------------------------------------------------------------------------------------------


def _labelled_csv(path, rows: int) -> None:
    with open(path, "w", encoding="utf-8-sig", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["id", "review", *ADDED])
        for i in range(rows):
            w.writerow([str(i), REVIEWS[i], "positive", "0.5", "0.2", "0.3", "0.5", "ok"])


@pytest.mark.parametrize("kind", ["jsonl", "parquet"])
@pytest.mark.parametrize("labelled", [3, 5])
def test_an_upload_and_a_labelled_file_that_differ_in_rows_are_refused_in_one_line(tmp_path, kind, labelled):
    import pandas as pd

    from koelectra_kit.app.results import convert

    upload = pd.DataFrame({"id": range(4), "review": REVIEWS[:4]})
    original = tmp_path / f"input.{kind}"
    if kind == "jsonl":
        upload.to_json(original, orient="records", lines=True, force_ascii=False)
    else:
        upload.to_parquet(original, index=False)
    master = tmp_path / "labelled.csv"
    _labelled_csv(master, labelled)
    dst = tmp_path / f"labelled.same.{kind}"
    with pytest.raises(InputError) as e:
        convert(master, dst, kind, "utf-8" if kind == "jsonl" else None, ["confidence", "prob_negative"],
                f"reviews.{kind}", original)
    message = str(e.value)
    assert "\n" not in message and "line up" in message and message.startswith(f"reviews.{kind} has ")
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["labelled.csv", original.name])  # nothing half-made
