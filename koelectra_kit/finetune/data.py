"""A run's train and dev rows: the labelled tables read by ``io.labelled`` (columns, label or rating mapping,
dropped rows always reported), the stratified dev split and subsample, and the printed data report.

Shared by ``finetune``, ``distill`` and the TF-IDF ``baseline`` so all three train on the same rows with the
same labels. No torch here: the baseline's data path imports this module alone.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError
from ..io.labelled import (Labelled, class_counts, format_file_report, label_resolver, read_labelled,  # noqa: F401 - re-exported
                           require_every_class)
from .config import DEFAULT_LABELS, FinetuneConfig


def stratified_split(y: np.ndarray, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Per class, hold out round(fraction * n_c) rows (at least 1, never all) -> (train_idx, dev_idx).

    Own code rather than sklearn's train_test_split, which refuses classes with a single member;
    here such a class simply stays in train (and the caller says so)."""
    rng = np.random.default_rng(seed)
    train, dev = [], []
    for c in np.unique(y):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_dev = min(max(round(fraction * len(idx)), 1), len(idx) - 1) if len(idx) >= 2 else 0
        dev.append(idx[:n_dev])
        train.append(idx[n_dev:])
    return np.sort(np.concatenate(train)), np.sort(np.concatenate(dev))


def stratified_subsample(y: np.ndarray, n: int, seed: int) -> np.ndarray:
    """``n`` indices with each class's share preserved (largest remainder; every class keeps >= 1, so a class under
    one row's share is paid for by the largest: 4 of [1000, 10, 10] are 2 + 1 + 1, not 3 + 1 + 1)."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    quota = counts * n / len(y)
    take = np.maximum(np.floor(quota).astype(int), 1)
    for i in np.argsort(-(quota - np.floor(quota)))[: max(n - take.sum(), 0)]:
        take[i] += 1
    take = np.minimum(take, counts)
    while take.sum() > n:  # a class under one row's share still keeps one: taken back from the largest (n >= classes)
        take[int(np.argmax(take))] -= 1
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), k, replace=False)
                                   for c, k in zip(classes, take)]))


@dataclass
class Splits:
    train: Labelled
    dev: Labelled
    report: dict


def read_configured(cfg: FinetuneConfig, path) -> Labelled:
    """The labelled table ``path`` read with ``cfg``'s columns, label map and format (train and dev alike; teach
    mode rereads a TF-IDF start's training file this way)."""
    return read_labelled(path, cfg.labels, text_column=cfg.text_column, label_column=cfg.label_column,
                         rating_column=cfg.rating_column, rating_map=cfg.rating_map, label_map=cfg.label_map,
                         drop_unknown_labels=cfg.drop_unknown_labels, fmt=cfg.format, encoding=cfg.encoding)


def load_splits(cfg: FinetuneConfig) -> Splits:
    """Train and dev rows as configured (dev file, or a stratified split of train; optional
    stratified subsample of train), with a report of every choice and every dropped row."""
    if not cfg.train:
        raise ConfigError("train= is required (a labelled .csv/.tsv/.jsonl/.parquet file, a dataset folder or "
                          "hf:OWNER/NAME:SPLIT)")
    train = read_configured(cfg, cfg.train)
    report: dict = {"labels": list(cfg.labels), "train_file": train.report}
    require_every_class(train, cfg.labels, f"{cfg.train}", _missing_class_fix(cfg, train))
    if cfg.dev:
        dev = read_configured(cfg, cfg.dev)
        report["dev_file"] = dev.report
        report["dev_source"] = f"file {cfg.dev}"
        require_every_class(dev, cfg.labels, f"{cfg.dev}", "add examples or remove the label from labels=, or leave "
                            "out dev= for a stratified split of train")
    else:
        counts = np.bincount(train.y, minlength=len(cfg.labels))
        single = [lab for lab, c in zip(cfg.labels, counts) if c < 2]
        if single:
            has = "has" if len(single) == 1 else "each have"  # one label, or several
            raise InputError(f"{cfg.train}: {', '.join(map(repr, single))} {has} a single example, so the dev split "
                             "can't hold one; add examples or give a dev= file")
        tr, dv = stratified_split(train.y, cfg.dev_fraction, cfg.seed)
        train, dev = train.take(tr), train.take(dv)
        report["dev_source"] = f"stratified {cfg.dev_fraction:g} of {cfg.train} (seed {cfg.seed})"
    if cfg.max_train_rows and len(train.y) > cfg.max_train_rows:
        report["train_subsample"] = f"{cfg.max_train_rows} of {len(train.y)} rows, stratified (seed {cfg.seed})"
        train = train.take(stratified_subsample(train.y, cfg.max_train_rows, cfg.seed))
    seen = {t.strip() for t in train.texts}
    overlap = sum(t.strip() in seen for t in dev.texts)
    if cfg.dev and overlap == len(dev.y):  # dev= is train= (or a copy of it): not a warning's matter
        raise InputError(f"{cfg.dev}: every dev text is also in train= ({cfg.train}), so the dev scores would be "
                         "training scores and the kept checkpoint the most overfit one; give held-out rows as dev=, "
                         "or leave dev= out for a stratified split of train")
    report["train"] = {"rows": len(train.y), "class_counts": class_counts(train.y, cfg.labels)}
    report["dev"] = {"rows": len(dev.y), "class_counts": class_counts(dev.y, cfg.labels)}
    report["dev_texts_also_in_train"] = overlap
    return Splits(train, dev, report)


def _missing_class_fix(cfg: FinetuneConfig, train: Labelled) -> str:
    """What a train file without a label's rows is told to do. With the default label set, which the user may never
    have chosen, the labels its rows have: a 긍정/부정 file read with [negative, neutral, positive] was told to
    "remove the label from labels=", a key it never set."""
    present = [lab for lab, c in class_counts(train.y, cfg.labels).items() if c]
    if cfg.labels != DEFAULT_LABELS or len(present) < 2:
        return "add examples or remove the label from labels="
    return (f"labels= is the default [{','.join(DEFAULT_LABELS)}]: give labels=[{','.join(present)}] for this "
            "file's classes, or add examples")


def format_data_report(rep: dict) -> str:
    """The split report as printed lines: where rows came from, what was dropped and why."""
    lines = [format_file_report(rep[key]) for key in ("train_file", "dev_file") if key in rep]
    lines.append(f"dev: {rep['dev_source']}")
    if rep.get("train_subsample"):
        lines.append(f"train subsample: {rep['train_subsample']}")
    for split in ("train", "dev"):
        counts = rep[split]["class_counts"]
        total = max(rep[split]["rows"], 1)
        lines.append(f"{split}: {rep[split]['rows']} rows  " +
                     "  ".join(f"{lab} {c} ({c / total:.0%})" for lab, c in counts.items()))
    if rep.get("dev_texts_also_in_train"):
        lines.append(f"warning: {rep['dev_texts_also_in_train']} dev texts also appear in train "
                     "(duplicates inflate dev scores)")
    if rep.get("tokens"):
        t = rep["tokens"]
        lines.append(f"tokens per text (train): median {t['median']}, p95 {t['p95']}, max {t['max']}; "
                     f"{t['truncated_train']} train / {t['truncated_dev']} dev texts truncated at max_length={t['max_length']}")
        if t.get("unk_warning"):  # (tokenizer.unknown: much of the text is [UNK], and why)
            lines.append(t["unk_warning"])
    return "\n".join(lines)


def fitted_texts(folder: Path) -> tuple[str, set[str]] | None:
    """(its training file, the texts a classifier folder was fitted on, stripped), from the config it records
    (finetune's or baseline's: the same split and subsample again), or None where that cannot be known."""
    from ..config import load_config
    from ..errors import KitError

    for name in ("finetune_config.yaml", "baseline_config.yaml"):
        path = Path(folder) / name
        if not path.is_file():
            continue
        try:
            cfg = load_config(FinetuneConfig, path)
            # an absolute path only: a relative one (folders saved before paths were kept absolute) is relative to
            # a folder not known here
            if not (cfg.train and Path(cfg.train).is_absolute() and Path(cfg.train).is_file()):
                return None
            return cfg.train, {t.strip() for t in load_splits(cfg).train.texts}
        except KitError:
            return None  # the file changed since, or a config of another version: nothing to compare with
    return None
