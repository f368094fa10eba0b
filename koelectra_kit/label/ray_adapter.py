"""The same labelling on Ray Data, for more than one machine (``pip install koelectra-kit[ray]``).

    import ray
    from koelectra_kit.label.ray_adapter import label_dataset

    ray.init()                                   # or ray.init("ray://head:10001"): a cluster
    ds = ray.data.read_csv("s3://bucket/reviews/", ...)  # any Ray Data source
    label_dataset(ds, "s3-synced/or/shared/runs/sentiment", text_column="review", concurrency=8) \\
        .write_csv("s3://bucket/labelled/")

Ray schedules, moves data between nodes and retries failed tasks; this module only says what one batch is:
``RayLabeller`` is the actor class ``map_batches`` starts ``concurrency`` copies of, each loading the classifier
once, and each batch goes through ``label_chunk``, the function ``koelectra-kit label`` runs on its chunks (same
columns, same ``status`` values, same deduplication of repeated texts), so a row gets the label ``label`` gives it.
Rows arrive in any order unless ``ray.data.DataContext.get_current().execution_options.preserve_order = True``:
keep an id column. Malformed lines are the reader's business here (Ray's CSV reader raises on them; ``label``
flags them).
"""
from __future__ import annotations

import inspect
import os
from pathlib import Path

from ..io.records import cell_text
from ..io.textcheck import check_text_column
from .chunk import CHECKED_ROWS, check_trained_head, label_chunk, load_classifier
from .dedupe import CACHE_ROWS, PredictionCache
from .human import apply_human_labels, check_labels_file, human_columns, read_human_labels


class RayLabeller:
    """A callable class for ``Dataset.map_batches``: pandas batch in, the same rows with the prediction columns
    out. Built once per actor, so the model is loaded once per worker, not once per batch."""

    def __init__(self, model: str, text_column: str = "review", batch_size: int = 128, backend: str = "auto",
                 device: str = "auto", precision: str = "auto", quantize: bool = False, threads: int | None = None,
                 dedupe: bool = True, cache_rows: int = CACHE_ROWS, allow_generic_labels: bool = False,
                 human_labels: str | None = None):
        self.clf = load_classifier(model, backend, device=device, precision=precision, quantize=quantize,
                                   threads=threads)
        check_trained_head(self.clf, allow_generic_labels)
        # the analyst's labels over the model's, as `label --human-labels` (the file readable on every node)
        self.human = read_human_labels(human_labels, list(self.clf.labels)) if human_labels else None
        self.text_column, self.batch_size = text_column, batch_size
        self.cache = PredictionCache(cache_rows) if dedupe else None  # per actor: repeats it has seen
        self.checked = 0  # rows whose text column was checked to hold text

    def __call__(self, batch):
        from ..errors import InputError

        if self.text_column not in batch.columns:
            raise InputError(f"no column {self.text_column!r}; columns present: {list(batch.columns)}")
        values = batch[self.text_column].tolist()
        if self.checked < CHECKED_ROWS:  # a rating or id column named as the text: refused, as label refuses it
            check_text_column(values, self.text_column, list(batch.columns), "a batch of the dataset")
            self.checked += len(values)
        # a cell that holds no text (a list, a dict, bytes that are not UTF-8) says why, as label's rows do
        out, names = label_chunk(self.clf, batch.reset_index(drop=True), self.text_column,
                                 [cell_text(v)[1] for v in values], self.batch_size, self.cache)
        if self.human is not None:
            apply_human_labels(out, names | human_columns(list(batch.columns)), self.text_column, self.human.labels)
        return out


def label_dataset(ds, model: str, text_column: str = "review", *, concurrency: int = 1, batch_rows: int = 4096,
                  num_gpus: float = 0, num_cpus: float | None = None, **options):
    """``ds`` with the prediction columns added, lazily (Ray runs it when the result is consumed or written).
    ``model`` must be readable on every node (a shared path, or a hub id). ``concurrency``: actors, i.e. model
    copies; ``batch_rows``: rows per batch (as a chunk in ``label``); ``num_gpus=1``: one GPU per actor;
    ``options``: the rest of ``RayLabeller``'s (batch_size, backend, precision, quantize, threads, dedupe, ...)."""
    check_job(ds, model, text_column, concurrency, batch_rows, options)
    resources = {"num_gpus": num_gpus} if num_gpus else {}
    if num_cpus is not None:
        resources["num_cpus"] = num_cpus
    return ds.map_batches(RayLabeller, fn_constructor_kwargs={"model": str(model), "text_column": text_column,
                                                               **options},
                          batch_format="pandas", batch_size=batch_rows, concurrency=concurrency, **resources)


def check_job(ds, model, text_column, concurrency, batch_rows, options) -> None:
    """What the actors would fail on, said here, before any starts: Ray reported a mistyped option, a folder that is
    no model or a missing column from inside a dead actor, wrapped in its own exceptions, after seconds of start-up.
    A model path this machine does not see is left to the actors (a Ray Client driver need not see the cluster's
    shared folder)."""
    from ..classify.classifier import head_labels
    from ..errors import ConfigError, InputError
    from ..hub.modelio import check_model_source
    from ..runtime import check_precision_name

    if not isinstance(model, (str, os.PathLike)) or not str(model).strip():
        raise ConfigError(f"model={model!r}: a model folder or a hub id (a str), as `label --model` takes")
    if not isinstance(text_column, str) or not text_column:
        raise ConfigError(f"text_column={text_column!r}: the name of the column that holds the text (a str)")
    for name, value in (("concurrency", concurrency), ("batch_rows", batch_rows)):
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ConfigError(f"{name}={value!r}: a whole number, at least 1")
    known = [n for n in inspect.signature(RayLabeller.__init__).parameters if n not in ("self", "model", "text_column")]
    unknown = [k for k in options if k not in known]
    if unknown:
        raise ConfigError(f"unknown option(s) {', '.join(unknown)}; label_dataset takes {', '.join(known)}")
    check_precision_name(options.get("precision", "auto"))
    if options.get("human_labels"):  # here, before any actor starts (each reads it against the model's labels)
        check_labels_file(options["human_labels"])
    path = Path(os.path.expanduser(str(model)))
    if path.exists():
        from ..classify.registry import toolkit_kind

        if toolkit_kind(path) is None:
            check_model_source(model)
        if head_labels(path) == [] and not options.get("allow_generic_labels"):
            raise InputError(f"{model} has no trained classification head (its labels are placeholders, LABEL_0 ...: "
                             "a pretraining discriminator or a bare encoder?); fine-tune it with `koelectra-kit "
                             "finetune` first, or allow_generic_labels=True")
    schema = ds.schema(fetch_if_missing=False)  # known without reading anything (from_pandas, from_items), or None
    if schema is not None and text_column not in schema.names:
        raise InputError(f"no column {text_column!r}; columns present: {list(schema.names)}")
