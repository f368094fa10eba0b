"""One chunk of rows in, the same rows out with the prediction columns added: the part of labelling that
knows nothing about files (``label_dataframe`` is this on a whole DataFrame)."""
from __future__ import annotations

import numpy as np

from ..classify.classifier import placeholder_labels
from ..classify.predictions import check_classifier
from ..errors import ConfigError, InputError
from ..io.labelcols import label_prefixes
from ..io.records import cell_text
from ..io.tables import TEXT_COLUMNS, column_hint, pick_column
from ..io.textcheck import check_text_column, is_blank
from ..runtime import warn
from .dedupe import PredictionCache, predict_once

# A text this many times longer than the model's token budget is cut before tokenizing: the model reads only
# the first max_length tokens anyway, and a 1M-character field must not cost seconds of Kiwi time.
CHARS_PER_TOKEN_CAP = 32
# Rows of a DataFrame or batch whose text column is checked to hold text (``check_text_column``): label checks its
# first chunk, 20,000 rows by default
CHECKED_ROWS = 20_000


def output_columns(labels: list[str], existing: list[str]) -> dict[str, str]:
    """Names of the columns we add; prefixed with ``pred_`` when the input already has one of them."""
    return prefixed(["label", "confidence", *[f"prob_{lab}" for lab in labels], "status"], existing)


def prefixed(names: list[str], existing: list[str]) -> dict[str, str]:
    """``names`` as the columns an output adds: all prefixed with ``pred_`` when the input has one of them already,
    ``pred2_``, ``pred3_``, ... when that is taken too (a file labelled again by another model keeps the first
    model's columns); all or none, so they read as one set."""
    taken = set(map(str, existing))
    prefix = next(p for p in label_prefixes() if not any(p + n in taken for n in names))
    return {n: prefix + n for n in names}


def check_trained_head(clf, allow_generic_labels: bool = False, override: str = "--allow-generic-labels") -> None:
    """Refuse a model whose labels are transformers' placeholders (LABEL_0, LABEL_1, ...): its head was never
    trained for a task, so every label it gives is noise. ``override``: how this command's user says to go on
    anyway (a flag, a config key, or another way: the app has none, so its hint named a flag it refuses)."""
    if allow_generic_labels:
        return
    if placeholder_labels(clf.labels):
        raise InputError(f"{clf.source or 'the model'} has no trained classification head (its labels are "
                         f"{', '.join(clf.labels)}: a pretraining discriminator or a bare encoder?); fine-tune it "
                         f"with `koelectra-kit finetune` first, or {override}")


def load_classifier(model, backend: str = "auto", **options):
    """The classifier a labelling run uses (``Classifier.load``; ``backend``: auto | torch | onnx)."""
    from ..classify.classifier import Classifier

    return Classifier.load(model, backend=backend, **options)


def as_text(v) -> str:
    """A cell as the text label reads (``records.cell_text``: None and NaN empty, bytes as UTF-8); a value that is
    no text (a JSON object) is flagged by the caller before this."""
    return cell_text(v)[0]


def _rounded(col: np.ndarray):
    """A float32 column -> nullable Float64 at 4 decimals, NaN as missing. Equal to Python's round(float(v), 4)
    value by value: a float32 times 10^4 is exact in float64, so np.round meets the same ties, then one correctly
    rounded division (tests/test_label_scale.py); ~20x faster than a list of round() calls."""
    from pandas.arrays import FloatingArray

    vals = np.round(col.astype(np.float64), 4)
    missing = np.isnan(vals)
    return FloatingArray(np.where(missing, 0.0, vals), missing)


def label_chunk(clf, df, text_column: str, errors: list[str | None], batch_size: int | None,
                cache: PredictionCache | None = None):
    """Add the prediction columns to one chunk (a DataFrame of the input columns). ``errors``: per row, why it
    could not be read (it is flagged, not labelled), or None. ``batch_size``: texts per model call (None: the
    classifier's default). ``cache``: reuse the prediction of an identical
    normalized text (in this chunk or an earlier one, counted in ``cache.reused``); None predicts every row."""
    names = output_columns(clf.labels, list(df.columns))
    texts = [as_text(v) for v in df[text_column].tolist()]
    cap = max(4096, CHARS_PER_TOKEN_CAP * clf.max_length)
    status = ["ok"] * len(df)
    todo = []
    for i, (t, err) in enumerate(zip(texts, errors)):
        if err:
            status[i] = f"error: {err}"
        elif is_blank(t):  # what training drops as an empty text (a zero-width space alone too)
            status[i] = "empty"
        else:
            todo.append(i)
    k = len(clf.labels)
    probs = np.full((len(df), k), np.nan, dtype=np.float32)
    label = [""] * len(df)
    if todo:
        found, truncated = predict_once(clf, [texts[i][:cap] for i in todo], batch_size, cache)
        probs[todo] = found
        for j, i in enumerate(todo):
            label[i] = clf.labels[int(found[j].argmax())]  # what Classifier.predict's labels are
            if truncated[j] or len(texts[i]) > cap:
                status[i] = "truncated"
    out = df.copy()
    out[names["label"]] = label
    out[names["confidence"]] = _rounded(np.max(probs, axis=1))  # NaN (no prediction) stays missing
    for j, lab in enumerate(clf.labels):
        out[names[f"prob_{lab}"]] = _rounded(probs[:, j])
    out[names["status"]] = status
    return out, names


def pick_text_column(columns: list, where: str, flag: str = "--text-column", hint: str = "") -> str:
    """The text column where none is named: review, else the first of the usual names present (``TEXT_COLUMNS``, as
    finetune, evaluate and suggest pick it), said in a note; none of them is an error naming ``flag``. ``label`` and
    ``label_dataframe`` alike (``hint``: more to say about ``where``, e.g. a workbook's other sheets)."""
    column = pick_column(columns, None, TEXT_COLUMNS, where)
    if column is None:
        raise InputError(f"{where}: no text column among {columns} (review, text, document, comment, ...); pass "
                         f"{flag} NAME{hint}")
    if column != "review":
        warn(f"note: {where} has no column 'review': labelling its column {column!r} ({flag} names another)")
    return column


def check_model_args(model, classifier) -> None:
    """``model=`` (a folder or hub id) or ``classifier=`` (one loaded): exactly one of them. Both given, ``model`` was
    ignored; ``classifier="folder"`` failed deep inside with an AttributeError."""
    if model is not None and classifier is not None:
        raise ConfigError("model= and classifier= both given: give one (model= a folder or hub id, classifier= a "
                          "loaded Classifier)")
    if classifier is None and model is None:
        raise ConfigError("give model= (a model folder or hub id) or classifier= (a loaded Classifier)")
    if classifier is not None:
        check_classifier(classifier, "classifier", " (or give it as model=)")


def check_load_kwargs(load_kwargs: dict) -> None:
    """``label_dataframe``'s other keywords go to ``Classifier.load``: a mistyped one (bach_size=) is said as a
    config's unknown key is, with its "did you mean", not as load's TypeError."""
    import inspect

    from ..classify.classifier import Classifier
    from ..config import unknown_key_message

    allowed = [n for n in inspect.signature(label_dataframe).parameters if n not in ("df", "load_kwargs")]
    allowed += [n for n in inspect.signature(Classifier.load).parameters if n not in ("cls", "name_or_dir")]
    for key in load_kwargs:
        if key not in allowed:
            raise ConfigError(unknown_key_message(key, allowed, "").replace("config key", "option", 1))


def label_dataframe(df, model=None, text_column: str | None = None, batch_size: int | None = None, classifier=None,
                    allow_generic_labels: bool = False, dedupe: bool = True, human_labels=None, **load_kwargs):
    """Label an in-memory DataFrame: the same columns and rows plus the prediction columns (``dedupe``: one
    prediction per distinct normalized text, the same output; ``human_labels``: a labels file whose labels win, as
    ``label --human-labels``). ``text_column`` None: review, else the first of the usual names present, as ``label``
    picks it (with the same note). ``load_kwargs``: ``Classifier.load``'s options (precision, device, ...)."""
    import pandas as pd

    from ..classify.classifier import Classifier
    from ..classify.predictions import check_batch_size

    if not isinstance(df, pd.DataFrame):
        raise InputError(f"label_dataframe takes a pandas DataFrame, not {type(df).__name__} (a list of dicts: "
                         "pd.DataFrame(rows))")
    check_model_args(model, classifier)
    check_load_kwargs(load_kwargs)
    if classifier is not None and load_kwargs:  # they were dropped without a word (precision="FP16", device=...)
        raise ConfigError(f"{', '.join(load_kwargs)}: how to load model=; a classifier= given is loaded already "
                          "(pass them to Classifier.load)")
    if text_column is None:
        text_column = pick_text_column(list(df.columns), "the DataFrame", "text_column=")
    if not isinstance(text_column, (str, int)) or isinstance(text_column, bool):
        raise ConfigError(f"text_column={text_column!r}: the name of the one column that holds the texts")
    if text_column not in df.columns:
        raise InputError(f"no column {text_column!r}; columns present: {list(df.columns)}"
                         f"{column_hint(text_column, df.columns)}")
    if (df.columns == text_column).sum() > 1:
        raise InputError(f"column {text_column!r} appears {(df.columns == text_column).sum()} times; rename all but "
                         "the one that holds the texts")
    check_batch_size(batch_size)
    # a rating or id column named as the text is refused, as label refuses it (its first rows, as label's first chunk)
    check_text_column(df[text_column].head(CHECKED_ROWS).tolist(), text_column, list(df.columns), "the DataFrame")
    clf = classifier or Classifier.load(model, **load_kwargs)
    check_trained_head(clf, allow_generic_labels)
    human = None
    if human_labels is not None:  # read (and checked) before the model runs
        from .human import read_human_labels

        human = read_human_labels(human_labels, list(clf.labels))
    cache = PredictionCache(max_rows=0) if dedupe else None
    # a cell that holds no text (a dict or list from JSON, bytes that are not UTF-8) says why, as a file's does
    errors = [cell_text(v)[1] for v in df[text_column].tolist()]
    out, names = label_chunk(clf, df, text_column, errors, batch_size, cache)
    if human is not None:
        from .human import apply_human_labels, human_columns

        apply_human_labels(out, names | human_columns(list(df.columns)), text_column, human.labels)
    return out
