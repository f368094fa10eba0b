"""A cell holding a lone "\r" (an old Mac line break, a cut CRLF) in every CSV the package writes: Python's csv
module quotes only its own line terminator's characters, so with "\n" such a cell went out bare and every reader
ended the record there. `label` wrote a file pandas read back as three rows of two, cells shifted. io/csvlines.py."""
from __future__ import annotations

import csv
import io

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.io.csvlines import RowWriter, csv_line, frame_csv

ODD = ["좋아\r요 최고", 'a "quoted"\r\nline', "plain", "two\n\rbreaks", '"\r"', ""]


def _read(text: str) -> list[list[str]]:
    return list(csv.reader(io.StringIO(text, newline="")))


def test_every_writer_reads_back_record_for_record():
    df = pd.DataFrame({"review": ODD, "n": range(len(ODD)), "p": [0.5, 0.25, 1.0, 0.125, 2.0, 0.0]})
    text = frame_csv(df)
    rows = _read(text)
    assert rows[0] == ["review", "n", "p"] and [r[0] for r in rows[1:]] == ODD and len(rows) == len(ODD) + 1
    assert pd.read_csv(io.StringIO(text), keep_default_na=False)["review"].tolist() == ODD
    assert text.count("\n") - sum(v.count("\n") for v in ODD) == len(ODD) + 1  # record ends are "\n", not "\r\n"
    assert not text.endswith("\r\n")
    assert _read(csv_line(["x\ry", 1]) + csv_line(["z", 2])) == [["x\ry", "1"], ["z", "2"]]
    buf = io.StringIO()
    w = RowWriter(buf)
    for v in ODD:
        w.writerow([v, 7])
    assert [r[0] for r in _read(buf.getvalue())] == ODD


def test_without_a_carriage_return_the_bytes_are_pandas_own():
    df = pd.DataFrame({"review": ["a,b", 'say "hi"', "x\ny", "plain"], "n": [1, 2, 3, 4]})
    assert frame_csv(df) == df.to_csv(index=False, lineterminator="\n")
    assert frame_csv(df, header=False) == df.to_csv(index=False, header=False, lineterminator="\n")


def test_a_sheet_cell_with_a_carriage_return_converts_to_one_record(tmp_path, monkeypatch):
    """xlsx_to_csv, every sheet reader's way in (a shared string's _x000D_ is a "\r" once openpyxl unescapes it)."""
    from koelectra_kit.io import workbook

    rows = [("id", "review"), (1, "좋아\r요"), (2, "별로")]
    monkeypatch.setattr(workbook, "sheet_rows", lambda *a, **k: (r for r in rows))
    assert workbook.xlsx_to_csv(tmp_path / "in.xlsx", tmp_path / "out.csv", "in.xlsx") == 2
    got = pd.read_csv(tmp_path / "out.csv", keep_default_na=False)
    assert got.values.tolist() == [[1, "좋아\r요"], [2, "별로"]]


def test_label_keeps_a_review_with_a_lone_carriage_return_in_its_row(tmp_path, sample_dir):
    assert main(["baseline", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'tf'}",
                 "plots=false"]) == 0
    src = tmp_path / "in.csv"
    frame = pd.DataFrame({"id": [1, 2, 3], "review": ["정말 좋아\r요 최고", "별로예요", "그냥\r그래요"]})
    with open(src, "w", encoding="utf-8", newline="") as f:  # CRLF line ends: the writer quotes the "\r" cells
        frame.to_csv(f, index=False, lineterminator="\r\n")
    out = tmp_path / "out.csv"
    assert main(["label", "--model", str(tmp_path / "tf"), "--input", str(src), "--output", str(out),
                 "--no-progress"]) == 0
    got = pd.read_csv(out, keep_default_na=False, encoding="utf-8-sig")
    assert got["id"].tolist() == [1, 2, 3] and got["review"].tolist() == frame["review"].tolist()
    assert (got["status"] == "ok").all() and set(got["label"]) <= {"negative", "neutral", "positive"}
