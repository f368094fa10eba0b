"""One run per output, and a resume that continues only what is whole: a second run given the same --output while
the first writes is refused (both used to exit 0 with an output missing rows and its header); a partial cut short
after the run stopped is refused, not padded with NULs; a resume compares the input's content (a touch or a copy
of the same bytes continues); a run that starts over says so, and keeps the earlier rows until its first chunk."""
from __future__ import annotations

import json
import os

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.label import label_file


def _reviews(path, n=40):
    rows = "".join(f"{i:03d},리뷰 {i} 정말 좋아요 ㅋㅋ\n" for i in range(n))
    path.write_text("id,review\n" + rows, encoding="utf-8")
    return path


def _stop_after(chunks):
    def hook(n):
        if n == chunks:
            raise KeyboardInterrupt
    return hook


def _interrupt(src, out, clf, chunks=2, **kw):
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=clf, progress=False, chunk_rows=5,
                   _after_chunk=_stop_after(chunks), **kw)


def test_a_second_run_on_the_same_output_is_refused_while_the_first_writes(tmp_path, tiny_classifier,
                                                                            tiny_classifier_dir, capsys):
    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    seen = {}

    def second_run(n):
        if n == 2:  # the first run has written two chunks and goes on
            before = (tmp_path / "out.csv.partial").read_bytes()
            seen["rc"] = main(["label", "--model", str(tiny_classifier_dir), "--input", str(src), "--output", str(out),
                               "--no-progress", "--precision", "fp32"])
            seen["err"] = capsys.readouterr().err
            seen["untouched"] = (tmp_path / "out.csv.partial").read_bytes() == before

    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=5,
                   _after_chunk=second_run)
    assert seen["rc"] == 2 and seen["err"].count("\n") == 1, seen["err"]
    assert seen["err"].startswith("error: ") and "being written by another run" in seen["err"]
    assert seen["untouched"]
    got = pd.read_csv(out, dtype=str, keep_default_na=False)
    assert s.rows == 40 and list(got["id"]) == [f"{i:03d}" for i in range(40)]
    assert sorted(p.name for p in tmp_path.iterdir()) == [".out.csv.job.json", "in.csv", "out.csv"]


def test_the_next_run_takes_the_name_once_the_first_is_done(tmp_path, tiny_classifier):
    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=5)
    first = out.read_bytes()
    label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, chunk_rows=7, overwrite=True)
    assert out.read_bytes() == first and not (tmp_path / "out.csv.partial").exists()


def test_a_failure_before_the_first_chunk_leaves_no_partial(tmp_path, tiny_classifier):
    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    with pytest.raises(InputError, match="no column 'text'"):
        label_file(None, src, out, "text", classifier=tiny_classifier, progress=False)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.csv"]


def test_a_partial_cut_short_after_the_run_stopped_is_not_resumed(tmp_path, tiny_classifier):
    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    _interrupt(src, out, tiny_classifier)
    partial = tmp_path / "out.csv.partial"
    cut = partial.read_bytes()[:-30]
    partial.write_bytes(cut)
    with pytest.raises(InputError, match="cut short after the run stopped"):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, resume=True)
    assert partial.read_bytes() == cut and b"\x00" not in cut and not out.exists()


def test_a_resume_continues_a_touched_or_copied_input_with_the_same_bytes(tmp_path, tiny_classifier):
    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    label_file(None, src, tmp_path / "ref.csv", "review", classifier=tiny_classifier, progress=False)
    _interrupt(src, out, tiny_classifier)
    st = src.stat()
    os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))  # touched: same bytes, another mtime
    moved = tmp_path / "moved.csv"
    moved.write_bytes(src.read_bytes())
    s = label_file(None, moved, out, "review", classifier=tiny_classifier, progress=False, resume=True)
    assert s.new_rows == 30 and out.read_bytes() == (tmp_path / "ref.csv").read_bytes()


def test_a_resume_of_an_older_record_compares_as_it_did(tmp_path, tiny_classifier):
    """Records written before the content fingerprint hold size, mtime and the first and last MiB: the same file
    still resumes from them, and an edited one is still refused."""
    from koelectra_kit.label.resume import input_fingerprint

    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    record = tmp_path / "out.csv.partial.json"
    _interrupt(src, out, tiny_classifier)
    state = json.loads(record.read_text())
    state["input_fingerprint"] = input_fingerprint(src)
    record.write_text(json.dumps(state))
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, resume=True)
    assert s.rows == 40 and s.new_rows == 30

    _interrupt(src, tmp_path / "o2.csv", tiny_classifier)
    state = json.loads((tmp_path / "o2.csv.partial.json").read_text())
    state["input_fingerprint"] = input_fingerprint(src)
    (tmp_path / "o2.csv.partial.json").write_text(json.dumps(state))
    _reviews(src, 41)
    with pytest.raises(InputError, match="another input"):
        label_file(None, src, tmp_path / "o2.csv", "review", classifier=tiny_classifier, progress=False, resume=True)


def test_starting_over_says_so_and_keeps_the_earlier_rows_until_the_first_chunk(tmp_path, tiny_classifier, capsys,
                                                                                monkeypatch):
    from koelectra_kit.label.run import FileLabeller

    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    _interrupt(src, out, tiny_classifier)
    kept = (tmp_path / "out.csv.partial").read_bytes()
    capsys.readouterr()

    def stopped(self):  # Ctrl-C after the note, before this run wrote anything
        raise KeyboardInterrupt
    monkeypatch.setattr(FileLabeller, "_loop", stopped)
    with pytest.raises(KeyboardInterrupt):
        label_file(None, src, out, "review", classifier=tiny_classifier, progress=False)
    err = capsys.readouterr().err
    assert "holds 10 labelled rows of an earlier run" in err and "--resume" in err
    assert (tmp_path / "out.csv.partial").read_bytes() == kept
    monkeypatch.undo()
    s = label_file(None, src, out, "review", classifier=tiny_classifier, progress=False, resume=True)
    assert s.rows == 40 and s.new_rows == 30


def test_resume_on_a_finished_output_is_refused_before_the_model_loads(tmp_path, tiny_classifier_dir, capsys,
                                                                       monkeypatch):
    """--resume on an output with nothing left to resume was refused only once the model had loaded (seconds for a
    large one, and a quantized load's warnings printed first)."""
    import koelectra_kit.label.run as run

    src, out = _reviews(tmp_path / "in.csv"), tmp_path / "out.csv"
    assert main(["label", "--model", str(tiny_classifier_dir), "--input", str(src), "--output", str(out),
                 "--text-column", "review", "--no-progress"]) == 0
    before = out.read_bytes()

    def never(*a, **k):
        raise AssertionError("the model was loaded")

    monkeypatch.setattr(run, "load_classifier", never)
    capsys.readouterr()
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(src), "--output", str(out),
               "--text-column", "review", "--no-progress", "--resume"])
    err = capsys.readouterr().err
    assert rc == 2 and err.strip() == f"error: {out} is complete (no out.csv.partial to resume); pass --overwrite to " \
                                      "label it again"
    assert out.read_bytes() == before and not (tmp_path / "out.csv.partial").exists()
