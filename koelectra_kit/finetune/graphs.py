"""The fine-tuning step as one CUDA graph (``cuda_graphs``: auto, on with a CUDA GPU, see ``wants_graphs``): forward,
loss, backward, clipping and the fused AdamW update recorded once and replayed with one launch per step.

Why: on an H100 (docs/benchmarks/gpu_check-h100.txt) a batch of 32 short reviews is a few milliseconds of
arithmetic, yet the eager step took 19-45 ms: the host issuing hundreds of small kernels was the step. torch.compile
with CUDA graphs (``compile=true compile_mode=reduce-overhead``) removes the launches too, but compiles for tens of
seconds per batch shape first, about as long as a 1,000-row fine-tune runs; recording a graph takes a few steps.

How, as PyTorch's "whole-network capture" recipe does it:

- one batch shape: every batch is padded to ``batch_size`` rows (copies of its first row whose label is
  ``IGNORE``, which the loss skips, so the mean is over the real rows as in ``train_step``) and ``width`` tokens
  (max_length; padding columns are masked). The batch is copied into static device tensors the graph reads;
- the learning rates are device tensors the graph reads; the scheduler (LambdaLR) fills them in place;
- the first ``WARMUP`` steps run eagerly on a side stream (real steps: they also create AdamW's state), the next
  one records the graph and replays it, every later one replays it;
- the step is ``train_step``'s, with autocast's cache of cast weights off (each step casts them again, inside
  the graph);
- gradients are the graph's own memory: the recorded backward writes them and the recorded update reads them, so
  they are not cleared between steps (``train_step`` sets them to None instead).

Not for fp16 (its loss scaler reads an overflow flag on the host) or with ``compile=true``. If recording fails, the
run says so once and goes on with the same padded batches, eagerly. ``capture=False`` runs exactly that eager
path: tests/test_finetune_graphs.py checks it trains as ``train_step`` does, on a CPU.
"""
from __future__ import annotations

from ..runtime import warn
from .step import train_step

IGNORE = -100  # cross_entropy's default ignore_index: a filler row adds nothing to the loss or its gradients
WARMUP = 3  # eager steps before recording (PyTorch's recipe: a few, on a side stream)


def wants_graphs(setting, device, dtype, compile: bool = False) -> bool:
    """``cuda_graphs`` resolved, once the device and the step's autocast dtype (None: fp32) are known. true/false as
    given (the recipe refuses true where it cannot run). auto: on a CUDA device, where the host issuing a small
    encoder's kernels is the step (an H100, 12 x 256: 4,516 examples/s, the eager loop 692), unless the step is fp16
    (its loss scaler reads the host; ``precision=auto`` picks it on a GPU without bf16) or ``compile=true`` (this
    records the eager step; a compiled model's CUDA graphs are ``compile_mode=reduce-overhead``). Every reader of the
    option goes through this: the string "auto" is truthy."""
    if setting != "auto":
        return bool(setting)
    import torch

    return device.type == "cuda" and dtype != torch.float16 and not compile


class GraphedStep:
    """``step(input_ids, attention_mask, labels) -> loss`` (a 0-d fp32 device tensor of its own), as
    ``finetune.step.train_step`` but replayed from one CUDA graph. Batches may have at most ``batch_size`` rows
    and ``width`` columns."""

    def __init__(self, model, optimizer, *, batch_size: int, width: int, device, dtype, class_weights=None,
                 max_grad_norm: float = 1.0, capture: bool = True):
        import torch

        self.model, self.optimizer, self.device, self.dtype = model, optimizer, device, dtype
        self.class_weights, self.max_grad_norm = class_weights, max_grad_norm
        self.batch_size, self.width = batch_size, width
        self.capture = capture and device.type == "cuda"
        self.ids = torch.zeros((batch_size, width), dtype=torch.long, device=device)
        self.mask = torch.zeros((batch_size, width), dtype=torch.long, device=device)
        self.labels = torch.full((batch_size,), IGNORE, dtype=torch.long, device=device)
        if self.capture:
            for group in optimizer.param_groups:
                # read by the graph at each replay: a float would be recorded as a constant
                group["lr"] = torch.tensor(float(group["lr"]), dtype=torch.float32, device=device)
                group["capturable"] = True
        self.steps = 0
        self.graph = None
        self.loss = None

    def _load(self, input_ids, attention_mask, labels) -> None:
        """The batch into the static tensors: rows past it repeat its first row, labelled IGNORE."""
        n, w = input_ids.shape
        if n > self.batch_size or w > self.width:
            raise ValueError(f"a batch of {n} x {w} does not fit the recorded {self.batch_size} x {self.width}")
        self.ids[:n, :w].copy_(input_ids, non_blocking=True)
        self.mask[:n, :w].copy_(attention_mask, non_blocking=True)
        self.labels[:n].copy_(labels, non_blocking=True)
        if w < self.width:
            self.ids[:n, w:].zero_()
            self.mask[:n, w:].zero_()
        if n < self.batch_size:
            self.ids[n:].copy_(self.ids[:1].expand(self.batch_size - n, -1))
            self.mask[n:].copy_(self.mask[:1].expand(self.batch_size - n, -1))
            self.labels[n:].fill_(IGNORE)

    def _body(self, clear_grads: bool = True):
        """``train_step`` on the static batch, without autocast's weight cache (a cast cached while recording would
        be the graph's memory, freed as the recording ends: PyTorch's CUDA-graphs notes); recording leaves the
        gradients for the recorded update (``clear_grads=False``)."""
        return train_step(self.model, self.optimizer, self.ids, self.mask, self.labels, device=self.device,
                          dtype=self.dtype, class_weights=self.class_weights, max_grad_norm=self.max_grad_norm,
                          amp_cache=False, clear_grads=clear_grads)

    def _record(self):
        import torch

        self.optimizer.zero_grad(set_to_none=True)  # the recorded backward writes them, in the graph's memory
        try:
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph):
                self.loss = self._body(clear_grads=False)
        except Exception as e:  # noqa: BLE001  (any failure: the run goes on eagerly, as it would have)
            warn(f"warning: cuda_graphs: recording the step failed ({type(e).__name__}: {str(e)[:200]}); the run "
                 "goes on without CUDA graphs")
            self.capture = False
            self.optimizer.zero_grad(set_to_none=True)
            for group in self.optimizer.param_groups:
                group["capturable"] = False
            return self._body()
        self.graph = graph
        graph.replay()  # recording ran nothing: this is the step
        return self.loss.clone()

    def __call__(self, input_ids, attention_mask, labels):
        import torch

        self._load(input_ids, attention_mask, labels)
        self.steps += 1
        if not self.capture:
            return self._body()
        if self.graph is not None:
            self.graph.replay()
            return self.loss.clone()  # the graph's loss tensor is overwritten by the next replay
        if self.steps <= WARMUP:
            side = torch.cuda.Stream(self.device)
            side.wait_stream(torch.cuda.current_stream(self.device))
            with torch.cuda.stream(side):
                loss = self._body()
            torch.cuda.current_stream(self.device).wait_stream(side)
            return loss
        return self._record()
