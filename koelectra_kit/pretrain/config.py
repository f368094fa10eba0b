"""The typed config of a pretraining run: ``PretrainConfig`` with its ``model`` (the discriminator) and
``generator`` sections, loaded from YAML + ``key=value`` overrides by ``config.load_config``. Every knob of
the recipe is here with its reason; ``validate`` turns a wrong combination into a one-line ``ConfigError``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import ClassVar, Literal

from ..config import check_cores
from ..errors import ConfigError
from ..io.fileio import check_cache_dir, check_distinct_inputs
from ..io.trackers import report_to_names
from ..tokenizer.config import check_text_column, check_vocab_size

# The deepest encoder built: published ones have 12-48 layers, and the memory pre-check builds every layer (on torch's
# meta device) before it can count them: model.num_layers=1e12 hung there without a word.
MAX_LAYERS = 1000
# The longest ranks wait for each other: torch's process group overflowed beyond ~1e9 minutes (a DistNetworkError
# with its C++ frames at once), timedelta beyond ~1.4e12.
MAX_DDP_TIMEOUT_MINUTES = 1_000_000


@dataclass
class ModelConfig:
    """The discriminator: the encoder that gets fine-tuned. Defaults are ELECTRA-Small (paper, Table 6)."""

    hidden_size: int = 256
    num_layers: int = 12  # at most 1,000
    num_heads: int = 4
    intermediate_size: int = 1024  # feed-forward inner size
    # Width of the token/position tables, shared with the generator; each model projects E -> its hidden size.
    embedding_size: int = 128
    max_position_embeddings: int = 512  # >= seq_len; fine-tuning may feed longer texts than pretraining did
    hidden_dropout: float = 0.1  # 0 allowed ("Cramming": no dropout when the budget is short)
    attention_dropout: float = 0.1
    initializer_range: float = 0.02  # std of the normal init of every Linear and Embedding weight
    hidden_act: str = "gelu"
    # normal: transformers' init (the paper's). positional: the same plus a positional-attention prior (each
    # head starts as a previous/next-token reader; electra.positional_prior_): leaves the unigram plateau at
    # once on small budgets. Initialization only: the exported model is a plain ELECTRA.
    init: Literal["normal", "positional"] = "normal"
    init_scale: float = 2.0  # query/key gain on the position dims (sharpness of the neighbour attention)
    init_shifts: list[int] = field(default_factory=lambda: [1, -1, 2, -2])  # offsets the heads attend to
    init_pos_dims: int = 32  # embedding dims that carry the sinusoidal positions (< hidden and embedding size)


@dataclass
class GeneratorConfig:
    """The generator (objective electra only). ``size`` scales the discriminator's hidden size, FFN size and
    heads, as the official ``generator_hidden_size`` does (paper: 1/4 for small, 1/3 for base); explicit
    fields override it. Depth defaults to the discriminator's."""

    size: float = 0.25
    hidden_size: int | None = None
    intermediate_size: int | None = None
    num_heads: int | None = None
    num_layers: int | None = None  # at most 1,000


@dataclass
class PretrainConfig:
    """One pretraining run. Defaults: ELECTRA-Small's recipe (paper, Table 6) except the budget."""

    STAGE: ClassVar[str] = "pretrain"  # --config NAME looks in the pretrain presets
    # Old key -> current key: the names every stage shares (fine-tuning says plots and warmup_ratio too).
    RENAMED: ClassVar[dict[str, str]] = {"plot": "plots", "warmup_fraction": "warmup_ratio"}

    # --- inputs and outputs
    corpus: list[str] = field(default_factory=list)  # .txt (one text a line) or .csv/.tsv (text_column)
    # ... or a prepared-data folder (`koelectra-kit prepare`): tokenizer + packed ids made on another
    # machine; the run needs neither the corpus nor Kiwi, and takes the folder's seq_len
    prepared: str | None = None
    text_column: str | None = None  # csv/tsv column with the text (None: the tokenizer's guess)
    # run directory: metrics.jsonl, checkpoints/, discriminator/, generator/, curves.png (no corpus file among them)
    out: str = ""
    tokenizer: str | None = None  # a trained tokenizer dir; None: train one on the corpus into out/tokenizer
    vocab_size: int = 32000  # only when training the tokenizer here
    tokenizer_model: str = "wordpiece"  # only when training it here: wordpiece | characters (see TokenizerConfig)
    # only when training it here: kiwi_word (each word on its own, memoized: the corpus and labelling pre-split at
    # cache speed, no worse after pretraining, docs/RESULTS.md §6) | kiwi (whole-text morpheme analysis) | none
    presplit: Literal["kiwi_word", "kiwi", "none"] = "kiwi_word"
    # Continued (domain-adaptive) pretraining: start from an ELECTRA discriminator instead of random weights: a
    # run folder of ours (discriminator/ + generator/), its discriminator/ (the sibling generator/ is used), any
    # ELECTRA model folder, or a hub id. Its tokenizer and shape are used: model.* shape keys that differ are
    # replaced by the checkpoint's with one notice (presets stay usable), model.init is forced to normal (the
    # weights already encode positions), and a tokenizer= with another vocabulary is an error.
    init: str | None = None
    # The generator to continue with (folder or hub id; needs init= and objective electra): published pairs ship it
    # apart (monologg/koelectra-small-v3-generator beside ...-discriminator). Its vocabulary and embedding size must
    # be init's (the two share one embedding table). None: the one beside init, else a fresh one of generator.size.
    init_generator: str | None = None
    cache_dir: str | None = None  # packed-data cache folder (default $KOELECTRA_CACHE or ~/.cache/koelectra-kit)
    num_workers: int | None = None  # tokenization processes (None: all cores)

    # --- objective
    objective: Literal["electra", "mlm"] = "electra"  # mlm: the same encoder trained BERT-style, no generator
    seq_len: int = 128  # packed sequence length in tokens ([CLS] and [SEP]s included)
    mask_prob: float = 0.15  # fraction of each sequence's (non-special) tokens that are masked
    mask_token_prob: float | None = None  # masked -> [MASK]; None: 0.85 (electra, official code), 0.8 (mlm, BERT)
    random_token_prob: float | None = None  # masked -> random token; None: 0 (electra), 0.1 (mlm); rest unchanged
    model: ModelConfig = field(default_factory=ModelConfig)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    disc_weight: float = 50.0  # lambda: loss = gen MLM + lambda * disc BCE (paper: 50)
    disc_weight_start: float | None = None  # lambda at step 0 when warming lambda up (None: no lambda warm-up)
    disc_weight_warmup_steps: int = 0  # steps to move lambda linearly from disc_weight_start to disc_weight
    temperature: float = 1.0  # generator sampling temperature (>1: more varied replacements)

    # --- optimisation
    batch_size: int = 128  # sequences per optimizer step, all ranks and accumulation micro-steps together
    grad_accum: int = 1  # micro-batches per optimizer step on each rank (micro = batch / (ranks x accum))
    lr: float = 5e-4  # peak learning rate
    # Shape after warm-up, over the budget (max_steps and/or max_minutes): linear decay (paper), cosine,
    # one_cycle (triangular: ramps up from min_lr_ratio x lr, back down to it at the end), constant.
    schedule: Literal["linear", "cosine", "one_cycle", "constant"] = "linear"
    warmup_steps: int = 10000  # linear warm-up in optimizer steps (paper: 10k); wins over warmup_ratio
    warmup_ratio: float = 0.0  # ... or as a fraction of the budget (used when warmup_steps is 0)
    min_lr_ratio: float = 0.0  # lr at the end of the budget, as a fraction of the peak
    weight_decay: float = 0.01  # AdamW; never on LayerNorm weights and biases
    adam_beta1: float = 0.9
    adam_beta2: float = 0.999
    adam_eps: float = 1.0e-6
    max_grad_norm: float = 1.0  # gradient clipping (0: off)
    # Budget: stop at max_steps or after max_minutes of training (not counting data preparation), whichever
    # comes first; 0 = no limit of that kind. The schedule runs on the budget's elapsed fraction (max of the
    # step fraction and the time fraction), so a time budget needs no step estimate.
    max_steps: int = 1000000
    max_minutes: float = 0.0
    shuffle: bool = True  # shuffle packed sequences each epoch (deterministic from seed + epoch)
    seed: int = 42

    # --- engine
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"  # auto: bf16 where fast, fp16+scaling on old GPUs
    compile: bool = False  # torch.compile the model (minutes of compiling; measure before relying on it)
    # torch.compile's mode: default | reduce-overhead (CUDA graphs: no launch overhead, the win for small models on
    # a GPU; the batch shapes are static) | max-autotune (also searches matmul kernels: longer compiling) |
    # max-autotune-no-cudagraphs
    compile_mode: Literal["default", "reduce-overhead", "max-autotune", "max-autotune-no-cudagraphs"] = "default"
    # What compile=true compiles: model (the whole forward as one graph: the fastest step, the longest compile) |
    # layers (each transformer layer in place, one compile per encoder shape: a cold compile ~3.5x shorter on a CPU;
    # the embeddings, heads and loss run eagerly). See docs/pretrain.md.
    compile_scope: Literal["model", "layers"] = "model"
    # The packed ids on the training device (true | false | auto: on a GPU when they take at most a tenth of its memory):
    # no host-to-device copy per step. On a CPU the memory-mapped file is the fastest source and keeps RAM flat.
    data_on_device: bool | Literal["auto"] = "auto"
    threads: int = 0  # torch CPU threads (0: torch's default = cores); 1 is faster when the CPU is shared
    fast_cpu_kernels: bool = True  # cheaper dropout masks / attention on CPU (same maths; see electra/cpu.py)

    # --- logging and checkpoints
    log_every: int = 100  # steps between metrics rows (metrics.jsonl) and log lines
    save_every: int = 1000  # steps between checkpoints (0: only at the end)
    save_every_minutes: float = 0.0  # ... or minutes between checkpoints (0: off)
    keep_checkpoints: int = 2  # newest checkpoints kept in out/checkpoints (at least 1)
    resume: bool | str = False  # true: continue from out's latest checkpoint; or a checkpoint dir
    overwrite: bool = False  # start over in an out dir that has a previous run's checkpoints (not with resume)
    progress: bool = True  # progress bar (stderr)
    plots: bool = True  # write out/curves.png at the end
    # Trackers that get every metrics row as it is logged, spelled as transformers' Trainer spells report_to: none,
    # all (each one installed), tensorboard (event files in out/runs: tensorboard --logdir OUT/runs), wandb (project
    # $WANDB_PROJECT or koelectra-kit, files in out/wandb), or a list: [tensorboard,wandb]. Each is a pip extra
    # (pip install "koelectra-kit[tensorboard]"); metrics.jsonl is written either way.
    report_to: str | list[str] = "none"
    # "Learning?" check: after this many tokens, warn when the generator's masked-token accuracy is within
    # plateau_gen_margin of the unigram baseline (always predicting the most frequent target) or the
    # discriminator's AUC on replaced tokens is below plateau_auc (0 tokens: off).
    plateau_check_tokens: int = 5000000
    plateau_gen_margin: float = 0.02  # in [0, 1]
    plateau_auc: float = 0.6  # in [0, 1]
    # how long ranks wait for each other (rank 0 builds the data cache): positive, at most 1,000,000
    ddp_timeout_minutes: float = 60.0

    # --- sharing: a model card (README.md) is always written; the hub only when asked
    push_to_hub: str | None = None  # owner/name: upload out/discriminator after it is saved (needs a hub token)
    hub_private: bool = False  # a new hub repo is created private
    card_license: str = "apache-2.0"  # the license the model card declares: the one your data allows
    card_datasets: list[str] = field(default_factory=list)  # hub dataset ids for the card (default: file names)

    def validate(self) -> None:
        from ..hub.repo import check_card_metadata, check_repo_id

        m = self.model
        check_repo_id(self.push_to_hub)
        check_card_metadata(self.card_license, self.card_datasets)
        if not self.corpus and not self.prepared:
            raise ConfigError("corpus is empty: pass corpus=FILE (or a list: corpus=[a.txt,b.csv]), or prepared=DIR")
        check_distinct_inputs(self.corpus, "corpus")
        if self.prepared and self.corpus:
            raise ConfigError(f"prepared={self.prepared} already holds the corpus as ids: drop corpus= (or drop "
                              "prepared= to pack the corpus here)")
        check_text_column(self.text_column, self.corpus)
        if self.resume not in (False, "", "false", "False") and self.overwrite:
            shown = "true" if self.resume is True else self.resume
            raise ConfigError(f"resume={shown} and overwrite=true contradict each other: resume continues out's run, "
                              "overwrite starts it over; pass one of them")
        if self.prepared and self.tokenizer:
            raise ConfigError(f"prepared={self.prepared} brings the tokenizer its ids were made with: drop "
                              "tokenizer=")
        if self.compile_mode != "default" and not self.compile:
            raise ConfigError(f"compile_mode={self.compile_mode} needs compile=true")
        if self.compile_scope != "model" and not self.compile:
            raise ConfigError(f"compile_scope={self.compile_scope} needs compile=true")
        if self.init_generator and not self.init:
            raise ConfigError(f"init_generator={self.init_generator} needs init= (the discriminator it continues "
                              "with, e.g. init=monologg/koelectra-small-v3-discriminator)")
        if self.init_generator and self.objective != "electra":
            raise ConfigError(f"init_generator= is for objective=electra; objective={self.objective} trains no "
                              "generator")
        if not self.out:
            raise ConfigError("out is not set: pass out=DIR for the run's outputs")
        if self.tokenizer_model not in ("wordpiece", "characters"):
            raise ConfigError(f"tokenizer_model must be wordpiece or characters, got {self.tokenizer_model!r} (train "
                              "other tokenizers with `koelectra-kit tokenizer train` and pass tokenizer=DIR)")
        if not 0.0 < self.mask_prob < 1.0:
            raise ConfigError(f"mask_prob must be in (0, 1), got {self.mask_prob}")
        if self.seq_len < 8:
            raise ConfigError(f"seq_len must be at least 8, got {self.seq_len}")
        if self.seq_len > m.max_position_embeddings:
            raise ConfigError(f"seq_len {self.seq_len} exceeds model.max_position_embeddings "
                              f"{m.max_position_embeddings}; raise the latter or shorten the former")
        for name, v in (("model.hidden_size", m.hidden_size), ("model.num_layers", m.num_layers),
                        ("model.num_heads", m.num_heads), ("model.intermediate_size", m.intermediate_size),
                        ("model.embedding_size", m.embedding_size), ("vocab_size", self.vocab_size)):
            if v < 1:
                raise ConfigError(f"{name} must be at least 1, got {v}")
        for name, v in (("model.num_layers", m.num_layers), ("generator.num_layers", self.generator.num_layers)):
            if v is not None and v > MAX_LAYERS:
                raise ConfigError(f"{name} {v:,} is more than the {MAX_LAYERS:,} layers an encoder may have here "
                                  "(ELECTRA-Small and -Base have 12, -Large 24)")
        check_vocab_size(self.vocab_size)  # the tokenizer trained here: before any Kiwi work, not in tokenizers' Rust
        check_cache_dir(self.cache_dir)  # a file there failed as "Not a directory" after the tokenizer was trained
        if m.initializer_range <= 0:
            raise ConfigError(f"model.initializer_range must be positive (the std of the initial weights), got "
                              f"{m.initializer_range}")
        _check_activation("model.hidden_act", m.hidden_act)
        g = self.generator
        if g.size <= 0:
            raise ConfigError(f"generator.size must be positive (a fraction of the discriminator's width), got {g.size}")
        for name in ("hidden_size", "intermediate_size", "num_heads", "num_layers"):
            v = getattr(g, name)
            if v is not None and v < 1:
                raise ConfigError(f"generator.{name} must be at least 1 (or null: from generator.size), got {v}")
        if m.hidden_size % m.num_heads:
            raise ConfigError(f"model.hidden_size {m.hidden_size} is not a multiple of model.num_heads {m.num_heads}")
        if self.objective == "electra":
            from ..electra.model import generator_shape  # here, not at the top: it imports torch

            shape = generator_shape(m, g)
            if shape["hidden_size"] % shape["num_heads"]:
                raise ConfigError(f"the generator's hidden size {shape['hidden_size']} is not a multiple of its "
                                  f"{shape['num_heads']} heads; set generator.hidden_size / generator.num_heads")
        if m.init == "positional" and not self.init:  # with init= the prior is switched off (continued.py)
            from ..electra.model import generator_shape  # here, not at the top: it imports torch

            # The generator reads a subset of the position dims when it is narrower (positional_prior_).
            sizes = [m.hidden_size, m.embedding_size]
            if m.init_pos_dims < 2 or m.init_pos_dims % 2 or m.init_pos_dims >= min(sizes):
                raise ConfigError(f"model.init_pos_dims {m.init_pos_dims} must be even, >= 2 and below the "
                                  f"hidden and embedding sizes {sorted(set(sizes))}; lower it")
            if self.objective == "electra" and generator_shape(m, self.generator)["hidden_size"] < 4:
                raise ConfigError("the positional prior needs a generator at least 4 wide; raise generator.size")
            if not m.init_shifts:
                raise ConfigError("model.init_shifts is empty: give the offsets heads attend to, e.g. [1,-1]")
            far = [s for s in m.init_shifts if abs(s) >= self.seq_len]
            if far:
                raise ConfigError(f"model.init_shifts {m.init_shifts}: {far[0]} is not a position within a "
                                  f"{self.seq_len}-token sequence; give offsets between -{self.seq_len - 1} and "
                                  f"{self.seq_len - 1}, e.g. [1,-1]")
            if m.init_scale <= 0:
                raise ConfigError(f"model.init_scale must be positive (the gain that points each head at its offset; "
                                  f"0 is no prior), got {m.init_scale}")
        for name, p in (("model.hidden_dropout", m.hidden_dropout), ("model.attention_dropout", m.attention_dropout)):
            if not 0.0 <= p < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {p}")
        for key in ("max_steps", "max_minutes"):
            if getattr(self, key) < 0:
                raise ConfigError(f"{key}={getattr(self, key):g}: must be 0 (no limit of that kind) or more")
        if self.max_steps <= 0 and self.max_minutes <= 0:
            raise ConfigError("no budget: set max_steps and/or max_minutes")
        if self.batch_size < 1 or self.grad_accum < 1 or self.batch_size % self.grad_accum:
            raise ConfigError(f"batch_size {self.batch_size} must be a positive multiple of grad_accum {self.grad_accum}")
        if not 0.0 <= self.warmup_ratio < 1.0:
            raise ConfigError(f"warmup_ratio must be in [0, 1), got {self.warmup_ratio}")
        if self.temperature <= 0:
            raise ConfigError(f"temperature must be positive, got {self.temperature}")
        if self.lr <= 0:
            raise ConfigError(f"lr must be positive, got {self.lr}")
        if not 0.0 <= self.min_lr_ratio <= 1.0:
            raise ConfigError(f"min_lr_ratio must be in [0, 1] (the final lr as a fraction of the peak), got "
                              f"{self.min_lr_ratio}")
        for name in ("adam_beta1", "adam_beta2"):
            if not 0.0 <= getattr(self, name) < 1.0:
                raise ConfigError(f"{name} must be in [0, 1), got {getattr(self, name)}")
        if self.adam_eps <= 0:
            raise ConfigError(f"adam_eps must be positive, got {self.adam_eps}")
        for name in ("weight_decay", "max_grad_norm", "max_minutes", "save_every_minutes", "disc_weight"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.keep_checkpoints < 1:  # 0 kept one anyway (the newest is what resume and the export read)
            raise ConfigError(f"keep_checkpoints={self.keep_checkpoints}: at least 1 (the newest checkpoint is what "
                              "resume=true continues from); to write fewer, raise save_every or save_every_minutes")
        for name in ("warmup_steps", "disc_weight_warmup_steps", "save_every", "threads", "plateau_check_tokens"):
            if getattr(self, name) < 0:
                raise ConfigError(f"{name} must be >= 0, got {getattr(self, name)}")
        if self.disc_weight_start is not None and self.disc_weight_start < 0:
            raise ConfigError(f"disc_weight_start must be >= 0, got {self.disc_weight_start}")
        if self.num_workers is not None and self.num_workers < 1:
            raise ConfigError(f"num_workers must be at least 1 (or null: all cores), got {self.num_workers}")
        check_cores(self.num_workers, "num_workers")
        check_cores(self.threads, "threads")
        if not 0 < self.ddp_timeout_minutes <= MAX_DDP_TIMEOUT_MINUTES:
            raise ConfigError(f"ddp_timeout_minutes must be positive and at most {MAX_DDP_TIMEOUT_MINUTES:,} (about "
                              f"two years), got {self.ddp_timeout_minutes:g}")
        for name in ("plateau_gen_margin", "plateau_auc"):  # an accuracy margin and an AUC: fractions
            if not 0.0 <= getattr(self, name) <= 1.0:
                raise ConfigError(f"{name} must be in [0, 1] (the \"learning?\" check's threshold), got "
                                  f"{getattr(self, name)}")
        if self.log_every < 1:
            raise ConfigError("log_every must be at least 1")
        report_to_names(self.report_to)
        probs = self.mask_probs()
        if min(probs) < 0 or sum(probs) > 1.0 + 1e-9:
            raise ConfigError("mask_token_prob and random_token_prob must be >= 0 and sum to at most 1")

    def mask_probs(self) -> tuple[float, float]:
        """(P(masked slot -> [MASK]), P(masked slot -> random token)) with the objective's defaults filled in."""
        electra = self.objective == "electra"
        mask = self.mask_token_prob if self.mask_token_prob is not None else (0.85 if electra else 0.8)
        rand = self.random_token_prob if self.random_token_prob is not None else (0.0 if electra else 0.1)
        return mask, rand


def _check_activation(key: str, name: str) -> None:
    """``name`` must be an activation transformers knows (gelu, relu, silu, ...)."""
    from transformers.activations import ACT2FN  # here, not at the top: it imports torch

    if name not in ACT2FN:
        raise ConfigError(f"{key}={name!r} is not an activation transformers knows; use one of "
                          f"{', '.join(sorted(k for k in ACT2FN if k.isidentifier()))}")
