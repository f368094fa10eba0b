"""The staging folders outputs are built in (io/fileio.py): one left by a killed run (a fine-tune's holds its best
checkpoint, a model's size, hidden beside the output) is removed by the next run for the same output, with a
warning; one that a live process still builds is left alone."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest

from koelectra_kit.cli import main
from koelectra_kit.io.fileio import make_staging_dir, remove_staging, staged_dir

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="no flock on Windows: staging folders are not held")


def _abandoned(tmp_path, name="out"):
    left = tmp_path / f".{name}.partial-k1ll3d"
    (left / "checkpoint").mkdir(parents=True)
    (left / "checkpoint" / "model.safetensors").write_bytes(b"\0" * 1024)
    return left


def test_a_killed_runs_staging_folder_goes_with_the_next_run_for_that_output(tmp_path, sample_dir, capsys):
    left, other = _abandoned(tmp_path), _abandoned(tmp_path, "another")
    assert main(["baseline", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'out'}",
                 "plots=false"]) == 0
    assert f"warning: removed {left}: the unfinished output of an earlier run for" in capsys.readouterr().err
    assert not left.exists() and other.exists()  # another output's is not this run's to judge
    assert sorted(p.name for p in tmp_path.iterdir()) == [".another.partial-k1ll3d", "out"]


def test_a_staging_folder_a_live_process_holds_is_left_alone(tmp_path):
    final = tmp_path / "out"
    held = make_staging_dir(final)  # this process's own: skipped
    (held / "f").write_text("x")
    other = _abandoned(tmp_path)
    holder = subprocess.Popen([sys.executable, "-c", (
        "import fcntl, os, sys, time\n"
        f"fd = os.open({str(other)!r}, os.O_RDONLY); fcntl.flock(fd, fcntl.LOCK_EX)\n"
        "print('held', flush=True); time.sleep(60)\n")], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with staged_dir(final) as staging:
            (staging / "done").write_text("ok")
        assert other.exists() and held.exists() and (final / "done").is_file()
    finally:
        holder.kill()
        holder.wait()
    time.sleep(0.1)
    with pytest.warns(UserWarning, match="partial-k1ll3d"):
        with staged_dir(final):
            pass
    assert not other.exists() and held.exists()
    remove_staging(held)
    assert not held.exists()
