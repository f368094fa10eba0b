"""What a Python entry function (``finetune()``, ``pretrain()``, ``distill()``, ``train_tokenizer()``) changes for
the whole process, put back when it returns or raises. Here, not in runtime.py: it reaches the hub's offline switch
(``io.hubreach``), a layer above runtime."""
from __future__ import annotations

import contextlib


@contextlib.contextmanager
def entry_scope():
    """What a run changes for the whole process, put back when a Python entry function (``finetune()``,
    ``pretrain()``, ``distill()``, ``train_tokenizer()``) returns or raises: torch's thread count (``threads=``) and
    the hub's offline mode that a failed reachability question switched on (``io.hubreach.offline_scope``). The CLI's
    process ends with its command; a notebook's goes on to the user's own code."""
    import torch

    from .hubreach import offline_scope

    threads = torch.get_num_threads()
    try:
        with offline_scope():
            yield
    finally:
        if torch.get_num_threads() != threads:
            torch.set_num_threads(threads)
