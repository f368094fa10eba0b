"""The package installs as users get it: build the wheel, install it (no network, no dependencies fetched:
they come from this environment) into a fresh virtual environment, and run the quickstart from a folder
outside the repository, so presets and the sample corpus must come from the installed package."""
from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_wheel_installs_and_quickstart_runs_outside_the_repo(tmp_path):
    dist = tmp_path / "dist"
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q",
                            "-w", str(dist), str(ROOT)], capture_output=True, text=True, cwd=tmp_path)
    assert build.returncode == 0, build.stderr[-2000:]
    wheel = next(dist.glob("koelectra_kit-*.whl"))
    names = set(zipfile.ZipFile(wheel).namelist())
    # every subpackage and the package data made it in (a package missing from pyproject's list would not)
    for pkg in (ROOT / "koelectra_kit").rglob("__init__.py"):
        rel = pkg.relative_to(ROOT).as_posix()
        assert rel in names, f"{rel} is not in the wheel: add its package to pyproject.toml"
    assert "koelectra_kit/presets/pretrain/cpu-30min.yaml" in names
    assert "koelectra_kit/sample/reviews_unlabelled.csv" in names

    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", str(venv)], check=True)
    py = venv / "bin" / "python"
    inst = subprocess.run([str(py), "-m", "pip", "install", "--no-deps", "--no-index", "-q", str(wheel)],
                          capture_output=True, text=True)
    assert inst.returncode == 0, inst.stderr[-2000:]
    work = tmp_path / "elsewhere"
    work.mkdir()
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    env.update(KOELECTRA_CACHE=str(tmp_path / "cache"), OMP_NUM_THREADS="1")
    # the installed package, not the repository's (an editable install of the repo would shadow it)
    where = subprocess.run([str(py), "-c", "import koelectra_kit, sys; print(koelectra_kit.__file__)"],
                           capture_output=True, text=True, cwd=work, env=env)
    assert str(venv) in where.stdout, where.stdout + where.stderr
    run = subprocess.run([str(venv / "bin" / "koelectra-kit"), "quickstart", "--out", "qs", "--show", "2",
                          "pretrain.max_steps=20", "finetune.epochs=2"],
                         capture_output=True, text=True, cwd=work, env=env, timeout=600)
    assert run.returncode == 0, run.stdout[-2000:] + run.stderr[-2000:]
    assert (work / "qs" / "labelled.csv").exists()
    assert "configs/" not in run.stdout.replace(str(venv), "")  # presets came from the package, not a checkout
