"""The checks a pretraining run makes before it writes anything, made in the process that starts its ranks
(``pretrain --nproc N``): a bad option is then one line before any rank, GPU or corpus is loaded, instead of the same
line from every rank. The ranks make them again (they are cheap); nothing here writes."""
from __future__ import annotations

import copy
from pathlib import Path

from .checkpoint import check_resume_request, check_run_dir, check_start_over, resolve_resume
from .config import PretrainConfig
from .distributed import DistContext
from .recipe import PretrainRecipe


def check_run(cfg: PretrainConfig, world: int) -> None:
    """Refuse ``cfg`` on ``world`` ranks where a rank would: the engine (batch_size a multiple of ranks x
    grad_accum, precision for the device), init=, the corpus or prepared folder and tokenizer, trackers, the batch's
    memory, and out= (a run folder; what resume= or a fresh start would do to it)."""
    cfg = copy.deepcopy(cfg)  # init= and prepared= set the shape on the config: the ranks do that themselves
    recipe = PretrainRecipe(cfg, DistContext.planned(cfg.device, world))
    recipe.notes = lambda lines, say=None: None  # rank 0 says them
    recipe.setup_engine()
    recipe.setup_init()
    recipe.setup_inputs()
    recipe.check_batch_fits()
    out = Path(cfg.out)
    check_run_dir(out)
    ckpt = resolve_resume(cfg, out)
    if ckpt is not None:
        check_resume_request(ckpt, cfg, out)
    elif out.exists():
        check_start_over(out, cfg.overwrite)
