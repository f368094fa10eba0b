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
    cfg = copy.deepcopy(cfg)  # init= and prepared= set the shape on the config: the ranks do that themselves
    recipe = PretrainRecipe(cfg, DistContext.planned(cfg.device, world))
    recipe.notes = lambda lines, say=None: None  # rank 0 says them
    recipe.check_settings()
