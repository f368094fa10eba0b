"""LABELS.csv's last line torn mid-write (a power loss or a kill during an append): the app sets it aside in
LABELS.csv.torn and goes on, the commands that only read the file (label --human-labels, finetune train=, suggest
labelled=) read without it and leave the file alone, and everything else reads as before (a short hand-typed answer
is an answer, a wrong label on a complete line is a problem). Every reader names a line as an editor numbers it."""
from __future__ import annotations

import codecs
import logging
import re
import warnings

import pytest

from koelectra_kit.app.labelstore import Event, LabelLog
from koelectra_kit.errors import InputError
from koelectra_kit.io.labellog import COLUMNS, LabelFileProblem, parse, without_torn_tail

pytestmark = pytest.mark.fast

LABELS = ["negative", "neutral", "positive"]
COMPLETE = (codecs.BOM_UTF8 + (",".join(COLUMNS) + "\n"
                               "배송 빨라요,positive,answer,4,teach,a1,,2025-01-02T10:11:12\n"
                               "별로,,skip,7,teach,a2,,2025-01-02T10:11:15\n").encode())
TORN = {
    "label cut": "좋아요,posi".encode(),
    "text cut inside a quote": '"배송이 빨라요,\n그리고 포장'.encode(),  # the csv module would read a skip to the end
    "character cut in two": "좋아요,부정".encode()[:-1],
    # an undo cut inside ``undoes``: read as it is, it retracts nothing, and its resend is dropped as a repeat
    "undo cut short": ",,undo,,teach,a9,a".encode(),
}


@pytest.fixture
def app_log():
    """The lines the app's logger says (the CLI's setup stops them reaching the root logger caplog listens to)."""
    said = []
    handler = logging.Handler()
    handler.emit = lambda record: said.append(record.getMessage())
    logger = logging.getLogger("koelectra_kit.app")
    logger.addHandler(handler)
    yield said
    logger.removeHandler(handler)


@pytest.mark.parametrize("tail", TORN.values(), ids=TORN.keys())
def test_a_torn_last_line_is_set_aside_and_answers_go_on(tmp_path, tail, app_log):
    path = tmp_path / "LABELS.csv"
    path.write_bytes(COMPLETE + tail)
    log = LabelLog(path, LABELS)
    assert log.problem is None
    assert [(e.text, e.label, e.action) for e in log.events] == [("배송 빨라요", "positive", "answer"),
                                                                 ("별로", "", "skip")]
    assert path.read_bytes() == COMPLETE  # cut back to its last complete line
    assert (tmp_path / "LABELS.csv.torn").read_bytes() == tail + b"\n"
    assert len(app_log) == 1 and "LABELS.csv: line 4 was cut off mid-write" in app_log[0]
    assert "LABELS.csv.torn" in app_log[0] and "\n" not in app_log[0]

    log.append(Event("좋아요", "positive", "answer", "9", "teach", "a3"))
    assert path.read_bytes().startswith(COMPLETE + "좋아요,positive,answer,9,teach,a3,,".encode())
    assert path.read_bytes().endswith(b"\n")
    again = LabelLog(path, LABELS)
    assert again.problem is None and again.state().labels == {"배송 빨라요": "positive", "좋아요": "positive"}

    # a short bad last line while the app runs is typed by hand (the app's own appends are whole): said, and left in
    # the file for the analyst to fix, not moved away (the page never sends a hand-typed line again)
    with open(path, "ab") as f:
        f.write("또,nega".encode())
    before = path.read_bytes()
    assert again.state().labels["좋아요"] == "positive"
    assert again.problem == "LABELS.csv: line 5 can't be read (label 'nega'): fix or delete that line"
    assert path.read_bytes() == before and (tmp_path / "LABELS.csv.torn").read_bytes() == tail + b"\n"
    with pytest.raises(LabelFileProblem):
        again.append(Event("또", "negative", "answer", "10", "teach", "a4"))
    path.write_bytes(before + b"tive\n")  # fixed: answers go on
    assert again.state().labels["또"] == "negative" and again.problem is None


@pytest.mark.parametrize("tail", ["좋아요,positive", "좋아요,긍정", "좋아요,positive,answer,9,te"])
def test_a_short_last_row_that_reads_well_is_an_answer(tmp_path, tail, app_log):
    path = tmp_path / "LABELS.csv"
    path.write_bytes(COMPLETE + tail.encode())
    log = LabelLog(path, LABELS)
    assert log.problem is None and log.state().labels["좋아요"] == "positive"
    assert path.read_bytes() == COMPLETE + tail.encode() and not (tmp_path / "LABELS.csv.torn").exists()
    assert app_log == []


@pytest.mark.parametrize("tail", [
    "좋아요,posi\n",  # a complete line: the analyst's typo, not a torn write
    "좋아요,posi,answer,9,teach,a3,,2025-01-02T10:11:20",  # every field there, no line end
])
def test_a_wrong_label_on_a_complete_line_is_still_a_problem(tmp_path, tail):
    path = tmp_path / "LABELS.csv"
    path.write_bytes(COMPLETE + tail.encode())
    log = LabelLog(path, LABELS)
    assert log.problem.startswith("LABELS.csv: line 4: label 'posi': not one of the labels")
    with pytest.raises(LabelFileProblem):
        log.append(Event("다른 리뷰", "positive", "answer", "9", "teach", "a9"))
    assert path.read_bytes() == COMPLETE + tail.encode() and not (tmp_path / "LABELS.csv.torn").exists()


def test_a_bad_line_above_a_torn_one_is_the_problem_and_the_file_is_not_touched(tmp_path):
    path = tmp_path / "LABELS.csv"
    data = COMPLETE + "손으로,great,answer,,,,,\n좋아요,posi".encode()
    path.write_bytes(data)
    log = LabelLog(path, LABELS)
    assert "line 4: label 'great'" in log.problem
    assert path.read_bytes() == data and not (tmp_path / "LABELS.csv.torn").exists()


def test_parse_never_reads_a_torn_line_as_a_skip(tmp_path):
    data = COMPLETE + TORN["text cut inside a quote"]
    with pytest.raises(LabelFileProblem, match=r"^L.csv: line 4 was cut off mid-write \(no line end, 1 of 8 fields, "
                                               r"an open quote\)"):
        parse(data, "L.csv", LABELS)
    assert len(parse(COMPLETE, "L.csv", LABELS)) == 2


def test_the_readers_copy_leaves_the_file_alone_and_their_errors_name_the_file(tmp_path):
    """``without_torn_tail``, what `label --human-labels`, `finetune train=` and `suggest labelled=` read a LABELS.csv
    through: a copy without the torn line, one warning, and an error about the copy said of the file given."""
    path = tmp_path / "LABELS.csv"
    path.write_bytes(COMPLETE + TORN["label cut"])
    with pytest.warns(UserWarning, match=r"^L\.csv: line 4 was cut off mid-write \(no line end, 2 of 8 fields, label "
                                         r"'posi'\): read without it \(the file is left as it is\)$") as said:
        with pytest.raises(LabelFileProblem, match=f"^{re.escape(str(path))}: unreadable$"):
            with without_torn_tail(path, "L.csv", LABELS) as readable:
                copy = readable
                assert readable != path and readable.name == path.name and readable.read_bytes() == COMPLETE
                raise LabelFileProblem(f"{readable}: unreadable")
    assert len(said) == 1 and not copy.exists()
    assert path.read_bytes() == COMPLETE + TORN["label cut"] and [p.name for p in tmp_path.iterdir()] == ["LABELS.csv"]


@pytest.mark.parametrize("data, logs_only", [
    (COMPLETE, False),  # ends with a line end: nothing torn
    (COMPLETE + "좋아요,positive".encode(), True),  # a short last line that reads well
    ("text,label,note\n좋아요,positive,x\n별로,posi".encode(), True),  # no action column: a table, not the app's log
], ids=["terminated", "short and well", "not a log"])
def test_the_readers_read_the_file_itself_where_no_line_is_torn(tmp_path, data, logs_only):
    path = tmp_path / "LABELS.csv"
    path.write_bytes(data)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with without_torn_tail(str(path), "L.csv", LABELS, logs_only=logs_only) as readable:
            assert readable == str(path)
        with pytest.raises(InputError, match="^nope$"):
            with without_torn_tail(path, "L.csv", LABELS, logs_only=logs_only):
                raise InputError("nope")
    assert path.read_bytes() == data


# Above the row at fault, a review with a line end in it (quoted: lines 2-3) and a blank line (4): an editor shows
# that row on line 6. Counted as records the messages said line 5, counted as pandas' rows (no blank line) line 4.
ABOVE = (",".join(COLUMNS) + "\n"
         '"배송 빨라요\n포장도 좋고",positive,answer,4,teach,a1,,2025-01-02T10:11:12\n'
         "\n"
         "별로,,skip,7,teach,a2,,2025-01-02T10:11:15\n").encode()


def _refusal(reader: str, path) -> str:
    """What the app (the problem it shows), ``finetune train=`` or ``label --human-labels`` says of the file."""
    from koelectra_kit.io.labelled import read_labelled
    from koelectra_kit.label.human import read_human_labels

    if reader == "app":
        return LabelLog(path, LABELS).problem
    with pytest.raises(InputError) as said:
        (read_labelled if reader == "finetune" else read_human_labels)(path, LABELS)
    return str(said.value)


@pytest.mark.parametrize("reader", ["app", "finetune", "label"])
@pytest.mark.parametrize("end", ["\n", "\r\n"], ids=["LF", "CRLF"])
def test_a_bad_row_is_named_by_the_line_an_editor_shows(tmp_path, reader, end):
    path = tmp_path / "LABELS.csv"
    path.write_bytes(ABOVE.replace(b"\n", end.encode()) + f"좋아요,posi{end}".encode())
    said = _refusal(reader, path)
    assert "line 6: label 'posi': not one of the labels negative, neutral, positive; fix the file" in said, said


def test_a_torn_last_line_is_named_by_the_line_an_editor_shows(tmp_path, app_log):
    path = tmp_path / "LABELS.csv"
    path.write_bytes(ABOVE + "좋아요,posi".encode())
    assert LabelLog(path, LABELS).problem is None
    assert (tmp_path / "LABELS.csv.torn").read_bytes() == "좋아요,posi\n".encode()
    assert len(app_log) == 1 and "LABELS.csv: line 6 was cut off mid-write" in app_log[0]


@pytest.mark.parametrize("reader", ["finetune", "label"])
@pytest.mark.parametrize("row, message", [
    ("배송 빨라요, 포장도 좋고,positive,answer,9,teach,a3,,2025-01-02T10:11:20\n", "Expected 8 fields in line 6, saw 9"),
    ('"배송 빨라요,positive\n', "EOF inside string starting at line 6"),  # a quote never closed
], ids=["wider than the header", "open quote"])
def test_what_pandas_refuses_is_named_by_the_line_an_editor_shows(tmp_path, reader, row, message):
    """pandas' own messages (``read_table``) counted records too: "line 5", "row 4"."""
    path = tmp_path / "LABELS.csv"
    path.write_bytes(ABOVE + row.encode())
    assert message in _refusal(reader, path)


def _jsonl_log(path):
    """The app's log saved as JSONL: the bad answer on line 5, below two blank lines (3, 4), which its reader passes
    over. Counted as records, a header line 1 first (JSONL has none), it was "line 4"."""
    import json

    rows = [dict(text="배송 빨라요", label="positive", action="answer"), dict(text="별로", label="", action="skip"),
            None, None, dict(text="좋아요", label="posi")]
    path.write_text("".join((json.dumps({**r, "action": r.get("action", "answer")}, ensure_ascii=False) if r else "")
                            + "\n" for r in rows), encoding="utf-8")
    return path


def _xlsx_log(path):
    """The app's log kept in Excel: row 1 left empty, the header in row 2, an empty row (4) above the bad answer, in
    Excel's row 5. Counted as the CSV copy's records (empty rows left out, header first) it was "line 3"."""
    openpyxl = pytest.importorskip("openpyxl")
    wb = openpyxl.Workbook()
    ws = wb.active
    for r, row in enumerate([["text", "label", "action"], ["배송 빨라요", "positive", "answer"], None,
                             ["좋아요", "posi", "answer"]], 2):
        for c, v in enumerate(row or [], 1):
            ws.cell(r, c, v)
    wb.save(path)
    return path


@pytest.mark.parametrize("reader, kind, where", [
    ("finetune", "jsonl", "line 5"), ("label", "jsonl", "line 5"), ("label", "xlsx", "row 5"),
])
def test_a_bad_row_of_a_jsonl_or_xlsx_log_is_named_as_the_editor_or_excel_shows_it(tmp_path, reader, kind, where):
    path = (_jsonl_log if kind == "jsonl" else _xlsx_log)(tmp_path / f"LABELS.{kind}")
    said = _refusal(reader, path)
    assert f": {where}: label 'posi': not one of the labels" in said, said


@pytest.mark.parametrize("kind, where", [("jsonl", "line 5"), ("xlsx", "row 5")])
def test_suggest_names_a_jsonl_or_xlsx_logs_bad_row_as_the_editor_or_excel_shows_it(tmp_path, capsys, kind, where,
                                                                                   tiny_classifier_dir):
    from koelectra_kit.cli import main

    path = (_jsonl_log if kind == "jsonl" else _xlsx_log)(tmp_path / f"LABELS.{kind}")
    pool = tmp_path / "pool.csv"
    pool.write_text("review\n배송 빨라요\n좋아요\n별로\n", encoding="utf-8")
    rc = main(["suggest", f"model={tiny_classifier_dir}", f"pool={pool}", f"out={tmp_path / 'next.csv'}",
               f"labelled={path}"])
    err = capsys.readouterr().err.strip().splitlines()
    assert rc == 2 and len(err) == 1 and f": {where}: label 'posi'" in err[0], err


@pytest.mark.parametrize("header, why", [
    ("text,label", "no action, row, source, answer_id, undoes, time column"),
    ("label,text", "no action, row, source, answer_id, undoes, time column"),
    ("text,label,action,row,source,answer_id,undoes,time,label", "label twice"),
])
def test_a_header_the_apps_lines_would_not_fit_is_refused_before_any_append(tmp_path, header, why):
    """The app appended its 8 fields under a text,label header: the file then read an undo as a skip, lost the
    answer ids, and no reader took it (`label --human-labels`: "Expected 2 fields in line 3, saw 8")."""
    path = tmp_path / "LABELS.csv"
    first = header.split(",").index("text")
    row = ["좋아요", "positive"] if first == 0 else ["positive", "좋아요"]
    path.write_text(header + "\n" + ",".join(row) + "\n", encoding="utf-8")
    before = path.read_bytes()
    log = LabelLog(path, LABELS)
    assert log.problem == (f"LABELS.csv's header is {header} ({why}): the app appends {','.join(COLUMNS)}; give "
                           "--labels a new file, or make its header those columns")
    with pytest.raises(LabelFileProblem):
        log.append(Event("별로", "negative", "answer", "2", "teach", "a1"))
    assert path.read_bytes() == before


def test_the_apps_columns_in_another_order_or_with_more_are_appended_in_the_files_order(tmp_path):
    path = tmp_path / "LABELS.csv"
    header = ["note", *reversed(COLUMNS)]
    path.write_text(",".join(header) + "\n", encoding="utf-8")
    log = LabelLog(path, LABELS)
    assert log.problem is None
    log.append(Event("별로", "negative", "answer", "2", "teach", "a1"))
    log.append(Event("", "", "undo", "2", "teach", "a2", undoes="a1"))
    lines = path.read_text(encoding="utf-8").splitlines()
    fields = lines[1].split(",")  # note,time,undoes,answer_id,source,row,action,label,text
    assert fields[0] == fields[2] == "" and fields[3:] == ["a1", "teach", "2", "answer", "negative", "별로"]
    again = LabelLog(path, LABELS)
    assert again.problem is None and [e.action for e in again.events] == ["answer", "undo"]
    assert again.state().labels == {}  # the undo read back as an undo, not a skip
