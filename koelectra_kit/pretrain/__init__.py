"""Pretrain an ELECTRA discriminator (replaced token detection, Clark et al. ICLR 2020) on a comment corpus,
or the same encoder BERT-style (``objective: mlm``) for comparison.

    koelectra-kit pretrain --config configs/pretrain/small.yaml corpus=comments.txt out=runs/small
    torchrun --nproc_per_node=2 -m koelectra_kit pretrain --config configs/pretrain/small.yaml ...

One concern a module, in the order a run uses them:
  config       ``PretrainConfig`` (YAML + ``key=value`` overrides): every knob of the recipe
  data         tokenizer (given, or trained on the corpus); corpus -> ids -> packed full-length sequences
               ``[CLS] t1 [SEP] t2 [SEP] ...`` in a memory-mapped Arrow cache keyed by (corpus, tokenizer,
               seq_len); a deterministic row order from (seed, epoch); each DDP rank masks only its own rows
  schedule     the budget, the learning-rate and lambda schedules (model, masking, loss: ``electra.py``)
  checkpoint   atomic checkpoints holding everything needed to resume bit-exactly; resume
  distributed  torchrun's process group and the collectives the loop needs
  report       the metrics row (``out/metrics.jsonl``) and its log/progress-bar forms
  export       ``out/discriminator`` and ``out/generator`` as Hugging Face model dirs with the tokenizer
  curves       the learning curves (``out/curves.png``)
  recipe       ``pretrain(cfg)``: named setup steps, then the explicit training loop
"""
from __future__ import annotations

from .checkpoint import (LoopState, latest_checkpoint, read_checkpoint, resolve_resume, rng_state, save_checkpoint,
                         set_rng_state)
from .config import GeneratorConfig, ModelConfig, PretrainConfig
from .curves import plot_curves, read_metrics
from .data import (BatchSource, PackedRows, RowOrder, build_packed_cache, check_corpus, corpus_fingerprint,
                   open_packed_data, pack_sequences, prepare_tokenizer)
from .distributed import DistContext, param_digest
from .export import export_models
from .recipe import PretrainRecipe, pretrain
from .schedule import budget_progress, disc_weight_at, lr_factor, warmup_done

__all__ = [
    "BatchSource", "DistContext", "GeneratorConfig", "LoopState", "ModelConfig", "PackedRows", "PretrainConfig",
    "PretrainRecipe", "RowOrder", "budget_progress", "build_packed_cache", "check_corpus", "corpus_fingerprint",
    "disc_weight_at", "export_models", "latest_checkpoint", "lr_factor", "open_packed_data", "pack_sequences",
    "param_digest", "plot_curves", "prepare_tokenizer", "pretrain", "read_checkpoint", "read_metrics",
    "resolve_resume", "rng_state", "save_checkpoint", "set_rng_state", "warmup_done",
]
