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
        self.timeout = datetime.timedelta(minutes=timeout_minutes)
        if self.enabled and not dist.is_initialized():
            backend = "nccl" if device.type == "cuda" else "gloo"
            dist.init_process_group(backend, timeout=self.timeout)

    @classmethod
    def planned(cls, device_name: str, world: int) -> "DistContext":
        """Rank 0 of a job of ``world`` ranks not started yet, as the process that starts them sees it (``--nproc``
        checks a run's settings there): the sizes and the device rank 0 gets, no process group, every collective a
        no-op."""
        ctx = cls.__new__(cls)
        ctx.world, ctx.rank, ctx.local_rank, ctx.is_main, ctx.enabled = world, 0, 0, True, False
        device = resolve_device(device_name)
        if device.type == "cuda" and device.index is None:
            import torch

            device = torch.device("cuda", 0)
        ctx.device = device
        return ctx

    def wrap(self, model):
        """``model`` in DDP over the ranks; None in a single process. Drop it before ``close``."""
        if not self.enabled:
            return None
        from torch.nn.parallel import DistributedDataParallel as DDP

        return DDP(model, device_ids=[self.device.index] if self.device.type == "cuda" else None)

    def barrier(self):
        """Wait for every rank (a no-op in a single process), on the host: Ctrl-C reaches a rank waiting here while
        rank 0 builds the data cache or writes a checkpoint (``runtime.wait_for_ranks``; inside a collective the
        signal's handler would wait as long as the rank)."""
        if self.enabled:
            self._wait(None)

    def share(self, value) -> list:
        """Every rank's ``value`` (JSON, not None), in rank order, at a barrier on the host (``barrier``). For what
        the ranks say last before they exit: a collective's tensors are freed by gloo's worker thread after the
        caller has gone on, which in a process already shutting down ends it in SIGABRT
        (``runtime.wait_for_ranks``)."""
        return self._wait(value) if self.enabled else [value]

    def _wait(self, share):
        from ..runtime import wait_for_ranks

        return wait_for_ranks(self.world, self.timeout.total_seconds(),
                              "a rank stopped, or needs longer than ddp_timeout_minutes (rank 0 builds the "
                              "data cache while the others wait: raise it for a big corpus)", share=share)

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
        """Every rank's ``obj`` (picklable: tensors too), in rank order; mid-run (``share`` for the last word)."""
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def close(self):
        """Destroy the process group; drop every DDP module first. A reducer freed after this is the group's last
        owner, and gloo's destructor then runs with the GIL held, joining a worker thread that needs the GIL to free
        the last collective's tensors: a hang at exit (3 runs in 30 of two CPU ranks under load)."""
        if self.enabled:
            import gc

            import torch.distributed as dist

            gc.collect()  # a dropped DDP module caught in a reference cycle goes now, not after the group
            if dist.is_initialized():
                dist.destroy_process_group()


class SharedClock:
    """Rank 0's training clock, the same number on every rank: a time budget, the lr schedule that follows it and
    checkpoints every N minutes must agree across ranks (a rank-local number in the lr would make the ranks' weights
    drift apart). A broadcast reads a device value back (NCCL), which stalls a GPU's queue, so it happens once every
    ``every`` steps; in between, every rank extrapolates from broadcast values alone (the last one plus steps x the
    seconds per step between the last two), which keeps them identical. A single process reads its own clock."""

    def __init__(self, dist_ctx: DistContext, every: int):
        self.dist, self.every = dist_ctx, max(1, every)
        self.at: tuple[int, float] | None = None  # (step, rank 0's elapsed) of the last broadcast
        self.rate = 0.0  # seconds per step between the last two broadcasts

    def read(self, step: int, local_elapsed: float, local_step_s: float) -> tuple[float, float]:
        """(elapsed seconds, seconds per step) at optimizer step ``step``."""
        if not self.dist.enabled:
            return local_elapsed, local_step_s
        if self.at is None or step - self.at[0] >= self.every:
            shared = self.dist.broadcast_float(local_elapsed)
            if self.at is not None:
                self.rate = (shared - self.at[1]) / (step - self.at[0])
            self.at = (step, shared)
        return self.at[1] + (step - self.at[0]) * self.rate, self.rate


class SharedStop:
    """A stop request (``runtime.StopRequest``: Ctrl-C, or a scheduler's SIGTERM that ``--nproc`` passes on as one)
    that every rank acts on after the same step, so they can checkpoint and export together. torchrun's agent passes
    its signal on to each rank, and each takes it in a different step; once a step every rank adds whether it has one
    to an all-reduce (MAX) of one integer on a gloo group of its own, started before the step and read before the
    next. The host never waits for it (it had a step to arrive) and no device queue is touched (a NCCL read-back
    would stall it), and the ranks stop together one step after the first of them was asked. A single process stops
    at the step boundary it was asked at."""

    def __init__(self, dist_ctx: DistContext, request):
        self.request, self.enabled = request, dist_ctx.enabled
        self.pending = None  # (work, flag) of the all-reduce in flight
        if self.enabled:
            import torch.distributed as dist

            # collective: every rank makes it at the same point; a job across machines needs gloo to reach them
            # too (GLOO_SOCKET_IFNAME, as NCCL_SOCKET_IFNAME)
            self.group = dist.new_group(backend="gloo", timeout=dist_ctx.timeout)

    def now(self) -> bool:
        """Whether to stop before the next step; called once between two steps, on every rank."""
        if not self.enabled:
            return self.request.requested
        import torch
        import torch.distributed as dist

        if self.pending is not None:
            work, flag = self.pending
            work.wait()
            self.pending = None
            if flag.item():
                return True
        flag = torch.tensor([int(self.request.requested)], dtype=torch.int32)
        self.pending = (dist.all_reduce(flag, op=dist.ReduceOp.MAX, group=self.group, async_op=True), flag)
        return False

    def settle(self) -> None:
        """Wait for the all-reduce in flight: the loop ended on its budget, at the same step on every rank."""
        if self.pending is not None:
            self.pending[0].wait()
            self.pending = None


def param_digest(model) -> str:
    """sha256 of every parameter's bytes: equal across DDP ranks iff their weights are bit-identical."""
    h = hashlib.sha256()
    for name, p in model.state_dict().items():
        h.update(name.encode())
        h.update(p.detach().float().cpu().numpy().tobytes())
    return h.hexdigest()[:16]
