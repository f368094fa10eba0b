"""The schedules of a pretraining run, all functions of the budget: how much of it is used (steps or
wall-clock, whichever is nearer its end), the learning-rate multiplier (warm-up, then the schedule's shape)
and the discriminator weight lambda. The model, masking and loss are in ``electra.py``.
"""
from __future__ import annotations

import math

from .config import PretrainConfig


def budget_progress(cfg: PretrainConfig, step: int, elapsed_s: float) -> float:
    """Fraction of the budget used: the larger of the step fraction and the wall-clock fraction."""
    p = 0.0
    if cfg.max_steps > 0:
        p = max(p, step / cfg.max_steps)
    if cfg.max_minutes > 0:
        p = max(p, elapsed_s / (cfg.max_minutes * 60))
    return min(p, 1.0)


def warmup_done(cfg: PretrainConfig, step: int, progress: float) -> bool:
    """Has the warm-up ended at optimizer step ``step`` (budget ``progress``)? The loop records the progress
    at which this first holds (``warm_end``): the decay runs from there to the end of the budget."""
    if cfg.warmup_steps > 0:
        return step >= cfg.warmup_steps
    return progress >= cfg.warmup_ratio


def lr_factor(cfg: PretrainConfig, step: int, progress: float, next_progress: float, warm_end: float | None) -> float:
    """Multiplier of the peak lr for optimizer step ``step`` (0-based), at budget ``progress`` before it and
    ``next_progress`` after it. Warm-up: linear to the peak over ``warmup_steps`` steps (or the first
    ``warmup_ratio`` of the budget); then the schedule's shape over the rest of the budget, from
    ``warm_end`` (the progress at which warm-up ended) to 1."""
    floor = cfg.min_lr_ratio
    start = floor if cfg.schedule == "one_cycle" else 0.0
    if cfg.warmup_steps > 0 and step < cfg.warmup_steps:
        return start + (1 - start) * (step + 1) / cfg.warmup_steps
    if cfg.warmup_steps <= 0 and cfg.warmup_ratio > 0 and progress < cfg.warmup_ratio:
        return start + (1 - start) * min(1.0, next_progress / cfg.warmup_ratio)
    if cfg.schedule == "constant":
        return 1.0
    w = warm_end if warm_end is not None else 0.0
    q = min(1.0, max(0.0, (progress - w) / max(1e-12, 1.0 - w)))
    if cfg.schedule == "cosine":
        return floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * q))
    return 1.0 - (1.0 - floor) * q  # linear, one_cycle


def disc_weight_at(cfg: PretrainConfig, step: int) -> float:
    """lambda at optimizer step ``step``: ``disc_weight``, or a linear warm-up to it from ``disc_weight_start``."""
    if cfg.disc_weight_start is None or cfg.disc_weight_warmup_steps <= 0:
        return cfg.disc_weight
    f = min(1.0, step / cfg.disc_weight_warmup_steps)
    return cfg.disc_weight_start + (cfg.disc_weight - cfg.disc_weight_start) * f
