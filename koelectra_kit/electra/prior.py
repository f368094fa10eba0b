"""The positional-attention prior: an initialization of transformers' ELECTRA encoders under which every
attention head starts as a previous/next-token reader. It is what leaves the unigram plateau at once on
small budgets (measured in docs/RESULTS.md); ``model.init: positional`` turns it on.

Kept apart from ``electra.py`` because it is initialization only: after it, every tensor has the shape
transformers gives it, the training code never sees it, and the exported model is a plain ELECTRA.

Shapes: P position-table rows, E embedding size, H hidden size, F = pos_dims / 2 frequencies, d = 2F.
"""
from __future__ import annotations

import math

import torch
from torch import nn




def positional_prior_(electra_models, *, scale: float = 2.0, shifts=(1, -1), pos_dims: int = 32,
                      initializer_range: float = 0.02) -> None:
    """Initialise ``ElectraModel``s (discriminator and generator, which share one embedding block) so that
    at step 0 each attention head already looks at a fixed neighbour (offset +1, -1, +2, ...) of its token.

    Why: with learned absolute positions initialised at random, attention starts uniform over the sequence;
    the only cheap solution is then the unigram one (predict frequent tokens everywhere), and on short noisy
    comments the models sit there for >10^7 tokens (docs/RESULTS.md). Starting the heads
    as "previous/next token" readers makes bigram-like predictions available from step 0, so the generator's
    masked-token accuracy rises at once and the discriminator gets non-trivial replacements to detect. It is
    an initialization only (the mimetic-initialization idea, Trockman & Kolter 2023): every tensor keeps the
    shape transformers' ELECTRA classes give it, so the exported model loads with ``from_pretrained``.

    - position table: sinusoids ``(cos wp, sin wp)`` for ``pos_dims/2`` frequencies in the first ``pos_dims``
      embedding dims, sized so their norm matches the word embeddings' (std ``initializer_range``) in the
      other dims; word and token-type tables are zeroed in those dims (position and content start apart).
    - ``embeddings_project`` (E -> H, when the sizes differ): identity from the position dims to the first
      ``pos_dims`` hidden dims, which no other hidden dim reads. A model with ``H <= pos_dims`` (a 1/4-width
      generator) reads ``H/4`` of the frequencies, spread and highest included, into its first ``H/2`` dims.
    - every layer, head h: its first ``pos_dims`` query/key dims read the position dims; the query rotated
      by ``shift`` positions (R(w * shift) per frequency pair), the key unrotated, both scaled by ``scale``:
      q.k peaks where p' = p + shift. Heads take shifts round-robin across layers and heads, so a one-head
      model still gets both directions over its layers. The rest of each head stays random (content).
    """
    emb = electra_models[0].embeddings  # shared by all models given
    E = emb.word_embeddings.weight.shape[1]
    F_ = pos_dims // 2
    if F_ < 1 or 2 * F_ >= E:
        raise ValueError(f"pos_dims {pos_dims} must be in [2, embedding_size {E})")
    freqs = torch.linspace(math.pi / F_, math.pi, F_)  # from a 2F-token period down to 2 tokens
    with torch.no_grad():
        sinusoidal_positions_(emb, freqs, initializer_range)
        rot = shift_rotations(freqs, shifts)
        for model in electra_models:
            sel = position_dims_read(2 * F_, model.config.hidden_size)
            project_positions_(model, sel, 2 * F_)
            neighbour_heads_(model, rot[:, sel][:, :, sel], scale)


def sinusoidal_positions_(emb, freqs: torch.Tensor, initializer_range: float) -> None:
    """The first d = 2F dims of the position table become ``(cos wp, sin wp)``; word and token-type tables
    are zeroed there (position and content start apart)."""
    E = emb.word_embeddings.weight.shape[1]
    F_ = len(freqs)
    d = 2 * F_
    n_pos = emb.position_embeddings.weight.shape[0]
    angles = torch.arange(n_pos).float()[:, None] * freqs[None, :]  # [P, F]
    amp = initializer_range * math.sqrt((E - d) / F_)  # |pos part|^2 = F amp^2 = |word part|^2
    table = emb.position_embeddings.weight
    table[:, :d] = 0.0
    table[:, 0:d:2] = amp * torch.cos(angles)
    table[:, 1:d:2] = amp * torch.sin(angles)
    table[:, d:].normal_(0.0, initializer_range * 0.1)  # little content in the position table
    emb.word_embeddings.weight[:, :d] = 0.0
    emb.token_type_embeddings.weight[:, :d] = 0.0


def shift_rotations(freqs: torch.Tensor, shifts) -> torch.Tensor:
    """[len(shifts), d, d]: R(shift), per frequency a 2x2 rotation by w * shift."""
    F_ = len(freqs)
    rot = torch.zeros(len(shifts), 2 * F_, 2 * F_)
    for i, s in enumerate(shifts):
        c, sn = torch.cos(freqs * s), torch.sin(freqs * s)
        for f in range(F_):
            rot[i, 2 * f:2 * f + 2, 2 * f:2 * f + 2] = torch.tensor([[c[f], -sn[f]], [sn[f], c[f]]])
    return rot


def position_dims_read(d: int, H: int) -> torch.Tensor:
    """The position dims (of the d) that a model of hidden size H reads: all of them, or for a model no
    wider than the position block (a 1/4-width generator) a spread subset of the frequencies, highest
    included (it makes the +-1 peaks sharp), in half its hidden dims; the other half stays content."""
    F_ = d // 2
    fsel = torch.arange(F_)
    if d >= H:
        fsel = torch.linspace(F_ - 1, 0, max(1, H // 4)).round().long().unique()
    return torch.stack([2 * fsel, 2 * fsel + 1], 1).flatten()


def project_positions_(model, sel: torch.Tensor, d: int) -> None:
    """``embeddings_project`` (E -> H, present when the sizes differ): identity from the ``sel`` position
    dims onto the first len(sel) hidden dims, which no other hidden dim reads."""
    proj = getattr(model, "embeddings_project", None)
    if proj is None:
        return
    H, E = proj.weight.shape
    dm = len(sel)
    proj.weight[:, :d] = 0.0
    proj.weight[:dm, :] = 0.0
    proj.weight[torch.arange(dm), sel] = 1.0  # identity onto its first dm hidden dims
    proj.bias[:dm] = 0.0
    # Content dims at unit gain (orthonormal rows): at std initializer_range a narrow generator's
    # projection shrinks the token content ~4x next to the position dims, and it learns slowly.
    content = torch.empty(H - dm, E - d)
    nn.init.orthogonal_(content)
    proj.weight[dm:, d:] = content


def neighbour_heads_(model, rot_m: torch.Tensor, scale: float) -> None:
    """Every layer, head h: its first query/key dims read the position dims, the query rotated by the head's
    shift (``rot_m``: [shifts, dm, dm], restricted to the dims this model reads), the key unrotated, both
    times ``scale``; heads take the shifts round-robin across layers and heads."""
    dm = rot_m.shape[1]
    heads = model.config.num_attention_heads
    hd = model.config.hidden_size // heads
    k = min(dm, hd)  # dims of each head given to position
    for li, layer in enumerate(model.encoder.layer):
        attn = layer.attention.self
        for h in range(heads):
            r = rot_m[(li * heads + h) % len(rot_m)]
            rows = slice(h * hd, h * hd + k)
            # q_pos = scale * R x_pos, k_pos = scale * x_pos (rows of W are output dims)
            attn.query.weight[rows, :] = 0.0
            attn.query.weight[rows, :dm] = scale * r[:k, :]
            attn.key.weight[rows, :] = 0.0
            attn.key.weight[rows, :dm] = scale * torch.eye(dm)[:k, :]
            attn.query.bias[rows] = 0.0
            attn.key.bias[rows] = 0.0
