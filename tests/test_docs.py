"""What the documentation shows runs: every ```python and ```bash block of README.md (in order, in one
scratch folder, with the bundled sample copied in under the names the README uses for a user's files), the
example script, and each experiment script's --help. A block that cannot run here (it needs a GPU, several
machines or the network) is preceded by an HTML comment ``<!-- not run in CI: WHY -->`` saying why."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"(<!--\s*not run in CI:[^>]*-->\s*\n)?```(python|bash)[^\n]*\n(.*?)\n```", re.S)

def without_set_up(code: str) -> str:
    """The set-up steps (apt-get/pip install ... &&) are what .ci/run itself runs: keep what follows them, and
    drop the test command (this is the test run)."""
    parts = [p.strip() for p in code.strip().split("&&")]
    while parts and parts[0].startswith(("pip install", "apt-get", "sudo apt-get")):
        parts.pop(0)
    rest = " && ".join(parts)
    return "" if "pytest" in rest else rest


def readme_blocks() -> list[tuple[str, str, bool]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m.group(2), m.group(3), m.group(1) is None) for m in FENCE.finditer(text)]


def _env(tmp_path):
    env = {**os.environ, "KOELECTRA_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    return env


def test_readme_blocks_run(tmp_path, sample_dir):
    blocks = readme_blocks()
    assert sum(run for _, _, run in blocks) >= 4, "the README lost its runnable examples"
    work = tmp_path / "work"
    work.mkdir()
    # a user's own files, as the README names them
    shutil.copy(sample_dir / "comments.txt", work / "my_comments.txt")
    shutil.copy(sample_dir / "reviews_labelled.csv", work / "my_reviews.csv")
    shutil.copy(sample_dir / "reviews_unlabelled.csv", work / "to_label.csv")
    shutil.copy(sample_dir / "reviews_unlabelled.csv", work / "reviews.csv")
    env = _env(tmp_path)
    ran = 0
    for lang, code, run in blocks:
        if lang == "bash":
            code = without_set_up(code)
        if not run or not code:
            continue
        if lang == "python":
            proc = subprocess.run([sys.executable, "-c", code], cwd=work, env=env, capture_output=True, text=True,
                                  timeout=600)
        else:
            proc = subprocess.run(["bash", "-euo", "pipefail", "-c", code], cwd=work, env=env, capture_output=True,
                                  text=True, timeout=600)
        assert proc.returncode == 0, f"README block failed:\n{code}\n--- stderr:\n{proc.stderr[-3000:]}"
        ran += 1
    assert ran >= 4


def test_setup_commands_are_the_ci_commands():
    """README's test command is exactly what .ci/run runs."""
    blocks = [code for lang, code, _ in readme_blocks() if lang == "bash"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = next(b for b in blocks if "pytest" in b).strip().splitlines()[-1]
    assert test_cmd in ci


def test_example_pipeline_runs(tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "pipeline.py"), "--out", str(tmp_path / "p")],
                          cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert (tmp_path / "p" / "labelled.csv").exists() and "labelled 60 rows" in proc.stdout


@pytest.mark.parametrize("script", sorted(p.name for p in (ROOT / "examples" / "experiments").glob("*.py")
                                          if p.name != "common.py"))
def test_experiment_scripts_parse_their_options(script, tmp_path):
    proc = subprocess.run([sys.executable, str(ROOT / "examples" / "experiments" / script), "--help"],
                          cwd=tmp_path, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "usage" in proc.stdout.lower(), proc.stderr[-2000:]
