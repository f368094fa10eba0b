"""torchrun support: the process group from torchrun's environment, the few collectives the loop needs,
and a digest that shows whether every rank ended with the same weights. A single process needs none of it:
every method is then a no-op or returns its input.
"""
from __future__ import annotations

import hashlib
import os

from ..runtime import resolve_device


class DistContext:
    """torchrun's environment (RANK/WORLD_SIZE/LOCAL_RANK) -> process group; a single process otherwise."""

    def __init__(self, device_name: str, timeout_minutes: float):
        import datetime

        import torch
        import torch.distributed as dist

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.is_main = self.rank == 0
        device = resolve_device(device_name)
        if device.type == "cuda" and device.index is None:
            device = torch.device("cuda", self.local_rank if self.world > 1 else torch.cuda.current_device())
        if device.type == "cuda":
            torch.cuda.set_device(device)
        self.device = device
        self.enabled = self.world > 1
        if self.enabled and not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(backend, timeout=datetime.timedelta(minutes=timeout_minutes))

    def barrier(self):
        """Wait for every rank (a no-op in a single process)."""
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def all_reduce_sum(self, t):
        """``t`` summed over ranks, in place."""
        if self.enabled:
            import torch.distributed as dist

            dist.all_reduce(t)
        return t

    def broadcast_float(self, value: float) -> float:
        """Rank 0's ``value`` on every rank (time budgets: every rank must stop at the same step)."""
        if not self.enabled:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.broadcast(t, 0)
        return float(t.item())

    def gather(self, obj) -> list:
        """Every rank's ``obj`` (picklable), in rank order."""
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def close(self):
        if self.enabled:
            import torch.distributed as dist

            if dist.is_initialized():
                dist.destroy_process_group()


def param_digest(model) -> str:
    """sha256 of every parameter's bytes: equal across DDP ranks iff their weights are bit-identical."""
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]
