"""The paths a `label` run reads and writes, as a Linux shell gives them: one file under two names (a hard link, a
bind mount), the files written beside the output, symlinks, FIFOs, names too long for the folder, and an input
that changes while it is labelled. Each case: one `error:` line and exit 2, or the right file written; the input
never damaged and no half-written output left."""
import os
import shutil
import subprocess

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.label import FileLabeller, label_file


def run_cli(capsys, *argv):
    rc = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return rc, out, err


def one_error(rc, err, *needles):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for needle in needles:
        assert needle in lines[0], err


@pytest.fixture
def base(tiny_classifier_dir):
    return ["label", "--model", tiny_classifier_dir, "--no-progress", "--precision", "fp32"]


@pytest.fixture
def src(tmp_path, sample_dir):
    path = tmp_path / "in.csv"
    shutil.copy(sample_dir / "reviews_unlabelled.csv", path)
    return path


def big_input(path, rows=600, reviews=("배송이 빨라요", "별로예요 다시는 안 사요", "그냥 그래요")):
    """A CSV well over the reader's read-ahead (8 KiB), so a change after the first chunk is one it has not read."""
    pd.DataFrame({"id": range(rows), "review": [f"{reviews[i % 3]} {i}" for i in range(rows)]}).to_csv(
        path, index=False)
    return path


def test_an_output_that_is_the_input_by_a_hard_link_is_refused(capsys, base, src, tmp_path):
    # os.replace put the output where the other name's directory entry was: the input, replaced (exit 0)
    other = tmp_path / "same.csv"
    os.link(src, other)
    before = src.read_bytes()
    rc, _, err = run_cli(capsys, *base, "--input", other, "--output", src, "--overwrite")
    one_error(rc, err, "--output must differ from --input", "one file under two names")
    assert src.read_bytes() == before and other.read_bytes() == before


@pytest.mark.skipif(os.geteuid() != 0 or not shutil.which("mount"), reason="a bind mount needs root")
def test_an_output_that_is_the_input_through_a_bind_mount_is_refused(capsys, base, src, tmp_path):
    # no path resolves to the other (realpath differs): only the inode says it is the input
    view = tmp_path / "view"
    view.mkdir()
    if subprocess.run(["mount", "--bind", str(tmp_path), str(view)], capture_output=True).returncode != 0:
        pytest.skip("mount --bind is not allowed here")
    try:
        before = src.read_bytes()
        rc, _, err = run_cli(capsys, *base, "--input", src, "--output", view / "in.csv", "--overwrite")
        one_error(rc, err, "--output must differ from --input")
        assert src.read_bytes() == before
    finally:
        subprocess.run(["umount", str(view)], check=True)


def test_an_input_named_as_the_outputs_partial_file_is_refused_not_deleted(capsys, base, src, tmp_path):
    # the fresh start deleted OUTPUT.partial, which was the input
    partial = tmp_path / "out.csv.partial"
    shutil.copy(src, partial)
    rc, _, err = run_cli(capsys, *base, "--input", partial, "--format", "csv", "--output", tmp_path / "out.csv")
    one_error(rc, err, "the unfinished output")
    assert partial.read_bytes() == src.read_bytes() and not (tmp_path / "out.csv").exists()


def test_the_human_labels_file_as_the_output_is_refused_even_with_overwrite(capsys, base, src, tmp_path):
    # the user's own labels were replaced by the labelled output
    labels = tmp_path / "LABELS.csv"
    labels.write_text("text,label\n정말 좋아요,positive\n", encoding="utf-8")
    before = labels.read_bytes()
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", labels, "--human-labels", labels, "--overwrite")
    one_error(rc, err, "--human-labels", "the output")
    assert labels.read_bytes() == before


def test_a_plot_over_the_input_is_refused(capsys, base, src, tmp_path):
    # an input read with --format may end in .png: the chart replaced it
    png = tmp_path / "reviews.png"
    shutil.copy(src, png)
    rc, _, err = run_cli(capsys, *base, "--input", png, "--format", "csv", "--output", tmp_path / "o.csv",
                         "--plot", png)
    one_error(rc, err, "--plot")
    assert png.read_bytes() == src.read_bytes()


def test_an_output_symlink_writes_its_target_and_keeps_the_link(capsys, base, src, tmp_path):
    # the rename put a plain file where the link was and the target kept its old content
    (tmp_path / "runs").mkdir()
    target = tmp_path / "runs" / "labelled.csv"
    target.write_text("old\n", encoding="utf-8")
    link = tmp_path / "latest.csv"
    link.symlink_to(target)
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", link)
    one_error(rc, err, "exists; pass --overwrite")
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", link, "--overwrite")
    assert rc == 0, err
    assert link.is_symlink() and os.readlink(link) == str(target)
    assert len(pd.read_csv(target, dtype=str, encoding="utf-8-sig")) == 60
    assert sorted(p.name for p in target.parent.iterdir()) == [".labelled.csv.job.json", "labelled.csv"]


def test_label_merge_into_a_symlink_writes_its_target_as_label_does(capsys, base, src, tmp_path):
    # label-merge renamed the joined file over the link, as label did
    target = tmp_path / "labelled.csv"
    link = tmp_path / "latest.csv"
    link.symlink_to(target)
    for k in (1, 2):
        rc, _, err = run_cli(capsys, *base, "--input", src, "--output", link, "--shard", f"{k}/2")
        assert rc == 0, err
    rc, _, err = run_cli(capsys, "label-merge", link)
    assert rc == 0, err
    assert link.is_symlink() and len(pd.read_csv(target, dtype=str, encoding="utf-8-sig")) == 60


def test_a_fifo_as_output_is_refused_and_left_a_fifo(capsys, base, src, tmp_path):
    # it was replaced by a regular file, exit 0, and a reader waiting on the pipe waited forever
    fifo = tmp_path / "out.csv"
    os.mkfifo(fifo)
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", fifo, "--overwrite")
    one_error(rc, err, "pipe (FIFO)")
    assert fifo.is_fifo()


def test_a_fifo_or_standard_input_as_input_is_one_clear_error(capsys, base, tmp_path):
    # a pipe's size reads 0: it was "file is empty" (a pipe full of reviews), and '-' was "file not found"
    fifo = tmp_path / "in.csv"
    os.mkfifo(fifo)
    rc, _, err = run_cli(capsys, *base, "--input", fifo, "--output", tmp_path / "o.csv")
    one_error(rc, err, "pipe (FIFO), not a regular file", "save it to a file")
    rc, _, err = run_cli(capsys, *base, "--input", "-", "--output", tmp_path / "o.csv")
    one_error(rc, err, "standard input is not supported")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_an_output_name_whose_partial_record_is_too_long_is_refused_before_labelling(capsys, base, src, tmp_path):
    # 240 bytes fit, OUTPUT.partial.json.tmp (257) did not: the error came after the first chunk, with
    # OUTPUT.partial left behind
    name = "가" * 79 + ".csv"  # 241 bytes
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", tmp_path / name)
    one_error(rc, err, "NAME.partial.json.tmp", "shorten it by")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_a_trailing_slash_on_one_input_says_what_is_wrong(capsys, base, src, tmp_path):
    # both said "several inputs write one file each into a folder", for one input
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", f"{tmp_path / 'nofolder'}/")
    one_error(rc, err, "does not exist")
    assert "several inputs" not in err
    (tmp_path / "o.csv").write_text("x\n", encoding="utf-8")
    rc, _, err = run_cli(capsys, *base, "--input", src, "--output", f"{tmp_path / 'o.csv'}/")
    one_error(rc, err, "is a file, not a folder")


def test_an_input_cut_short_while_labelled_is_an_error_not_a_shorter_output(tmp_path, tiny_classifier):
    # the reader met the new end of file: the rows before it written as the whole output, exit 0 (ASCII here: a
    # cut in a character was a decoding error)
    src = big_input(tmp_path / "in.csv", 1500, ("fast delivery, great", "never again", "so-so"))
    out = tmp_path / "out.csv"

    def cut(chunks):
        if chunks == 1:  # at a line's end, as an exporter rewriting it in place leaves it
            with open(src, "r+b") as f:
                f.truncate(src.read_bytes().index(b"\n", 12000) + 1)
    with pytest.raises(InputError, match="changed while it was labelled"):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=50,
                   _after_chunk=cut)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]  # no output, no partial, no record


def test_rows_appended_while_labelled_are_left_for_the_next_run_and_said(tmp_path, tiny_classifier, capsys):
    # the rows appended (half of one, mid-write) were labelled too: no version of the file had those rows
    src = big_input(tmp_path / "in.csv")
    out = tmp_path / "out.csv"

    def append(chunks):
        if chunks == 1:
            with open(src, "a", encoding="utf-8") as f:
                f.write('9999,"반쯤 쓰인 리뷰')
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=50,
                   _after_chunk=append)
    assert s.rows == 600 and s.malformed == []
    assert pd.read_csv(out, dtype=str, encoding="utf-8-sig")["id"].tolist() == [str(i) for i in range(600)]
    assert "bytes were appended to" in capsys.readouterr().err


def test_an_input_replaced_while_the_model_loads_is_not_resumed_with_the_new_files_rows(tmp_path, tiny_classifier,
                                                                                        monkeypatch):
    # the reader had the old file open, the resume record fingerprinted the new one: a kill and --resume
    # continued the old file's rows with the new file's
    src = big_input(tmp_path / "in.csv")
    out = tmp_path / "out.csv"
    load = FileLabeller.load_model

    def load_and_replace(self):
        new = tmp_path / "new.csv"
        pd.DataFrame({"id": range(1000, 1600), "review": ["완전히 다른 파일"] * 600}).to_csv(new, index=False)
        os.replace(new, src)
        load(self)

    def kill(chunks):
        if chunks == 2:
            raise KeyboardInterrupt
    monkeypatch.setattr(FileLabeller, "load_model", load_and_replace)
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=50,
                   _after_chunk=kill)
    monkeypatch.setattr(FileLabeller, "load_model", load)
    with pytest.raises(InputError, match="another input"):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=50, resume=True)


@pytest.mark.parametrize("odd", ["two\nlines.csv", "cr\rname.csv", "esc\x1b[31mred.csv", "ls\u2028sep.csv"])
def test_a_file_name_with_a_line_break_or_escape_stays_one_error_line(capsys, base, tmp_path, odd):
    # the name went into the message as it was: "error: ... two" and "lines.csv ..." on a line of its own
    rc, _, err = run_cli(capsys, *base, "--input", tmp_path / odd, "--output", tmp_path / "out.csv")
    one_error(rc, err, repr(odd)[1:-1].split("\\")[0])
    assert "\x1b" not in err and "\u2028" not in err


def test_a_usage_error_naming_a_line_break_stays_one_line(capsys):
    rc, _, err = run_cli(capsys, "label", "--bogus\nflag")
    one_error(rc, err, "--bogus\\nflag")
