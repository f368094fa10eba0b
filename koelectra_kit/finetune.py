"""Fine-tune an ELECTRA (or BERT, or any ``AutoModelForSequenceClassification``) encoder for review
sentiment, or any single-label text classification.

    koelectra-kit finetune --config configs/finetune/sentiment.yaml \\
        model=runs/pretrain/discriminator train=reviews.csv dev=dev.csv out=runs/sentiment

Reads top to bottom like a script:
  1. config (``FinetuneConfig``; YAML + ``key=value`` overrides)
  2. data: columns, label or rating mapping, dropped rows reported, stratified dev split / subsample
  3. tokenizer from the model directory (same normalization as pretraining), texts encoded once
  4. model with a fresh classification head (id2label/label2id set), AdamW with layer-wise lr decay
  5. an explicit training loop: length-grouped dynamic padding, bf16 autocast, evaluation every N
     steps, early stopping and best-checkpoint selection on dev macro-F1, metrics.jsonl
  6. the best checkpoint published atomically as a Hugging Face model directory, with eval.json,
     data_report.json, confusion.png and curves.png beside it.

The data helpers (``read_labelled``, ``load_splits``) are shared with ``evaluate`` and the TF-IDF
``baseline`` so all three read the same rows with the same labels.
"""
from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import numpy as np

from .config import dump_yaml
from .errors import ConfigError, InputError

# ---------------------------------------------------------------------------------------------
# 1. Config
# ---------------------------------------------------------------------------------------------

DEFAULT_LABELS = ["negative", "neutral", "positive"]
# Rating bands, inclusive: "lo-hi:label" or "value:label", comma-separated.
RATING_PRESETS = {
    "stars5": "1-2:negative,3:neutral,4-5:positive",  # 1-5 stars (shops, app stores)
    "nsmc10": "1-4:negative,5-8:neutral,9-10:positive",  # Naver movie 1-10 (nsmc3's own bands)
}
# Column names tried, in order, when text_column / label_column / rating_column are not given.
TEXT_COLUMNS = ("review", "text", "document", "sentence", "comment", "content", "리뷰", "내용", "텍스트", "문장")
LABEL_COLUMNS = ("label", "labels", "sentiment", "class", "라벨", "레이블", "감성", "감정")
RATING_COLUMNS = ("rating", "stars", "star", "score", "별점", "평점")
# File label values that mean the same sentiment; used only when the label set has exactly one
# member of a group, so "긍정" in a file maps to "positive" (and "positive" to "긍정") by itself.
LABEL_ALIASES = (
    {"positive", "pos", "긍정", "긍정적"},
    {"negative", "neg", "부정", "부정적"},
    {"neutral", "neu", "중립", "중립적", "보통"},
)


@dataclass
class BaselineConfig:
    """TF-IDF character n-grams + logistic regression (``koelectra-kit baseline``)."""

    analyzer: Literal["char", "char_wb"] = "char_wb"  # char_wb: n-grams don't cross spaces
    ngram_min: int = 1
    ngram_max: int = 3
    min_df: int = 2  # drop n-grams seen in fewer training texts (noise, typos): smaller, faster
    max_features: int | None = None  # cap the vocabulary (None = all that pass min_df)
    C: float = 1.0  # inverse L2 strength (nsmc3: C=1 beats 2 and 4 by 0.1-0.5 points of macro-F1)
    max_iter: int = 1000


@dataclass
class FinetuneConfig:
    """One fine-tuning run. Defaults are the ELECTRA paper's GLUE recipe (Clark et al. 2020,
    Table 7) where it has one, so ``sentiment.yaml`` only has to name data and paths."""

    # --- inputs and output
    model: str = ""  # pretrained encoder: a local HF model dir (ours or e.g. KcELECTRA) or a hub id
    train: str = ""  # labelled table: .csv .tsv .jsonl .parquet
    dev: str | None = None  # None: a stratified dev_fraction of train, seeded, reported
    out: str = ""  # output model dir (replaced atomically at the end; never half-written)
    init: Literal["pretrained", "random"] = "pretrained"  # random: same architecture, no pretraining (a control run)
    format: str | None = None  # csv|tsv|jsonl|parquet; None = from the file extension
    encoding: str | None = None  # None = detect (utf-8, utf-8 with BOM, cp949/EUC-KR)
    text_column: str | None = None  # None = first present of review, text, document, sentence, ...
    label_column: str | None = None  # None = 'label' (or another usual name) unless a rating is used
    rating_column: str | None = None  # use a numeric rating instead of a label column (needs rating_map)
    rating_map: str | None = None  # stars5 | nsmc10 | explicit bands "1-2:negative,3:neutral,4-5:positive"
    # Label set, in class-index order (= logits columns, confusion-matrix order). Ordered from bad to
    # good so the confusion matrix reads like the rating scale. Any names work (binary, 긍정/부정/중립).
    labels: list[str] = field(default_factory=lambda: list(DEFAULT_LABELS))
    label_map: dict[str, str] = field(default_factory=dict)  # file value -> label, e.g. {0: negative, 1: positive}
    # Rows whose label (or rating) maps to no label: false = error with counts and examples (default,
    # so a typo never silently shrinks a class), true = drop them and report the count.
    drop_unknown_labels: bool = False
    dev_fraction: float = 0.1  # share of train held out per class when there is no dev file
    max_train_rows: int | None = None  # stratified, seeded subsample of train (CPU budgets)

    # --- training (ELECTRA paper: lr 3e-4 Small / 1e-4 Base / 5e-5 Large, layer decay 0.8,
    # warm-up 10%, batch 32, 3 epochs, Adam eps 1e-6)
    max_length: int = 128  # tokens incl. [CLS]/[SEP]; longer texts are truncated (count reported)
    epochs: float = 3.0  # may be fractional (0.5 = half an epoch)
    batch_size: int = 32
    lr: float | None = None  # peak lr of the top layer; None = by width: <=256: 3e-4, <=768: 1e-4, else 5e-5
    layer_decay: float = 0.8  # layer l of L gets lr * decay^(L+1-l); embeddings decay^(L+1); head 1
    warmup_ratio: float = 0.1  # linear warm-up over this share of steps, then linear decay to 0
    weight_decay: float = 0.01  # AdamW, not on biases/LayerNorm (the paper used 0; 0.01 is HF's usual)
    adam_eps: float = 1e-6
    grad_clip: float = 1.0  # max global grad norm (0 = off)
    class_weights: Literal["none", "balanced"] = "none"  # balanced: loss weight n/(k*n_c) per class
    eval_every: int = 0  # steps between dev evaluations; 0 = auto: 4 per epoch, fewer if dev is big next to train. Always at the end.
    patience: int = 0  # stop after this many evaluations without a better dev macro-F1 (0 = never)
    seed: int = 42
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 where fast (AVX512-BF16/AMX CPUs, recent GPUs)
    device: str = "auto"  # auto | cpu | cuda | cuda:1
    group_by_length: bool = True  # batches of similar length (less padding); false = plain shuffle
    eval_batch_size: int = 128
    log_every: int = 20  # steps between train-loss rows in metrics.jsonl
    progress: bool = True  # tqdm progress bar (stderr)
    # Token ids of train/dev are cached as `datasets` Arrow files keyed by tokenizer + texts + max_length, so
    # a second fine-tune of the same data skips Kiwi (~1 min for nsmc3's 150k reviews on 2 cores).
    cache_dir: str | None = None  # None: $KOELECTRA_CACHE or ~/.cache/koelectra-kit
    token_cache: bool = True  # false: always tokenize, write nothing
    plots: bool = True  # confusion.png and curves.png

    baseline: BaselineConfig = field(default_factory=BaselineConfig)

    def validate(self) -> None:
        if len(self.labels) < 2:
            raise ConfigError(f"labels: need at least 2 labels, got {self.labels}")
        if len(set(self.labels)) != len(self.labels) or any(not str(x).strip() for x in self.labels):
            raise ConfigError(f"labels: must be distinct non-empty names, got {self.labels}")
        for src, dst in self.label_map.items():
            if dst not in self.labels:
                raise ConfigError(f"label_map: '{src}' -> '{dst}', but '{dst}' is not in labels {self.labels}")
        if self.rating_map is not None:
            parse_rating_map(self.rating_map)  # raises ConfigError if malformed
        if not 0 < self.dev_fraction < 1:
            raise ConfigError(f"dev_fraction: must be between 0 and 1, got {self.dev_fraction}")
        if self.max_train_rows is not None and self.max_train_rows < len(self.labels):
            raise ConfigError(f"max_train_rows: must be at least the number of labels, got {self.max_train_rows}")
        if self.epochs <= 0 or self.batch_size < 1 or self.max_length < 3:
            raise ConfigError("epochs must be > 0, batch_size >= 1 and max_length >= 3")
        if self.lr is not None and self.lr <= 0:
            raise ConfigError(f"lr: must be positive, got {self.lr}")
        if not 0 < self.layer_decay <= 1:
            raise ConfigError(f"layer_decay: must be in (0, 1] (1 = off), got {self.layer_decay}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup_ratio: must be in [0, 1), got {self.warmup_ratio}")
        if self.eval_every < 0 or self.patience < 0 or self.log_every < 1:
            raise ConfigError("eval_every and patience must be >= 0, log_every >= 1")
        b = self.baseline
        if not 1 <= b.ngram_min <= b.ngram_max:
            raise ConfigError(f"baseline: need 1 <= ngram_min <= ngram_max, got {b.ngram_min}, {b.ngram_max}")


def parse_rating_map(spec: str) -> list[tuple[float, float, str]]:
    """``"1-2:negative,3:neutral,4-5:positive"`` (or a preset name) -> [(lo, hi, label)], inclusive."""
    text = RATING_PRESETS.get(spec, spec)
    bands = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*[:=]\s*(.+?)\s*", part)
        if not m:
            raise ConfigError(f"rating_map: can't read band '{part.strip()}' in '{spec}'; write bands like "
                              f"'1-2:negative,3:neutral,4-5:positive' or use a preset ({', '.join(RATING_PRESETS)})")
        lo = float(m.group(1))
        hi = float(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ConfigError(f"rating_map: band '{part.strip()}' ends below its start")
        bands.append((lo, hi, m.group(3)))
    bands.sort()
    for (lo1, hi1, _), (lo2, _, _) in zip(bands, bands[1:]):
        if lo2 <= hi1:
            raise ConfigError(f"rating_map: bands overlap at {lo2:g} in '{spec}'")
    return bands


# ---------------------------------------------------------------------------------------------
# 2. Data: columns, label mapping, dropped rows (always reported), stratified split
# ---------------------------------------------------------------------------------------------

@dataclass
class Labelled:
    """Rows of one table that made it: texts, class indices, 1-based data-row numbers, report."""

    texts: list[str]
    y: np.ndarray  # int64 class indices into the label set
    rows: np.ndarray  # 1-based row number in the file (header not counted), for reports
    report: dict

    def take(self, idx) -> "Labelled":
        idx = np.asarray(idx, dtype=np.int64)
        return Labelled([self.texts[i] for i in idx], self.y[idx], self.rows[idx], self.report)


def _pick_column(df, given: str | None, candidates: tuple[str, ...], path, what: str) -> str | None:
    from .tables import require_columns

    if given:
        require_columns(df, [given], path)
        return given
    lower = {str(c).strip().casefold(): c for c in df.columns}
    for name in candidates:
        if name.casefold() in lower:
            return lower[name.casefold()]
    return None


def _column_as_str(df, col) -> "list[str]":
    s = df[col]
    return [("" if v is None or (isinstance(v, float) and math.isnan(v)) else str(v)) for v in s.tolist()]


def _norm(value: str) -> str:
    return str(value).strip().casefold()


def label_resolver(labels: list[str], label_map: dict | None = None):
    """A function file value -> label (or None). Tries, in order: the explicit ``label_map``, an
    exact label name, the same ignoring case/spaces, then the built-in Korean/English sentiment
    aliases (긍정/pos/positive ...) when the label set has exactly one label of that meaning."""
    table: dict[str, str] = {}
    for group in LABEL_ALIASES:
        targets = [lab for lab in labels if _norm(lab) in group]
        if len(targets) == 1:
            table.update({alias: targets[0] for alias in group})
    table.update({_norm(lab): lab for lab in labels})
    table.update({_norm(k): v for k, v in (label_map or {}).items()})
    exact = {str(k): v for k, v in (label_map or {}).items()}

    def resolve(value: str) -> str | None:
        if value in exact:
            return exact[value]
        if value in labels:
            return value
        return table.get(_norm(value))

    return resolve


def _examples(rows, texts, values=None, n: int = 3) -> list[str]:
    out = []
    for i in range(min(n, len(rows))):
        t = texts[i] if len(texts[i]) <= 40 else texts[i][:40] + "…"
        out.append(f"row {rows[i]}: {t!r}" + (f" ({values[i]!r})" if values is not None else ""))
    return out


def _read_table(path, fmt: str | None, encoding: str | None):
    """``tables.read_table``, except TSV is read without CSV quoting. TSV has no quoting convention
    and Korean review sets (NSMC and its derivatives) contain unbalanced '"' in the text: parsed
    with CSV quoting, 413 of nsmc3/train.tsv's 150,000 rows silently merge into their neighbours."""
    import csv

    import pandas as pd

    from .tables import check_file, detect_encoding, read_table, table_format

    if table_format(path, fmt) != "tsv":
        return read_table(path, fmt=fmt, encoding=encoding)
    enc = detect_encoding(check_file(path), encoding)
    try:
        return pd.read_csv(path, sep="\t", encoding=enc, dtype=str, keep_default_na=False,
                           quoting=csv.QUOTE_NONE)
    except (pd.errors.ParserError, ValueError) as e:
        raise InputError(f"{path}: could not parse as tsv: {str(e).strip().splitlines()[-1]}") from None
    except pd.errors.EmptyDataError:
        raise InputError(f"{path}: no columns found (empty table)") from None


def read_labelled(path: str | Path, labels: list[str], *, text_column: str | None = None,
                  label_column: str | None = None, rating_column: str | None = None,
                  rating_map: str | None = None, label_map: dict | None = None,
                  drop_unknown_labels: bool = False, fmt: str | None = None,
                  encoding: str | None = None) -> Labelled:
    """Read one labelled table. Empty texts are dropped (counted, with examples); a label or rating
    that maps to no label is an error with counts and examples, or dropped and reported with
    ``drop_unknown_labels``. Nothing is dropped silently: see ``report["dropped"]``."""
    from .tables import detect_encoding, table_format

    df = _read_table(path, fmt, encoding)
    fmt = table_format(path, fmt)
    text_col = _pick_column(df, text_column, TEXT_COLUMNS, path, "text")
    if text_col is None:
        raise InputError(f"{path}: no text column found (tried {', '.join(TEXT_COLUMNS[:6])}, ...); "
                         f"set text_column=; columns present: {', '.join(map(str, df.columns))}")
    if rating_map and not label_column:
        source_col = _pick_column(df, rating_column, RATING_COLUMNS, path, "rating")
        kind = "rating"
    elif rating_column and not label_column:
        raise ConfigError(f"rating_column={rating_column} needs rating_map= "
                          f"({', '.join(RATING_PRESETS)} or bands like '1-2:negative,3:neutral,4-5:positive')")
    else:
        source_col = _pick_column(df, label_column, LABEL_COLUMNS, path, "label")
        kind = "label"
    if source_col is None:
        raise InputError(f"{path}: no {kind} column found (tried {', '.join(LABEL_COLUMNS if kind == 'label' else RATING_COLUMNS)}); "
                         f"set {kind}_column= (or rating_column= with rating_map=); "
                         f"columns present: {', '.join(map(str, df.columns))}")
    for src, dst in (label_map or {}).items():
        if dst not in labels:
            raise ConfigError(f"label_map: '{src}' -> '{dst}', but '{dst}' is not one of the labels {labels}")
    texts = _column_as_str(df, text_col)
    raw = [v.strip() for v in _column_as_str(df, source_col)]
    rows = np.arange(1, len(df) + 1)
    report: dict = {"path": str(path), "format": fmt, "rows_read": len(df), "text_column": str(text_col)}
    if fmt != "parquet":
        report["encoding"] = detect_encoding(path, encoding)

    # Labels: from the rating bands, or resolved from the label column's own names.
    if kind == "rating":
        import pandas as pd

        bands = parse_rating_map(rating_map)
        ratings = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
        band_label: list[str | None] = [None] * len(raw)
        for lo, hi, lab in bands:
            for i in np.flatnonzero((ratings >= lo) & (ratings <= hi)):
                band_label[i] = lab
        report["label_source"] = f"rating column '{source_col}' via {rating_map}"
        resolve = label_resolver(labels)
        mapped = [resolve(b) if b is not None else None for b in band_label]
    else:
        report["label_source"] = f"label column '{source_col}'"
        resolve = label_resolver(labels, label_map)
        cache = {v: resolve(v) for v in set(raw)}
        mapped = [cache[v] for v in raw]
        renamed = {v: m for v, m in cache.items() if m is not None and m != v}
        if renamed:
            report["label_mapping"] = dict(sorted(renamed.items()))

    empty = np.array([not t.strip() for t in texts], dtype=bool)
    unknown = np.array([m is None for m in mapped], dtype=bool) & ~empty
    dropped = {}
    if empty.any():
        idx = np.flatnonzero(empty)
        dropped["empty_text"] = {"count": int(len(idx)), "rows": rows[idx][:10].tolist()}
    if unknown.any():
        idx = np.flatnonzero(unknown)
        values: dict[str, int] = {}
        for i in idx:
            values[raw[i]] = values.get(raw[i], 0) + 1
        top = sorted(values.items(), key=lambda kv: -kv[1])
        shown = ", ".join(f"{v!r} ({c} rows)" for v, c in top[:6]) + (" ..." if len(top) > 6 else "")
        examples = "; ".join(_examples(rows[idx], [texts[i] for i in idx], [raw[i] for i in idx]))
        what = ("ratings fit no band of rating_map " + repr(rating_map)) if kind == "rating" else \
            f"labels are not in the label set {labels}"
        if not drop_unknown_labels:
            hint = ("fix the bands in rating_map=" if kind == "rating" else
                    "map them with label_map={value: label}, change labels=")
            raise InputError(f"{path}: {len(idx)} rows' {what}: {shown}; e.g. {examples}; "
                             f"{hint}, or pass drop_unknown_labels=true to drop these rows")
        dropped["unknown_label"] = {"count": int(len(idx)), "values": dict(top[:20]),
                                    "rows": rows[idx][:10].tolist()}
    keep = ~(empty | unknown)
    if not keep.any():
        raise InputError(f"{path}: no usable rows ({int(empty.sum())} empty texts, "
                         f"{int(unknown.sum())} unknown labels out of {len(df)})")
    index = {lab: i for i, lab in enumerate(labels)}
    y = np.array([index[mapped[i]] for i in np.flatnonzero(keep)], dtype=np.int64)
    report["dropped"] = dropped
    report["rows_kept"] = int(keep.sum())
    report["class_counts"] = {lab: int(c) for lab, c in zip(labels, np.bincount(y, minlength=len(labels)))}
    return Labelled([texts[i] for i in np.flatnonzero(keep)], y, rows[keep], report)


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
    """``n`` indices with each class's share preserved (largest remainder; every class keeps >= 1)."""
    rng = np.random.default_rng(seed)
    classes, counts = np.unique(y, return_counts=True)
    quota = counts * n / len(y)
    take = np.maximum(np.floor(quota).astype(int), 1)
    for i in np.argsort(-(quota - np.floor(quota)))[: max(n - take.sum(), 0)]:
        take[i] += 1
    take = np.minimum(take, counts)
    return np.sort(np.concatenate([rng.choice(np.flatnonzero(y == c), k, replace=False)
                                   for c, k in zip(classes, take)]))


@dataclass
class Splits:
    train: Labelled
    dev: Labelled
    report: dict


def _require_every_class(data: Labelled, labels: list[str], where: str) -> None:
    counts = np.bincount(data.y, minlength=len(labels))
    empty = [lab for lab, c in zip(labels, counts) if c == 0]
    if empty:
        have = ", ".join(f"{lab} {c}" for lab, c in zip(labels, counts))
        raise InputError(f"{where}: no examples of {', '.join(repr(e) for e in empty)} (counts: {have}); "
                         f"add examples or remove the label from labels=")


def load_splits(cfg: FinetuneConfig) -> Splits:
    """Train and dev rows as configured (dev file, or a stratified split of train; optional
    stratified subsample of train), with a report of every choice and every dropped row."""
    if not cfg.train:
        raise ConfigError("train= is required (a labelled .csv/.tsv/.jsonl/.parquet file)")
    kw = dict(text_column=cfg.text_column, label_column=cfg.label_column, rating_column=cfg.rating_column,
              rating_map=cfg.rating_map, label_map=cfg.label_map,
              drop_unknown_labels=cfg.drop_unknown_labels, fmt=cfg.format, encoding=cfg.encoding)
    train = read_labelled(cfg.train, cfg.labels, **kw)
    report: dict = {"labels": list(cfg.labels), "train_file": train.report}
    _require_every_class(train, cfg.labels, f"{cfg.train}")
    if cfg.dev:
        dev = read_labelled(cfg.dev, cfg.labels, **kw)
        report["dev_file"] = dev.report
        report["dev_source"] = f"file {cfg.dev}"
        _require_every_class(dev, cfg.labels, f"{cfg.dev}")
    else:
        counts = np.bincount(train.y, minlength=len(cfg.labels))
        single = [lab for lab, c in zip(cfg.labels, counts) if c < 2]
        if single:
            raise InputError(f"{cfg.train}: {', '.join(map(repr, single))} has a single example, so the dev split "
                             "can't hold one; add examples or give a dev= file")
        tr, dv = stratified_split(train.y, cfg.dev_fraction, cfg.seed)
        train, dev = train.take(tr), train.take(dv)
        report["dev_source"] = f"stratified {cfg.dev_fraction:g} of {cfg.train} (seed {cfg.seed})"
    if cfg.max_train_rows and len(train.y) > cfg.max_train_rows:
        report["train_subsample"] = f"{cfg.max_train_rows} of {len(train.y)} rows, stratified (seed {cfg.seed})"
        train = train.take(stratified_subsample(train.y, cfg.max_train_rows, cfg.seed))
    seen = {t.strip() for t in train.texts}
    overlap = sum(t.strip() in seen for t in dev.texts)
    report["train"] = {"rows": len(train.y), "class_counts": _counts(train.y, cfg.labels)}
    report["dev"] = {"rows": len(dev.y), "class_counts": _counts(dev.y, cfg.labels)}
    report["dev_texts_also_in_train"] = overlap
    return Splits(train, dev, report)


def _counts(y, labels) -> dict:
    return {lab: int(c) for lab, c in zip(labels, np.bincount(y, minlength=len(labels)))}


def format_file_report(f: dict) -> str:
    """One table's part of the report: format, encoding, columns, label mapping, dropped rows."""
    enc = f", {f['encoding']}" if f.get("encoding") else ""
    lines = [f"{f['path']} ({f['format']}{enc}): {f['rows_read']} rows, text column '{f['text_column']}', "
             f"labels from {f['label_source']}"]
    if f.get("label_mapping"):
        lines.append("  label names mapped: " + ", ".join(f"{k!r} -> {v!r}" for k, v in f["label_mapping"].items()))
    for reason, d in f["dropped"].items():
        more = f" values {d['values']}" if "values" in d else ""
        lines.append(f"  dropped {d['count']} rows: {reason.replace('_', ' ')}{more} (rows {d['rows']}"
                     f"{' ...' if d['count'] > len(d['rows']) else ''})")
    lines.append(f"  kept {f['rows_kept']} rows: " + ", ".join(f"{k} {v}" for k, v in f["class_counts"].items()))
    return "\n".join(lines)


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
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------------
# 3. Tokenize once; batches of similar length, padded per batch
# ---------------------------------------------------------------------------------------------

TOKEN_CACHE_FORMAT = 1  # bump when what encode_texts stores changes


def encode_texts(tok, texts: list[str], max_length: int, progress: bool = False, desc: str = "tokenizing",
                 cache_dir: str | Path | None = None) -> tuple[list[list[int]], np.ndarray]:
    """Token ids per text (with [CLS]/[SEP], truncated, unpadded) and a truncated flag per text.

    ``cache_dir``: look the result up in, or store it to, a `datasets` Arrow dataset under
    ``cache_dir/finetune-ids/<key>``; the key hashes the tokenizer's saved files (vocabulary, normalization,
    pre-split settings, Kiwi versions), ``max_length`` and every text, so any change makes a new entry. Arrow
    files hold plain columns (nothing is unpickled) and are written to a temporary directory, renamed when
    complete: a killed run leaves no half-written entry."""
    if cache_dir is None:
        return _encode_uncached(tok, texts, max_length, progress, desc)
    import hashlib

    import datasets
    from datasets import Dataset, load_from_disk

    from .tokenizer import tokenizer_fingerprint

    h = hashlib.blake2b(digest_size=16)
    h.update(f"{TOKEN_CACHE_FORMAT}|{tokenizer_fingerprint(tok)}|{max_length}|{len(texts)}".encode())
    for t in texts:
        h.update(t.encode("utf-8", "surrogatepass") + b"\0")
    path = Path(cache_dir) / "finetune-ids" / h.hexdigest()
    if (path / "state.json").exists():
        try:
            table = load_from_disk(str(path)).data  # memory-mapped Arrow
            ids = table.column("input_ids").to_pylist()
            truncated = np.asarray(table.column("truncated").to_numpy(zero_copy_only=False), dtype=bool)
            print(f"{desc}: {len(ids):,} texts' tokens read from the cache {path}")
            return ids, truncated
        except (OSError, ValueError, KeyError) as e:  # a damaged entry is recomputed, never trusted
            print(f"ignoring the damaged token cache {path} ({str(e).splitlines()[0]})")
    ids, truncated = _encode_uncached(tok, texts, max_length, progress, desc)
    tmp = path.with_name(f"{path.name}.tmp{os.getpid()}")
    quiet = datasets.are_progress_bars_disabled()
    datasets.disable_progress_bars()  # a sub-second save needs no bar of its own
    try:
        Dataset.from_dict({"input_ids": ids, "truncated": truncated.tolist()}).save_to_disk(str(tmp))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(tmp, path)
    except OSError as e:  # a full disk or a read-only cache must not stop the fine-tune
        print(f"could not write the token cache {path}: {e}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
        if not quiet:
            datasets.enable_progress_bars()
    return ids, truncated


def _encode_uncached(tok, texts: list[str], max_length: int, progress: bool, desc: str):
    """Chunked only so the progress bar moves (Kiwi's morpheme split is the slow part, where it runs)."""
    from tqdm.auto import tqdm

    ids: list[list[int]] = []
    truncated: list[bool] = []
    chunk = 4096
    for start in tqdm(range(0, len(texts), chunk), desc=desc, disable=not progress or len(texts) <= chunk,
                      unit_scale=chunk, unit="texts", leave=False):
        enc = tok.encode_batch(texts[start:start + chunk], max_length=max_length, padding=False,
                               truncation=True)
        ids.extend(list(x) for x in enc["input_ids"])
        truncated.extend(bool(t) for t in enc["truncated"])
    return ids, np.array(truncated, dtype=bool)


def length_grouped_batches(lengths: np.ndarray, batch_size: int, rng: np.random.Generator,
                           mega: int = 50) -> list[np.ndarray]:
    """Shuffle, cut into mega-batches of ``mega * batch_size``, sort each by length, slice batches,
    shuffle the batch order. Batches hold similar lengths (little padding) while every epoch still
    sees a fresh random mix, as in HF's LengthGroupedSampler. The longest batch goes first so an
    out-of-memory error shows on step 1, not an hour in."""
    perm = rng.permutation(len(lengths))
    batches = []
    for start in range(0, len(perm), batch_size * mega):
        chunk = perm[start:start + batch_size * mega]
        chunk = chunk[np.argsort(-lengths[chunk], kind="stable")]
        batches += [chunk[i:i + batch_size] for i in range(0, len(chunk), batch_size)]
    batches = [batches[i] for i in rng.permutation(len(batches))]
    longest = int(np.argmax([lengths[b].max() for b in batches]))
    batches[0], batches[longest] = batches[longest], batches[0]
    return batches


def shuffled_batches(n: int, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    perm = rng.permutation(n)
    return [perm[i:i + batch_size] for i in range(0, n, batch_size)]


def collate(ids: list[list[int]], idx, pad_id: int, multiple: int = 1, pad_to: int | None = None):
    """Batch ``ids[idx]`` -> (input_ids, attention_mask) LongTensors [B, T], T = longest in the batch
    (rounded up to ``multiple``; 8 on GPUs for tensor cores) or ``pad_to`` for fixed padding."""
    import torch

    seqs = [ids[i] for i in idx]
    width = pad_to or -(-max(len(s) for s in seqs) // multiple) * multiple
    input_ids = np.full((len(seqs), width), pad_id, dtype=np.int64)
    mask = np.zeros((len(seqs), width), dtype=np.int64)
    for r, s in enumerate(seqs):
        input_ids[r, :len(s)] = s
        mask[r, :len(s)] = 1
    return torch.from_numpy(input_ids), torch.from_numpy(mask)


# ---------------------------------------------------------------------------------------------
# 4. Model with a classification head for our labels; optimizer with layer-wise lr decay
# ---------------------------------------------------------------------------------------------

def _quiet_transformers():
    """Silence transformers' load report and progress bars (we report what matters ourselves);
    returns a function that restores the previous settings."""
    from transformers.utils import logging as hf_logging

    verbosity = hf_logging.get_verbosity()
    bars = hf_logging.is_progress_bar_enabled()
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()

    def restore():
        hf_logging.set_verbosity(verbosity)
        if bars:
            hf_logging.enable_progress_bar()

    return restore


def _source_labels(config) -> list[str] | None:
    """The label names a checkpoint was fine-tuned with, or None for a bare encoder (LABEL_0 ...)."""
    id2label = getattr(config, "id2label", None) or {}
    names = [id2label[i] for i in sorted(id2label)]
    if not names or all(re.fullmatch(r"LABEL_\d+", str(n)) for n in names):
        return None
    return names


def _head_linears(model):
    import torch

    head = getattr(model, "classifier", None) or getattr(model, "score", None)
    if head is None:
        return []
    return [m for m in head.modules() if isinstance(m, torch.nn.Linear)] if not isinstance(head, torch.nn.Linear) else [head]


def align_head(model, source_labels: list[str] | None, labels: list[str]) -> str:
    """Make an already fine-tuned head agree with ``labels``. HF loads a head whenever the shapes
    match, whatever the names mean, so: same names in another order -> permute the output rows;
    other names with the same count -> re-initialize the head; otherwise HF already did (sizes)."""
    import torch

    if source_labels is None:
        return "new classification head"
    if source_labels == labels:
        return f"classification head kept (same labels {labels})"
    linears = _head_linears(model)
    if sorted(source_labels) == sorted(labels) and linears:
        out = linears[-1]
        perm = torch.tensor([source_labels.index(lab) for lab in labels])
        with torch.no_grad():
            out.weight.copy_(out.weight[perm])
            if out.bias is not None:
                out.bias.copy_(out.bias[perm])
        return f"classification head kept, rows reordered {source_labels} -> {labels}"
    if len(source_labels) == len(labels):
        # Re-initialize as HF initializes a fresh head (normal(0, initializer_range), zero bias);
        # model._init_weights is no help here: transformers 5 skips modules it marked initialized.
        std = float(getattr(model.config, "initializer_range", 0.02))
        with torch.no_grad():
            for lin in linears:
                lin.weight.normal_(0.0, std)
                if lin.bias is not None:
                    lin.bias.zero_()
    return f"new classification head (checkpoint had labels {source_labels})"


def load_model(cfg: FinetuneConfig, labels: list[str]):
    """``AutoModelForSequenceClassification`` for the model dir/hub id with our labels set.
    ``ignore_mismatched_sizes`` lets a classifier be re-fine-tuned on another label set. Never
    ``trust_remote_code``: only architectures that ship with transformers load."""
    from transformers import AutoConfig, AutoModelForSequenceClassification

    restore = _quiet_transformers()
    try:
        try:
            source = AutoConfig.from_pretrained(cfg.model, trust_remote_code=False)
            config = AutoConfig.from_pretrained(
                cfg.model, num_labels=len(labels), id2label=dict(enumerate(labels)),
                label2id={lab: i for i, lab in enumerate(labels)},
                problem_type="single_label_classification", trust_remote_code=False)
            if cfg.init == "random":
                model = AutoModelForSequenceClassification.from_config(config, trust_remote_code=False)
                info = {"missing_keys": [], "mismatched_keys": []}
            else:
                model, info = AutoModelForSequenceClassification.from_pretrained(
                    cfg.model, config=config, ignore_mismatched_sizes=True, output_loading_info=True,
                    trust_remote_code=False)
        except (OSError, ValueError, KeyError) as e:
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise InputError(f"model={cfg.model}: can't load a sequence-classification model ({first}); "
                             "give a Hugging Face model dir (config.json + weights) or hub id") from None
    finally:
        restore()
    notes = []
    if cfg.init == "random":
        notes.append("random initialization (init=random): the checkpoint's weights are NOT used")
    else:
        notes.append(align_head(model, _source_labels(source), labels))
        head = ("classifier", "score", "pooler")
        body = [k for k in info["missing_keys"] if not k.split(".")[0] in head and ".pooler." not in k]
        if body:
            notes.append(f"warning: {len(body)} encoder weights were not in the checkpoint and start random "
                         f"(e.g. {sorted(body)[0]}); is {cfg.model} a pretrained encoder?")
    return model, notes


def _layer_depth(name: str, num_layers: int) -> int:
    """0 = embeddings, 1..L = transformer layer, L+1 = everything above (head, pooler)."""
    if "embeddings" in name:  # also ELECTRA's embeddings_project (embedding_size != hidden_size)
        return 0
    m = re.search(r"\.layers?\.(\d+)\.", name)
    return int(m.group(1)) + 1 if m else num_layers + 1


def param_groups(model, lr: float, layer_decay: float, weight_decay: float) -> list[dict]:
    """AdamW groups with layer-wise lr decay as in ELECTRA's fine-tuning: lr * decay^(L+1-depth),
    so the head trains at ``lr`` and lower layers, which hold more general features, move less.
    No weight decay on biases and LayerNorm weights (1-d tensors)."""
    num_layers = int(getattr(model.config, "num_hidden_layers", 0) or 0)
    groups: dict[tuple[int, bool], dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        depth = _layer_depth(name, num_layers)
        no_decay = p.ndim < 2
        g = groups.setdefault((depth, no_decay), {
            "params": [], "lr": lr * layer_decay ** (num_layers + 1 - depth),
            "weight_decay": 0.0 if no_decay else weight_decay, "depth": depth})
        g["params"].append(p)
    return [groups[k] for k in sorted(groups)]


def default_lr(model) -> float:
    """The ELECTRA paper's fine-tuning lr by model width (Small 256, Base 768, Large 1024)."""
    hidden = int(getattr(model.config, "hidden_size", 768))
    return 3e-4 if hidden <= 256 else 1e-4 if hidden <= 768 else 5e-5


# ---------------------------------------------------------------------------------------------
# 5. One training step; evaluation during training
# ---------------------------------------------------------------------------------------------

def predict_logits(model, ids: list[list[int]], *, pad_id: int, device, dtype, batch_size: int = 128,
                   multiple: int = 1) -> np.ndarray:
    """Logits [n, num_labels] (fp32) for pre-tokenized texts, in input order. Batches are formed
    longest-first so padding is minimal; rows are put back in order afterwards."""
    import torch

    from .utils import autocast

    model.eval()
    lengths = np.array([len(x) for x in ids])
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros((len(ids), model.config.num_labels), dtype=np.float32)
    with torch.inference_mode():
        for start in range(0, len(order), batch_size):
            idx = order[start:start + batch_size]
            input_ids, mask = collate(ids, idx, pad_id, multiple)
            with autocast(device, dtype):
                logits = model(input_ids=input_ids.to(device), attention_mask=mask.to(device)).logits
            out[idx] = logits.float().cpu().numpy()
    return out


def train_step(model, optimizer, input_ids, attention_mask, labels, *, device, dtype, class_weights=None,
               grad_clip: float = 1.0, scaler=None) -> float:
    """One optimization step on one batch; returns the loss. (Split out of the loop only so
    benchmarks/bench_finetune.py can time exactly this step against a textbook one.)"""
    import torch

    from .utils import autocast

    model.train()
    with autocast(device, dtype):
        logits = model(input_ids=input_ids.to(device), attention_mask=attention_mask.to(device)).logits
    # Loss in fp32 from the (possibly bf16) logits, so class weights and the softmax stay exact.
    loss = torch.nn.functional.cross_entropy(logits.float(), labels.to(device), weight=class_weights)
    if scaler is not None:  # fp16 needs loss scaling; bf16 and fp32 don't
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    if grad_clip:
        torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    if scaler is not None:
        scaler.step(optimizer)
        scaler.update()
    else:
        optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    return loss.item()


def _cross_entropy(logits: np.ndarray, y: np.ndarray) -> float:
    z = logits - logits.max(axis=1, keepdims=True)
    logp = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
    return float(-logp[np.arange(len(y)), y].mean())


# ---------------------------------------------------------------------------------------------
# 6. Output directory: staged, then published in one rename
# ---------------------------------------------------------------------------------------------

OUTPUT_MARKERS = ("eval.json", "finetune_config.yaml")


def check_out_dir(out: Path) -> None:
    """Refuse to replace a directory that isn't a previous output of ours (e.g. out=. or a model)."""
    if out.exists() and not out.is_dir():
        raise InputError(f"out={out} is a file; give a directory path")
    if out.is_dir() and any(out.iterdir()) and not any((out / m).exists() for m in OUTPUT_MARKERS):
        raise InputError(f"out={out} exists and is not a previous koelectra-kit output (no eval.json); "
                         "choose a new or empty directory")


def make_staging_dir(out: Path) -> Path:
    out.parent.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".{out.name}.partial-", dir=out.parent))


def publish_dir(staging: Path, out: Path) -> None:
    """Move the finished staging dir to ``out``. A previous ``out`` is renamed aside first and
    removed after: readers see the old complete dir or the new complete dir, never a mix."""
    # mkdtemp/mkstemp create owner-only (0700/0600) entries; give the published model the
    # permissions any other file would get (umask), so a shared model dir is readable.
    umask = os.umask(0)
    os.umask(umask)
    staging.chmod(0o777 & ~umask)
    for f in staging.rglob("*"):
        f.chmod((0o777 if f.is_dir() else 0o666) & ~umask)
    if out.exists():
        old = out.with_name(f".{out.name}.old-{os.getpid()}")
        os.rename(out, old)
        os.rename(staging, out)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.rename(staging, out)


# ---------------------------------------------------------------------------------------------
# 7. The run
# ---------------------------------------------------------------------------------------------

def finetune(cfg: FinetuneConfig) -> dict:
    """Train, pick the best dev macro-F1 checkpoint, write ``cfg.out``; returns eval.json's dict."""
    import torch

    from .metrics import classification_report, format_report, plot_confusion, plot_curves
    from .utils import autocast_dtype, resolve_device, set_seed, write_json_atomic, write_text_atomic

    for key in ("model", "out"):
        if not getattr(cfg, key):
            raise ConfigError(f"{key}= is required")
    out = Path(cfg.out)
    check_out_dir(out)
    labels = list(cfg.labels)
    print("resolved config:\n  " + dump_yaml(cfg).rstrip().replace("\n", "\n  "))

    # -- tokenizer and model first: a wrong model path fails in a second, not after reading the data
    from .tokenizer import KoTokenizer

    tok = KoTokenizer.from_pretrained(cfg.model)
    set_seed(cfg.seed)  # the new head's initialization is part of the seeded run
    device = resolve_device(cfg.device)
    dtype = autocast_dtype(device, cfg.precision)
    model, notes = load_model(cfg, labels)
    model.to(device)
    max_pos = getattr(model.config, "max_position_embeddings", None)
    if max_pos and cfg.max_length > max_pos:
        raise ConfigError(f"max_length={cfg.max_length} exceeds the model's max_position_embeddings={max_pos}")

    # -- data and tokens
    splits = load_splits(cfg)
    t0 = time.perf_counter()
    cache = None
    if cfg.token_cache:
        from .tokenizer import default_cache_dir

        cache = Path(cfg.cache_dir) if cfg.cache_dir else default_cache_dir()
    train_ids, train_trunc = encode_texts(tok, splits.train.texts, cfg.max_length, cfg.progress, "tokenizing train",
                                          cache)
    dev_ids, dev_trunc = encode_texts(tok, splits.dev.texts, cfg.max_length, cfg.progress, "tokenizing dev", cache)
    tokenize_s = time.perf_counter() - t0
    lengths = np.array([len(x) for x in train_ids])
    splits.report["tokens"] = {"median": int(np.median(lengths)), "p95": int(np.percentile(lengths, 95)),
                               "max": int(lengths.max()), "max_length": cfg.max_length,
                               "truncated_train": int(train_trunc.sum()), "truncated_dev": int(dev_trunc.sum())}
    print(format_data_report(splits.report))
    y_train = torch.from_numpy(splits.train.y)
    y_dev = splits.dev.y

    # -- optimizer, schedule
    lr = cfg.lr or default_lr(model)
    groups = param_groups(model, lr, cfg.layer_decay, cfg.weight_decay)
    optimizer = torch.optim.AdamW([{k: v for k, v in g.items() if k != "depth"} for g in groups],
                                  lr=lr, eps=cfg.adam_eps, betas=(0.9, 0.999))
    steps_per_epoch = math.ceil(len(train_ids) / cfg.batch_size)
    total_steps = max(1, math.ceil(cfg.epochs * steps_per_epoch))
    warmup = int(cfg.warmup_ratio * total_steps)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer, lambda s: (s + 1) / warmup if s < warmup else max(0.0, (total_steps - s) / max(1, total_steps - warmup)))
    # auto: up to 4 dev evaluations per epoch, fewer when dev is large next to train, so that
    # evaluation (forward only, ~1/3 of a training step per row) stays within ~10% of training time
    evals_per_epoch = min(4, max(1, int(0.3 * len(train_ids) / max(len(dev_ids), 1))))
    eval_every = cfg.eval_every or max(1, steps_per_epoch // evals_per_epoch)
    class_w = None
    if cfg.class_weights == "balanced":
        counts = np.bincount(splits.train.y, minlength=len(labels))
        class_w = torch.tensor(len(splits.train.y) / (len(labels) * counts), dtype=torch.float32, device=device)
    scaler = torch.amp.GradScaler(device.type) if dtype == torch.float16 else None
    multiple = 8 if device.type == "cuda" else 1
    n_params = sum(p.numel() for p in model.parameters())
    for note in notes:
        print(note)
    print(f"model: {type(model).__name__} {n_params / 1e6:.2f}M parameters on {device} "
          f"({str(dtype).replace('torch.', '') if dtype else 'fp32'}); lr {lr:g} (top), layer decay "
          f"{cfg.layer_decay:g} -> embeddings {min(g['lr'] for g in groups):.2g}; "
          f"{total_steps} steps ({cfg.epochs:g} epochs of {steps_per_epoch}), warm-up {warmup}, "
          f"dev every {eval_every} steps")

    # -- train
    staging = make_staging_dir(out)
    try:
        log_path = staging / "metrics.jsonl"
        print(f"metrics: {log_path} (moved to {out} at the end)")
        log_file = open(log_path, "w", encoding="utf-8", buffering=1)
        rows_logged: list[dict] = []

        def log(row: dict) -> None:
            rows_logged.append(row)
            log_file.write(json.dumps(row) + "\n")

        from tqdm.auto import tqdm

        bar = tqdm(total=total_steps, desc="fine-tuning", unit="step", disable=not cfg.progress, dynamic_ncols=True)
        best = {"macro_f1": -1.0, "step": 0, "state": None, "logits": None}
        step, since_best, stopped = 0, 0, "completed"
        train_time = eval_time = 0.0
        run_loss, run_n, run_examples, run_t = 0.0, 0, 0, 0.0
        examples_seen = 0

        def evaluate_now() -> None:
            nonlocal since_best, eval_time
            t = time.perf_counter()
            logits = predict_logits(model, dev_ids, pad_id=tok.pad_token_id, device=device, dtype=dtype,
                                    batch_size=cfg.eval_batch_size, multiple=multiple)
            rep = classification_report(y_dev, logits.argmax(1), labels)
            eval_time += time.perf_counter() - t
            row = {"kind": "eval", "step": step, "epoch": round(step / steps_per_epoch, 3),
                   "loss": _cross_entropy(logits, y_dev), "accuracy": rep["accuracy"], "macro_f1": rep["macro_f1"]}
            log(row)
            if rep["macro_f1"] > best["macro_f1"]:
                # Keep the best weights in memory (CPU copy); written once at the end.
                best.update(macro_f1=rep["macro_f1"], step=step, logits=logits,
                            state={k: v.detach().to("cpu", copy=True) for k, v in model.state_dict().items()})
                since_best = 0
            else:
                since_best += 1
            bar.set_postfix(dev_f1=f"{rep['macro_f1']:.3f}", best=f"{best['macro_f1']:.3f}")

        try:
            epoch = 0
            while step < total_steps and stopped == "completed":
                # A fresh generator per epoch (seeded by seed and epoch): the same run reproduces
                # exactly, and a run continued with more epochs sees the same first epochs.
                erng = np.random.default_rng([cfg.seed, epoch])
                batches = (length_grouped_batches(lengths, cfg.batch_size, erng) if cfg.group_by_length
                           else shuffled_batches(len(lengths), cfg.batch_size, erng))
                for idx in batches:
                    t = time.perf_counter()
                    input_ids, mask = collate(train_ids, idx, tok.pad_token_id, multiple)
                    loss = train_step(model, optimizer, input_ids, mask, y_train[torch.from_numpy(idx)],
                                      device=device, dtype=dtype, class_weights=class_w,
                                      grad_clip=cfg.grad_clip, scaler=scaler)
                    schedule.step()
                    step += 1
                    dt = time.perf_counter() - t
                    train_time += dt
                    run_loss += loss
                    run_n += 1
                    run_examples += len(idx)
                    examples_seen += len(idx)
                    run_t += dt
                    bar.update(1)
                    if step % cfg.log_every == 0 or step == total_steps:
                        log({"kind": "train", "step": step, "epoch": round(step / steps_per_epoch, 3),
                             "loss": run_loss / run_n, "lr": schedule.get_last_lr()[-1],
                             "examples_per_s": run_examples / max(run_t, 1e-9),
                             "elapsed_s": round(train_time + eval_time, 2)})
                        bar.set_postfix(loss=f"{run_loss / run_n:.4f}", best=f"{best['macro_f1']:.3f}")
                        run_loss, run_n, run_examples, run_t = 0.0, 0, 0, 0.0
                    if step % eval_every == 0 or step == total_steps:
                        evaluate_now()
                        if cfg.patience and since_best >= cfg.patience:
                            stopped = "early_stopping"
                            break
                    if step >= total_steps:
                        break
                epoch += 1
        except KeyboardInterrupt:
            # Ctrl-C ends training early but keeps the run: the best checkpoint so far is written.
            stopped = "interrupted"
            print(f"\ninterrupted at step {step}: writing the best checkpoint so far", flush=True)
            if best["state"] is None:
                evaluate_now()
        bar.close()
        log_file.close()

        # -- write the best checkpoint and its report, then publish the directory in one rename
        model.load_state_dict(best["state"])
        model.config.koelectra_kit = {  # read by the predictor: same truncation as in training
            "task": "text-classification", "max_length": cfg.max_length, "labels": labels,
            "source_model": cfg.model, "init": cfg.init}
        restore = _quiet_transformers()
        try:
            model.save_pretrained(staging)
        finally:
            restore()
        tok.save(staging)
        dev_pred = best["logits"].argmax(1)
        report = classification_report(y_dev, dev_pred, labels)
        result = {
            "model": f"{type(model).__name__} from {cfg.model}" + (" (random init)" if cfg.init == "random" else ""),
            "dev": report,
            "best": {"step": best["step"], "epoch": round(best["step"] / steps_per_epoch, 3)},
            "train": {"rows": len(train_ids), "steps": step, "epochs": round(step / steps_per_epoch, 3),
                      "stopped": stopped, "train_time_s": round(train_time, 2), "eval_time_s": round(eval_time, 2),
                      "tokenize_time_s": round(tokenize_s, 2),
                      "examples_per_s": round(examples_seen / max(train_time, 1e-9), 1),
                      "device": str(device), "precision": str(dtype).replace("torch.", "") if dtype else "fp32",
                      "threads": torch.get_num_threads(), "lr": lr, "parameters": n_params},
        }
        write_json_atomic(staging / "eval.json", result)
        write_json_atomic(staging / "data_report.json", splits.report)
        write_text_atomic(staging / "finetune_config.yaml", dump_yaml(cfg))
        if cfg.plots:
            plot_confusion(report, staging / "confusion.png")
            plot_curves(rows_logged, staging / "curves.png", best_step=best["step"])
        publish_dir(staging, out)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    print(format_report(report, title=f"dev (best step {best['step']} of {step}, {stopped})"))
    print(f"train {train_time:.1f}s ({result['train']['examples_per_s']:.0f} examples/s), eval {eval_time:.1f}s; "
          f"wrote {out}/ (model, eval.json, data_report.json, metrics.jsonl"
          f"{', confusion.png, curves.png' if cfg.plots else ''})")
    return result


# ---------------------------------------------------------------------------------------------
# 8. Evaluate a saved classifier on a labelled file (``koelectra-kit evaluate``)
# ---------------------------------------------------------------------------------------------

def evaluate(model_dir: str, data: str, *, out: str | None = None, text_column: str | None = None,
             label_column: str | None = None, rating_column: str | None = None,
             rating_map: str | None = None, label_map: dict | None = None,
             drop_unknown_labels: bool = False, fmt: str | None = None, encoding: str | None = None,
             batch_size: int = 64, device: str = "auto", precision: str = "auto",
             plots: bool = True) -> dict:
    """Score a fine-tuned model dir on a labelled table with the toolkit's predictor (the same code
    path users label with). The label set is the model's own (config.json id2label); file labels
    and ratings are mapped onto it as in fine-tuning. With ``out``: eval.json, confusion.png and
    predictions.csv (one row per kept input row, for error analysis)."""
    from .classifier import Classifier
    from .metrics import classification_report, format_report, plot_confusion
    from .utils import atomic_path, write_json_atomic

    if out:
        check_out_dir(Path(out))
    clf = Classifier.load(model_dir, device=device, precision=precision)
    labels = list(clf.labels)
    rows = read_labelled(data, labels, text_column=text_column, label_column=label_column,
                         rating_column=rating_column, rating_map=rating_map, label_map=label_map,
                         drop_unknown_labels=drop_unknown_labels, fmt=fmt, encoding=encoding)
    print(format_file_report(rows.report))
    missing = [lab for lab, c in rows.report["class_counts"].items() if c == 0]
    t0 = time.perf_counter()
    preds = clf.predict(rows.texts, batch_size=batch_size)
    predict_s = time.perf_counter() - t0
    index = {lab: i for i, lab in enumerate(labels)}
    y_pred = np.array([index[p] for p in preds.labels], dtype=np.int64)
    report = classification_report(rows.y, y_pred, labels)
    result = {"model": str(model_dir), "data": str(data), "dev": report, "data_report": rows.report,
              "predict_time_s": round(predict_s, 2)}
    if missing:
        result["note"] = f"no rows of {missing} in {data}: their F1 is 0 and pulls macro-F1 down"
    print(format_report(report, title=f"{data}"))
    if missing:
        print("note: " + result["note"])
    print(f"predicted {len(rows.y)} rows in {predict_s:.1f}s")
    if out:
        import pandas as pd

        outp = Path(out)
        outp.mkdir(parents=True, exist_ok=True)
        write_json_atomic(outp / "eval.json", result)
        if plots:
            plot_confusion(report, outp / "confusion.png")
        probs = np.asarray(preds.probs)
        table = pd.DataFrame({"row": rows.rows, "text": rows.texts, "label": [labels[i] for i in rows.y],
                              "predicted": preds.labels, "correct": rows.y == y_pred})
        for j, lab in enumerate(labels):
            table[f"prob_{lab}"] = np.round(probs[:, j], 4)
        with atomic_path(outp / "predictions.csv", suffix=".csv") as tmp:
            # utf-8-sig: Excel (the usual viewer for Korean users) needs the BOM to read UTF-8
            table.to_csv(tmp, index=False, encoding="utf-8-sig")
        print(f"wrote {outp}/ (eval.json, predictions.csv{', confusion.png' if plots else ''})")
    return result


__all__ = [
    "FinetuneConfig", "BaselineConfig", "RATING_PRESETS", "DEFAULT_LABELS", "finetune", "read_labelled",
    "load_splits", "label_resolver", "parse_rating_map", "stratified_split", "stratified_subsample",
    "length_grouped_batches", "collate", "encode_texts", "param_groups", "predict_logits", "evaluate",
]
