"""One optimization step of fine-tuning on one batch: what the recipe's loop runs, what ``graphs.GraphedStep``
records as a CUDA graph, and what benchmarks/bench_finetune.py times against a textbook step."""
from __future__ import annotations

from ..classify.classifier import attention_mask_for
from ..runtime import autocast, optimizer_step


def train_step(model, optimizer, input_ids, attention_mask, labels, *, device, dtype, class_weights=None,
               max_grad_norm: float = 1.0, scaler=None, amp_cache: bool = True, clear_grads: bool = True):
    """One optimization step on one batch; returns the loss, a 0-d fp32 tensor on ``device`` (``float(loss)`` for
    the number). Nothing here reads a value back to the host: on a GPU the host queues step after step while the
    GPU works, and the loop reads the losses once per ``log_every`` steps (before, a ``loss.item()`` here made the
    host wait for every step's last kernel). The batch's host tensors may be pinned (``collate(pin=True)``): their
    copies then do not wait either. Rows labelled -100 count for nothing (cross_entropy's ignore_index).
    ``amp_cache=False, clear_grads=False``: as a CUDA graph records it (``graphs.GraphedStep``): no autocast cache,
    and the gradients left in place for the recorded update to read."""
    import torch

    model.train()
    input_ids, attention_mask, labels = (t.to(device, non_blocking=True) for t in (input_ids, attention_mask, labels))
    with autocast(device, dtype, cache=amp_cache):
        logits = model(input_ids=input_ids, attention_mask=attention_mask_for(model, attention_mask)).logits
    # Loss in fp32 from the (possibly bf16) logits, so class weights and the softmax stay exact.
    loss = torch.nn.functional.cross_entropy(logits.float(), labels, weight=class_weights)
    if scaler is not None:  # fp16 needs loss scaling; bf16 and fp32 don't
        scaler.scale(loss).backward()
        scaler.unscale_(optimizer)
    else:
        loss.backward()
    if max_grad_norm:
        torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm)  # (the norm stays on the device)
    # (fp16's scaler: fused AdamW, the GPU's, skips an overflowed step on the GPU; with a non-fused optimizer the
    # scaler reads its inf flag back every step)
    if clear_grads:
        optimizer_step(optimizer, scaler)
    else:
        optimizer.step()
    return loss.detach()
