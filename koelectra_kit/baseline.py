"""The bar a transformer has to clear: TF-IDF character n-grams + logistic regression.

    koelectra-kit baseline --config configs/finetune/sentiment.yaml train=reviews.csv dev=dev.csv out=runs/tfidf

Same config, files, columns, label mapping, dev split and subsample as ``finetune`` (it calls the
same ``load_splits``), and the same ``eval.json`` / table / ``confusion.png`` format, so every report
can put the two side by side. Character n-grams need no tokenizer, which suits noisy Korean text
(spacing errors, ㅋㅋㅋ, typos). No model file is written: it retrains in about a minute on 150k rows,
and a pickled scikit-learn model is not something users should be asked to load.
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from .finetune.config import FinetuneConfig
from .finetune.data import format_data_report, load_splits
from .finetune.output import check_out_dir
from .runtime import log


def run_baseline(cfg: FinetuneConfig) -> dict:
    """Fit on train, score dev; write eval.json, data_report.json, confusion.png to ``cfg.out`` if set."""
    from sklearn.feature_extraction.text import TfidfVectorizer
    from sklearn.linear_model import LogisticRegression

    from .config import dump_yaml
    from .fileio import write_json_atomic, write_text_atomic
    from .metrics import classification_report, format_report

    out = Path(cfg.out) if cfg.out else None
    if out:
        check_out_dir(out)
    splits = load_splits(cfg)
    print(format_data_report(splits.report))
    b = cfg.baseline
    t0 = time.perf_counter()
    # sublinear tf: a review that repeats "ㅋㅋㅋㅋ" ten times is not ten times as funny
    vec = TfidfVectorizer(analyzer=b.analyzer, ngram_range=(b.ngram_min, b.ngram_max), min_df=b.min_df,
                          max_features=b.max_features, sublinear_tf=True, dtype=np.float32)
    x_train = vec.fit_transform(splits.train.texts)
    clf = LogisticRegression(C=b.C, max_iter=b.max_iter,
                             class_weight="balanced" if cfg.class_weights == "balanced" else None)
    clf.fit(x_train, splits.train.y)
    train_s = time.perf_counter() - t0
    pred = clf.classes_[clf.predict_proba(vec.transform(splits.dev.texts)).argmax(1)]
    report = classification_report(splits.dev.y, pred, list(cfg.labels))
    name = f"TF-IDF {b.analyzer} {b.ngram_min}-{b.ngram_max}-grams + logistic regression (C={b.C:g})"
    result = {"model": name, "dev": report,
              "train": {"rows": len(splits.train.y), "features": int(x_train.shape[1]),
                        "train_time_s": round(train_s, 2)}}
    print(format_report(report, title=f"dev ({name})"))
    log(f"fit in {train_s:.1f}s on {len(splits.train.y)} rows, {x_train.shape[1]} features")
    if out:
        out.mkdir(parents=True, exist_ok=True)
        write_json_atomic(out / "eval.json", result)
        write_json_atomic(out / "data_report.json", splits.report)
        write_text_atomic(out / "baseline_config.yaml", dump_yaml(cfg))
        if cfg.plots:
            from .plots import plot_confusion

            plot_confusion(report, out / "confusion.png", title=f"{name}\naccuracy {report['accuracy']:.3f}  "
                                                               f"macro-F1 {report['macro_f1']:.3f}")
        log(f"wrote {out}/ (eval.json, data_report.json{', confusion.png' if cfg.plots else ''})")
    return result
