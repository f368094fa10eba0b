"""File-system permissions: read-only output folders, write-protected outputs, unreadable inputs, models and caches,
no home folder. Each refusal is one ``error:`` line naming the path and what to do, exit 2, before any work, and
leaves what was there as it was.

Root ignores mode bits, and the test suite usually runs as root. So, as root, each case runs the CLI in a child
without CAP_DAC_OVERRIDE and CAP_DAC_READ_SEARCH: dropped from its bounding set before exec, root's capabilities
after exec are the bounding set's, and the mode bits bind as for any user (the files are root's, so the owner's
bits). A second user was not used: the interpreter may live under /root (0700 here), out of its reach. As any
other user the child just runs; mode bits bind already.
"""
from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from koelectra_kit.cli import main

PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2


def _drop_dac() -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
        if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP)")


def _preexec():
    return _drop_dac if os.geteuid() == 0 else None


@pytest.fixture(scope="module")
def unprivileged(tmp_path_factory):
    """Skip unless a child process here is bound by mode bits (probed: it must fail to write into a 0555 folder)."""
    if sys.platform != "linux":
        pytest.skip("mode bits as a non-root user: Linux only (prctl)")
    folder = tmp_path_factory.mktemp("probe") / "ro"
    folder.mkdir()
    folder.chmod(0o555)
    try:
        probe = subprocess.run([sys.executable, "-c", f"open({str(folder / 'x')!r}, 'w')"], capture_output=True,
                               preexec_fn=_preexec(), timeout=60)
    except (OSError, subprocess.SubprocessError) as e:
        pytest.skip(f"as root, could not drop CAP_DAC_OVERRIDE for a child process ({e})")
    finally:
        folder.chmod(0o755)
    if probe.returncode == 0:
        pytest.skip("a child process here writes into a 0555 folder (root with capabilities that can't be dropped)")


def cli(*args: str, cwd: Path, env: dict | None = None) -> tuple[int, str, str]:
    """``python -m koelectra_kit ARGS`` bound by mode bits (see the module docstring)."""
    p = subprocess.run([sys.executable, "-m", "koelectra_kit", *map(str, args)], cwd=cwd, capture_output=True,
                       text=True, preexec_fn=_preexec(), env={**os.environ, **(env or {})}, timeout=300)
    return p.returncode, p.stdout, p.stderr


def one_error(rc: int, err: str, *needles: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2 and "Traceback" not in err, err
    assert [line for line in lines if line.startswith("error:")] == lines[-1:], err
    for needle in needles:
        assert needle in lines[-1], lines[-1]
    return lines[-1]


def tree(folder: Path) -> dict:
    return {str(p.relative_to(folder)): p.read_bytes() if p.is_file() else None for p in sorted(folder.rglob("*"))}


def leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".partial" in p.name or ".old-" in p.name)


@pytest.fixture
def work(tmp_path, sample_dir) -> Path:
    shutil.copy(sample_dir / "reviews_labelled.csv", tmp_path)
    shutil.copy(sample_dir / "reviews_unlabelled.csv", tmp_path)
    return tmp_path


@pytest.fixture
def restore_modes(tmp_path):
    """chmod everything back afterwards, so pytest can clean tmp_path up as any user."""
    yield
    for p in [tmp_path, *tmp_path.rglob("*")]:
        p.chmod(0o755 if p.is_dir() else 0o644)


def test_a_resume_whose_record_cant_be_read_keeps_the_labelled_rows(unprivileged, work, restore_modes):
    # an unreadable OUT.partial.json read as "nothing to resume": the rows in OUT.partial were deleted, labelling
    # started over (exit 0)
    assert main(["baseline", "--train", str(work / "reviews_labelled.csv"), "--out", str(work / "tfidf")]) == 0
    partial, record = work / "out.csv.partial", work / "out.csv.partial.json"
    partial.write_bytes(b"review,label\n")
    record.write_text("{}", encoding="utf-8")
    record.chmod(0)
    rc, _, err = cli("label", "--model", "tfidf", "--input", "reviews_unlabelled.csv", "--output", "out.csv",
                     "--resume", "--no-progress", cwd=work)
    one_error(rc, err, "out.csv.partial.json", "can't be read", "--resume")
    assert partial.read_bytes() == b"review,label\n" and not (work / "out.csv").exists()


def test_a_write_protected_output_folder_is_refused_before_any_work(unprivileged, work, restore_modes):
    # it was swapped out (its parent is writable) and, its files not removable, left beside the new one as
    # .tfidf.old-PID, exit 0
    assert main(["baseline", "--train", str(work / "reviews_labelled.csv"), "--out", str(work / "tfidf")]) == 0
    before = tree(work / "tfidf")
    (work / "tfidf").chmod(0o555)
    rc, out, err = cli("baseline", "--train", "reviews_labelled.csv", "--out", "tfidf", cwd=work)
    one_error(rc, err, "out=tfidf", "write-protected", "chmod")
    assert "macro-F1" not in out  # refused before the fit
    assert tree(work / "tfidf") == before and leftovers(work) == []


@pytest.mark.parametrize("command", ["baseline", "evaluate"])
def test_an_output_that_cant_be_written_is_named_before_the_work(unprivileged, work, command, restore_modes):
    # baseline: "Permission denied (ro/.tfidf.partial-x1)" after the fit, naming a folder the user never gave;
    # evaluate into a write-protected out=: "Permission denied (.../.eval.json.x1.tmp)" after the evaluation
    (work / "ro").mkdir()
    if command == "baseline":
        args, out, folder = ["baseline", "--train", "reviews_labelled.csv", "--out", "ro/tfidf"], "out=ro/tfidf", "ro"
    else:
        assert main(["baseline", "--train", str(work / "reviews_labelled.csv"), "--out", str(work / "tfidf")]) == 0
        args, out, folder = ["evaluate", "--model", "tfidf", "--data", "reviews_labelled.csv", "--out", "ro"], \
            "out=ro", "ro"
    (work / "ro").chmod(0o555)
    rc, stdout, err = cli(*args, cwd=work)
    line = one_error(rc, err, out, folder, "chmod")
    assert ".partial" not in line and ".tmp" not in line and "macro-F1" not in stdout
    assert leftovers(work) == [] and leftovers(work / "ro") == []


@pytest.mark.parametrize("blocked", ["", "model.safetensors"])
def test_an_unreadable_model_is_named_not_called_damaged(unprivileged, work, blocked, restore_modes):
    # model.safetensors: "damaged or truncated (No such file or directory: ...)" (safetensors' text for EACCES);
    # the folder: "Permission denied (MODEL/classifier.json)", a file it does not hold
    from transformers import ElectraConfig, ElectraForSequenceClassification

    model = work / "model"  # weights and config are all either message needs (no tokenizer: refused before it)
    ElectraForSequenceClassification(ElectraConfig(vocab_size=50, hidden_size=8, embedding_size=8, num_hidden_layers=1,
                                                   num_attention_heads=1, intermediate_size=8,
                                                   max_position_embeddings=16)).save_pretrained(model)
    (model / blocked).chmod(0)
    rc, _, err = cli("label", "--model", "model", "--input", "reviews_unlabelled.csv", "--output", "out.csv",
                     "--no-progress", cwd=work)
    line = one_error(rc, err, "can't be read", "chmod", blocked or "folder")
    assert "damaged" not in line and "classifier.json" not in line and not (work / "out.csv").exists()


@pytest.mark.extended
@pytest.mark.parametrize("what", ["cache", "cached file"])
def test_the_onnx_backend_says_what_to_do_with_an_unwritable_cache(unprivileged, work, tiny_classifier_dir, what,
                                                                   restore_modes, monkeypatch):
    # cache: "Permission denied (CACHE/onnx)"; an unreadable cached export: onnxruntime's traceback, exit 1
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    cache = work / "cache"
    cache.mkdir()
    args = ["label", "--model", str(tiny_classifier_dir), "--input", "reviews_unlabelled.csv", "--output",
            "out.csv", "--backend", "onnx", "--no-progress"]
    if what == "cached file":
        with monkeypatch.context() as m:
            m.setenv("KOELECTRA_CACHE", str(cache))
            m.chdir(work)
            assert main([*args[:6], "first.csv", *args[7:]]) == 0  # the export, in the cache
        [graph] = cache.rglob("model.onnx")
        graph.chmod(0)
        rc, _, err = cli(*args, cwd=work, env={"KOELECTRA_CACHE": str(cache)})
        one_error(rc, err, str(graph), "can't read it", "delete it")
    else:
        cache.chmod(0o555)
        rc, _, err = cli(*args, cwd=work, env={"KOELECTRA_CACHE": str(cache)})
        one_error(rc, err, "cache", str(cache), "KOELECTRA_CACHE", "koelectra-kit export")
    assert not (work / "out.csv").exists()


@pytest.mark.parametrize("what", ["input", "config", "cache"])
def test_an_unreadable_input_says_what_to_do(unprivileged, work, what, restore_modes):
    # all three were "error: Permission denied (PATH)": the path, not what to do (the cache: not that it is one)
    blocked = work / {"input": "reviews_labelled.csv", "config": "my.yaml", "cache": "cache"}[what]
    if what == "config":
        blocked.write_text("epochs: 1\n", encoding="utf-8")
    if what == "cache":  # the Kiwi pre-split a tokenizer trains from is a file in the cache: it must be writable
        blocked.mkdir()
        args = ["tokenizer", "train", "input=[reviews_labelled.csv]", "vocab_size=300", "out=tfidf", "progress=false"]
    else:
        args = ["baseline", "--train", "reviews_labelled.csv", "--out", "tfidf",
                *(["--config", "my.yaml"] if what == "config" else [])]
    blocked.chmod(0)
    rc, _, err = cli(*args, cwd=work, env={"KOELECTRA_CACHE": str(blocked)} if what == "cache" else None)
    line = one_error(rc, err, blocked.name, "permission")
    assert "check its permissions" in line or "make it readable" in line
    assert what != "cache" or "KOELECTRA_CACHE" in line
    assert not (work / "tfidf").exists() and leftovers(work) == []


@pytest.mark.extended
def test_an_onnx_export_into_a_read_only_model_folder_says_pass_out(unprivileged, work, tiny_classifier_dir,
                                                                   restore_modes):
    # it failed after loading the model, "Permission denied (MODEL/onnx)", the default --out never mentioned
    pytest.importorskip("onnxruntime")
    pytest.importorskip("onnx")
    model = work / "model"
    shutil.copytree(tiny_classifier_dir, model)
    model.chmod(0o555)
    rc, _, err = cli("export", "--model", "model", "--onnx", cwd=work)
    one_error(rc, err, "model", "not writable", "--out")
    assert not (model / "onnx").exists()


def _no_home(monkeypatch):
    def home(cls):
        raise RuntimeError("Could not determine home directory.")  # HOME unset, no passwd entry

    monkeypatch.delenv("HOME", raising=False)
    monkeypatch.setattr(Path, "home", classmethod(home))


def test_without_a_home_folder_the_cache_is_koelectra_cache_or_one_line(monkeypatch, tmp_path):
    # Path.home() was the default of os.environ.get: a traceback even with KOELECTRA_CACHE set
    from koelectra_kit.errors import InputError
    from koelectra_kit.io.fileio import cache_dir

    _no_home(monkeypatch)
    monkeypatch.setenv("KOELECTRA_CACHE", str(tmp_path))
    assert cache_dir() == tmp_path
    monkeypatch.delenv("KOELECTRA_CACHE")
    with pytest.raises(InputError, match="KOELECTRA_CACHE"):
        cache_dir()


def test_without_a_home_folder_the_word_cache_is_skipped_with_a_warning(monkeypatch):
    # the word file's path was the first encode's RuntimeError: `label` with a kiwi_word model, a traceback
    from koelectra_kit.tokenizer import wordfile, wordsplit

    _no_home(monkeypatch)
    monkeypatch.delenv("KOELECTRA_CACHE")
    monkeypatch.setenv("KOELECTRA_WORD_FILE", "1")
    monkeypatch.setattr(wordfile, "_STATE", {"path": None, "pid": None, "loaded": False, "stored": 0,
                                             "registered": True})
    from koelectra_kit.runtime import warnings_said

    with warnings_said() as said:
        wordfile.load_into(wordsplit.WordCache(10))
    assert len(said) == 1 and said[0].startswith("no word cache this run") and "KOELECTRA_CACHE" in said[0]
    assert wordfile._STATE["path"] is None  # nothing written at exit
