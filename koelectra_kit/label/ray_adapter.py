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

from .chunk import check_trained_head, label_chunk, load_classifier
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

    def __call__(self, batch):
        from ..errors import InputError

        if self.text_column not in batch.columns:
            raise InputError(f"no column {self.text_column!r}; columns present: {list(batch.columns)}")
        out, names = label_chunk(self.clf, batch.reset_index(drop=True), self.text_column, [None] * len(batch),
                                 self.batch_size, self.cache)
        if self.human is not None:
            apply_human_labels(out, names | human_columns(list(batch.columns)), self.text_column, self.human.labels)
        return out


def label_dataset(ds, model: str, text_column: str = "review", *, concurrency: int = 1, batch_rows: int = 4096,
                  num_gpus: float = 0, num_cpus: float | None = None, **options):
    """``ds`` with the prediction columns added, lazily (Ray runs it when the result is consumed or written).
    ``model`` must be readable on every node (a shared path, or a hub id). ``concurrency``: actors, i.e. model
    copies; ``batch_rows``: rows per batch (as a chunk in ``label``); ``num_gpus=1``: one GPU per actor;
    ``options``: the rest of ``RayLabeller``'s (batch_size, backend, precision, quantize, threads, dedupe, ...)."""
    from ..errors import ConfigError

    if concurrency < 1 or batch_rows < 1:
        raise ConfigError(f"concurrency={concurrency} and batch_rows={batch_rows} must be at least 1")
    if options.get("human_labels"):  # here, before any actor starts (each reads it against the model's labels)
        check_labels_file(options["human_labels"])
    resources = {"num_gpus": num_gpus} if num_gpus else {}
    if num_cpus is not None:
        resources["num_cpus"] = num_cpus
    return ds.map_batches(RayLabeller, fn_constructor_kwargs={"model": str(model), "text_column": text_column,
                                                               **options},
                          batch_format="pandas", batch_size=batch_rows, concurrency=concurrency, **resources)
