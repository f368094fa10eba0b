"""Score a fine-tuned classifier on a labelled table (``koelectra-kit evaluate``) with the toolkit's predictor,
the same code path users label with.

    koelectra-kit evaluate --model runs/sentiment --data test.csv --out runs/sentiment-test
    result = run_evaluate(EvaluateConfig(model="runs/sentiment", data="test.csv"))

The label set is the model's own (config.json id2label); file labels and ratings are mapped onto it as in
fine-tuning (``finetune.data``). With ``out``: eval.json, confusion.png and predictions.csv.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Literal

import numpy as np

from ..config import check_batch_cap, check_not_blank
from ..errors import ConfigError, InputError, KitError
from ..io.csvlines import frame_csv
from ..io.labelled import Labelled, format_file_report, parse_rating_map, read_labelled
from ..io.output import check_not_input, check_report_dir
from ..runtime import log, warn

FORMATS = ("csv", "tsv", "jsonl", "parquet")


@dataclass
class EvaluateConfig:
    STAGE: ClassVar[str] = "evaluate"

    model: str = ""  # fine-tuned classifier folder (output of finetune) or hub id
    data: str = ""  # labelled table: .csv .tsv .jsonl .parquet
    out: str | None = None  # folder for eval.json, confusion.png, predictions.csv; None = print only
    text_column: str | None = None  # None = first present of review, text, document, sentence, ...
    label_column: str | None = None  # None = 'label' (or another usual name) unless a rating is used
    rating_column: str | None = None  # a numeric rating column instead of labels (needs rating_map)
    rating_map: str | None = None  # stars5 | nsmc10 | bands "1-2:negative,3:neutral,4-5:positive"
    # file value -> model label, e.g. {0: negative}; {}: the label_map the model was trained with (its saved config)
    label_map: dict[str, str] = field(default_factory=dict)
    drop_unknown_labels: bool = False  # false: a label outside the model's set is an error; true: drop + report
    format: str | None = None  # csv|tsv|jsonl|parquet; None = from the file extension
    encoding: str | None = None  # None = detect (utf-8, utf-8 with BOM, cp949/EUC-KR)
    batch_size: int = 64  # texts per model call: 1 to 4096
    device: str = "auto"  # auto | cpu | cuda | cuda:1
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 where the hardware is fast at it
    plots: bool = True  # confusion.png (with out)
    # Report the majority class and TF-IDF beside the model (TF-IDF fitted on the model's own training file
    # when its finetune_config.yaml names one that exists here, else 5-fold cross-validated on this file).
    references: bool = True

    def validate(self) -> None:
        for key in ("model", "data"):
            if not getattr(self, key):
                raise ConfigError(f"{key} is required: --{key} ... (or {key}=... )")
        if self.format is not None and self.format not in FORMATS:
            raise ConfigError(f"format={self.format!r}: use one of {', '.join(FORMATS)}")
        if self.rating_map is not None:
            parse_rating_map(self.rating_map)  # raises ConfigError if malformed
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size} must be at least 1")
        check_batch_cap(self.batch_size, "batch_size")
        # out="" printed only, out=" " wrote ./" "/eval.json
        check_not_blank(self, ("out", "text_column", "label_column", "rating_column", "format", "encoding"))


def evaluate(model_dir: str, data: str, *, out: str | None = None, text_column: str | None = None,
             label_column: str | None = None, rating_column: str | None = None,
             rating_map: str | None = None, label_map: dict | None = None,
             drop_unknown_labels: bool = False, fmt: str | None = None, encoding: str | None = None,
             batch_size: int = 64, device: str = "auto", precision: str = "auto",
             plots: bool = True) -> dict:
    """``run_evaluate`` with the options as arguments (``fmt`` is the config's ``format``). Built as ``--config``'s
    keys are (``from_dict``: types checked, batch_size="big" a ConfigError, not a TypeError from inside)."""
    from ..config import from_dict
    from ..io.fileio import path_arg

    model_dir = path_arg(model_dir, "model_dir", "a model folder or hub id (Classifier.load(...).predict scores texts "
                         "in memory)")
    data = path_arg(data, "data", "a labelled file; write a DataFrame to one first (df.to_csv('dev.csv', "
                    "index=False)), or score it in memory with Classifier.load(model).predict(df['review'])")
    if label_map is not None and not isinstance(label_map, dict):
        raise ConfigError(f"label_map: a dict of file value -> model label, not a {type(label_map).__name__}")
    cfg = from_dict(EvaluateConfig, dict(
        model=model_dir, data=data, out=None if out is None else path_arg(out, "out"), text_column=text_column,
        label_column=label_column, rating_column=rating_column, rating_map=rating_map, label_map=dict(label_map or {}),
        drop_unknown_labels=drop_unknown_labels, format=fmt, encoding=encoding, batch_size=batch_size, device=device,
        precision=precision, plots=plots))
    return run_evaluate(cfg)


def run_evaluate(cfg: EvaluateConfig, fitted_texts=None) -> dict:
    """Predict every kept row of ``cfg.data``, print the report; write ``cfg.out`` if set. Returns eval.json's
    dict (its ``dev`` is the report, named so to sit beside a fine-tune's eval.json field for field).
    ``fitted_texts``: a folder -> (its training file, the texts it was fitted on) or None (``finetune.data``'s, handed
    in by the command): a TF-IDF folder or an ensemble's members evaluated on their own training rows are said to be
    (0.90 accuracy on them against 0.58 held out, no word; an encoder folder had the warning)."""
    from .classifier import Classifier, placeholder_labels
    from .metrics import classification_report, format_report

    if cfg.out:
        check_report_dir(Path(cfg.out))
        check_not_input(Path(cfg.out), {"data": cfg.data}, writes=("eval.json", "confusion.png", "predictions.csv"))
    clf = Classifier.load(cfg.model, device=cfg.device, precision=cfg.precision)
    labels = list(clf.labels)
    if not cfg.label_map and placeholder_labels(labels):
        # the file's labels cannot match these: say why, rather than suggest mapping them onto a random head
        raise InputError(f"{cfg.model} has no named labels ({', '.join(labels)}): a pretraining discriminator or a "
                         "bare encoder has no trained classification head; fine-tune it with `koelectra-kit "
                         "finetune` first (a trained classifier with such names: map your labels, label_map=)")
    label_map = cfg.label_map if cfg.rating_map or cfg.rating_column else label_map_for(cfg, labels)
    rows = read_labelled(cfg.data, labels, text_column=cfg.text_column, label_column=cfg.label_column,
                         rating_column=cfg.rating_column, rating_map=cfg.rating_map, label_map=label_map,
                         drop_unknown_labels=cfg.drop_unknown_labels, fmt=cfg.format, encoding=cfg.encoding,
                         labels_of="the model")  # (evaluate has no labels= key: the model's are fixed)
    print(format_file_report(rows.report))
    if fitted_texts is not None:
        warn_fitted_rows(clf, Path(cfg.model), rows.texts, fitted_texts)
    missing = [lab for lab, c in rows.report["class_counts"].items() if c == 0]
    t0 = time.perf_counter()
    preds = clf.predict(rows.texts, batch_size=cfg.batch_size)
    predict_s = time.perf_counter() - t0
    index = {lab: i for i, lab in enumerate(labels)}
    y_pred = np.array([index[p] for p in preds.labels], dtype=np.int64)
    report = classification_report(rows.y, y_pred, labels, scores=np.asarray(preds.probs))
    result = {"model": str(cfg.model), "data": str(cfg.data), "dev": report, "data_report": rows.report,
              "predict_time_s": round(predict_s, 2)}
    if missing:
        result["note"] = f"no rows of {missing} in {cfg.data}: their F1 is 0 and pulls macro-F1 down"
    print(format_report(report, title=f"{cfg.data}"))
    if missing:
        print("note: " + result["note"])
    if cfg.references:
        from .references import format_references

        result["references"] = references_for(cfg, rows, labels)
        print(format_references(report, result["references"], kind=getattr(clf, "kind", None)))
    log(f"predicted {len(rows.y)} rows in {predict_s:.1f}s")
    if cfg.out:
        write_outputs(Path(cfg.out), result, rows, preds, y_pred, labels, cfg.plots)
    return result


# What a toolkit folder records its training run in (finetune's encoder, a TF-IDF folder, finetune's or baseline's).
TRAINING_CONFIGS = ("finetune_config.yaml", "baseline_config.yaml")


def training_label_map(model: str) -> tuple[dict, str] | None:
    """(the label_map ``model`` was trained with, the file that records it), or None: a hub id, a folder that records
    none (or trained on ratings), or an ensemble whose members record different ones (each member's own else)."""
    import os

    from ..config import read_yaml
    from .registry import read_manifest, toolkit_kind

    folder = Path(os.path.expanduser(str(model)))
    if not folder.is_dir():
        return None
    if toolkit_kind(folder) == "ensemble":
        found = [training_label_map(os.path.normpath(folder / m.get("path", "")))
                 for m in read_manifest(folder)["members"]]
        maps = {repr(sorted((str(k), str(v)) for k, v in got[0].items())) for got in found if got}
        return next(got for got in found if got) if len(maps) == 1 else None
    for name in TRAINING_CONFIGS:
        if (folder / name).is_file():
            try:
                saved = read_yaml(folder / name)
            except KitError:
                return None  # changed or damaged since: nothing to go by
            trained = saved.get("label_map")
            if trained and isinstance(trained, dict) and not saved.get("rating_map"):
                return trained, str(folder / name)
            return None
    return None


def label_map_for(cfg: EvaluateConfig, labels: list[str]) -> dict:
    """The label_map ``cfg.data``'s label column is read with: the one given, else the one the model was trained
    with (``training_label_map``), said in a note. A model trained with label_map={1: negative, 0: positive} was
    evaluated only with label_map= typed again, and the usual 0=negative typed instead flipped every score without a
    word: a given one that maps a value otherwise than training did is said in a warning naming both."""
    from ..io.labelled import checked_label_map

    saved = training_label_map(cfg.model)
    if saved is None:
        return cfg.label_map
    trained, source = saved
    try:
        was = checked_label_map(trained, labels)
    except ConfigError:
        return cfg.label_map  # names no label of the model's (its labels were changed since): nothing to go by
    if not cfg.label_map:
        warn(f"note: {cfg.data}'s labels are read with the label_map {cfg.model} was trained with, "
             f"{_shown(trained)} ({source}); give label_map= to read them otherwise")
        return trained
    given = checked_label_map(cfg.label_map, labels)
    differ = sorted(k for k in given.keys() & was.keys() if given[k] != was[k])
    if differ:
        said = ", ".join(f"{k} -> {given[k]} (trained: {was[k]})" for k in differ)
        warn(f"warning: label_map {_shown(cfg.label_map)} is not the one {cfg.model} was trained with, "
             f"{_shown(trained)} ({source}): {said}; the scores are of the label_map given here")
    return cfg.label_map


def _shown(label_map: dict) -> str:
    """A label_map as it is typed: {1: negative, 0: positive}."""
    return "{" + ", ".join(f"{k}: {v}" for k, v in label_map.items()) + "}"


def warn_fitted_rows(clf, folder: Path, texts: list[str], fitted_texts) -> None:
    """A warning for each TF-IDF folder (the model, or an ensemble's members) fitted on some of ``texts``."""
    from .registry import toolkit_kind

    kind = toolkit_kind(folder)
    folders = [folder] if kind == "tfidf" else [folder / m for m in getattr(clf, "paths", [])] if kind else []
    for member in folders:
        got = fitted_texts(member)
        if not got:
            continue
        train, seen = got
        if overlap := sum(t.strip() in seen for t in texts):
            warn(f"warning: {overlap:,} of the {len(texts):,} rows evaluated are among the rows {member} was fitted on "
                 f"(from {train}): its scores here are not held-out ones")


def references_for(cfg: EvaluateConfig, rows: Labelled, labels: list[str]) -> dict:
    """Majority class (of the model's training rows when its data_report.json says, else of this file) and
    TF-IDF (trained on the model's training file when it is here, else cross-validated on this file)."""
    import json

    from ..config import read_yaml
    from .references import cv_tfidf_reference, majority_reference, tfidf_reference

    folder = Path(cfg.model)
    y_train = rows.y
    report_path = folder / "data_report.json"
    if report_path.is_file():
        counts = json.loads(report_path.read_text(encoding="utf-8")).get("train", {}).get("class_counts", {})
        if counts and set(counts) == set(labels):
            y_train = np.repeat(np.arange(len(labels)), [int(counts[lab]) for lab in labels])
    refs = {"majority": majority_reference(y_train, rows.y, labels)}
    train = None
    if (folder / "finetune_config.yaml").is_file():
        saved = read_yaml(folder / "finetune_config.yaml")
        # an absolute path only: a relative one (models saved before the paths were kept absolute) is relative
        # to a folder that is not known here, and read from this one it named another file
        if saved.get("train") and Path(saved["train"]).is_absolute() and Path(saved["train"]).is_file():
            train = saved
    if train is not None:
        try:
            tr = read_labelled(train["train"], labels, text_column=train.get("text_column"),
                               label_column=train.get("label_column"), rating_column=train.get("rating_column"),
                               rating_map=train.get("rating_map"), label_map=train.get("label_map") or {},
                               drop_unknown_labels=True, fmt=train.get("format"), encoding=train.get("encoding"))
            refs["tfidf"] = tfidf_reference(tr.texts, tr.y, rows.texts, rows.y, labels)
            refs["tfidf"]["name"] += " (fitted on the model's training file)"
            seen = set(tr.texts)
            if overlap := sum(t in seen for t in rows.texts):
                # the model and this reference were both fitted on those rows: their scores there are not held out
                # (evaluate on the model's own training file: TF-IDF 0.996, the model 0.48, both on seen rows)
                refs["tfidf"]["overlap_rows"] = overlap
                warn(f"warning: {overlap:,} of the {len(rows.texts):,} rows evaluated are in the model's training file "
                     f"({train['train']}): the model and the TF-IDF reference were fitted on them, so their scores "
                     "here are not held-out ones")
            return refs
        except KitError:
            pass  # the training file changed since: fall back to cross-validation on this file
    refs["tfidf"] = cv_tfidf_reference(rows.texts, rows.y, labels)
    return refs


def write_outputs(out: Path, result: dict, rows: Labelled, preds, y_pred: np.ndarray, labels: list[str],
                  plots: bool) -> None:
    """eval.json, confusion.png and predictions.csv (one row per kept input row, for error analysis)."""
    import pandas as pd

    from ..io.fileio import atomic_path, write_json_atomic

    out.mkdir(parents=True, exist_ok=True)
    write_json_atomic(out / "eval.json", result)
    if plots:
        from ..io.plots import plot_confusion

        plot_confusion(result["dev"], out / "confusion.png")
    else:  # a rerun into the same out= with --no-plots left the last run's matrix beside this run's eval.json
        (out / "confusion.png").unlink(missing_ok=True)
    probs = np.asarray(preds.probs)
    table = pd.DataFrame({"row": rows.rows, "text": rows.texts, "label": [labels[i] for i in rows.y],
                          "predicted": preds.labels, "correct": rows.y == y_pred})
    for j, lab in enumerate(labels):
        table[f"prob_{lab}"] = np.round(probs[:, j], 4)
    if rows.ids is not None:  # the file's own id, as written, first: rows can be joined back to the input
        table.insert(0, rows.report.get("id_column", "id"), rows.ids)
    with atomic_path(out / "predictions.csv", suffix=".csv") as tmp:
        # utf-8-sig: Excel (the usual viewer for Korean users) needs the BOM to read UTF-8
        Path(tmp).write_text(frame_csv(table), encoding="utf-8-sig", newline="")
    log(f"wrote {out}/ (eval.json, predictions.csv{', confusion.png' if plots else ''})")
