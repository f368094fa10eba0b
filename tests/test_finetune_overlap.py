"""On a GPU, `finetune` fits its TF-IDF companion (or reference row) in a thread while the model trains
(recipe._background_fit, companions.fit_in_background) and save() takes the fitted model. No GPU here: the
background path is forced on a tiny CPU fine-tune, and must write what the sequential fit writes, start before
training's first step, fail as the sequential fit fails, save after Ctrl-C, and never hold up a failed run's exit.
A CPU run keeps the fit after training, on the main thread."""
from __future__ import annotations

import json
import re
import subprocess
import sys
import textwrap
import threading
import time

import pytest
import torch

from koelectra_kit.classify import references
from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.finetune import recipe

from .fixtures_finetune import TINY_CONFIG

RUN_TIMES = ("train_time_s", "eval_time_s", "tokenize_time_s", "examples_per_s", "threads")


def _args(encoder, sample_dir, out, *extra):
    return ["finetune", "--config", str(TINY_CONFIG), f"model={encoder}", f"train={sample_dir / 'reviews_labelled.csv'}",
            f"out={out}", "epochs=2", "progress=false", "plots=false", "token_cache=false", "precision=fp32", *extra]


def _force_background(monkeypatch):
    """What a CUDA device decides, on this CPU."""
    monkeypatch.setattr(recipe, "_background_fit", lambda device, job, graphs=True: job is not None,
                        raising=False)


class Recorder:
    """Which thread the TF-IDF fit and the training steps ran on, in order. ``references.fit_tfidf`` is the fit under
    both TfidfClassifier.fit (ensemble=tfidf) and the reference row (ensemble=none)."""

    def __init__(self, monkeypatch):
        self.events: list[tuple[str, int]] = []
        self.fit_started = threading.Event()
        self.fit_hold = None  # a callable run inside the fit, before fitting
        self.step_hook = None  # a callable run at each step's start, with the step count
        real_fit, real_step = references.fit_tfidf, recipe.train_step

        def fit(*a, **k):
            self.events.append(("fit", threading.get_ident()))
            self.fit_started.set()
            if self.fit_hold:
                self.fit_hold()
            out = real_fit(*a, **k)
            self.events.append(("fit done", threading.get_ident()))
            return out

        def step(*a, **k):
            if self.step_hook:
                self.step_hook(sum(e == "step" for e, _ in self.events))
            self.events.append(("step", threading.get_ident()))
            return real_step(*a, **k)

        monkeypatch.setattr(references, "fit_tfidf", fit)
        monkeypatch.setattr(recipe, "train_step", step)

    def index(self, name: str, last: bool = False) -> int:
        hits = [i for i, (e, _) in enumerate(self.events) if e == name]
        return hits[-1] if last else hits[0]

    def thread(self, name: str) -> int:
        return next(t for e, t in self.events if e == name)


def _read_eval(folder):
    result = json.loads((folder / "eval.json").read_text(encoding="utf-8"))
    for key in RUN_TIMES:
        result["train"].pop(key)
    return result


def _files(folder):
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


@pytest.mark.parametrize("ensemble, weights", [("tfidf", "none"), ("none", "none"), ("tfidf", "balanced")])
def test_the_background_fit_writes_what_the_sequential_fit_writes(monkeypatch, tmp_path, sample_dir,
                                                                  plain_encoder_dir, ensemble, weights):
    out = tmp_path / "o"  # both runs write the same path: the configs they copy name it
    extra = [f"ensemble={ensemble}", f"class_weights={weights}"]
    assert main(_args(plain_encoder_dir, sample_dir, out, *extra)) == 0
    out.rename(tmp_path / "sequential")
    _force_background(monkeypatch)
    rec = Recorder(monkeypatch)
    assert main(_args(plain_encoder_dir, sample_dir, out, *extra)) == 0
    assert rec.thread("fit") != threading.get_ident()  # (it did run in the background)
    seq, bg = _read_eval(tmp_path / "sequential"), _read_eval(out)
    assert bg["references"] == seq["references"]
    assert bg.get("candidates") == seq.get("candidates")
    assert bg == seq
    if ensemble == "tfidf":
        for sub in ("tfidf", "ensemble"):
            seq_files, bg_files = _files(tmp_path / "sequential" / sub), _files(out / sub)
            assert seq_files and bg_files.keys() == seq_files.keys(), sub
            for name in seq_files:
                assert bg_files[name] == seq_files[name], f"{sub}/{name}"
        settings = json.loads((out / "tfidf" / "classifier.json").read_text(encoding="utf-8"))["settings"]
        assert settings["class_weight"] == (None if weights == "none" else "balanced")  # the companion's weights
    else:
        assert "candidates" not in bg and not (out / "tfidf").exists()
        assert bg["references"]["tfidf"]["name"] == "TF-IDF + logistic regression"


def test_the_background_fit_runs_on_another_thread_from_before_the_first_step(monkeypatch, tmp_path, sample_dir,
                                                                              plain_encoder_dir):
    _force_background(monkeypatch)
    rec = Recorder(monkeypatch)
    began = []
    # the first step waits (a while at most) for the fit to begin: the sequential fit begins only after the last one
    rec.step_hook = lambda n: began.append(rec.fit_started.wait(5)) if n == 0 else None
    assert main(_args(plain_encoder_dir, sample_dir, tmp_path / "o")) == 0
    assert began == [True]
    assert rec.index("fit") < rec.index("step")
    assert rec.thread("fit") != threading.get_ident() == rec.thread("step")
    assert [e for e, _ in rec.events].count("fit") == 1  # fitted once: save() took it, no second fit
    assert (tmp_path / "o" / "tfidf" / "tfidf.safetensors").is_file()


def _failing_fit(monkeypatch, error, threads=None):
    def fit(*a, **k):
        if threads is not None:
            threads.append(threading.get_ident())
        raise error

    monkeypatch.setattr(references, "fit_tfidf", fit)


def test_an_error_in_the_fit_reaches_the_cli_as_the_sequential_fits_does(monkeypatch, capsys, tmp_path, sample_dir,
                                                                         plain_encoder_dir):
    out = tmp_path / "o"
    threads = []
    _failing_fit(monkeypatch, InputError("TF-IDF on 405 training texts: boom (baseline.min_df=2; lower it)"), threads)
    seen = {}
    for path in ("sequential", "background"):
        if path == "background":
            _force_background(monkeypatch)
        rc = main(_args(plain_encoder_dir, sample_dir, out))
        assert (threads.pop() == threading.get_ident()) == (path == "sequential"), path
        seen[path] = rc, re.sub(r"\.o\.partial-\w+", ".o.partial-X", capsys.readouterr().err)
        assert not out.exists() and not list(tmp_path.glob(".o.partial-*")), path  # the staging folder removed
    assert seen["background"] == seen["sequential"]  # the whole of stderr, and the status
    rc, err = seen["background"]
    assert rc == 2 and "Traceback" not in err
    assert err.splitlines()[-1] == "error: TF-IDF on 405 training texts: boom (baseline.min_df=2; lower it)"
    # an unexpected error: the same type and message out of main() on both paths
    monkeypatch.undo()
    _failing_fit(monkeypatch, ValueError("boom"), threads)
    for force in (False, True):
        if force:
            _force_background(monkeypatch)
        with pytest.raises(ValueError, match="^boom$"):
            main(_args(plain_encoder_dir, sample_dir, out, "ensemble=none"))
        assert (threads.pop() == threading.get_ident()) != force and not out.exists()


def test_on_a_cpu_the_fit_runs_after_training_on_the_main_thread(monkeypatch, tmp_path, sample_dir,
                                                                plain_encoder_dir):
    cpu, cuda = torch.device("cpu"), torch.device("cuda")
    assert recipe._background_fit(cuda, lambda: None) is True
    assert recipe._background_fit(cpu, lambda: None) is False  # torch's threads have the cores
    # an eager GPU loop (cuda_graphs off): the host issuing kernels is the step, the fit would take the GIL from it
    assert recipe._background_fit(cuda, lambda: None, graphs=False) is False
    assert recipe._background_fit(cuda, None) is False  # references=false ensemble=none: nothing to fit
    rec = Recorder(monkeypatch)
    assert main(_args(plain_encoder_dir, sample_dir, tmp_path / "o")) == 0
    assert rec.thread("fit") == threading.get_ident()
    assert rec.index("fit") > rec.index("step", last=True)


def test_ctrl_c_during_training_waits_for_the_fit_and_saves_the_run(monkeypatch, tmp_path, sample_dir,
                                                                   plain_encoder_dir):
    _force_background(monkeypatch)
    rec = Recorder(monkeypatch)
    interrupted = threading.Event()

    def ctrl_c(n):
        if n == 3:
            interrupted.set()
            raise KeyboardInterrupt

    rec.step_hook = ctrl_c
    rec.fit_hold = lambda: (interrupted.wait(30), time.sleep(0.5))  # still fitting when save() starts
    out = tmp_path / "o"
    assert main(_args(plain_encoder_dir, sample_dir, out)) == 130  # (an interrupted run's status, saved)
    result = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    assert result["train"]["stopped"] == "interrupted" and result["train"]["steps"] == 3
    assert rec.thread("fit") != threading.get_ident() and rec.index("fit done") > rec.index("step", last=True)
    assert result["candidates"]["scores"]["tfidf"]["macro_f1"] > 0
    assert (out / "tfidf" / "tfidf.safetensors").is_file() and (out / "ensemble").is_dir()


def test_with_no_references_and_no_ensemble_nothing_is_fitted_or_started(monkeypatch, tmp_path, sample_dir,
                                                                         plain_encoder_dir):
    _force_background(monkeypatch)
    rec = Recorder(monkeypatch)
    started = []
    monkeypatch.setattr(recipe, "fit_in_background", lambda job: started.append(job))
    out = tmp_path / "o"
    assert main(_args(plain_encoder_dir, sample_dir, out, "ensemble=none", "references=false")) == 0
    assert started == [] and "fit" not in [e for e, _ in rec.events] and rec.index("step") == 0
    result = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    assert "references" not in result and "candidates" not in result and not (out / "tfidf").exists()


def test_a_second_ctrl_c_while_save_waits_for_the_fit_stops_at_once_and_writes_nothing(monkeypatch, capsys,
                                                                                       tmp_path, sample_dir,
                                                                                       plain_encoder_dir,
                                                                                       terminal_sigint):
    """The first Ctrl-C during training saves the run (above), and save() then waits for the fit; a second Ctrl-C
    there stops the run: OUT is not written, the staging folder goes, and the fit is left behind."""
    import os
    import signal
    from concurrent.futures import Future

    from koelectra_kit.finetune import companions

    _force_background(monkeypatch)
    rec = Recorder(monkeypatch)
    release, waiting = threading.Event(), threading.Event()
    rec.fit_hold = lambda: release.wait(60)
    rec.step_hook = lambda n: (_ for _ in ()).throw(KeyboardInterrupt) if n == 3 else None  # the first Ctrl-C

    class Watched(Future):
        def result(self, timeout=None):
            waiting.set()
            return super().result(timeout)

    monkeypatch.setattr(companions, "Future", Watched)

    def ctrl_c():  # a real SIGINT, as a terminal sends it, once the main thread waits in result()
        if waiting.wait(60):
            time.sleep(0.2)
            os.kill(os.getpid(), signal.SIGINT)

    threading.Thread(target=ctrl_c, daemon=True).start()
    out = tmp_path / "o"
    try:
        rc = main(_args(plain_encoder_dir, sample_dir, out))
        assert waiting.is_set() and "fit done" not in [e for e, _ in rec.events]  # it was still fitting
    finally:
        release.set()
    err = capsys.readouterr().err
    assert rc == 130 and err.splitlines()[-1].startswith("interrupted: ") and "Traceback" not in err
    assert not out.exists() and not list(tmp_path.glob(".o.partial-*"))


def test_a_failed_run_does_not_wait_for_the_fit(monkeypatch, capsys, tmp_path, sample_dir, plain_encoder_dir):
    _force_background(monkeypatch)
    rec = Recorder(monkeypatch)
    release = threading.Event()
    rec.fit_hold = lambda: release.wait(60)

    def broken(n):
        raise InputError("the step broke")

    rec.step_hook = broken
    try:
        rc = main(_args(plain_encoder_dir, sample_dir, tmp_path / "o"))
        assert rec.fit_started.is_set() and not release.is_set()  # main() returned with the fit still running
    finally:
        release.set()
    err = capsys.readouterr().err
    assert rc == 2 and "error: the step broke" in err.splitlines()
    assert not (tmp_path / "o").exists() and not list(tmp_path.glob(".o.partial-*"))


SCRIPT = """
import sys, threading
from koelectra_kit.classify import references
from koelectra_kit.cli import main
from koelectra_kit.errors import InputError
from koelectra_kit.finetune import recipe

recipe._background_fit = lambda device, job, graphs=True: job is not None
real_fit = references.fit_tfidf
started = threading.Event()

def fit(*a, **k):  # scikit-learn fitting, over and over, when the process exits
    started.set()
    while True:
        real_fit(*a, **k)

def step(*a, **k):
    if not started.wait(10):
        raise RuntimeError("the fit did not start beside training")
    raise InputError("the step broke")

references.fit_tfidf, recipe.train_step = fit, step
sys.exit(main(sys.argv[1:]))
"""


def test_a_failed_runs_process_exits_with_the_fit_still_running(tmp_path, sample_dir, plain_encoder_dir):
    """A ThreadPoolExecutor's worker would be joined at exit, here forever."""
    script = tmp_path / "run.py"
    script.write_text(textwrap.dedent(SCRIPT), encoding="utf-8")
    done = subprocess.run([sys.executable, str(script), *_args(plain_encoder_dir, sample_dir, tmp_path / "o")],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 2, done.stderr
    assert "error: the step broke" in done.stderr.splitlines() and "Fatal" not in done.stderr, done.stderr
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("background", [False, True], ids=["sequential", "background"])
@pytest.mark.parametrize("ensemble", ["tfidf", "none"])
def test_ctrl_c_in_the_fit_after_training_keeps_the_trained_model(monkeypatch, capsys, tmp_path, sample_dir,
                                                                  plain_encoder_dir, background, ensemble,
                                                                  terminal_sigint):
    """Training finished and the TF-IDF fit (the companions' or the reference row's) is interrupted: the
    fine-tuned model is written without OUT/tfidf, OUT/ensemble and the reference rows, exit 130 with a line that
    says so. (A CPU run fits after training on the main thread; a GPU run waits for its background fit there.)"""
    import os
    import signal
    from concurrent.futures import Future

    from koelectra_kit.finetune import companions

    rec = Recorder(monkeypatch)
    if background:
        _force_background(monkeypatch)
        waiting = threading.Event()

        class Watched(Future):
            def result(self, timeout=None):
                waiting.set()
                return super().result(timeout)

        monkeypatch.setattr(companions, "Future", Watched)

        def ctrl_c():  # the fit runs in its thread: a real SIGINT reaches the main thread once save() waits
            if waiting.wait(60):
                time.sleep(0.2)
                os.kill(os.getpid(), signal.SIGINT)
                time.sleep(2)  # still fitting when it lands
    else:
        def ctrl_c():
            raise KeyboardInterrupt

    rec.fit_hold = ctrl_c
    out = tmp_path / "o"
    assert main(_args(plain_encoder_dir, sample_dir, out, f"ensemble={ensemble}")) == 130
    err = capsys.readouterr().err
    assert "interrupted while fitting TF-IDF" in err and "without the TF-IDF companions" in err
    assert "Traceback" not in err
    result = json.loads((out / "eval.json").read_text(encoding="utf-8"))
    assert result["train"]["stopped"] != "interrupted" and result["interrupted"] == "tfidf"
    assert "candidates" not in result and "references" not in result
    assert not (out / "tfidf").exists() and not (out / "ensemble").exists()
    assert (out / "model.safetensors").is_file() and (out / "README.md").is_file()
    assert not list(tmp_path.glob(".o.partial-*"))
    from koelectra_kit.classify.classifier import Classifier

    assert len(Classifier.load(out).predict(["좋아요"]).labels) == 1
