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


def test_a_download_waits_while_the_labels_file_does_not_read_well(tiny_classifier, tiny_classifier_dir, tmp_path):
    """A hand edit that broke LABELS.csv (a typo, a cp949 save) left downloads serving the labels last read well as
    the analyst's latest, without a word (label --human-labels refuses the same file)."""
    labels = tmp_path / "fixes.csv"
    data = ("review\n" + "\n".join(REVIEWS) + "\n").encode()
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "w", labels=str(labels)) as c:
        job = c.label("r.csv", data, column="review")
        row = job["review"][0]
        fix = {"job": job["id"], "row": row["row"], "label": "negative", "answer_id": "fix-1"}
        assert c.call("POST", "/api/corrections", json_body=fix).status == 200
        good = labels.read_bytes()
        labels.write_bytes(good.replace(b",negative,", b",positive,") + "별로 최악,nagative\n".encode())
        r = c.call("GET", f"/api/jobs/{job['id']}/download/csv")
        assert r.status == 409 and "label 'nagative'" in r.json["error"] and "downloads wait" in r.json["error"]
        labels.write_bytes(good.replace(b",negative,", b",positive,"))  # fixed: the edit is in the download
        got = list(csv.DictReader(io.StringIO(_download(c, job, "csv").decode("utf-8-sig"))))
        assert (got[row["row"] - 1]["label"], got[row["row"] - 1]["label_source"]) == ("positive", "human")


# ---------------------------------------------------------------------------------------------------------
# The Excel download (every upload): Excel opening a CSV reads a cell that starts with = + - @ as a formula
# ---------------------------------------------------------------------------------------------------------

# emoticons Korean reviews start with, a crafted formula (CSV injection), a normal review, an empty text, digits
TRICKY = ["-_- 별로", "=_= 최악", "+_+ 대박", "@_@", '=HYPERLINK("http://x","y")', REVIEWS[0], "", "007"]


def _csv_bytes(header: list, rows: list, encoding: str = "utf-8") -> bytes:
    buf = io.StringIO()
    csv.writer(buf, lineterminator="\n").writerows([header, *rows])
    return buf.getvalue().encode(encoding)


def _sheet(data: bytes):
    """(header, rows of cells) of a downloaded workbook's first sheet, cells with their types (not read-only)."""
    openpyxl = pytest.importorskip("openpyxl")
    header, *rows = list(openpyxl.load_workbook(io.BytesIO(data)).worksheets[0].iter_rows())
    return [c.value for c in header], rows


def _no_formula(data: bytes) -> None:
    """No cell of the workbook is a formula, whatever openpyxl would read back: the sheet's XML has no <f>."""
    import zipfile

    with zipfile.ZipFile(io.BytesIO(data)) as z:
        sheets = [n for n in z.namelist() if n.startswith("xl/worksheets/")]
        assert sheets and not any(b"<f>" in z.read(n) or b"<f " in z.read(n) for n in sheets)


def _offer(job: dict) -> dict:
    return {d["kind"]: d for d in job["downloads"]}


def test_the_excel_download_keeps_every_review_as_text_and_the_figures_as_numbers(app_client):
    rows = [[f"{i:03d}", text] for i, text in enumerate(TRICKY)]
    job = app_client.label("emoticons.csv", _csv_bytes(["id", "review"], rows), column="review")
    assert job["state"] == "done", job["message"]
    offer = _offer(job)
    assert list(offer) == ["same", "csv", "excel"]
    assert offer["excel"]["filename"] == "emoticons.labelled.xlsx" and "Excel (.xlsx" in offer["excel"]["label"]
    assert "refused" not in offer["excel"]
    data = _download(app_client, job, "excel")
    _no_formula(data)
    header, cells = _sheet(data)
    assert header == ["id", "review", *ADDED]
    assert len(cells) == len(TRICKY)
    master = list(csv.DictReader(io.StringIO(_download(app_client, job, "csv").decode("utf-8-sig"))))
    for (ident, text), row, want in zip(rows, cells, master):
        got = {name: cell for name, cell in zip(header, row)}
        assert (got["id"].value, got["id"].data_type) == (ident, "s")  # "000", not the number 0
        if text:
            assert (got["review"].value, got["review"].data_type) == (text, "s"), text
        else:
            assert got["review"].value is None  # an empty text is an empty cell, as in the CSV
        assert (got["label"].value or "") == want["label"] and got["status"].value == want["status"]
        for col in ["confidence", *[f"prob_{lab}" for lab in LABELS]]:
            if want[col]:
                assert got[col].data_type == "n" and got[col].value == float(want[col]), col
            else:
                assert got[col].value is None  # the empty text: not labelled
    labelled = [dict(zip(header, [c.value for c in row])) for row, text in zip(cells, TRICKY) if text]
    for row in labelled:
        _check_added(row)


def test_a_jsonl_upload_gets_the_excel_download_and_an_xlsx_upload_only_its_own(app_client):
    openpyxl = pytest.importorskip("openpyxl")
    objects = [{"id": i, "review": text, "score": i + 0.5} for i, text in enumerate(TRICKY) if text]
    data = "".join(json.dumps(o, ensure_ascii=False) + "\n" for o in objects).encode()
    job = app_client.label("emoticons.jsonl", data, column="review")
    assert job["state"] == "done", job["message"]
    assert list(_offer(job)) == ["same", "csv", "excel"]
    body = _download(app_client, job, "excel")
    _no_formula(body)
    header, cells = _sheet(body)
    assert header == ["id", "review", "score", *ADDED]
    for obj, row in zip(objects, cells):
        got = dict(zip(header, row))
        # the input's columns as the labelled CSV holds them: text (the typed download is the JSONL itself)
        assert [(got[k].value, got[k].data_type) for k in obj] == [(str(v), "s") for v in obj.values()]
        _check_added({k: c.value for k, c in got.items()})

    wb = openpyxl.Workbook()
    wb.active.append(["id", "review"])
    for i, text in enumerate(REVIEWS):
        wb.active.append([i, text])
    buf = io.BytesIO()
    wb.save(buf)
    job = app_client.label("book.xlsx", buf.getvalue(), column="review")
    assert job["state"] == "done", job["message"]
    offer = _offer(job)
    assert list(offer) == ["same", "csv"] and offer["same"]["label"].startswith("Excel (.xlsx")  # not two of them
    assert _download(app_client, job, "excel") == _download(app_client, job, "same")  # the route answers anyway


def test_the_excel_download_has_the_analysts_labels_as_the_csv_has_them(tiny_classifier, tiny_classifier_dir,
                                                                       tmp_path):
    rows = [[str(i), text] for i, text in enumerate(TRICKY) if text]
    with start_app(tiny_classifier, tiny_classifier_dir, tmp_path / "w", labels=str(tmp_path / "fixes.csv")) as c:
        job = c.label("fixed.csv", _csv_bytes(["id", "review"], rows), column="review")
        assert job["state"] == "done", job["message"]
        _download(c, job, "excel")  # made once before the fixes: they must still reach the next one
        for n, (row, label) in enumerate(zip(job["review"][:2], ["negative", "positive"])):
            fix = {"job": job["id"], "row": row["row"], "label": label, "answer_id": f"fix-{n}"}
            assert c.call("POST", "/api/corrections", json_body=fix).status == 200
        want = list(csv.DictReader(io.StringIO(_download(c, job, "csv").decode("utf-8-sig"))))
        header, cells = _sheet(_download(c, job, "excel"))
    assert header == ["id", "review", *ADDED, "label_source", "model_label"]
    got = [dict(zip(header, [cell.value for cell in row])) for row in cells]
    for col in ("label", "label_source", "model_label"):
        assert [r[col] for r in got] == [r[col] for r in want], col
    fixed = {r["row"] for r in job["review"][:2]}
    assert {i for i, r in enumerate(got, 1) if r["label_source"] == "human"} == fixed
    assert [got[r - 1]["label"] for r in sorted(fixed)] == [
        lab for row, lab in sorted(zip([r["row"] for r in job["review"][:2]], ["negative", "positive"]))]


def test_a_file_longer_than_a_worksheet_has_no_excel_download_but_one_line_why(app_client, monkeypatch):
    from koelectra_kit.io import workbook

    monkeypatch.setattr(workbook, "EXCEL_MAX_ROWS", 4)  # a header and 3 rows, not a million
    fits = app_client.label("three.csv", _csv_bytes(["review"], [[t] for t in REVIEWS[:3]]))
    assert "refused" not in _offer(fits)["excel"]
    assert len(_sheet(_download(app_client, fits, "excel"))[1]) == 3

    job = app_client.label("four.csv", _csv_bytes(["review"], [[t] for t in REVIEWS[:4]]))
    assert job["state"] == "done", job["message"]
    why = _offer(job)["excel"]["refused"]
    assert "\n" not in why and why.startswith("four.csv has 4 rows") and "4 rows, header included" in why
    assert why.endswith("download four.labelled.csv or four.labelled.utf8.csv")  # its own format and the CSV
    r = app_client.call("GET", f"/api/jobs/{job['id']}/download/excel")
    assert r.status == 400 and r.json == {"error": why}
    folder = app_client.store.get(job["id"]).upload.folder
    assert not [p.name for p in folder.iterdir() if "xlsx" in p.name]  # nothing half-written left behind
    assert _download(app_client, job, "csv").count(b"\n") == 5  # the other downloads are there


def test_the_excel_writer_refuses_a_long_file_before_a_cut_one_exists(tmp_path, monkeypatch):
    """The writer's own guard, for a file the app did not know to be too long: no workbook, no temporary file."""
    from koelectra_kit.app import results
    from koelectra_kit.io import workbook

    master = tmp_path / "labelled.csv"
    _labelled_csv(master, 5)
    monkeypatch.setattr(workbook, "EXCEL_MAX_ROWS", 5)
    with pytest.raises(InputError) as e:
        results.convert(master, tmp_path / "labelled.excel.xlsx", "excel", None, ["confidence"], "big.csv")
    assert str(e.value).startswith("big.csv has more than 4 rows") and "CSV UTF-8" in str(e.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labelled.csv"]


def test_without_openpyxl_the_excel_download_says_how_to_install_it(app_client, monkeypatch):
    import sys

    job = app_client.label("plain.csv", _csv_bytes(["review"], [[t] for t in REVIEWS]))
    monkeypatch.setitem(sys.modules, "openpyxl", None)  # what `import openpyxl` meets without the package
    job = app_client.call("GET", f"/api/jobs/{job['id']}").json
    why = _offer(job)["excel"]["refused"]
    assert why == "the Excel (.xlsx) download needs openpyxl: pip install 'koelectra-kit[xlsx]'"
    assert app_client.call("GET", f"/api/jobs/{job['id']}/download/excel").json == {"error": why}


def test_a_review_with_a_control_character_is_one_line_for_excel_and_kept_in_the_csv(app_client):
    rows = [[REVIEWS[0]], ["탭은 되지만\x0b이건 안 됨"], [REVIEWS[1]]]
    job = app_client.label("ctrl.csv", _csv_bytes(["review"], rows))
    assert job["state"] == "done", job["message"]
    r = app_client.call("GET", f"/api/jobs/{job['id']}/download/excel")
    assert r.status == 400 and r.json["error"] == ("ctrl.csv: row 2 holds the control character U+000B, which an "
                                                   "Excel worksheet can't store; download the CSV UTF-8 file instead")
    assert "\x0b" in _download(app_client, job, "csv").decode("utf-8-sig")


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


@pytest.mark.parametrize("kind", ["csv", "tsv"])
def test_a_character_the_uploads_encoding_cannot_store_is_one_line_in_either_text_download(tmp_path, kind):
    """A cp949 download of text cp949 has no code for (an emoji label, say): one line naming the character, as the
    CSV always said; the TSV's was an uncaught UnicodeEncodeError (a 500). No half-written file is left."""
    from koelectra_kit.app.results import convert

    master = tmp_path / "labelled.csv"
    _labelled_csv(master, 2)
    master.write_text(master.read_text(encoding="utf-8-sig").replace("positive", "좋음😀"), encoding="utf-8-sig")
    with pytest.raises(InputError) as e:
        convert(master, tmp_path / f"labelled.same.{kind}", kind, "cp949", ["confidence"], f"reviews.{kind}")
    assert str(e.value).startswith(f"the labelled reviews.{kind} holds characters that cp949 can't store ('😀')")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["labelled.csv"]
