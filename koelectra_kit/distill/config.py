"""What one distillation run is: ``DistillConfig`` (YAML + ``key=value`` overrides, see ``koelectra_kit.config``).
The labelled-data keys have fine-tuning's names and meanings (``data_config`` hands them to ``finetune.data``), so
a distill command reads its train and dev rows exactly as ``finetune`` does."""
from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import check_batch_cap, check_not_blank
from ..errors import ConfigError
from ..finetune.config import BaselineConfig, FinetuneConfig
from ..io.trackers import report_to_names

TFIDF = "tfidf"  # the teacher name of the TF-IDF baseline (fitted on train here)
# ElectraConfig attributes a student shape may set (a random-init student of that shape, the student's vocabulary)
MAX_WEIGHTINGS = 10_000  # teacher weightings scored on dev (simplex grid points): 0.01 with 3 teachers is 5,151
SHAPE_KEYS = ("hidden_size", "num_hidden_layers", "num_attention_heads", "intermediate_size", "embedding_size")
# Keys that change nothing in the trained weights: a resumed run may differ in them.
NOT_TRAINING = ("progress", "resume", "save_every", "save_every_minutes", "eval_batch_size", "teacher_batch_size",
                "log_every", "plots", "references", "cache_dir", "token_cache", "keep_work", "report_to", "out",
                "device")
PATH_KEYS = ("teachers", "transfer", "exclude", "student", "train", "dev")  # compared as absolute paths on a resume


@dataclass
class DistillConfig:
    """A teacher (one or more fine-tuned classifiers and/or TF-IDF) labels unlabelled in-domain text with soft
    probabilities; a student learns them: loss = T^2 KL(teacher_T || student_T) on every row + alpha CE on the
    labelled rows (Hinton et al. 2015). The student is written as an ordinary fine-tuned classifier folder."""

    STAGE: ClassVar[str] = "distill"

    # --- teachers
    teachers: list[str] = field(default_factory=list)  # fine-tuned classifier folders / hub ids, and/or "tfidf"
    # Ensemble weights in ``teachers`` order (one per teacher, non-negative, not all zero, a finite sum); None: the
    # best dev macro-F1 on a grid over the simplex (step below).
    teacher_weights: list[float] | None = None
    weight_step: float = 0.1  # the grid's step: divides 1 into whole steps (0.05, 0.1, 0.25), at most 10,000 points
    teacher_batch_size: int = 64  # texts per teacher call: 1 to 4096
    baseline: BaselineConfig = field(default_factory=BaselineConfig)  # the "tfidf" teacher's knobs

    # --- transfer set: unlabelled text the teacher labels
    transfer: list[str] = field(default_factory=list)  # .txt one text a line, or .csv/.tsv/.jsonl/.parquet tables
    transfer_text_column: str | None = None  # tables: the text column (None: the usual names, see io/tables.py)
    # Transfer texts that also appear (normalized, exact) in these files are dropped: training the student on the
    # teacher's labels of dev inputs would inflate the dev figure. The dev split's own texts are dropped too.
    exclude: list[str] = field(default_factory=list)
    exclude_dev: bool = True
    max_transfer: int | None = None  # a seeded random subset of the transfer texts (CPU budgets)

    # --- student and labelled data (fine-tuning's keys and meanings)
    student: str = ""  # a pretrained encoder folder or hub id (or a fine-tuned classifier)
    init: Literal["pretrained", "random"] = "pretrained"
    # A student of another shape, from random init with the student's vocabulary, e.g. {num_hidden_layers: 2}.
    student_shape: dict[str, int] = field(default_factory=dict)
    train: str = ""  # labelled table: cross-entropy rows (alpha), the TF-IDF teacher's training data
    dev: str | None = None  # None: a stratified dev_fraction of train
    out: str = ""  # the student folder (replaced atomically at the end); its work files go to OUT.work/
    labels: list[str] | None = None  # None: the first classifier teacher's labels (else negative/neutral/positive)
    format: str | None = None
    encoding: str | None = None
    text_column: str | None = None
    label_column: str | None = None
    rating_column: str | None = None
    rating_map: str | None = None
    label_map: dict[str, str] = field(default_factory=dict)
    drop_unknown_labels: bool = False
    dev_fraction: float = 0.1
    max_train_rows: int | None = None

    # --- training
    temperature: float = 2.0  # softens the teacher's and the student's distributions in the KL term
    alpha: float = 0.5  # weight of the cross-entropy on labelled rows (0: soft labels only)
    max_length: int = 128
    epochs: float = 1.0  # over labelled + transfer rows together
    max_minutes: float = 0.0  # also stop after this many minutes of training (0: no time limit); lr decays to it
    batch_size: int = 32
    lr: float | None = None  # None: by width, as fine-tuning
    layer_decay: float = 0.8
    warmup_ratio: float = 0.06
    weight_decay: float = 0.01
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0
    eval_every: int = 0  # steps between dev evaluations (0: up to 4 an epoch, as fine-tuning); always at the end
    seed: int = 42
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    device: str = "auto"
    eval_batch_size: int = 128  # dev rows per model call: 1 to 4096
    log_every: int = 20
    progress: bool = True
    cache_dir: str | None = None  # teacher probabilities and token ids (default $KOELECTRA_CACHE)
    token_cache: bool = True
    references: bool = True  # majority class and TF-IDF beside the student in eval.json
    plots: bool = True  # confusion.png
    # Trackers that get every metrics.jsonl row, as fine-tuning's report_to (none, all, tensorboard, wandb or a
    # list); while the run lasts their files are in OUT.work (a resumed run goes on logging there), then in OUT.
    report_to: str | list[str] = "none"

    # --- checkpoints: a killed run continues from OUT.work/checkpoints when rerun with the same settings
    save_every: int = 500  # steps (0: off)
    save_every_minutes: float = 5.0  # ... or minutes of training (0: off)
    resume: bool = True  # false: start over, discarding OUT.work
    keep_work: bool = False  # keep OUT.work (checkpoints, the transfer list) after the student is written

    def validate(self) -> None:
        if not self.teachers:
            raise ConfigError("teachers is empty: pass teachers=[DIR] (fine-tuned classifier folders and/or tfidf)")
        # runs/a and ./runs/a/ are one teacher (twice, it would double its weight and its labelling pass)
        if len({os.path.normpath(os.path.expanduser(t)) for t in self.teachers}) != len(self.teachers):
            raise ConfigError(f"teachers: each teacher once, got {self.teachers}")
        if self.teacher_weights is not None:
            w = self.teacher_weights
            if len(w) != len(self.teachers) or min(w) < 0 or sum(w) <= 0:
                raise ConfigError(f"teacher_weights {w}: one non-negative weight per teacher ({len(self.teachers)}), "
                                  "not all zero")
            if not math.isfinite(sum(w)):  # [1e308, 1e308] summed to inf: every weight / inf was 0, silently
                raise ConfigError(f"teacher_weights {w}: their sum is past a float's range; give relative weights "
                                  "such as [0.7, 0.3]")
        if not 0 < self.weight_step <= 1:
            raise ConfigError(f"weight_step must be in (0, 1], got {self.weight_step}")
        if abs(round(1 / self.weight_step) * self.weight_step - 1) > 1e-9:
            # 0.3 searched thirds (round(1 / 0.3) steps) and eval.json reported step 0.3, as ensemble refuses it
            raise ConfigError(f"weight_step: must divide 1 into whole steps (0.05, 0.1, 0.25, ...), got "
                              f"{self.weight_step:g}")
        if self.teacher_weights is None and len(self.teachers) > 1:
            # every weighting on the grid is scored on dev: step 0.001 with 3 teachers is 501,501 of them (hours)
            points = math.comb(round(1 / self.weight_step) + len(self.teachers) - 1, len(self.teachers) - 1)
            if points > MAX_WEIGHTINGS:
                raise ConfigError(f"weight_step={self.weight_step:g} with {len(self.teachers)} teachers is "
                                  f"{points:,} weightings to score on dev (at most {MAX_WEIGHTINGS:,}): give a larger "
                                  "weight_step (0.1 is the default), or teacher_weights")
        for key in ("student", "train", "out"):
            if not getattr(self, key):
                raise ConfigError(f"{key}= is required")
        if not self.transfer:
            raise ConfigError("transfer is empty: pass transfer=FILE (or a list) of unlabelled in-domain text")
        bad = sorted(set(self.student_shape) - set(SHAPE_KEYS))
        if bad or any(not isinstance(v, int) or isinstance(v, bool) or v < 1 for v in self.student_shape.values()):
            raise ConfigError(f"student_shape {self.student_shape}: positive integers for {', '.join(SHAPE_KEYS)}")
        if not 0 < self.temperature <= 100:  # the KL term is scaled by T^2: 1e30 overflowed float32 to NaN weights
            raise ConfigError(f"temperature must be above 0 and at most 100 (1-20 are the usual), got "
                              f"{self.temperature}")
        if self.alpha < 0:
            raise ConfigError(f"alpha must be >= 0, got {self.alpha}")
        if self.max_minutes < 0 or self.save_every < 0 or self.save_every_minutes < 0:
            raise ConfigError("max_minutes, save_every and save_every_minutes must be >= 0")
        if self.max_transfer is not None and self.max_transfer < 1:
            raise ConfigError(f"max_transfer must be >= 1, got {self.max_transfer}")
        if self.teacher_batch_size < 1:
            raise ConfigError("teacher_batch_size must be >= 1")
        check_batch_cap(self.teacher_batch_size, "teacher_batch_size")
        check_not_blank(self, ("transfer_text_column",))  # (the labelled data's keys: FinetuneConfig.validate)
        report_to_names(self.report_to)
        self.data_config(["negative", "positive"] if self.labels is None else self.labels).validate()

    def data_config(self, labels: list[str]) -> FinetuneConfig:
        """The same keys as a ``FinetuneConfig`` (read by ``finetune.data.load_splits``, ``finetune.model``)."""
        return FinetuneConfig(
            model=self.student, train=self.train, dev=self.dev, out=self.out, init=self.init, format=self.format,
            encoding=self.encoding, text_column=self.text_column, label_column=self.label_column,
            rating_column=self.rating_column, rating_map=self.rating_map, labels=list(labels),
            label_map=dict(self.label_map), drop_unknown_labels=self.drop_unknown_labels,
            dev_fraction=self.dev_fraction, max_train_rows=self.max_train_rows, max_length=self.max_length,
            epochs=self.epochs, batch_size=self.batch_size, lr=self.lr, layer_decay=self.layer_decay,
            warmup_ratio=self.warmup_ratio, weight_decay=self.weight_decay, adam_eps=self.adam_eps,
            max_grad_norm=self.max_grad_norm, eval_every=self.eval_every, seed=self.seed, precision=self.precision,
            device=self.device, eval_batch_size=self.eval_batch_size, log_every=self.log_every,
            progress=self.progress, cache_dir=self.cache_dir, token_cache=self.token_cache,
            references=self.references, baseline=self.baseline)
