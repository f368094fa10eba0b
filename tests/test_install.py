"""The package installs as users get it: build the wheel, install it (no network, no dependencies fetched:
they come from this environment) into a fresh virtual environment, and run the quickstart from a folder
outside the repository, so presets and the sample corpus must come from the installed package. It passes
wherever the suite runs: a virtualenv, a conda env, the system Python (as root or not)."""
from __future__ import annotations

import os
import site
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def make_venv_seeing_our_packages(venv: Path) -> Path:
    """A fresh venv whose interpreter also finds the packages this one runs with (torch, transformers, ...), so
    installing the wheel with --no-deps fetches nothing. Not `venv --system-site-packages`: that exposes the
    site-packages of the interpreter the venv is based on, which for pytest running in a venv is the *base*
    Python's, not the venv's where the dependencies are (a user's usual set-up; the wheel then can't import
    transformers). Instead a .pth file in the new venv adds this interpreter's own site dirs (a venv's, a
    conda env's, or the system's dist-packages, and the system ones too where this venv was made with them).
    addsitedir rather than plain path lines, so their own .pth files run as well (packages that install through
    one); it appends, after the new venv's site-packages, so the installed wheel comes first (checked below)."""
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = venv / "bin" / "python"
    ours = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    ours = [d for d in dict.fromkeys(ours) if os.path.isdir(d)]
    purelib = subprocess.run([str(py), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
                             capture_output=True, text=True, check=True).stdout.strip()
    # a .pth line that starts with "import" is executed: one line, every site dir of ours after the venv's own
    (Path(purelib) / "_koelectra_test_deps.pth").write_text(
        "import site; " + "; ".join(f"site.addsitedir({d!r})" for d in ours) + "\n", encoding="utf-8")
    return py


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
    py = make_venv_seeing_our_packages(venv)
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
