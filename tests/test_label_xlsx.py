"""``label --output FILE.xlsx``: labelled as a .csv run labels (into OUTPUT.xlsx.partial, a CSV, resumable), then
made a workbook whose reviews are text cells (never formulas: Korean reviews start with -_- =_= +_+ @_@) and whose
confidence and prob_* are numbers. What a worksheet can't hold is refused in one line, the labelled CSV kept."""
import csv

import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.io import workbook
from koelectra_kit.label import label_file, label_files

pytestmark = pytest.mark.fast
openpyxl = pytest.importorskip("openpyxl")

REVIEWS = ["-_- 별로", "=_= 최악", "+_+", "@_@", '=HYPERLINK("http://x","y")', "007", "", "배송 빠르고 좋아요"]
FIGURES = ["confidence", "prob_negative", "prob_neutral", "prob_positive"]


def _input(path, reviews=REVIEWS):
    with open(path, "w", encoding="utf-8", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(["id", "review"])
        w.writerows([f"{i:03d}", text] for i, text in enumerate(reviews))
    return path


def _csv(path):
    with open(path, encoding="utf-8-sig", newline="") as f:
        return list(csv.reader(f))


def _sheet(path):
    """(header, rows of cells) of the workbook's one sheet."""
    wb = openpyxl.load_workbook(path)
    rows = list(wb.worksheets[0].iter_rows())
    return [c.value for c in rows[0]], rows[1:]


def _values(path):
    header, rows = _sheet(path)
    return [header, *[[c.value for c in row] for row in rows]]


def _label(src, out, clf, **options):
    return label_file(None, src, out, "review", classifier=clf, progress=False, **options)


def _cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    return rc, capsys.readouterr().err


def _one_line(rc, err, *needles):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


def test_every_review_is_a_text_cell_as_the_csv_holds_it_and_the_figures_are_numbers(tmp_path, tiny_classifier):
    src = _input(tmp_path / "in.csv")
    s = _label(src, tmp_path / "out.xlsx", tiny_classifier, chunk_rows=3)
    _label(src, tmp_path / "out.csv", tiny_classifier, chunk_rows=3)
    assert s.rows == len(REVIEWS) and s.output == str(tmp_path / "out.xlsx")
    want = _csv(tmp_path / "out.csv")
    header, rows = _sheet(tmp_path / "out.xlsx")
    assert header == want[0] and header[:2] == ["id", "review"] and len(rows) == len(REVIEWS)
    for text, row, line in zip(REVIEWS, rows, want[1:]):
        cells = dict(zip(header, row))
        got = dict(zip(header, line))
        assert (cells["id"].value, cells["id"].data_type) == (got["id"], "s")  # "000", not the number 0
        if text:
            assert (cells["review"].value, cells["review"].data_type) == (text, "s"), text  # never a formula
            assert got["review"] == text
        else:
            assert cells["review"].value is None and got["review"] == ""  # an empty field is an empty cell
        for col in ("label", "status"):
            assert (cells[col].value or "") == got[col], col  # the label columns a .csv run writes
        for col in FIGURES:
            if got[col]:
                assert cells[col].data_type == "n" and cells[col].value == float(got[col]), col
            else:
                assert cells[col].value is None, col  # the empty text: not labelled
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.endswith(".job.json")) == \
        ["in.csv", "out.csv", "out.xlsx"]  # no staging left


def test_an_existing_workbook_needs_overwrite(tmp_path, tiny_classifier):
    src = _input(tmp_path / "in.csv")
    out = tmp_path / "out.xlsx"
    out.write_bytes(b"the user's own workbook")
    with pytest.raises(InputError, match="out.xlsx exists; pass --overwrite"):
        _label(src, out, tiny_classifier)
    assert out.read_bytes() == b"the user's own workbook"
    _label(src, out, tiny_classifier, overwrite=True)
    assert _values(out)[0][:2] == ["id", "review"]


def test_resume_after_a_kill_gives_the_workbook_an_uninterrupted_run_gives(tmp_path, tiny_classifier):
    src = _input(tmp_path / "in.csv", REVIEWS * 3)
    out = tmp_path / "out.xlsx"

    def die(n):
        if n == 3:
            raise KeyboardInterrupt  # a kill after the third chunk

    with pytest.raises(KeyboardInterrupt):
        _label(src, out, tiny_classifier, chunk_rows=4, _after_chunk=die)
    partial = tmp_path / "out.xlsx.partial"  # the staging CSV, named as a .csv output's partial file is
    assert not out.exists() and partial.exists() and (tmp_path / "out.xlsx.partial.json").exists()
    assert len(_csv(partial)) == 1 + 12
    with open(partial, "a", encoding="utf-8") as f:  # a half-written chunk the kill left behind
        f.write("half,written,row\n")
    s = _label(src, out, tiny_classifier, chunk_rows=4, resume=True)
    assert s.rows == len(REVIEWS) * 3 and s.new_rows == len(REVIEWS) * 3 - 12
    _label(src, tmp_path / "ref.xlsx", tiny_classifier, chunk_rows=4)
    assert _values(out) == _values(tmp_path / "ref.xlsx")
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.xlsx.job.json", ".ref.xlsx.job.json", "in.csv",
                                                         "out.xlsx", "ref.xlsx"]


def test_more_rows_than_a_worksheet_holds_keeps_the_labelled_csv(tmp_path, tiny_classifier, tiny_classifier_dir,
                                                                 capsys, monkeypatch):
    monkeypatch.setattr(workbook, "EXCEL_MAX_ROWS", 4)  # a header and 3 rows, not a million
    src = _input(tmp_path / "in.csv")  # 8 rows: known only once labelled (a CSV is not counted first)
    rc, err = _cli(capsys, "label", "--model", tiny_classifier_dir, "--input", src, "--output", tmp_path / "out.xlsx",
                   "--no-progress", "--precision", "fp32", "--chunk-rows", "3")
    partial = tmp_path / "out.xlsx.partial"
    _one_line(rc, err, "8 rows labelled", "4 rows, header included", f"kept in {partial}")
    assert not (tmp_path / "out.xlsx").exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv", "out.xlsx.partial", "out.xlsx.partial.json"]
    _label(src, tmp_path / "ref.csv", tiny_classifier, chunk_rows=3)
    kept = _csv(partial)
    assert len(kept) == 1 + len(REVIEWS) and [r[:2] for r in kept] == [r[:2] for r in _csv(tmp_path / "ref.csv")]
    # a resume labels nothing again and is refused the same way; the CSV stays
    with pytest.raises(InputError, match="more than an Excel worksheet holds"):
        _label(src, tmp_path / "out.xlsx", tiny_classifier, chunk_rows=3, resume=True)
    assert _csv(partial) == kept and not (tmp_path / "out.xlsx").exists()

    # a workbook input's rows are known before labelling: refused before anything is written
    book = tmp_path / "book.xlsx"
    wb = openpyxl.Workbook()
    wb.active.append(["review"])
    for text in ["좋아요", "별로", "그냥 그래요", "최고"]:  # openpyxl would write "=_= 최악" as a formula
        wb.active.append([text])
    wb.save(book)
    with pytest.raises(InputError, match="has 4 rows, more than an Excel worksheet holds"):
        _label(book, tmp_path / "book.labelled.xlsx", tiny_classifier)
    assert not list(tmp_path.glob("*book.labelled*"))


def test_a_control_character_a_worksheet_cant_store_keeps_the_labelled_csv(tmp_path, tiny_classifier):
    src = _input(tmp_path / "in.csv", ["좋아요", "탭은 되지만\x0b이건 안 됨", "별로"])
    with pytest.raises(InputError) as e:
        _label(src, tmp_path / "out.xlsx", tiny_classifier)
    partial = tmp_path / "out.xlsx.partial"
    assert "\n" not in str(e.value)
    assert "row 2 holds the control character U+000B" in str(e.value) and f"kept in {partial}" in str(e.value)
    assert not (tmp_path / "out.xlsx").exists() and not list(tmp_path.glob(".out.xlsx*"))  # no temporary workbook
    assert _csv(partial)[2][1] == "탭은 되지만\x0b이건 안 됨"


def test_an_output_suffix_gives_a_workbook_beside_each_input(tmp_path, tiny_classifier):
    a, b = _input(tmp_path / "a.csv"), _input(tmp_path / "b.csv", REVIEWS[:2])
    summaries = label_files(None, [a, b], None, "review", classifier=tiny_classifier, progress=False,
                            output_suffix=".labelled.xlsx")
    assert [s.rows for s in summaries] == [len(REVIEWS), 2]
    assert _values(tmp_path / "b.labelled.xlsx")[1][1] == REVIEWS[0]
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith(".")) == \
        ["a.csv", "a.labelled.xlsx", "b.csv", "b.labelled.xlsx"]


def test_what_an_xlsx_output_cant_be_is_one_line(tmp_path, tiny_classifier_dir, capsys):
    src = _input(tmp_path / "in.csv")
    base = ["label", "--model", tiny_classifier_dir, "--input", src, "--no-progress"]
    rc, err = _cli(capsys, *base, "--output", tmp_path / "out.xlsx", "--shard", "1/2")
    _one_line(rc, err, "label-merge joins .csv, .tsv or .jsonl shards")
    rc, err = _cli(capsys, *base, "--output", tmp_path / "out.xlsx", "--output-encoding", "cp949")
    _one_line(rc, err, "output_encoding='cp949' with an .xlsx output")
    rc, err = _cli(capsys, *base, "--output", tmp_path / "out.xlsm")
    _one_line(rc, err, "write .xlsx for Excel")
    rc, err = _cli(capsys, "label-merge", tmp_path / "out.xlsx")
    _one_line(rc, err, "label-merge joins .csv, .tsv or .jsonl shards")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def _two_sheets(path):
    """A workbook whose first sheet is a summary and whose reviews are on the second, as analysts keep them."""
    wb = openpyxl.Workbook()
    wb.active.title = "Summary"
    wb.active.append(["id", "note"])
    wb.active.append([1, "x"])
    reviews = wb.create_sheet("Reviews")
    reviews.append(["id", "review", "label"])
    reviews.append([1, "배송 빠르고 좋아요", "positive"])
    wb.save(path)
    return path


@pytest.mark.parametrize("command", ["label", "label --text-column", "label --human-labels", "suggest",
                                     "suggest text_column=", "suggest labelled="])
def test_a_text_column_on_another_sheet_is_named_with_the_way_to_read_it(tmp_path, tiny_classifier_dir, capsys,
                                                                          command):
    book, src = _two_sheets(tmp_path / "book.xlsx"), _input(tmp_path / "in.csv")
    label = ["label", "--model", tiny_classifier_dir, "--no-progress", "--output", tmp_path / "out.csv"]
    suggest = ["suggest", f"model={tiny_classifier_dir}", f"out={tmp_path / 'next.csv'}"]
    argv = {"label": [*label, "--input", book],
            "label --text-column": [*label, "--input", book, "--text-column", "review"],
            "label --human-labels": [*label, "--input", src, "--human-labels", book],
            "suggest": [*suggest, f"pool={book}"],
            "suggest text_column=": [*suggest, f"pool={book}", "text_column=review"],
            "suggest labelled=": [*suggest, f"pool={src}", f"labelled={book}"]}[command]
    rc, err = _cli(capsys, *argv)
    # the first sheet's columns, as before, then where the column is and what to do: one line
    _one_line(rc, err, "id, note" if "suggest" in command or "human" in command else "'note'",
              "sheet 'Reviews' has a column 'review'", "only the first sheet is read",
              "move that sheet first in the workbook, or save it as its own file")
    assert not (tmp_path / "out.csv").exists() and not (tmp_path / "next.csv").exists()


def test_an_app_upload_with_its_reviews_on_another_sheet_says_so(tmp_path):
    from koelectra_kit.app.uploads import Upload, inspect

    folder = tmp_path / "upload"
    folder.mkdir()
    book = _two_sheets(folder / "input.xlsx")
    up = inspect(Upload(id="1", name="mine.xlsx", folder=folder, original=book, kind="xlsx"), 5)
    # the first sheet's 'note' is a guess from its contents: the page's note says where the review column is
    assert up.guessed == "note" and "the workbook's sheet 'Reviews' has a column 'review'" in up.note


def _with_dimension(src, dst, ref):
    """``src`` with each worksheet's size record set to ``ref`` (None: removed), as some exporters write it."""
    import re
    import zipfile

    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
        for item in zi.infolist():
            data = zi.read(item.filename)
            if item.filename.startswith("xl/worksheets/sheet"):
                data = re.sub(rb"<dimension[^>]*/>", b"" if ref is None else f'<dimension ref="{ref}"/>'.encode(),
                              data)
            zo.writestr(item, data)
    return dst


@pytest.mark.parametrize("ref", ["A1", None])
def test_a_workbook_whose_size_record_is_stale_or_missing_is_read_whole(tmp_path, tiny_classifier, ref):
    """openpyxl's read-only mode trusted the sheet's <dimension> record: one that said A1 gave "labelled 0 rows" (the
    id column gone too), and without one a row whose last cell is empty came back short and was flagged malformed.
    Every row and column is read, short rows padded to the header."""
    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["id", "review", "note"])
    for row in [[1, "배송 빠르고 좋아요"], [2, "최악이에요 환불 원합니다", "반품"], [3, "그냥 그래요", None],
                [4, "재구매 의사 있어요"]]:
        ws.append(row)
    wb.save(tmp_path / "good.xlsx")
    src = _with_dimension(tmp_path / "good.xlsx", tmp_path / "stale.xlsx", ref)
    assert [values for _, values in workbook.numbered_rows(src, "stale.xlsx")] == [
        ("id", "review", "note"), (1, "배송 빠르고 좋아요", None), (2, "최악이에요 환불 원합니다", "반품"),
        (3, "그냥 그래요", None), (4, "재구매 의사 있어요", None)]
    _label(src, tmp_path / "out.csv", tiny_classifier)
    rows = _csv(tmp_path / "out.csv")
    assert rows[0][:3] == ["id", "review", "note"] and len(rows) == 5
    assert [r[:3] for r in rows[1:]] == [["1", "배송 빠르고 좋아요", ""], ["2", "최악이에요 환불 원합니다", "반품"],
                                         ["3", "그냥 그래요", ""], ["4", "재구매 의사 있어요", ""]]
    assert all(r[rows[0].index("status")] == "ok" for r in rows[1:])


def _with_sheet_xml(src, dst, edit):
    """``src`` with its first worksheet's XML passed through ``edit`` (bytes -> bytes)."""
    import zipfile

    with zipfile.ZipFile(src) as zi, zipfile.ZipFile(dst, "w", zipfile.ZIP_DEFLATED) as zo:
        for item in zi.infolist():
            data = zi.read(item.filename)
            zo.writestr(item, edit(data) if item.filename == "xl/worksheets/sheet1.xml" else data)
    return dst


def test_formulas_a_program_left_uncomputed_are_refused_not_labelled_empty(tmp_path, tiny_classifier_dir, capsys):
    """A review column of formulas (=A2&" "&B2) in a workbook a script wrote has no saved values: openpyxl read them
    as empty and every row was labelled "empty", exit 0. Refused in one line naming the first cell; the same
    workbook once Excel saved it (values beside the formulas, an empty string one of them) labels as before."""
    import re

    wb = openpyxl.Workbook()
    ws = wb.active
    ws.append(["title", "body", "review"])
    for i, (title, body) in enumerate([("배송", "빠르고 좋아요"), ("포장", "최악이에요"), ("기타", None)], 2):
        ws.append([title, body, f'=A{i}&" "&B{i}'])
    wb.save(tmp_path / "script.xlsx")
    out = tmp_path / "out.csv"
    rc, err = _cli(capsys, "label", "--model", tiny_classifier_dir, "--input", tmp_path / "script.xlsx",
                   "--output", out, "--text-column", "review")
    _one_line(rc, err, "3 formula cells", "no saved value", "cell C2", "save it")
    assert not out.exists()
    assert workbook.uncomputed_formulas(tmp_path / "script.xlsx", "xl/worksheets/sheet1.xml") == (3, "C2")

    def saved_by_excel(xml):  # Excel's own spelling: t="str", the value after the formula, "" for the empty one
        values = iter(["배송 빠르고 좋아요".encode(), "포장 최악이에요".encode(), b""])
        return re.sub(rb'<c r="(C\d)"><f>([^<]*)</f><v ?/></c>',
                      lambda m: b'<c r="' + m[1] + b'" t="str"><f>' + m[2] + b"</f><v>" + next(values) + b"</v></c>",
                      xml)

    saved = _with_sheet_xml(tmp_path / "script.xlsx", tmp_path / "saved.xlsx", saved_by_excel)
    assert workbook.uncomputed_formulas(saved, "xl/worksheets/sheet1.xml") == (0, None)
    rc, err = _cli(capsys, "label", "--model", tiny_classifier_dir, "--input", saved, "--output", out,
                   "--text-column", "review")
    assert rc == 0, err
    rows = _csv(out)
    assert [r[2] for r in rows[1:]] == ["배송 빠르고 좋아요", "포장 최악이에요", ""]
    assert [r[rows[0].index("status")] for r in rows[1:]] == ["ok", "ok", "empty"]
    # a shared formula with no value and no <v> at all (another writer's spelling), under a namespace prefix
    prefixed = _with_sheet_xml(tmp_path / "script.xlsx", tmp_path / "prefixed.xlsx", lambda xml: re.sub(
        rb'<c r="C3"><f>[^<]*</f><v ?/></c>', b'<x:c r="C3"><x:f t="shared" si="0"/></x:c>', xml))
    assert workbook.uncomputed_formulas(prefixed, "xl/worksheets/sheet1.xml") == (3, "C2")
