"""The checks a pretraining run makes before it writes anything, made in the process that starts its ranks
(``pretrain --nproc N``): a bad option is then one line before any rank, GPU or corpus is loaded, instead of the same
line from every rank. The ranks make them again (they are cheap); nothing here writes."""
from __future__ import annotations

import copy

from .config import PretrainConfig
from .distributed import DistContext
from .recipe import PretrainRecipe


def check_run(cfg: PretrainConfig, world: int) -> None:
    """Refuse ``cfg`` on ``world`` ranks where rank 0 would (``PretrainRecipe.check_settings``: batch_size over ranks x
    grad_accum, precision, init=, the corpus or prepared folder, tokenizer, trackers, the batch's memory, out=)."""
    check_rank_threads(cfg, world)
    cfg = copy.deepcopy(cfg)  # init= and prepared= set the shape on the config: the ranks do that themselves
    recipe = PretrainRecipe(cfg, DistContext.planned(cfg.device, world))
    recipe.notes = lambda lines, say=None: None  # rank 0 says them
    recipe.check_settings()


def check_rank_threads(cfg: PretrainConfig, world: int) -> None:
    """CPU ranks whose threads= add up to more than the machine's cores: each rank starts its own (``--nproc 2
    threads=2`` on 2 cores ran at 2,965 tokens/s against ~10,000 with the cores shared out), where OpenMP threads
    that share a core wait on each other far more than the share costs."""
    import os

    from ..errors import ConfigError
    from ..runtime import resolve_device

    cores = os.cpu_count() or 1
    if cfg.threads and cfg.threads * world > cores and resolve_device(cfg.device).type == "cpu":
        raise ConfigError(f"threads={cfg.threads} on each of --nproc {world} ranks is {cfg.threads * world} threads "
                          f"on this machine's {cores} cores: give threads={max(1, cores // world)} or fewer, or leave "
                          "threads out (the cores are shared out between the ranks)")
