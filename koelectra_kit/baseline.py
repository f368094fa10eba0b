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

from .finetune.config import FinetuneConfig
from .finetune.data import format_data_report, load_splits
from .finetune.output import check_not_input, check_report_dir
from .references import fit_tfidf, format_references, majority_reference, tfidf_predict
from .runtime import log


def run_baseline(cfg: FinetuneConfig) -> dict:
    """Fit on train, score dev; write eval.json, data_report.json, confusion.png to ``cfg.out`` if set."""
    from .config import dump_yaml
    from .fileio import write_json_atomic, write_text_atomic
    from .metrics import classification_report, format_report

    out = Path(cfg.out) if cfg.out else None
    if out:
        check_report_dir(out)
        check_not_input(out, {"train": cfg.train, "dev": cfg.dev},
                        writes=("eval.json", "data_report.json", "baseline_config.yaml", "confusion.png"))
    splits = load_splits(cfg)
    print(format_data_report(splits.report))
    t0 = time.perf_counter()
    vec, clf, name = fit_tfidf(splits.train.texts, splits.train.y, cfg.baseline,
                               class_weight="balanced" if cfg.class_weights == "balanced" else None)
    train_s = time.perf_counter() - t0
    report = classification_report(splits.dev.y, tfidf_predict(vec, clf, splits.dev.texts), list(cfg.labels))
    n_features = len(vec.vocabulary_)
    result = {"model": name, "dev": report,
              "train": {"rows": len(splits.train.y), "features": n_features, "train_time_s": round(train_s, 2)}}
    print(format_report(report, title=f"dev ({name})"))
    majority = majority_reference(splits.train.y, splits.dev.y, list(cfg.labels))
    result["references"] = {"majority": majority}
    print(format_references(report, result["references"]))
    log(f"fit in {train_s:.1f}s on {len(splits.train.y)} rows, {n_features} features")
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
