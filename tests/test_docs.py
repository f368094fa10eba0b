"""What the documentation shows runs, and where it points exists.

Every ```python and ```bash block of README.md and of every page of the documentation site (docs/*.md, in the
order of mkdocs.yml's nav, then the rest) runs, in order, in one scratch folder, with the bundled sample copied in
under the names the pages use for a user's files; a block that appears on two pages (the set-up command) runs once.
A block that cannot run here (it needs a GPU, several machines, the network or the user's own big files) is
preceded by an HTML comment ``<!-- not run in CI: WHY -->`` saying why. The records of experiments (docs/RESULTS.md
and docs/results/: commands that took CPU-hours on the shared data, kept beside the tables they produced) are
read, not run. Also: the site builds with ``mkdocs build --strict`` (broken links and anchors between pages fail
it), every relative link of README.md and the pages names a file a clone has, the example script runs and each
experiment script parses its options."""
from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
FENCE = re.compile(r"(<!--\s*not run in CI:[^>]*-->\s*\n)?```(python|bash)[^\n]*\n(.*?)\n```", re.S)
# Experiment records: their commands ran for hours on the shared data; the tables beside them are the output.
RECORDS = ("docs/RESULTS.md", "docs/results/")


def without_set_up(code: str) -> str:
    """The set-up steps (apt-get/pip install ... &&) are what .ci/run itself runs: keep what follows them, and
    drop the test command (this is the test run)."""
    parts = [p.strip() for p in code.strip().split("&&")]
    while parts and parts[0].startswith(("pip install", "apt-get", "sudo apt-get", "python3 -m venv", ". .venv/")):
        parts.pop(0)
    rest = " && ".join(parts)
    return "" if "pytest" in rest else rest


def nav_pages(nav) -> list[str]:
    """mkdocs.yml's nav, flattened to page paths (relative to docs/), in order."""
    out = []
    for item in nav:
        value = next(iter(item.values())) if isinstance(item, dict) else item
        out += nav_pages(value) if isinstance(value, list) else [value]
    return out


def doc_pages() -> list[Path]:
    """README.md, the site's pages in nav order, then every other page under docs/."""
    site = yaml.safe_load((ROOT / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = [ROOT / "README.md"] + [ROOT / site["docs_dir"] / p for p in nav_pages(site["nav"])]
    pages += sorted(set((ROOT / site["docs_dir"]).rglob("*.md")) - set(pages))
    return pages


def is_record(page: Path) -> bool:
    rel = page.relative_to(ROOT).as_posix()
    return any(rel == r or (r.endswith("/") and rel.startswith(r)) for r in RECORDS)


def doc_blocks() -> list[tuple[str, str, str, bool]]:
    """(page, language, code, runs here) of every block, README first; a block seen before is left out."""
    seen, out = set(), []
    for page in doc_pages():
        if is_record(page):
            continue
        for m in FENCE.finditer(page.read_text(encoding="utf-8")):
            lang, code = m.group(2), m.group(3)
            if code.strip() in seen:
                continue
            seen.add(code.strip())
            out.append((page.relative_to(ROOT).as_posix(), lang, code, m.group(1) is None))
    return out


def readme_blocks() -> list[tuple[str, str, bool]]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    return [(m.group(2), m.group(3), m.group(1) is None) for m in FENCE.finditer(text)]


def _env(tmp_path):
    env = {**os.environ, "KOELECTRA_CACHE": str(tmp_path / "cache"), "OMP_NUM_THREADS": "1",
           "PYTHONPATH": str(ROOT)}
    return env


def test_doc_blocks_run(tmp_path, sample_dir):
    blocks = doc_blocks()
    assert sum(run for *_, run in blocks) >= 8, "the docs lost their runnable examples"
    work = tmp_path / "work"
    work.mkdir()
    # a user's own files, as the pages name them
    shutil.copy(sample_dir / "comments.txt", work / "my_comments.txt")
    shutil.copy(sample_dir / "reviews_labelled.csv", work / "my_reviews.csv")
    shutil.copy(sample_dir / "reviews_labelled.csv", work / "dev.csv")
    shutil.copy(sample_dir / "reviews_unlabelled.csv", work / "to_label.csv")
    shutil.copy(sample_dir / "reviews_unlabelled.csv", work / "reviews.csv")
    env = _env(tmp_path)
    ran = 0
    for page, lang, code, run in blocks:
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
        assert proc.returncode == 0, f"{page}: block failed:\n{code}\n--- stderr:\n{proc.stderr[-3000:]}"
        ran += 1
    assert ran >= 8


def test_docs_build_strict(tmp_path):
    """The site builds with no warning: a broken link or anchor between pages, a page missing from the tree, or a
    command the config reference does not cover (docs/hooks/config_reference.py) fails it."""
    pytest.importorskip("mkdocs", reason="mkdocs is not installed (pip install -e '.[docs]')")
    pytest.importorskip("material", reason="mkdocs-material is not installed (pip install -e '.[docs]')")
    env = {**os.environ, "PYTHONPATH": str(ROOT), "NO_MKDOCS_2_WARNING": "1"}
    proc = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-4000:]
    reference = (tmp_path / "site" / "reference" / "index.html").read_text(encoding="utf-8")
    for key in ("max_grad_norm", "model.hidden_size", "normalize.repeat_limit", "baseline.ngram_max", "members",
                "teacher_weights", "cache_rows", "max_upload_bytes"):
        assert f"<code>{key}</code>" in reference, f"the config reference lacks {key}"


LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")


def ignored(paths: list[Path]) -> set[str]:
    """Of ``paths``, those git ignores (a clone does not have them); nothing when git is not there."""
    try:
        proc = subprocess.run(["git", "check-ignore", "--no-index", *map(str, paths)], cwd=ROOT, capture_output=True,
                              text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return set()
    return {str(Path(line).resolve()) for line in proc.stdout.splitlines()}


def test_relative_links_name_files_a_clone_has():
    """Every relative link or image of README.md and of every docs page points at a file or folder of the
    repository (not one only a local run makes, such as runs/), so the links work on GitHub and on the site."""
    targets: list[tuple[str, Path]] = []
    for page in doc_pages():
        text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.S)
        text = re.sub(r"`[^`\n]*`", "", text)
        for m in LINK.finditer(text):
            target = m.group(1).split("#", 1)[0]
            if not target or re.match(r"[a-z][a-z0-9+.-]*:", target, re.I):
                continue  # an anchor on the same page, or a URL
            targets.append((f"{page.relative_to(ROOT)} -> {m.group(1)}", (page.parent / target).resolve()))
    assert len(targets) > 30
    missing = [where for where, path in targets if not path.exists()]
    assert not missing, "links to files that do not exist:\n" + "\n".join(missing)
    outside = [where for where, path in targets if ROOT not in path.parents and path != ROOT]
    assert not outside, "links that leave the repository:\n" + "\n".join(outside)
    gone = ignored([p for _, p in targets])
    local = [where for where, path in targets if str(path) in gone]
    assert not local, "links to files git ignores (a clone lacks them):\n" + "\n".join(local)


def test_setup_commands_are_the_ci_commands():
    """README's test command is exactly what .ci/run runs."""
    blocks = [code for lang, code, _ in readme_blocks() if lang == "bash"]
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    test_cmd = next(b for b in blocks if "pytest" in b).strip().splitlines()[-1]
    assert test_cmd in ci
    # the getting-started page shows the same two set-up commands, byte for byte
    page = (ROOT / "docs" / "getting-started.md").read_text(encoding="utf-8")
    for code in blocks[:2]:
        assert f"```bash\n{code}\n```" in page, f"docs/getting-started.md lost README's command:\n{code}"


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
