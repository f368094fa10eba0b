"""CPU kernels for ELECTRA pretraining: cheaper dropout masks and an attention path that uses them. The
maths is transformers' own (same expectation, same per-element independence); only the random draws are
cheaper. Used when ``fast_cpu_kernels`` is on (the default); on CUDA every function here defers to torch.

Kept apart from ``electra.py`` (the objective) because these are speed details: the exported model never
contains them, and the model code reads the same with or without them.

Shapes: B sequences, L tokens, heads attention heads, D head size.
"""
from __future__ import annotations

import torch
from torch import nn


def fast_dropout(x: torch.Tensor, p: float) -> torch.Tensor:
    """Inverted dropout with a cheaper mask for CPU: one 64-bit random word per 4 elements, each 16-bit lane
    compared with a threshold (drop probability quantised to 1/65536). ``F.dropout`` on CPU draws a
    Bernoulli per element, ~8 ns each: ~13% of a small-preset step (63M dropout elements per step, attention
    probabilities included); this mask costs about half. Same expectation and the same per-element
    independence; draws from torch's global CPU generator (seeded, saved in checkpoints) like dropout."""
    n = x.numel()
    words = torch.empty((n + 3) // 4, dtype=torch.int64, device=x.device).random_(-(2**63), 2**63 - 1)
    lanes = words.view(torch.int16)[:n].view(x.shape)
    threshold = int(round(p * 65536)) - 32768  # P(lane < threshold) = p (to 1/65536)
    return torch.where(lanes >= threshold, x * (1.0 / (1.0 - p)), torch.zeros((), dtype=x.dtype, device=x.device))


class FastDropout(nn.Dropout):
    """``nn.Dropout`` that uses ``fast_dropout`` on CPU (swapped into transformers' modules by
    ``use_fast_dropout``; it holds no weights, so saved models are unchanged)."""

    def forward(self, x):
        if not self.training or self.p == 0.0 or x.device.type != "cpu":
            return super().forward(x)
        return fast_dropout(x, self.p)


def use_fast_dropout(model: nn.Module) -> None:
    """Swap every plain ``nn.Dropout`` in ``model`` for ``FastDropout`` (in place)."""
    for name, module in list(model.named_modules()):
        for child_name, child in list(module.named_children()):
            if type(child) is nn.Dropout:
                setattr(module, child_name, FastDropout(child.p, child.inplace))


def cpu_sdpa_attention(module, query, key, value, attention_mask, dropout: float = 0.0, scaling=None, **kwargs):
    """transformers' "sdpa" attention, except on CPU with attention dropout: there torch's SDPA falls back to
    its math path with a per-element Bernoulli; here the same math (QK^T, mask, softmax, dropout, xV) with
    ``fast_dropout``. Registered as attention implementation ``CPU_SDPA``; exported configs say "sdpa"."""
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    if dropout == 0.0 or query.device.type != "cpu":
        return sdpa_attention_forward(module, query, key, value, attention_mask, dropout=dropout, scaling=scaling,
                                      **kwargs)
    scaling = scaling if scaling is not None else query.size(-1) ** -0.5
    scores = torch.matmul(query, key.transpose(2, 3)) * scaling  # [B, heads, L, L]
    if attention_mask is not None:
        if attention_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attention_mask, torch.finfo(scores.dtype).min)
        else:
            scores = scores + attention_mask
    probs = fast_dropout(torch.softmax(scores, dim=-1, dtype=torch.float32).to(query.dtype), dropout)
    return torch.matmul(probs, value).transpose(1, 2).contiguous(), None


CPU_SDPA = "koelectra_cpu_sdpa"


def register_cpu_sdpa() -> None:
    """Make ``CPU_SDPA`` a name transformers' ``attn_implementation`` accepts (idempotent)."""
    from transformers import AttentionInterface
    from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, sdpa_mask

    AttentionInterface.register(CPU_SDPA, cpu_sdpa_attention)
    ALL_MASK_ATTENTION_FUNCTIONS.register(CPU_SDPA, sdpa_mask)
