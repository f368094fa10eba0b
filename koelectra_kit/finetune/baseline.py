"""The bar a transformer has to clear: TF-IDF character n-grams + logistic regression.

    koelectra-kit baseline --config configs/finetune/sentiment.yaml train=reviews.csv dev=dev.csv out=runs/tfidf

Same config, files, columns, label mapping, dev split and subsample as ``finetune`` (it calls the
same ``load_splits``), and the same ``eval.json`` / table / ``confusion.png`` format, so every report
can put the two side by side. Character n-grams need no tokenizer, which suits noisy Korean text
(spacing errors, ㅋㅋㅋ, typos). With ``out`` the folder is also a classifier (``tfidf.TfidfClassifier``: JSON
and safetensors, never a pickle) that ``label``, ``evaluate``, the app, ``distill`` and ensembles load like a
fine-tuned model: on a few thousand labels it is often the better labeller (docs/RESULTS.md §5).
"""
from __future__ import annotations

import time
from pathlib import Path

from .config import FinetuneConfig, with_absolute_paths
from .data import format_data_report, load_splits
from ..io.output import check_kind, check_not_input, check_report_dir, replaced_note
from ..classify.references import format_references, majority_reference
from ..io.printed import label_list
from ..runtime import log

WRITES = ("eval.json", "data_report.json", "baseline_config.yaml", "confusion.png", "classifier.json",
          "tfidf.safetensors", "README.md")


def run_baseline(cfg: FinetuneConfig) -> dict:
    """Fit on train, score dev; with ``cfg.out`` write the classifier folder (the model, eval.json,
    data_report.json, confusion.png, README.md), built beside it and swapped in whole."""
    from ..config import dump_yaml
    from ..io.fileio import staged_dir, write_json_atomic, write_text_atomic
    from ..classify.metrics import classification_report, format_report
    from ..classify.tfidf import TfidfClassifier

    out = Path(cfg.out) if cfg.out else None
    if out:
        # a TF-IDF folder (classifier.json) is its own rerun; staged: swapped in whole (below)
        check_report_dir(out, model_files=("config.json",), staged=True)
        check_kind(out, "tfidf")
        check_not_input(out, {"train": cfg.train, "dev": cfg.dev}, writes=WRITES)
        # out= is swapped in whole (staged_dir), not written file by file: an input anywhere in it is lost with it
        # (a train.csv beside an old eval.json was deleted, exit 0), not only one named like a file written here
        check_not_input(out, {"train": cfg.train, "dev": cfg.dev})
    splits = load_splits(cfg)
    print(format_data_report(splits.report))
    labels = list(cfg.labels)
    t0 = time.perf_counter()
    clf = TfidfClassifier.fit(splits.train.texts, splits.train.y, labels, cfg.baseline,
                              class_weight="balanced" if cfg.class_weights == "balanced" else None)
    train_s = time.perf_counter() - t0
    probs = clf.predict(splits.dev.texts).probs
    report = classification_report(splits.dev.y, probs.argmax(1), labels, scores=probs)
    name = clf.settings["name"]
    n_features = len(clf.vectorizer.vocabulary_)
    result = {"model": name, "dev": report,
              "train": {"rows": len(splits.train.y), "features": n_features, "train_time_s": round(train_s, 2)}}
    print(format_report(report, title=f"dev ({name})"))
    majority = majority_reference(splits.train.y, splits.dev.y, labels)
    result["references"] = {"majority": majority}
    print(format_references(report, result["references"], kind=clf.kind))
    log(f"fit in {train_s:.1f}s on {len(splits.train.y)} rows, {n_features} features")
    if out:
        replaced = replaced_note(out)
        with staged_dir(out) as staging:
            clf.save(staging)
            write_json_atomic(staging / "eval.json", result)
            write_json_atomic(staging / "data_report.json", splits.report)
            # local paths absolute: the app's TF-IDF rounds refit on this train=, read from wherever it starts
            write_text_atomic(staging / "baseline_config.yaml", dump_yaml(with_absolute_paths(cfg)))
            write_text_atomic(staging / "README.md", tfidf_card(name, labels, report, len(splits.train.y), n_features))
            if cfg.plots:
                from ..io.plots import plot_confusion

                plot_confusion(report, staging / "confusion.png", title=f"{name}\naccuracy {report['accuracy']:.3f}  "
                                                                       f"macro-F1 {report['macro_f1']:.3f}")
        if replaced:
            log(replaced)
        log(f"wrote {out}/: a classifier folder (classifier.json, tfidf.safetensors) with eval.json, data_report.json"
            f"{', confusion.png' if cfg.plots else ''}; label with `koelectra-kit label --model {out} ...`")
    return result


def tfidf_card(name: str, labels: list[str], report: dict, rows: int, features: int) -> str:
    """README.md of a TF-IDF classifier folder."""
    return f"""# koelectra-kit TF-IDF classifier

{name}, fitted on {rows:,} labelled rows ({features:,} n-gram features). Labels: {label_list(labels)}.
Dev: accuracy {report['accuracy']:.4f}, macro-F1 {report['macro_f1']:.4f}.

A koelectra-kit folder (`classifier.json` with the n-gram vocabulary, `tfidf.safetensors` with idf and the
logistic regression's coefficients; no pickle), read by every command that takes a classifier:

```bash
koelectra-kit label --model THIS_FOLDER --input reviews.csv --output labelled.csv
```

```python
from koelectra_kit.classify.classifier import Classifier
Classifier.load("THIS_FOLDER").predict(["배송 빠르고 좋아요"]).labels
```
"""
