"""What one running app is: the options behind ``koelectra-kit app`` (flags land here), checked before the
model loads or a port opens."""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path

from ..config import check_not_blank
from ..errors import ConfigError, InputError
from ..label.config import MAX_BATCH

MB = 1 << 20
# what the app's user can do with an encoder that has no trained head (label's --allow-generic-labels is no app flag)
APP_OVERRIDE = "teach it in the app: --teach POOL.csv --labels LABELS.csv"


def check_dev_columns(dev: str) -> None:
    """``--dev`` holds a text and a label column by the names each retrain reads it with (``read_dev``, as
    ``finetune`` reads a dev file: review, text, ... and label, sentiment, ...; the app has no keys to name them):
    a file without its label column was found only when the first retrain failed, many answers in. Its header only:
    the labels themselves are checked against the model's by that first retrain."""
    from ..io.labelled import LABEL_COLUMNS
    from ..io.records import read_records
    from ..io.tables import CONFIG_HINTS, TEXT_COLUMNS, detect_encoding, pick_column, table_format

    path = Path(dev)
    fmt = table_format(path)
    enc = "utf-8" if fmt == "parquet" else detect_encoding(path, None, hints=CONFIG_HINTS)
    columns, records = read_records(path, fmt, enc, None)
    getattr(records, "close", lambda: None)()
    columns = [str(c) for c in columns]
    present = ", ".join(columns) or "none"
    for what, names, usual in (("text", TEXT_COLUMNS, "review"), ("label", LABEL_COLUMNS, "label")):
        if pick_column(columns, None, names, dev) is None:
            raise InputError(f"--dev {dev}: no {what} column (none of {', '.join(names[:4])}, ... is present; "
                             f"columns present: {present}); each retrain reads the dev file by these names: rename "
                             f"its column of {'reviews' if what == 'text' else 'labels'} to {usual}")


def check_dev_labels(dev: str, classes: list[str]) -> None:
    """``--dev``'s labels are the app's classes, read as each retrain reads the file (``retrain.read_dev``): a label
    outside them started the app, and then failed every round with the reader's hint to set finetune's label_map= or
    drop_unknown_labels=, keys the app has no flag for."""
    import warnings

    from ..io.labelled import read_labelled
    from .retrain import read_dev

    with warnings.catch_warnings():  # (a dev file `label` wrote: the rounds that read it say so)
        warnings.simplefilter("ignore")
        try:
            read_dev(dev, classes)
            return
        except InputError as e:
            problem = str(e)
        try:  # which labels: the same rows read again, the unknown ones reported instead of refused
            unknown = read_labelled(dev, classes, drop_unknown_labels=True).report["dropped"].get("unknown_label")
            values = (unknown or {}).get("values") or {}
        except InputError:  # no row left: every label is unknown, so each one in the file is named
            values = _labels_outside(dev, classes)
    if not values:  # not its labels (an empty file, every text empty): the reader's own line
        raise InputError(f"--dev {problem}") from None
    shown = ", ".join(f"{v!r} ({n} row{'s' if n != 1 else ''})" for v, n in list(values.items())[:6])
    raise InputError(f"--dev {dev}: labels that are not the app's classes ({', '.join(classes)}): {shown}"
                     f"{' ...' if len(values) > 6 else ''}; each retrain is scored on this file: relabel those rows "
                     "with these classes, or take them out of it")


def _labels_outside(dev: str, classes: list[str]) -> dict[str, int]:
    """{label: rows} of the label column's values that name none of ``classes`` (as the reader matches them)."""
    from ..io.labelled import LABEL_COLUMNS, label_resolver
    from ..io.tables import pick_column, read_table

    try:
        df = read_table(dev)
    except InputError:
        return {}
    column, resolve, values = pick_column(df.columns, None, LABEL_COLUMNS, dev), label_resolver(classes), {}
    for value in (str(v).strip() for v in (df[column] if column is not None else [])):
        if value and resolve(value) is None:
            values[value] = values.get(value, 0) + 1
    return dict(sorted(values.items(), key=lambda kv: -kv[1]))


@dataclass
class AppSettings:
    model: str = ""  # fine-tuned classifier folder (output of finetune): loaded once, at start
    host: str = "127.0.0.1"  # loopback only by default: uploads are the users' customer data
    port: int = 7860
    max_upload_bytes: int = 200 * MB  # larger uploads are refused before (or while) they arrive
    chunk_rows: int | None = None  # rows per labelling chunk; None = 1/50 of the file, 1,000-5,000
    batch_size: int = 128  # as label (LabelConfig.batch_size): at most 4096
    device: str = "auto"
    precision: str = "auto"
    review_rows: int = 20  # least confident rows shown for review
    preview_rows: int = 5  # first rows shown under the column dropdown
    workdir: str | None = None  # a fresh folder is made in it for uploads and results (None: the system's temp)
    # what a request must carry (guard.py): None = a random per-run token when host is not a loopback address and
    # none on loopback; a string = that token, whatever the host
    token: str | None = None
    # --- teach mode (teach.py) and corrections: where answers go, what is asked, how retrains run
    teach: str | None = None  # the pool of unlabelled reviews to ask about (None: no teach mode)
    labels: str | None = None  # LABELS.csv, the append-only log of answers (teach mode and corrections)
    text_column: str | None = None  # the pool's text column; None = the usual names (review, text, 리뷰, ...)
    # labelled file each retrain is scored on, its columns named as finetune looks for them (review, text, ...; label,
    # sentiment, ...); None = a held-out 10% of the labels
    dev: str | None = None
    retrain_every: int = 50  # a background retrain after this many new labels (and on the button)
    encoder: str | None = None  # what retrains start from; None = decided from --model (start.start_point)
    classes: list[str] | None = None  # the label names when --model is an encoder (no classifier to read them from)
    strategy: str = "margin"  # which rows to ask first (suggest/rows.py): margin | entropy | random
    seed: int = 42  # the random first sample's order and each retrain's seed
    retrain_overrides: list[str] = field(default_factory=list)  # extra finetune key=value (after the recipe's)
    # what a round trains (retrain.RECIPES): auto = TF-IDF alone while a bare encoder has under 2,000 labels and
    # no --dev to choose on, else the full recipe; full = finetune + TF-IDF + ensemble every round; tfidf = TF-IDF only
    retrain_recipe: str = "auto"

    def validate(self) -> None:
        if not self.model:
            raise ConfigError("model is required: --model CLASSIFIER_DIR (the output folder of finetune)")
        if not 0 <= self.port <= 65535:
            raise ConfigError(f"port={self.port} is not a TCP port (0-65535)")
        for key in ("max_upload_bytes", "batch_size", "review_rows", "preview_rows"):
            if getattr(self, key) < 1:
                raise ConfigError(f"{key}={getattr(self, key)} must be at least 1")
        if self.chunk_rows is not None and self.chunk_rows < 1:
            raise ConfigError(f"chunk_rows={self.chunk_rows} must be at least 1 (leave it out for automatic)")
        if self.batch_size > MAX_BATCH:  # label's cap: a mistyped 100000 would end in an OOM kill mid-job
            raise ConfigError(f"batch_size={self.batch_size}: at most {MAX_BATCH} texts per model call, as label "
                              "(128-512 is the usual best)")
        if not 0 <= self.seed < 2**32:
            raise ConfigError(f"seed={self.seed}: a seed is a whole number from 0 to {2**32 - 1}")
        if self.token is not None and len(self.token) < 8:
            raise ConfigError("token: at least 8 characters (leave it out for a random one off loopback)")
        # "" for a path was read as not given (--teach "" quietly left teach mode off), " " made a folder " " here
        check_not_blank(self, ("workdir", "teach", "labels", "text_column", "dev", "encoder", "token"))
        if self.workdir and Path(self.workdir).exists() and not Path(self.workdir).is_dir():
            raise ConfigError(f"workdir={self.workdir} is a file; give a folder for uploads and results")
        self._validate_teach()
        if not self.teach:
            self._check_classifier()

    def _check_classifier(self) -> None:
        """A local encoder folder as --model outside teach mode is refused here, with the app's own way on: the
        labeller's refusal (after loading it) ended "or pass --allow-generic-labels", a flag of `label`'s only."""
        from ..classify.classifier import head_labels

        if head_labels(self.model) == []:
            raise ConfigError(f"--model {self.model} has no trained classification head (its labels are "
                              "transformers' placeholders LABEL_0, LABEL_1, ...: a pretraining discriminator or a bare "
                              f"encoder?); fine-tune it with `koelectra-kit finetune` first, or {APP_OVERRIDE}")

    def start_classes(self) -> list[str] | None:
        """The classes teach mode answers in, told from the files without loading a model (as start.start_point
        decides them): a classifier --model's own, else --classes or the default ones; None for a --model that is
        not a local folder (a hub id: loading it tells)."""
        from ..classify.classifier import head_labels
        from ..finetune.config import DEFAULT_LABELS

        if not Path(os.path.expanduser(self.model)).is_dir():
            return None
        return head_labels(self.model) or list(self.classes or DEFAULT_LABELS)

    def _validate_teach(self) -> None:
        from ..suggest.rows import STRATEGIES

        if self.teach and not self.labels:
            raise ConfigError("--teach needs --labels LABELS.csv: the file every answer is appended to")
        if self.labels:
            path = Path(self.labels)
            if path.is_dir() or path.suffix.lower() != ".csv":
                raise ConfigError(f"--labels {self.labels}: give a .csv file (created on the first answer)")
            if not path.parent.is_dir():
                raise ConfigError(f"--labels {self.labels}: the folder {path.parent} does not exist")
            # every answer is appended to it: found out at start, not as the first answer's "internal error"
            if not os.access(path if path.exists() else path.parent, os.W_OK):
                raise ConfigError(f"--labels {self.labels}: can't be written here (read-only file or folder); give "
                                  "a file in a folder you can write to")
        for key in ("dev", "encoder", "classes", "text_column"):
            if getattr(self, key) and not self.teach:
                raise ConfigError(f"--{key.replace('_', '-')} is for teach mode: add --teach POOL.csv")
        if self.dev and not Path(self.dev).is_file():
            raise ConfigError(f"--dev {self.dev}: no such file")
        if self.dev:
            check_dev_columns(self.dev)
        if self.encoder:  # what every retrain starts from: a missing one failed the first retrain, answers later
            from ..hub.modelio import check_model_source

            check_model_source(self.encoder, "--encoder")
        if self.retrain_every < 1:
            raise ConfigError(f"--retrain-every {self.retrain_every}: at least 1 new label between retrains")
        from .retrain import RECIPES

        if self.retrain_recipe not in RECIPES:
            raise ConfigError(f"--retrain-recipe {self.retrain_recipe}: use one of {', '.join(RECIPES)}")
        if self.strategy not in STRATEGIES:
            raise ConfigError(f"--strategy {self.strategy}: use one of {', '.join(STRATEGIES)}")
        if self.classes is not None and (len(self.classes) < 2 or len(set(self.classes)) != len(self.classes)
                                         or not all(c.strip() for c in self.classes)):
            raise ConfigError(f"--classes {','.join(self.classes) or repr('')}: at least 2 distinct names")
        if self.dev and (classes := self.start_classes()):  # after --classes: the dev file is read against them
            check_dev_labels(self.dev, classes)

    def run_token(self) -> str | None:
        """The token this run requires: the one given, a fresh random one off loopback, else None."""
        from .guard import is_loopback, new_token

        if self.token is not None:
            return self.token
        return None if is_loopback(self.host) else new_token()

    def chunk_rows_for(self, rows: int) -> int:
        """Rows per chunk: ~50 progress steps, but never under 5,000 rows (the classifier sorts a chunk's texts
        by length to cut padding, and scores batches side by side only from 8 batches a call on: 1,000-row
        chunks labelled at 0.58x `label`'s rows/s in benchmarks/bench_app.py, 5,000-row ones at 0.86-0.88x) nor over
        20,000 (`label`'s own chunk; the bar would sit still for long)."""
        if self.chunk_rows:
            return self.chunk_rows
        return max(5000, min(20000, rows // 50))
