"""The ELECTRA objective (Clark et al., ICLR 2020) on transformers' own classes: model building with
shared embeddings, dynamic masking, masked-only generator logits, Gumbel sampling, the joint loss and
the per-step diagnostics. The ``pretrain`` package (config, data, loop, checkpoints) is the only caller; the
benchmark imports ``build_pretrain_model`` and ``train_step`` from here to time the real code path. Beside it:
``cpu`` (cheaper CPU dropout and attention, a speed detail) and ``prior`` (the
positional-attention initialization).

Shapes: B sequences of L tokens, K = masked slots per sequence (fixed: round(mask_prob * L)),
V vocabulary, H hidden size, E embedding size.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .prior import positional_prior_
from ..runtime import optimizer_step

# ---------------------------------------------------------------------------------------------
# Model building
# ---------------------------------------------------------------------------------------------


def electra_config(vocab_size: int, pad_token_id: int, *, hidden_size: int, num_layers: int, num_heads: int,
                   intermediate_size: int, embedding_size: int, max_position_embeddings: int,
                   hidden_dropout: float, attention_dropout: float, initializer_range: float,
                   hidden_act: str = "gelu", layer_norm_eps: float = 1e-12, attn_implementation: str = "sdpa"):
    from transformers import ElectraConfig

    cfg = ElectraConfig(
        vocab_size=vocab_size, embedding_size=embedding_size, hidden_size=hidden_size,
        num_hidden_layers=num_layers, num_attention_heads=num_heads, intermediate_size=intermediate_size,
        hidden_act=hidden_act, hidden_dropout_prob=hidden_dropout, attention_probs_dropout_prob=attention_dropout,
        max_position_embeddings=max_position_embeddings, type_vocab_size=2, initializer_range=initializer_range,
        layer_norm_eps=layer_norm_eps, pad_token_id=pad_token_id,
    )
    # SDPA: fused attention kernels (flash / memory-efficient on CUDA, a fused softmax on CPU) instead of
    # materialising the B x heads x L x L score tensor through separate matmul/softmax/dropout ops.
    cfg._attn_implementation = attn_implementation
    return cfg


class ElectraPretrainModel(nn.Module):
    """Generator + discriminator (objective ``electra``) or one masked LM (objective ``mlm``).

    One ``nn.Module`` so that ``parameters()`` lists the shared embedding once (for the optimizer),
    DDP wraps both models together, and ``forward`` returns the whole loss.

    - ``discriminator``: ``ElectraForPreTraining`` (``None`` for mlm)
    - ``generator``: ``ElectraForMaskedLM``; for mlm it is the encoder being trained, shaped like the
      discriminator would be, and it is what gets exported as the encoder.
    """

    def __init__(self, generator, discriminator=None, special_ids=(), temperature: float = 1.0):
        super().__init__()
        self.generator = generator
        self.discriminator = discriminator
        self.temperature = temperature
        self.compiled_layers = False  # set by ``compile_layers`` (the step marks CUDA-graph steps then)
        if discriminator is not None:
            # ELECTRA shares the whole embedding block (token, position and type tables and their
            # LayerNorm), as the official code does with one "electra/embeddings" variable scope. With
            # ``embedding_size`` the tables don't depend on either model's hidden size; each model keeps its
            # own ``embeddings_project`` (E -> H), which transformers creates when E != H.
            generator.electra.embeddings = discriminator.electra.embeddings
        # The generator's output layer is tied to the (shared) input embedding, as in the paper; re-tie
        # explicitly because the embedding module was just replaced.
        generator.generator_lm_head.weight = generator.electra.embeddings.word_embeddings.weight
        # Never sampled as replacements: the generator is never trained to predict them (special tokens are
        # never masked), and a sampled [CLS]/[SEP]/[PAD]/[MASK] would be trivially detectable noise.
        self.register_buffer("no_sample", torch.tensor(sorted(set(special_ids)), dtype=torch.long), persistent=False)

    @property
    def objective(self) -> str:
        return "mlm" if self.discriminator is None else "electra"

    def encoder(self):
        """The ``ElectraModel`` exported as ``out/discriminator`` (the encoder fine-tuning starts from)."""
        return (self.generator if self.discriminator is None else self.discriminator).electra

    def forward(self, input_ids, attention_mask, masked_ids, positions, valid, disc_weight: float | torch.Tensor,
                rng: torch.Generator | None = None, sample_u: torch.Tensor | None = None):
        """One micro-batch.

        input_ids, masked_ids: [B, L] original / generator input; attention_mask: [B, L] (or None when no
        padding: lets SDPA skip the mask); positions: [B, K] masked slots; valid: [B, K] bool (a row with
        fewer candidates than K has trailing invalid slots); sample_u: [B, K] uniforms for the generator's
        samples, drawn by ``mask_batch`` (without them, sampling draws from ``rng`` here). Returns (loss, stats
        dict of tensors, all of fixed shape: nothing here waits for the device or breaks a compiled graph).
        """
        gen = self.generator
        hidden = gen.electra(masked_ids, attention_mask=attention_mask).last_hidden_state  # [B, L, Hg]
        # Logits only at the masked slots: the generator head (dense + LayerNorm + E x V projection) on
        # every position is wasted work, since only ~15% of positions have a target, and with a 30k
        # vocabulary the projection costs more than the whole (narrow) generator encoder.
        picked = torch.gather(hidden, 1, positions.unsqueeze(-1).expand(-1, -1, hidden.size(-1)))  # [B, K, Hg]
        logits = gen.generator_lm_head(gen.generator_predictions(picked)).float()  # [B, K, V]
        targets = torch.gather(input_ids, 1, positions)  # [B, K]
        validf = valid.float()
        n_masked = validf.sum().clamp(min=1.0)
        # Flattened to [B*K, V]: a log-softmax over a strided (transposed) dim is several times slower on CPU.
        ce = F.cross_entropy(logits.view(-1, logits.size(-1)), targets.view(-1), reduction="none")
        gen_loss = (ce * validf.view(-1)).sum() / n_masked
        # Accuracy only where the input was corrupted ([MASK] or a random token): at the slots left unchanged
        # (15% in ELECTRA's recipe) copying the visible token scores for free, which would hide a model that
        # learned nothing but copying (up to +15 points).
        corrupted = valid & (torch.gather(masked_ids, 1, positions) != targets)
        # targets and valid, not targets[valid]: a boolean index has a data-dependent shape, which makes CUDA wait
        # for the device (nonzero) and splits a compiled graph.
        stats = {"gen_loss": gen_loss.detach(), "gen_correct": ((logits.argmax(-1) == targets) & corrupted).sum(),
                 "n_masked": corrupted.sum(), "targets": targets, "valid": valid}
        if self.discriminator is None:
            return gen_loss, stats

        with torch.no_grad():
            if sample_u is not None:
                sampled = sample_softmax(logits, self.temperature, self.no_sample, uniform=sample_u)
            else:
                sampled = sample_softmax(logits, self.temperature, self.no_sample, rng)
            sampled = torch.where(valid, sampled, targets)
            fake = input_ids.scatter(1, positions, sampled)  # [B, L]
            # A sampled token equal to the original counts as "original" (label 0), as in the paper.
            labels = (fake != input_ids).float()

        disc = self.discriminator
        d_hidden = disc.electra(fake, attention_mask=attention_mask).last_hidden_state
        d_logits = disc.discriminator_predictions(d_hidden).float()  # [B, L]
        # BCE over all real (non-pad) tokens, [CLS]/[SEP] included, as the official implementation weights it.
        real = torch.ones_like(d_logits) if attention_mask is None else attention_mask.float()
        n_real = real.sum().clamp(min=1.0)
        disc_loss = (F.binary_cross_entropy_with_logits(d_logits, labels, reduction="none") * real).sum() / n_real
        loss = gen_loss + disc_weight * disc_loss
        with torch.no_grad():
            pred = (d_logits > 0).float() * real
            stats.update({
                "disc_loss": disc_loss.detach(),
                "n_real": real.sum(), "n_replaced": (labels * real).sum(),
                "disc_correct": ((pred == labels).float() * real).sum(),
                "true_pos": (pred * labels).sum(), "pred_pos": pred.sum(),
                "d_logits": d_logits.detach(), "labels": labels, "real": real,
            })
        return loss, stats


def sample_softmax(logits: torch.Tensor, temperature: float, banned: torch.Tensor, rng=None,
                   method: str = "auto", uniform: torch.Tensor | None = None) -> torch.Tensor:
    """One exact sample per row from softmax(logits / T) over the last dim, never a ``banned`` id. No
    gradient flows through sampling (as in the paper: the generator learns by MLM only, not adversarially).

    Inverse CDF: one uniform per row searched in the cumulative softmax. ``uniform`` ([...] = logits' shape
    without the last dim) gives those draws; the training step passes ``mask_batch``'s, so that no random
    generator is used inside the model's forward (a ``torch.Generator`` there breaks a ``torch.compile`` graph)
    and the draws come from the masking stream on every device (exact resume). Drawing B x K x V uniforms for
    Gumbel-max instead costs ~7 ns each on CPU (measured: 0.14 s + 0.06 s of logs per step for 608 x 32k logits,
    ~5% of a small-preset step) while a cumsum is one cheap pass.
    ``method`` (without ``uniform``): auto (Gumbel-max on CUDA, inverse CDF elsewhere) | gumbel | cdf.
    """
    scores = logits.float() / temperature
    if banned.numel():
        scores = scores.index_fill(-1, banned, float("-inf"))
    if uniform is None and (method == "gumbel" or (method == "auto" and logits.is_cuda)):
        u = torch.rand(scores.shape, device=scores.device, generator=rng)
        gumbel = -torch.log((-torch.log(u.clamp_(min=1e-20))).clamp_(min=1e-20))
        return (scores + gumbel).argmax(-1)
    cdf = torch.softmax(scores, dim=-1).cumsum_(-1)  # [..., V]
    if uniform is None:
        uniform = torch.rand(cdf.shape[:-1], device=cdf.device, generator=rng)
    u = uniform.unsqueeze(-1).to(cdf.dtype) * cdf[..., -1:]
    return torch.searchsorted(cdf, u, right=True).squeeze(-1).clamp_(max=cdf.size(-1) - 1)


def build_pretrain_model(vocab_size: int, pad_token_id: int, special_ids, model_cfg, gen_cfg,
                         objective: str = "electra", max_position_embeddings: int = 512,
                         temperature: float = 1.0, attn_implementation: str = "sdpa") -> ElectraPretrainModel:
    """``model_cfg``/``gen_cfg``: ``pretrain.ModelConfig`` / ``pretrain.GeneratorConfig`` (duck-typed); with
    ``model_cfg.init == "positional"`` the encoders start from ``prior.positional_prior_``."""
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    common = dict(embedding_size=model_cfg.embedding_size, max_position_embeddings=max_position_embeddings,
                  hidden_dropout=model_cfg.hidden_dropout, attention_dropout=model_cfg.attention_dropout,
                  initializer_range=model_cfg.initializer_range, hidden_act=model_cfg.hidden_act,
                  attn_implementation=attn_implementation)
    disc_shape = dict(hidden_size=model_cfg.hidden_size, num_layers=model_cfg.num_layers,
                      num_heads=model_cfg.num_heads, intermediate_size=model_cfg.intermediate_size)
    if objective == "mlm":
        # BERT-style baseline at equal compute: the discriminator-shaped encoder with ELECTRA's MLM head.
        mlm = ElectraForMaskedLM(electra_config(vocab_size, pad_token_id, **disc_shape, **common))
        model = ElectraPretrainModel(mlm, None, special_ids, temperature)
    else:
        disc = ElectraForPreTraining(electra_config(vocab_size, pad_token_id, **disc_shape, **common))
        gen = ElectraForMaskedLM(electra_config(vocab_size, pad_token_id, **generator_shape(model_cfg, gen_cfg),
                                                **common))
        model = ElectraPretrainModel(gen, disc, special_ids, temperature)
    if getattr(model_cfg, "init", "normal") == "positional":
        encoders = [m.electra for m in (model.discriminator, model.generator) if m is not None]
        positional_prior_(encoders, scale=model_cfg.init_scale, shifts=tuple(model_cfg.init_shifts),
                          pos_dims=model_cfg.init_pos_dims, initializer_range=model_cfg.initializer_range)
    return model


def generator_shape(model_cfg, gen_cfg) -> dict:
    """The generator's width: ``size`` x the discriminator's hidden size, FFN size and heads, as the official
    ``generator_hidden_size`` multiplier does (small: 256 -> 64 hidden, 1024 -> 256 FFN, 4 -> 1 head); any
    explicit field wins. Depth defaults to the discriminator's (the paper's generators are narrower, not
    shallower)."""
    f = gen_cfg.size
    hidden = gen_cfg.hidden_size or max(1, int(round(model_cfg.hidden_size * f)))
    heads = gen_cfg.num_heads or max(1, int(model_cfg.num_heads * f))
    ffn = gen_cfg.intermediate_size or max(1, int(round(model_cfg.intermediate_size * f)))
    layers = gen_cfg.num_layers or model_cfg.num_layers
    return dict(hidden_size=hidden, num_layers=layers, num_heads=heads, intermediate_size=ffn)


# ---------------------------------------------------------------------------------------------
# Dynamic masking
# ---------------------------------------------------------------------------------------------


@dataclass
class MaskedBatch:
    input_ids: torch.Tensor  # [B, L] original
    attention_mask: torch.Tensor | None  # [B, L] long, None when the batch has no padding
    masked_ids: torch.Tensor  # [B, L] generator input
    positions: torch.Tensor  # [B, K]
    valid: torch.Tensor  # [B, K] bool
    n_tokens: int  # real tokens in the batch (known on the host: no device sync)
    sample_u: torch.Tensor | None = None  # [B, K] uniforms for the generator's samples (sample_softmax)


def num_mask_slots(seq_len: int, mask_prob: float) -> int:
    return max(1, int(round(seq_len * mask_prob)))


def mask_batch(input_ids: torch.Tensor, attention_mask: torch.Tensor | None, special_ids: torch.Tensor,
               mask_token_id: int, vocab_size: int, mask_prob: float, mask_token_prob: float,
               random_token_prob: float, rng: torch.Generator | None, n_tokens: int) -> MaskedBatch:
    """Choose round(mask_prob x candidates) positions per row, uniformly among non-special real tokens,
    and corrupt them: [MASK] with ``mask_token_prob``, a random token with ``random_token_prob``, else
    unchanged. ELECTRA's official code uses 85% [MASK] / 15% unchanged; BERT 80/10/10.

    A fixed number of slots K per row (not a Bernoulli draw per token) keeps every tensor's shape static
    across steps (``torch.compile`` compiles once) and lets the generator gather exactly K hidden states.
    """
    B, L = input_ids.shape
    K = num_mask_slots(L, mask_prob)
    cand = ~torch.isin(input_ids, special_ids)
    if attention_mask is not None:
        cand &= attention_mask.bool()
    # Uniform scores for candidates, -1 for the rest: the top K are a uniform sample without replacement.
    scores = torch.rand((B, L), device=input_ids.device, generator=rng)
    scores = torch.where(cand, scores, torch.full_like(scores, -1.0))
    top, positions = scores.topk(K, dim=1)  # [B, K]
    k_row = (cand.sum(1).float() * mask_prob).round().clamp(min=1).long()  # [B]
    valid = (torch.arange(K, device=input_ids.device).unsqueeze(0) < k_row.unsqueeze(1)) & (top >= 0)
    r = torch.rand((B, K), device=input_ids.device, generator=rng)
    orig = torch.gather(input_ids, 1, positions)
    random_tok = torch.randint(0, vocab_size, (B, K), device=input_ids.device, generator=rng)
    new = torch.where(r < mask_token_prob, torch.full_like(orig, mask_token_id),
                      torch.where(r < mask_token_prob + random_token_prob, random_tok, orig))
    new = torch.where(valid, new, orig)
    masked_ids = input_ids.scatter(1, positions, new)
    sample_u = torch.rand((B, K), device=input_ids.device, generator=rng)
    return MaskedBatch(input_ids, attention_mask, masked_ids, positions, valid, n_tokens, sample_u)


# ---------------------------------------------------------------------------------------------
# Diagnostics
# ---------------------------------------------------------------------------------------------


def replaced_auc(logits: torch.Tensor, labels: torch.Tensor) -> float:
    """Rank-based ROC AUC (Mann-Whitney U) of discriminator logits for "replaced", ties given their average
    rank (bf16 logits tie often). NaN when one class is absent. O(n log n) on the step's tokens."""
    logits = logits.float().flatten()
    labels = labels.flatten().bool()
    n_pos = int(labels.sum())
    n_neg = labels.numel() - n_pos
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    sorted_vals, order = logits.sort()
    _, inverse, counts = torch.unique_consecutive(sorted_vals, return_inverse=True, return_counts=True)
    ends = counts.cumsum(0).double()  # 1-based rank of each tie group's last member
    avg_rank = ends - (counts.double() - 1) / 2  # average 1-based rank of each tie group
    ranks = torch.empty_like(avg_rank[inverse]).scatter_(0, order, avg_rank[inverse])
    u = ranks[labels].sum().item() - n_pos * (n_pos + 1) / 2
    return u / (n_pos * n_neg)


# ---------------------------------------------------------------------------------------------
# The optimizer step
# ---------------------------------------------------------------------------------------------


def build_optimizer(model: nn.Module, lr: float, weight_decay: float, betas=(0.9, 0.999), eps: float = 1e-6,
                    device_type: str = "cpu"):
    """AdamW, no weight decay on LayerNorm weights and biases (as BERT/ELECTRA). Fused kernel where torch
    has it (CPU and CUDA): one pass over all parameters instead of ~10 elementwise ops per tensor."""
    decay, no_decay = [], []
    for name, p in model.named_parameters():  # shared tensors are listed once
        if not p.requires_grad:
            continue
        (no_decay if p.ndim < 2 or "LayerNorm" in name or name.endswith(".bias") else decay).append(p)
    groups = [{"params": decay, "weight_decay": weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    try:
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, fused=True)
    except (RuntimeError, TypeError, ValueError):
        return torch.optim.AdamW(groups, lr=lr, betas=betas, eps=eps, foreach=True)


def compile_layers(model: ElectraPretrainModel, mode: str | None = None, **options) -> None:
    """Regional compilation: ``torch.compile`` each transformer layer in place (``Module.compile``: parameter names
    and exports unchanged) instead of the whole forward. The layers of one encoder are alike, so torch traces and
    compiles one layer per encoder shape (generator, discriminator) and reuses that code for the others: cold, the
    ``gpu-10min`` shape's first step took 36 s instead of 126 s on 2 CPU cores (docs/pretrain.md). What it gives up:
    fusion across a layer's edges, and the embeddings, heads, loss and sampling stay eager (with CUDA graphs, each
    layer is its own replayed graph).

    ``dynamic=False``: the second encoder's layer has another hidden size; without it torch would recompile that
    layer with a symbolic hidden size (automatic dynamic shapes), slower kernels for both encoders. ``options``: more
    ``torch.compile`` arguments (tests pass ``backend="eager"``).
    """
    for m in (model.generator, model.discriminator):
        if m is not None:
            for layer in m.electra.encoder.layer:
                layer.compile(mode=mode, dynamic=False, **options)
    model.compiled_layers = True


def train_step(model, optimizer, micro_batches, *, disc_weight: float, lr: float, amp_dtype=None,
               device_type: str = "cpu", scaler=None, max_grad_norm: float = 1.0, rng=None, wrapped=None):
    """One optimizer step over ``micro_batches`` (gradient accumulation): forward/backward each, clip, step.

    ``model`` is the ``ElectraPretrainModel``; ``wrapped`` what the forward runs through, when not the bare
    model: its ``torch.compile`` and/or DDP wrapper (DDP all-reduces gradients only on the last micro-batch);
    ``compile_layers`` compiles in place (no wrapper).
    Returns (stats of the last micro-batch, summed stats over all micro-batches, grad norm) as device tensors:
    the caller decides when to sync them to the host.
    """
    import contextlib

    fwd = wrapped if wrapped is not None else model
    no_sync = getattr(fwd, "no_sync", None)  # DDP (also through a compiled wrapper's attribute forwarding)
    for group in optimizer.param_groups:
        group["lr"] = lr
    n = len(micro_batches)
    # lambda as a 0-d device tensor (a fill kernel, no copy): a Python float that changes (lambda warm-up) would
    # make torch.compile recompile the forward for each new value.
    lam = torch.full((), float(disc_weight), device=micro_batches[0].input_ids.device)
    sums: dict = {}
    stats = {}
    for i, mb in enumerate(micro_batches):
        sync = no_sync() if (no_sync is not None and i < n - 1) else contextlib.nullcontext()
        if (wrapped is not None or getattr(model, "compiled_layers", False)) and hasattr(torch, "compiler"):
            # A new "step" for CUDA graphs (compile_mode=reduce-overhead): each micro-batch's replay may reuse the
            # previous one's output memory, so every output kept past it is cloned below. No-op otherwise.
            torch.compiler.cudagraph_mark_step_begin()
        with sync:
            ctx = torch.autocast(device_type=device_type, dtype=amp_dtype) if amp_dtype else contextlib.nullcontext()
            with ctx:
                loss, stats = fwd(mb.input_ids, mb.attention_mask, mb.masked_ids, mb.positions, mb.valid,
                                  lam, rng, mb.sample_u)
            loss = loss / n
            (scaler.scale(loss) if scaler is not None else loss).backward()
        for k, v in stats.items():
            if k in SUMMED:
                sums[k] = sums[k] + v if k in sums else v.clone()
        sums["loss"] = sums["loss"] + loss.detach() if "loss" in sums else loss.detach()
    if scaler is not None:
        scaler.unscale_(optimizer)
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), max_grad_norm if max_grad_norm > 0 else math.inf)
    optimizer_step(optimizer, scaler)
    return stats, sums, grad_norm


# Per-micro-batch stats that add up over micro-batches and steps (losses are means: summed here and divided
# by the number of micro-batches by the caller).
SUMMED = ("gen_loss", "disc_loss", "gen_correct", "n_masked", "n_real", "n_replaced", "disc_correct",
          "true_pos", "pred_pos")
