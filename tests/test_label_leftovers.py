"""What a probe of `label` found left over: `--nproc N --resume` over a finished many-file run refused its outputs
(one process skips them); a pattern over the folder the outputs land in took a killed run's .partial files, shards
and records, and earlier runs' outputs, for inputs; a full disk named no file; ``label_dataframe`` labelled a
column of true/false values, or of dates with a gap. Each case: one `error:` line and exit 2, or the right files
labelled; nothing lost."""
from __future__ import annotations

import errno
import json
from pathlib import Path

import pandas as pd
import pytest

from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.label import LabelConfig, label_dataframe, label_files
from koelectra_kit.label import torchrun as tr
from koelectra_kit.label.files import expand_inputs

from .launch import koelectra


def _reviews(path: Path, n: int = 12) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    texts = ["배송이 빨라요", "별로예요 다시는 안 사요", "그냥 그래요", "최고예요"]
    pd.DataFrame({"id": range(n), "review": [f"{texts[i % 4]} {i}" for i in range(n)]}).to_csv(path, index=False)
    return path


def _one_error(capsys, rc, *needles) -> str:
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in lines[0], err
    return lines[0]


# -- 1. --nproc --resume over a finished many-file run

@pytest.fixture
def finished_run(tmp_path, tiny_classifier_dir):
    """Two inputs labelled by one process into out/, each output with its record: (pattern, output folder)."""
    _reviews(tmp_path / "d" / "a.csv")
    _reviews(tmp_path / "d" / "b.csv", n=7)
    out = tmp_path / "out"
    out.mkdir()
    pattern = str(tmp_path / "d" / "*.csv")
    label_files(tiny_classifier_dir, pattern, f"{out}/", "review", precision="fp32", progress=False)
    return pattern, out


def test_the_ranks_skip_a_many_file_runs_finished_outputs_of_this_job_and_refuse_anothers(
        finished_run, tiny_classifier_dir, monkeypatch, capsys):
    pattern, out = finished_run
    monkeypatch.setattr(tr, "_gpus", lambda: 0)
    cfg = LabelConfig(model=str(tiny_classifier_dir), input=pattern, output=f"{out}/", text_column="review",
                      precision="fp32", resume=True)
    rank0 = tr.Launch(rank=0, world=2, local_rank=0, local_world=2)
    rank0.rank_config(cfg)  # was: "out/a.csv is complete; pass --overwrite to label it again"
    assert rank0.outputs == () and [Path(p).name for p in rank0.finished] == ["a.csv", "b.csv"]
    assert "a.csv is complete: skipped" in capsys.readouterr().err
    tr.check_job(cfg, 2)  # what `label --nproc 2` checks before starting the ranks: the same

    (out / "b.csv").unlink()  # one output still to label: joined at the end, the other skipped
    (out / ".b.csv.job.json").unlink()
    rank0.rank_config(cfg)
    assert rank0.outputs == (out / "b.csv",) and [Path(p).name for p in rank0.finished] == ["a.csv"]

    record = json.loads((out / ".a.csv.job.json").read_text(encoding="utf-8"))
    (out / ".a.csv.job.json").write_text(json.dumps({**record, "text_column": "id"}), encoding="utf-8")
    with pytest.raises(InputError, match="a.csv is complete, but was labelled with another text column"):
        rank0.rank_config(cfg)
    # one file's finished output: nothing to resume, as one process says it
    with pytest.raises(InputError, match="a.csv is complete; pass --overwrite"):
        rank0.rank_config(LabelConfig(model=str(tiny_classifier_dir), input=str(Path(pattern).parent / "a.csv"),
                                      output=str(out / "a.csv"), text_column="review", resume=True))


@pytest.mark.extended
def test_nproc_resume_skips_the_finished_outputs_and_labels_the_rest(tmp_path, tiny_classifier_dir):
    _reviews(tmp_path / "d" / "a.csv")
    _reviews(tmp_path / "d" / "b.csv", n=7)
    (tmp_path / "out").mkdir()
    common = ["label", "--nproc", "2", "--model", str(tiny_classifier_dir), "--input", "d/*.csv", "--output", "out/",
              "--text-column", "review", "--precision", "fp32", "--no-progress", "--device", "cpu"]
    env = {"TMPDIR": str(tmp_path)}
    first = koelectra(*common, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stderr[-3000:]
    done = {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()}
    assert sorted(done) == [".a.csv.job.json", ".b.csv.job.json", "a.csv", "b.csv"]
    (tmp_path / "out" / "b.csv").unlink()
    (tmp_path / "out" / ".b.csv.job.json").unlink()

    again = koelectra(*common, "--resume", cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stderr[-3000:]  # was: "error: out/a.csv is complete; pass --overwrite"
    assert again.stdout.count("labelled ") == 1 and "-> out/b.csv" in again.stdout
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == done

    last = koelectra(*common, "--resume", cwd=tmp_path, env=env)  # all finished: nothing labelled, nothing refused
    assert last.returncode == 0 and "labelled " not in last.stdout, last.stderr[-3000:]
    assert {p.name: p.read_bytes() for p in (tmp_path / "out").iterdir()} == done


# -- 2. a pattern over the folder the outputs land in

def test_a_pattern_leaves_out_the_files_label_writes_beside_its_outputs(tmp_path, capsys):
    d = tmp_path / "d"
    d.mkdir()
    names = ["a.csv", "b.csv", "notes.tsv",  # the inputs
             "a_l.csv", ".a_l.csv.job.json",  # this suffix's finished output and its record
             "b_l.csv.partial", "b_l.csv.partial.json", "b_l.csv.partial.json.tmp",  # a killed run's
             "a_l.shard-1-of-2.csv", "a_l.shard-1-of-2.csv.job.json", "a_l.shard-2-of-2.csv.partial",  # --nproc's
             "a_l.csv.merging", "a_v1.csv", ".a_v1.csv.job.json"]  # a join cut short; another suffix's output
    for name in names:
        (d / name).write_text("review\n좋아요\n", encoding="utf-8")
    for record in (".a_l.csv.job.json", ".a_v1.csv.job.json"):  # both labelled from a.csv
        (d / record).write_text(json.dumps({"input": str((d / "a.csv").resolve()), "output_content": "c2:x"}))
    paths, many = expand_inputs([str(d / "*")], "_l.csv")
    assert [p.name for p in paths] == ["a.csv", "b.csv", "notes.tsv"] and many
    assert "a_v1.csv" in capsys.readouterr().err  # left out, and said: name it to label it again
    # into a folder (no suffix to tell this run's outputs by): an earlier run's shard is a file like any
    paths, _ = expand_inputs([str(d / "*")], None)
    assert [p.name for p in paths] == ["a.csv", "a_l.shard-1-of-2.csv", "b.csv", "notes.tsv"]
    # named, a file is taken as it is named; a folder of outputs whose inputs are elsewhere is labelled as asked
    assert expand_inputs([str(d / "a_v1.csv")], "_l.csv")[0] == [d / "a_v1.csv"]
    again = expand_inputs([str(d / "a_?.csv"), str(d / "a_v?.csv")], ".again.csv")[0]
    assert [p.name for p in again] == ["a_l.csv", "a_v1.csv"]
    # a real input that ends in the suffix (no record: no run of ours wrote it) is left out, but said
    (d / "c_l.csv").write_text("review\n좋아요\n", encoding="utf-8")
    capsys.readouterr()
    assert [p.name for p in expand_inputs([str(d / "*")], "_l.csv")[0]] == ["a.csv", "b.csv", "notes.tsv"]
    err = capsys.readouterr().err
    assert "c_l.csv: each ends in --output-suffix '_l.csv'" in err and "a_l.csv" not in err.split("c_l.csv")[0]
    with pytest.raises(InputError, match="each ends in --output-suffix '_l.csv'.*name them one by one"):
        expand_inputs([str(d / "c_*.csv")], "_l.csv")


def test_a_killed_run_with_an_output_suffix_resumes_over_the_same_pattern(tmp_path, tiny_classifier_dir, capsys):
    d = tmp_path / "d"
    _reviews(d / "a.csv", n=30)
    _reviews(d / "b.csv", n=30)
    opts = {"output_suffix": "_l.csv", "precision": "fp32", "progress": False, "chunk_rows": 10}

    def killed(chunks):
        raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        label_files(tiny_classifier_dir, str(d / "*"), None, "review", _after_chunk=killed, **opts)
    assert (d / "a_l.csv.partial").exists() and (d / "a_l.csv.partial.json").exists()
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(d / "*"), "--output-suffix", "_l.csv",
               "--text-column", "review", "--precision", "fp32", "--no-progress", "--resume", "--chunk-rows", "10"])
    out = capsys.readouterr().out
    assert rc == 0 and out.count("labelled ") == 2, out  # was: "can't tell the format from the extension '.partial'"
    assert sorted(p.name for p in d.iterdir()) == [".a_l.csv.job.json", ".b_l.csv.job.json", "a.csv", "a_l.csv",
                                                  "b.csv", "b_l.csv"]
    assert pd.read_csv(d / "a_l.csv")["id"].tolist() == list(range(30))

    # labelled again with another suffix: the first run's outputs are no inputs (a_l.csv became a_l.v2.csv)
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(d / "*"), "--output-suffix", ".v2.csv",
               "--text-column", "review", "--no-progress"])
    captured = capsys.readouterr()
    assert rc == 0 and captured.out.count("labelled ") == 2, captured.out
    assert not (d / "a_l.v2.csv").exists() and (d / "a.v2.csv").exists() and "a_l.csv" in captured.err


# -- 3. a full disk names the file it could not write

def _nameless_enospc(*args, **kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")  # as write() and fsync() say it: no file named


@pytest.mark.parametrize("where, named", [("chunk", "o.csv.partial"), ("state", "o.csv.partial.json"),
                                           ("record", ".o.csv.job.json")])
def test_a_full_disk_names_the_file_it_could_not_write(where, named, tmp_path, tiny_classifier_dir, monkeypatch,
                                                       capsys):
    import os

    import koelectra_kit.io.fileio as fileio

    src = _reviews(tmp_path / "in.csv")
    if where == "chunk":
        fsync = os.fsync
        monkeypatch.setattr(os, "fsync", lambda fd: _nameless_enospc() if os.readlink(f"/proc/self/fd/{fd}").endswith(
            ".partial") else fsync(fd))
    elif where == "state":
        write_text = Path.write_text
        monkeypatch.setattr(Path, "write_text", lambda self, *a, **k: _nameless_enospc() if self.name.endswith(
            ".partial.json.tmp") else write_text(self, *a, **k))
    else:
        write = fileio.write_text_atomic
        monkeypatch.setattr(fileio, "write_text_atomic", lambda path, text: _nameless_enospc() if str(path).endswith(
            ".job.json") else write(path, text))
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(src), "--output", str(tmp_path / "o.csv"),
               "--text-column", "review", "--no-progress"])
    line = _one_error(capsys, rc, "No space left on device")
    assert named in line  # was: "error: No space left on device", no file said


def test_a_full_disk_while_shards_are_joined_names_the_file_and_leaves_no_half_joined_one(
        tmp_path, tiny_classifier_dir, monkeypatch, capsys):
    import koelectra_kit.label.shard as shard

    src = _reviews(tmp_path / "in.csv")
    for k in (1, 2):
        assert main(["label", "--model", str(tiny_classifier_dir), "--input", str(src), "--output",
                     str(tmp_path / "o.csv"), "--text-column", "review", "--no-progress", "--shard", f"{k}/2"]) == 0
    capsys.readouterr()
    monkeypatch.setattr(shard.shutil, "copyfileobj", _nameless_enospc)
    line = _one_error(capsys, main(["label-merge", str(tmp_path / "o.csv")]), "No space left on device")
    assert "o.csv.merging" in line
    assert not (tmp_path / "o.csv.merging").exists() and not (tmp_path / "o.csv").exists()


# -- 4. label_dataframe refuses what is no text, as label does

@pytest.mark.parametrize("column", [
    [True, False, True],  # a bool column: labelled as the words "True" and "False"
    pd.array([True, None, False], dtype="boolean"),
    pd.to_datetime(["2024-01-02", None, "2024-03-04"]),  # two dates and a gap: under the three values checked
    pd.to_timedelta([1, 2, 3], unit="D"),
], ids=["bool", "boolean", "dates-with-a-gap", "durations"])
def test_label_dataframe_refuses_a_column_of_dates_or_true_false_values(column, tiny_classifier):
    df = pd.DataFrame({"review": column, "id": [1, 2, 3]})
    with pytest.raises(InputError, match="'review' holds .* not review text"):
        label_dataframe(df, classifier=tiny_classifier)


def test_label_refuses_a_parquet_column_of_true_false_values_as_the_api_does(tmp_path, tiny_classifier_dir,
                                                                             capsys):
    pd.DataFrame({"review": [True, False], "id": [1, 2]}).to_parquet(tmp_path / "in.parquet")
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(tmp_path / "in.parquet"), "--output",
               str(tmp_path / "o.csv"), "--text-column", "review", "--no-progress"])
    _one_error(capsys, rc, "'review' holds", "not review text")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in.parquet"]
    # a true/false value among reviews is one odd row, not a column picked by mistake: labelled
    (tmp_path / "mixed.jsonl").write_text("".join(json.dumps({"review": v}, ensure_ascii=False) + "\n"
                                                  for v in ["좋아요", True, "별로예요", "그냥 그래요"]), encoding="utf-8")
    assert main(["label", "--model", str(tiny_classifier_dir), "--input", str(tmp_path / "mixed.jsonl"),
                 "--output", str(tmp_path / "o.csv"), "--text-column", "review", "--no-progress"]) == 0
