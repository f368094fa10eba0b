"""What one fine-tuning run is: ``FinetuneConfig`` (YAML + ``key=value`` overrides, see ``koelectra_kit.config``).
The TF-IDF baseline's knobs (``BaselineConfig``) live with the fit in ``classify.references``, and the label and
rating vocabularies every reader of a labelled table shares in ``io.labelled``; both are re-exported here."""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..classify.ensemble import check_grid_size
from ..classify.references import BaselineConfig
from ..config import check_batch_cap, check_not_blank
from ..errors import ConfigError
from ..io.labelled import (ID_COLUMNS, LABEL_ALIASES, LABEL_COLUMNS, RATING_COLUMNS,  # noqa: F401 - re-exported
                          RATING_PRESETS, check_label_set, checked_label_map, parse_rating_map)
from ..io.trackers import report_to_names

DEFAULT_LABELS = ["negative", "neutral", "positive"]
# Keys a resumed run may change (finetune/checkpoint.py): where and how it runs, reports and writes, and how it reads
# its files (the rows read are compared themselves). Any other change is another run, refused with its name.
RESUMABLE = ("train", "dev", "out", "format", "encoding", "text_column", "label_column", "rating_column", "rating_map",
             "label_map", "drop_unknown_labels", "device", "compile", "compile_mode", "cuda_graphs", "eval_batch_size",
             "log_every", "progress", "cache_dir", "token_cache", "plots", "report_to", "references", "ensemble",
             "ensemble_grid_step", "push_to_hub", "hub_private", "card_license", "card_datasets", "save_every",
             "save_every_minutes", "resume", "baseline")


@dataclass
class FinetuneConfig:
    """One fine-tuning run. Defaults are the ELECTRA paper's GLUE recipe (Clark et al. 2020,
    Table 7) where it has one, so ``sentiment.yaml`` only has to name data and paths."""

    STAGE: ClassVar[str] = "finetune"  # --config NAME looks in the shipped configs/finetune/
    # Old key -> current key, so old configs keep working (one notice): the names agree with pretraining's.
    RENAMED: ClassVar[dict[str, str]] = {"grad_clip": "max_grad_norm"}

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
    # None (auto): 3 epochs, or more where that is fewer than min_steps optimizer steps (a small set: 1,000 rows
    # are 94 steps in 3 epochs, far too few), with early stopping then on. A number: exactly that many epochs
    # (may be fractional, 0.5 = half an epoch), no floor.
    epochs: float | None = None
    min_steps: int = 4000  # auto epochs: at least this many optimizer steps (docs/RESULTS.md §5 measured it)
    batch_size: int = 32
    lr: float | None = None  # peak lr of the top layer; None = by width: <=256: 3e-4, <=768: 1e-4, else 5e-5
    # Dropout of the fine-tuned encoder (hidden states and attention; the head's is transformers' default): the
    # paper's 0.1. The cpu presets pretrain without it (every token counts there), and fine-tuning inherited that:
    # 1,000 labels overfitted within 5 epochs (0.383 dev macro-F1 vs 0.430 with 0.1, docs/RESULTS.md §5). null: the
    # checkpoint's own.
    dropout: float | None = 0.1
    # Layer l of L trains at lr * decay^(L+1-l), the embeddings at decay^(L+1), the head at lr. None (auto): the
    # paper's 0.8 for encoders of up to 6 layers, 1.0 (off) for deeper ones, where 0.8 a layer leaves a 12-layer
    # encoder's embeddings at 5% of the top's rate (measured: docs/RESULTS.md §11).
    layer_decay: float | None = None
    warmup_ratio: float = 0.1  # linear warm-up over this share of steps, then linear decay to 0
    weight_decay: float = 0.01  # AdamW, not on biases/LayerNorm (the paper used 0; 0.01 is HF's usual)
    adam_eps: float = 1e-6
    max_grad_norm: float = 1.0  # clip the global grad norm to this (0 = off)
    class_weights: Literal["none", "balanced"] = "none"  # balanced: loss weight n/(k*n_c) per class
    eval_every: int = 0  # steps between dev evaluations; 0 = auto: 4 per epoch, fewer if dev is big next to train. Always at the end.
    # stop after this many evaluations without a better dev macro-F1 (0 = never). None (auto): 5 when min_steps
    # raised the schedule (its evaluations are then 20 in all, eval_every auto), else 0.
    patience: int | None = None
    seed: int = 42
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 where fast (AVX512-BF16/AMX CPUs, recent GPUs)
    device: str = "auto"  # auto | cpu | cuda | cuda:1
    group_by_length: bool = True  # batches of similar length (less padding); false = plain shuffle
    # Padded lengths are rounded up to a multiple of this (never past max_length). None: 16 on a GPU (tensor cores,
    # and few distinct batch shapes, which torch.compile and CUDA graphs need: 8 up to max_length 128), 1 on a CPU.
    pad_to_multiple_of: int | None = None
    # torch.compile the model (dynamic=False: one graph per batch shape, few thanks to pad_to_multiple_of). Worth it on
    # a GPU, where a small encoder's step is kernel launches more than arithmetic; the first steps wait for compiling.
    compile: bool = False
    # torch.compile's mode: default | reduce-overhead (CUDA graphs: one launch per step) | max-autotune |
    # max-autotune-no-cudagraphs
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    # The whole step (forward, backward, clipping, fused AdamW) recorded once as a CUDA graph and replayed: one launch
    # a step instead of hundreds, no compiling (finetune/graphs.py); every batch is padded to batch_size x max_length.
    # For a GPU, where a small encoder's step waits on the host: on an H100 a 12 x 256 encoder's fine-tune ran 4,516
    # examples/s with it, the eager loop 692 (docs/benchmarks/gpu_check-h100*.txt). auto | true | false. auto: on with a
    # CUDA GPU unless compile=true or the step is fp16 (graphs.wants_graphs), else off; true: on, an error where it
    # cannot be. Spelled as pretrain's data_on_device, its other auto | true | false option.
    cuda_graphs: bool | Literal["auto"] = "auto"
    eval_batch_size: int | None = None  # dev rows per model call, 1 to 4096; None: 128 on a CPU, 512 on a GPU
    log_every: int = 20  # steps between train-loss rows in metrics.jsonl
    progress: bool = True  # tqdm progress bar (stderr)
    # Token ids of train/dev are cached as `datasets` Arrow files keyed by tokenizer + texts + max_length, so
    # a second fine-tune of the same data skips Kiwi (~1 min for nsmc3's 150k reviews on 2 cores).
    cache_dir: str | None = None  # None: $KOELECTRA_CACHE or ~/.cache/koelectra-kit
    token_cache: bool = True  # false: always tokenize, write nothing
    plots: bool = True  # confusion.png and curves.png
    # Trackers that get every metrics.jsonl row (train/loss, eval/macro_f1, ...), spelled as transformers' Trainer
    # spells report_to: none, all (each one installed), tensorboard (event files in OUT/runs), wandb (project
    # $WANDB_PROJECT or koelectra-kit, files in OUT/wandb), or a list: [tensorboard,wandb]. Each is a pip extra (pip
    # install "koelectra-kit[tensorboard]"). While the run lasts its files are in the staging folder beside OUT.
    report_to: str | list[str] = "none"
    # Score the majority class and the TF-IDF baseline on the same split and report them beside the model
    # (seconds on small data, ~1 minute on 150k rows), warning when the model is not above them.
    references: bool = True
    # tfidf: also write OUT/tfidf (TF-IDF + logistic regression on the same rows) and OUT/ensemble (encoder + TF-IDF
    # probabilities averaged, weights chosen on dev), and name the best of the three on dev. OUT itself stays a plain
    # transformers folder. none: the encoder only.
    ensemble: Literal["none", "tfidf"] = "tfidf"
    # the ensemble's weights are multiples of this (chosen on dev macro-F1): it divides 1 into whole steps, at most
    # 0.5, and gives at most 10,000 points
    ensemble_grid_step: float = 0.1
    # --- sharing: a model card (README.md) is always written; the hub only when asked
    push_to_hub: str | None = None  # owner/name: upload the finished folder after it is saved (needs a hub token)
    hub_private: bool = False  # a new hub repo is created private
    card_license: str = "apache-2.0"  # the license the model card declares: the one your data allows
    card_datasets: list[str] = field(default_factory=list)  # hub dataset ids for the card (default: file names)

    # --- checkpoints: a run killed, crashed or stopped (a scheduler's time limit, Ctrl-C) continues when the same command
    # is run again, from its last checkpoint in OUT.work beside OUT, to the weights the uninterrupted run would have
    # reached (finetune/checkpoint.py). OUT.work is removed once the run is done.
    # Minutes, not steps, by default: a GPU with CUDA graphs runs a small encoder's steps by the hundred a second.
    save_every: int = 0  # optimizer steps between checkpoints (0: off)
    save_every_minutes: float = 5.0  # ... or minutes of training between checkpoints (0: off)
    resume: bool = True  # false: start over, discarding a checkpoint in OUT.work

    baseline: BaselineConfig = field(default_factory=BaselineConfig)

    def validate(self) -> None:
        from ..hub.repo import check_card_metadata, check_repo_id

        check_repo_id(self.push_to_hub)
        check_card_metadata(self.card_license, self.card_datasets)
        if len(self.labels) < 2:
            raise ConfigError(f"labels: need at least 2 labels, got {self.labels}")
        if len(set(self.labels)) != len(self.labels) or any(not str(x).strip() for x in self.labels):
            raise ConfigError(f"labels: must be distinct non-empty names, got {self.labels}")
        # NFC, as a file's cells are read: a name typed or copied on macOS (decomposed Korean) is the model's
        # id2label as the same name typed elsewhere; two that a file's cells could not tell apart are refused
        self.labels = check_label_set(self.labels)
        checked_label_map(self.label_map, self.labels)
        if self.rating_map is not None:
            parse_rating_map(self.rating_map)  # raises ConfigError if malformed
        if not 0 < self.dev_fraction <= 0.5:
            # more than half of the labelled rows held out is a slip (0.9 meant "train on 90%"), not a split:
            # at 0.999 a 3-class model trained on one row per class and reported a dev score, exit 0
            raise ConfigError(f"dev_fraction: the share of train held out for dev must be more than 0 and at most "
                              f"0.5, got {self.dev_fraction:g}")
        if self.max_train_rows is not None and self.max_train_rows < len(self.labels):
            raise ConfigError(f"max_train_rows: must be at least the number of labels, got {self.max_train_rows}")
        if self.epochs is not None and self.epochs <= 0:
            raise ConfigError(f"epochs={self.epochs:g}: must be more than 0 (or null: at least min_steps steps)")
        if self.batch_size < 1:
            raise ConfigError(f"batch_size={self.batch_size}: must be at least 1")
        if self.max_length < 3:
            raise ConfigError(f"max_length={self.max_length}: must be at least 3 ([CLS], a token, [SEP])")
        if self.min_steps < 1:
            raise ConfigError(f"min_steps: must be at least 1, got {self.min_steps}")
        if self.lr is not None and self.lr <= 0:
            raise ConfigError(f"lr: must be positive, got {self.lr}")
        if self.dropout is not None and not 0 <= self.dropout < 1:
            raise ConfigError(f"dropout: must be in [0, 1) (or null: the checkpoint's), got {self.dropout:g}")
        if self.layer_decay is not None and not 0 < self.layer_decay <= 1:
            raise ConfigError(f"layer_decay: must be in (0, 1] (1 = off; null: by depth), got {self.layer_decay}")
        if not 0 <= self.warmup_ratio < 1:
            raise ConfigError(f"warmup_ratio: must be in [0, 1), got {self.warmup_ratio}")
        if self.eval_every < 0 or (self.patience is not None and self.patience < 0) or self.log_every < 1:
            raise ConfigError("eval_every and patience must be >= 0, log_every >= 1")
        report_to_names(self.report_to)
        if self.eval_batch_size is not None and self.eval_batch_size < 1:
            raise ConfigError(f"eval_batch_size: must be at least 1 (or null: by device), got {self.eval_batch_size}")
        check_batch_cap(self.eval_batch_size, "eval_batch_size")
        if self.pad_to_multiple_of is not None and not 1 <= self.pad_to_multiple_of <= self.max_length:
            raise ConfigError(f"pad_to_multiple_of: must be between 1 and max_length={self.max_length} (or null: 16 on "
                              f"a GPU, 1 on a CPU), got {self.pad_to_multiple_of}")
        if self.cuda_graphs is True and (self.compile or self.precision == "fp16"):  # (auto: simply off)
            raise ConfigError("cuda_graphs=true records the eager step: not with compile=true (its own CUDA graphs: "
                              "compile_mode=reduce-overhead) or precision=fp16 (its loss scaler reads the host)")
        if self.save_every < 0 or not 0 <= self.save_every_minutes < math.inf:
            raise ConfigError(f"save_every and save_every_minutes must be >= 0 (0 = off), got {self.save_every} and "
                              f"{self.save_every_minutes:g}")
        if self.adam_eps <= 0:
            raise ConfigError(f"adam_eps: must be positive, got {self.adam_eps}")
        for key in ("weight_decay", "max_grad_norm"):  # a negative max_grad_norm would flip every gradient
            if getattr(self, key) < 0:
                raise ConfigError(f"{key}: must be >= 0 (0 = off), got {getattr(self, key)}")
        if not (0 < self.ensemble_grid_step <= 0.5) or abs(round(1 / self.ensemble_grid_step)
                                                           * self.ensemble_grid_step - 1) > 1e-9:
            raise ConfigError(f"ensemble_grid_step: must divide 1 into whole steps, at most 0.5 (0.05, 0.1, ...), "
                              f"got {self.ensemble_grid_step:g}")
        check_grid_size(2, self.ensemble_grid_step, "ensemble_grid_step")  # the encoder and TF-IDF
        # "" read as unset: an auto-detected column, a dev split instead of the dev file meant
        check_not_blank(self, ("dev", "format", "encoding", "text_column", "label_column", "rating_column",
                               "cache_dir"))
        b = self.baseline
        if not 1 <= b.ngram_min <= b.ngram_max:
            raise ConfigError(f"baseline: need 1 <= ngram_min <= ngram_max, got {b.ngram_min}, {b.ngram_max}")
        if b.C <= 0:
            raise ConfigError(f"baseline.C: must be positive (inverse regularization strength), got {b.C}")
        if not b.tol > 0:
            raise ConfigError(f"baseline.tol: must be positive (lbfgs' gradient tolerance), got {b.tol}")
        for key in ("min_df", "max_iter"):
            if getattr(b, key) < 1:
                raise ConfigError(f"baseline.{key}: must be at least 1, got {getattr(b, key)}")
        if b.max_features is not None and b.max_features < 1:
            raise ConfigError(f"baseline.max_features: must be at least 1 (or null: no cap), got {b.max_features}")


def with_absolute_paths(cfg: FinetuneConfig) -> FinetuneConfig:
    """``cfg`` with its local train, dev and model paths absolute, as finetune_config.yaml keeps them: `evaluate`
    fits its TF-IDF reference on the saved train=, and a relative one, read from another folder, named another
    file (there: the very file evaluated). Hub ids and hf: datasets stay as they are."""
    from dataclasses import replace

    return replace(cfg, train=absolute_path(cfg.train), dev=absolute_path(cfg.dev), model=absolute_path(cfg.model))


def absolute_path(value):
    """A local file or folder's absolute path; anything else (a hub id, an hf: dataset, None) as it is."""
    from pathlib import Path

    return str(Path(value).resolve()) if value and not str(value).startswith("hf:") and Path(value).exists() \
        else value
