"""``finetune ensemble=tfidf``: the TF-IDF model and the encoder + TF-IDF ensemble, written beside the encoder in
the same run, and which of the three scored best on dev.

    OUT/             the fine-tuned encoder (a plain transformers folder, as without this option)
    OUT/tfidf/       TF-IDF + logistic regression on the same training rows (``baseline``'s classifier folder)
    OUT/ensemble/    their probabilities averaged with weights chosen on dev (members ``..`` and ``../tfidf``)

On a few thousand labels TF-IDF is often the better model and the ensemble better still (docs/RESULTS.md §5), so
a user gets all three and a line naming the best. The TF-IDF fit is the one the report's reference row needs
anyway: nothing is fitted twice. On a GPU the recipe runs that fit (``tfidf_job``) in a thread while the model
trains (``fit_in_background``) and hands the fitted model to ``write_companions``.
"""
from __future__ import annotations

from concurrent.futures import Future
from pathlib import Path

import numpy as np

NAMES = {"encoder": ".", "tfidf": "tfidf", "ensemble": "ensemble"}


def softmax(logits: np.ndarray) -> np.ndarray:
    z = logits.astype(np.float64) - logits.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def tfidf_job(splits, labels: list[str], cfg):
    """The one TF-IDF fit a fine-tune's output needs, as a call taking no arguments; None when it needs none. With
    ``ensemble=tfidf``: the companion ``TfidfClassifier`` (``write_companions``'s ``tfidf``); with ``ensemble=none``
    and ``references`` on: the reference row's ``(vectorizer, model, name)``, fitted as ``reference_scores`` fits it
    (no class weights; its ``fitted``). The same call wherever it runs, so the same fitted model and files."""
    from functools import partial

    if cfg.ensemble == "tfidf":
        from ..classify.tfidf import TfidfClassifier

        return partial(TfidfClassifier.fit, splits.train.texts, splits.train.y, labels, cfg.baseline,
                       class_weight="balanced" if cfg.class_weights == "balanced" else None)
    if cfg.references:
        from ..classify.references import fit_tfidf

        return partial(fit_tfidf, splits.train.texts, np.asarray(splits.train.y), cfg.baseline)
    return None


def fit_in_background(job) -> Future:
    """``job()`` started in a daemon thread; the Future holds its result or its exception (``result()`` raises
    it as calling ``job()`` there would). Not a ThreadPoolExecutor: its worker is joined when the interpreter exits,
    even after ``shutdown(wait=False, cancel_futures=True)``, so a fine-tune failing early would wait at exit for
    the rest of a fit nobody reads (on 150,000 rows up to ~37 s). An abandoned daemon thread ends with the process."""
    import threading

    future = Future()

    def work():
        future.set_running_or_notify_cancel()
        try:
            future.set_result(job())
        except BaseException as e:  # noqa: BLE001  (handed to whoever takes the result)
            future.set_exception(e)

    threading.Thread(target=work, name="tfidf-fit", daemon=True).start()
    return future


def write_companions(staging: Path, splits, labels: list[str], encoder_logits: np.ndarray, cfg, tfidf=None) -> dict:
    """Fit TF-IDF on ``splits.train`` (``tfidf``: ``tfidf_job``'s model, already fitted), choose the ensemble's
    weights on ``splits.dev`` with the encoder's best dev logits, write ``staging/tfidf`` and ``staging/ensemble``;
    returns eval.json's ``candidates`` block."""
    from .baseline import tfidf_card
    from ..config import dump_yaml
    from .config import with_absolute_paths
    from ..classify.ensemble import choose_weights, ensemble_card, write_ensemble
    from ..io.fileio import write_json_atomic, write_text_atomic
    from ..classify.metrics import classification_report

    y_dev = splits.dev.y
    if tfidf is None:
        tfidf = tfidf_job(splits, labels, cfg)()
    p_tfidf = tfidf.predict(splits.dev.texts).probs.astype(np.float64)
    p_enc = softmax(encoder_logits)
    reports = {"encoder": classification_report(y_dev, p_enc.argmax(1), labels, scores=p_enc),
               "tfidf": classification_report(y_dev, p_tfidf.argmax(1), labels, scores=p_tfidf)}
    weights, grid, reports["ensemble"] = choose_weights([p_enc, p_tfidf], y_dev, labels, cfg.ensemble_grid_step)

    tfidf_dir = staging / "tfidf"
    tfidf.save(tfidf_dir)
    tf_name = tfidf.settings["name"]
    write_json_atomic(tfidf_dir / "eval.json", {"model": tf_name, "dev": reports["tfidf"],
                                                "train": {"rows": len(splits.train.y)}})
    write_text_atomic(tfidf_dir / "baseline_config.yaml", dump_yaml(with_absolute_paths(cfg)))
    write_text_atomic(tfidf_dir / "README.md", tfidf_card(tf_name, labels, reports["tfidf"], len(splits.train.y),
                                                          len(tfidf.vectorizer.vocabulary_)))
    ens_dir = staging / "ensemble"
    ens_dir.mkdir()
    write_ensemble(ens_dir, ["..", "../tfidf"], weights, labels)
    write_json_atomic(ens_dir / "eval.json", {
        "model": "ensemble", "members": {"encoder": {"source": "..", "weight": float(weights[0])},
                                         "tfidf": {"source": "../tfidf", "weight": float(weights[1])}},
        "dev": reports["ensemble"], "member_dev": {"encoder": reports["encoder"], "tfidf": reports["tfidf"]},
        "weight_search": {"method": "grid", "step": cfg.ensemble_grid_step, "criterion": "dev macro-F1",
                          "points": grid}})
    write_text_atomic(ens_dir / "README.md", ensemble_card(labels, ["encoder (..)", "tfidf (../tfidf)"], weights,
                                                           reports["ensemble"],
                                                           {"encoder (..)": reports["encoder"],
                                                            "tfidf (../tfidf)": reports["tfidf"]}))
    best = max(reports, key=lambda k: (reports[k]["macro_f1"], k == "encoder"))  # a tie keeps the plain encoder
    return {"best": best, "folder": NAMES[best], "weights": {"encoder": float(weights[0]), "tfidf": float(weights[1])},
            "scores": {k: {"accuracy": r["accuracy"], "macro_f1": r["macro_f1"],
                           **({"binary_accuracy": r["binary"]["accuracy"]} if r.get("binary") else {})}
                       for k, r in reports.items()},
            "tfidf_name": tf_name}


def add_companions(result: dict, staging: Path, splits, labels: list[str], encoder_logits: np.ndarray, cfg,
                   fitted_tfidf) -> dict | None:
    """eval.json's ``candidates`` (``ensemble=tfidf``: OUT/tfidf and OUT/ensemble written, the best of the three
    named) and ``references`` blocks, into ``result``; returns the candidates or None. ``fitted_tfidf()``: the
    background fit's model, or None (fitted here)."""
    candidates = None
    if cfg.ensemble == "tfidf":
        candidates = result["candidates"] = write_companions(staging, splits, labels, encoder_logits, cfg,
                                                             fitted_tfidf())
    if cfg.references:
        from ..classify.references import majority_reference, reference_scores

        if candidates:  # the TF-IDF just fitted is the reference: not fitted a second time
            result["references"] = {
                "majority": majority_reference(splits.train.y, splits.dev.y, labels),
                "tfidf": {"name": "TF-IDF + logistic regression", **candidates["scores"]["tfidf"]}}
        else:
            result["references"] = reference_scores(splits.train.texts, splits.train.y, splits.dev.texts,
                                                    splits.dev.y, labels, cfg.baseline, fitted_tfidf())
    return candidates


def format_candidates(c: dict, out: Path) -> str:
    """Which folder to label with: the three dev scores and the best one's path."""
    s = c["scores"]
    folder = out if c["folder"] == "." else out / c["folder"]
    w = c["weights"]
    return (f"dev macro-F1: encoder {s['encoder']['macro_f1']:.4f}, TF-IDF {s['tfidf']['macro_f1']:.4f}, "
            f"ensemble {s['ensemble']['macro_f1']:.4f} (weights {w['encoder']:g}/{w['tfidf']:g}); best on dev: "
            f"{c['best']} -> koelectra-kit label --model {folder} ...")
