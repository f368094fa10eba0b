"""Unit tests of the ELECTRA objective and the pretraining plumbing with random token ids (no tokenizer):
masking, sampling, the masked-only generator loss, shared embeddings, AUC, dropout, schedules, packing,
the data cache and row order."""
from __future__ import annotations

import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from koelectra_kit.electra import cpu as electra_cpu, model as electra
from koelectra_kit.config import load_config
from koelectra_kit.errors import ConfigError
from koelectra_kit.pretrain import (PretrainConfig, RowOrder, budget_progress, disc_weight_at, lr_factor,
                                    pack_sequences, warmup_done)

SPECIAL = [0, 1, 2, 3, 4]  # pad, unk, cls, sep, mask
MASK = 4
V = 50


def tiny_shapes(**kw):
    model = SimpleNamespace(hidden_size=32, num_layers=2, num_heads=2, intermediate_size=64, embedding_size=16,
                            hidden_dropout=0.0, attention_dropout=0.0, initializer_range=0.02, hidden_act="gelu")
    for k, v in kw.items():
        setattr(model, k, v)
    gen = SimpleNamespace(size=0.5, hidden_size=None, intermediate_size=None, num_heads=None, num_layers=None)
    return model, gen


def random_batch(B=4, L=24, seed=0, pad_last=0):
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, V, (B, L), generator=g)
    ids[:, 0] = 2
    ids[:, L // 2] = 3
    attn = None
    if pad_last:
        ids[-1, L - pad_last:] = 0
        attn = (ids != 0).long()
    return ids, attn


def test_mask_batch_counts_and_never_special():
    ids, attn = random_batch(B=6, L=40, pad_last=15)
    rng = torch.Generator().manual_seed(1)
    mb = electra.mask_batch(ids, attn, torch.tensor(SPECIAL), MASK, V, 0.25, 0.85, 0.0, rng, int(attn.sum()))
    K = mb.positions.shape[1]
    assert K == round(40 * 0.25)
    chosen = torch.gather(ids, 1, mb.positions)
    assert not torch.isin(chosen[mb.valid], torch.tensor(SPECIAL)).any(), "special or pad token masked"
    cand = (~torch.isin(ids, torch.tensor(SPECIAL))).sum(1).float()
    assert mb.valid.sum(1).tolist() == (cand * 0.25).round().long().tolist()
    # positions of a row are distinct
    for r in range(ids.shape[0]):
        p = mb.positions[r][mb.valid[r]]
        assert len(set(p.tolist())) == len(p)
    # only valid slots change; about 85% of them become [MASK], the rest stay the original
    changed = (mb.masked_ids != ids)
    assert changed.sum() <= mb.valid.sum()
    became_mask = (torch.gather(mb.masked_ids, 1, mb.positions) == MASK) & mb.valid
    assert 0.6 < became_mask.sum().item() / mb.valid.sum().item() <= 1.0


def test_mask_batch_bert_style_random_tokens():
    ids, _ = random_batch(B=64, L=64, seed=3)
    rng = torch.Generator().manual_seed(2)
    mb = electra.mask_batch(ids, None, torch.tensor(SPECIAL), MASK, V, 0.15, 0.8, 0.1, rng, ids.numel())
    new = torch.gather(mb.masked_ids, 1, mb.positions)[mb.valid]
    old = torch.gather(ids, 1, mb.positions)[mb.valid]
    frac_mask = (new == MASK).float().mean().item()
    frac_same = (new == old).float().mean().item()
    assert 0.74 < frac_mask < 0.86
    assert 0.07 < frac_same < 0.17  # 10% kept + random draws equal to the original


@pytest.mark.parametrize("method", ["cdf", "gumbel"])
def test_sample_softmax_matches_distribution(method):
    logits = torch.tensor([[2.0, 1.0, 0.0, -1.0, 3.0]]).repeat(40000, 1)
    banned = torch.tensor([4])
    rng = torch.Generator().manual_seed(0)
    s = electra.sample_softmax(logits, 1.0, banned, rng, method=method)
    assert not (s == 4).any()
    freq = torch.bincount(s, minlength=5).float() / len(s)
    expect = torch.softmax(logits[0, :4], -1)
    assert torch.allclose(freq[:4], expect, atol=0.01)
    hot = electra.sample_softmax(logits, 5.0, banned, rng, method=method)  # temperature flattens the distribution
    assert (torch.bincount(hot, minlength=5).float() / len(hot))[3] > freq[3] + 0.05


def test_replaced_auc_matches_sklearn_with_ties():
    from sklearn.metrics import roc_auc_score

    g = torch.Generator().manual_seed(0)
    labels = torch.rand(500, generator=g) < 0.3
    logits = (labels.float() + torch.randn(500, generator=g)).round(decimals=1)  # many ties
    assert electra.replaced_auc(logits, labels) == pytest.approx(roc_auc_score(labels.numpy(), logits.numpy()))
    assert np.isnan(electra.replaced_auc(logits, torch.zeros(500, dtype=torch.bool)))


def test_fast_dropout_rate_scale_and_grad():
    torch.manual_seed(0)
    x = torch.ones(1001, 333, requires_grad=True)
    y = electra_cpu.fast_dropout(x, 0.1)
    kept = (y != 0).float().mean().item()
    assert abs(kept - 0.9) < 0.005
    assert torch.allclose(y[y != 0], torch.tensor(1 / 0.9))
    y.sum().backward()
    assert torch.equal(x.grad != 0, y != 0)
    # lanes are independent: the drop pattern is not periodic with the 4-lane word layout
    masks = (electra_cpu.fast_dropout(torch.ones(4 * 20000), 0.5) == 0).view(-1, 4).float()
    assert masks.mean(0).sub(0.5).abs().max() < 0.02
    assert abs(torch.corrcoef(masks.T)[0, 1].item()) < 0.03


def test_cpu_attention_is_sdpa_maths(monkeypatch):
    """The CPU attention path (used with attention dropout) computes the same attention as SDPA."""
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(2, 3, 7, 8, generator=g) for _ in range(3))
    mask = torch.ones(2, 1, 7, 7, dtype=torch.bool)
    mask[1, ..., 5:] = False
    monkeypatch.setattr(electra_cpu, "fast_dropout", lambda x, p: x)
    module = torch.nn.Module()
    module.is_causal = False
    ours, _ = electra_cpu.cpu_sdpa_attention(module, q, k, v, mask, dropout=0.1)
    ref = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask).transpose(1, 2)
    assert torch.allclose(ours, ref, atol=1e-5)


def test_shared_embeddings_and_tied_head():
    m_cfg, g_cfg = tiny_shapes()
    model = electra.build_pretrain_model(V, 0, SPECIAL, m_cfg, g_cfg)
    gen, disc = model.generator, model.discriminator
    assert gen.electra.embeddings is disc.electra.embeddings
    assert gen.generator_lm_head.weight is disc.electra.embeddings.word_embeddings.weight
    assert gen.config.hidden_size == 16 and disc.config.hidden_size == 32  # generator 1/2 wide
    assert gen.config.embedding_size == disc.config.embedding_size == 16
    assert hasattr(disc.electra, "embeddings_project") and not hasattr(gen.electra, "embeddings_project")
    opt = electra.build_optimizer(model, 1e-3, 0.01)
    params = [p for grp in opt.param_groups for p in grp["params"]]
    assert len(params) == len({id(p) for p in params}) == len(list(model.parameters()))
    no_decay = {id(p) for p in opt.param_groups[1]["params"]}
    for name, p in model.named_parameters():
        assert (id(p) in no_decay) == ("LayerNorm" in name or name.endswith(".bias")), name


@pytest.mark.parametrize("gen_size", [0.25, 0.5])
def test_positional_prior_heads_start_on_their_neighbour(gen_size):
    """model.init=positional: at step 0 every first-layer head of the discriminator and of the generator (also
    one narrower than the position block, which reads a subset of its frequencies) attends to its offset."""
    m_cfg, g_cfg = tiny_shapes(hidden_size=128, embedding_size=128, intermediate_size=256, init="positional",
                               init_scale=2.0, init_shifts=[1, -1, 2, -2], init_pos_dims=32)
    g_cfg.size = gen_size
    torch.manual_seed(0)
    model = electra.build_pretrain_model(V, 0, SPECIAL, m_cfg, g_cfg, attn_implementation="eager")
    ids, _ = random_batch(B=2, L=24)
    for enc in (model.discriminator.electra, model.generator.electra):
        heads = enc.config.num_attention_heads
        with torch.no_grad():
            att = enc(ids, output_attentions=True).attentions  # per layer [B, heads, L, L]
        for h in range(heads):
            shift = m_cfg.init_shifts[h % 4]
            rows = torch.arange(3, 21)
            hits = (att[0][:, h, rows].argmax(-1) == rows + shift).float().mean().item()
            assert hits >= 0.9, (enc.config.hidden_size, h, shift, hits)


def test_masked_only_generator_loss_equals_full_logits():
    """Our gather-then-head generator loss equals transformers' ElectraForMaskedLM loss at the same targets."""
    torch.manual_seed(0)
    m_cfg, g_cfg = tiny_shapes()
    model = electra.build_pretrain_model(V, 0, SPECIAL, m_cfg, g_cfg).eval()
    ids, attn = random_batch(B=3, L=20, pad_last=6)
    mb = electra.mask_batch(ids, attn, torch.tensor(SPECIAL), MASK, V, 0.2, 0.85, 0.0,
                            torch.Generator().manual_seed(0), int(attn.sum()))
    with torch.no_grad():
        _, stats = model(mb.input_ids, mb.attention_mask, mb.masked_ids, mb.positions, mb.valid, 50.0)
        labels = torch.full_like(ids, -100)
        rows = torch.arange(3).unsqueeze(1).expand_as(mb.positions)
        labels[rows[mb.valid], mb.positions[mb.valid]] = ids[rows[mb.valid], mb.positions[mb.valid]]
        ref = model.generator(mb.masked_ids, attention_mask=attn, labels=labels).loss
    assert stats["gen_loss"].item() == pytest.approx(ref.item(), rel=1e-5)


def test_disc_labels_follow_replacements_and_loss_weights():
    torch.manual_seed(0)
    m_cfg, g_cfg = tiny_shapes()
    model = electra.build_pretrain_model(V, 0, SPECIAL, m_cfg, g_cfg)
    ids, attn = random_batch(B=4, L=32, pad_last=10)
    mb = electra.mask_batch(ids, attn, torch.tensor(SPECIAL), MASK, V, 0.3, 0.85, 0.0,
                            torch.Generator().manual_seed(0), int(attn.sum()))
    loss, st = model(mb.input_ids, mb.attention_mask, mb.masked_ids, mb.positions, mb.valid, 50.0,
                     torch.Generator().manual_seed(1))
    labels = st["labels"]
    assert labels[attn == 0].sum() == 0  # padding never "replaced"
    outside = torch.ones_like(labels, dtype=torch.bool)
    outside[torch.arange(4).unsqueeze(1).expand_as(mb.positions)[mb.valid], mb.positions[mb.valid]] = False
    assert labels[outside].sum() == 0  # only masked slots can be replaced
    assert 0 < st["n_replaced"] <= mb.valid.sum()
    assert st["n_real"] == attn.sum()
    assert loss.item() == pytest.approx(st["gen_loss"].item() + 50 * st["disc_loss"].item(), rel=1e-5)
    loss.backward()
    assert model.generator.generator_lm_head.weight.grad is not None


def test_train_step_accumulation_equals_big_batch():
    """Two micro-batches of 2 give the same update as one batch of 4 (no dropout, fp32)."""
    m_cfg, g_cfg = tiny_shapes()
    ids, _ = random_batch(B=4, L=16, seed=5)
    spec = torch.tensor(SPECIAL)

    def run(splits):
        torch.manual_seed(0)
        model = electra.build_pretrain_model(V, 0, SPECIAL, m_cfg, g_cfg, objective="mlm")
        opt = electra.build_optimizer(model, 1e-2, 0.01)
        # the same masks in both runs: mask the whole batch once, then split it
        base = electra.mask_batch(ids, None, spec, MASK, V, 0.25, 1.0, 0.0, torch.Generator().manual_seed(0), 0)
        mbs = [electra.MaskedBatch(base.input_ids[s], None, base.masked_ids[s], base.positions[s], base.valid[s], 0)
               for s in splits]
        electra.train_step(model, opt, mbs, disc_weight=50.0, lr=1e-2)
        return torch.cat([p.detach().flatten() for p in model.parameters()])

    one = run([slice(0, 4)])
    two = run([slice(0, 2), slice(2, 4)])
    assert torch.allclose(one, two, atol=1e-6)


# --- schedules --------------------------------------------------------------------------------


def cfg_with(**kw) -> PretrainConfig:
    base = {"corpus": ["x.txt"], "out": "o"}
    return load_config(PretrainConfig, None, [f"{k}={v}" for k, v in {**base, **kw}.items()])


def lr_curve(cfg, steps):
    warm_end = None
    out = []
    for s in range(steps):
        p = budget_progress(cfg, s, 0.0)
        if warm_end is None and warmup_done(cfg, s, p):
            warm_end = p
        out.append(lr_factor(cfg, s, p, budget_progress(cfg, s + 1, 0.0), warm_end))
    return out


def test_linear_warmup_then_decay():
    f = lr_curve(cfg_with(max_steps=100, warmup_steps=10, schedule="linear"), 100)
    assert f[0] == pytest.approx(0.1) and f[9] == pytest.approx(1.0)
    assert f[10] == pytest.approx(1.0)
    assert all(a >= b for a, b in zip(f[10:], f[11:]))
    assert f[99] == pytest.approx(1 / 90, abs=1e-9)


def test_schedule_shapes():
    one = lr_curve(cfg_with(max_steps=100, warmup_steps=0, warmup_ratio=0.5, schedule="one_cycle",
                            min_lr_ratio=0.1), 100)
    assert max(one) == pytest.approx(1.0) and int(np.argmax(one)) in (49, 50)
    assert one[0] > 0.1 and one[-1] == pytest.approx(0.1 + 0.9 / 50, abs=1e-6)
    cos = lr_curve(cfg_with(max_steps=100, warmup_steps=0, schedule="cosine"), 100)
    assert cos[0] == pytest.approx(1.0) and cos[50] == pytest.approx(0.5) and cos[-1] < 0.01
    const = lr_curve(cfg_with(max_steps=50, warmup_steps=5, schedule="constant"), 50)
    assert const[5:] == [1.0] * 45


def test_time_budget_progress_and_lambda_warmup():
    cfg = cfg_with(max_steps=0, max_minutes=2)
    assert budget_progress(cfg, 10_000, 60.0) == pytest.approx(0.5)
    both = cfg_with(max_steps=100, max_minutes=2)
    assert budget_progress(both, 80, 60.0) == pytest.approx(0.8)  # whichever budget is nearer its end
    lam = cfg_with(max_steps=10, disc_weight_start=1, disc_weight_warmup_steps=10)
    assert [disc_weight_at(lam, s) for s in (0, 5, 10, 20)] == [1.0, 25.5, 50.0, 50.0]


@pytest.mark.parametrize("override, msg", [
    (["seq_len=600"], "max_position_embeddings"),
    (["mask_prob=0"], "mask_prob"),
    (["max_steps=0"], "budget"),
    (["batch_size=10", "grad_accum=4"], "multiple"),
    (["model.num_heads=5"], "multiple"),
    (["model.hidden_dropout=1.0"], "hidden_dropout"),
    (["model.init=positional", "generator.size=0.01"], "at least 4 wide"),
    (["model.init=positional", "model.init_pos_dims=128"], "below the hidden and embedding"),
    (["mask_token_prob=0.8", "random_token_prob=0.3"], "sum"),
    (["tokenizer_model=unigram"], "wordpiece or characters"),
    (["nope=1"], "unknown config key"),
])
def test_config_errors(override, msg):
    with pytest.raises(ConfigError, match=msg):
        load_config(PretrainConfig, None, ["corpus=a.txt", "out=o"] + override)


def test_old_key_names_still_work():
    """plot and warmup_fraction were renamed to the names every stage uses; old configs keep working."""
    cfg = load_config(PretrainConfig, None, ["corpus=a.txt", "out=o", "plot=false", "warmup_fraction=0.25"])
    assert cfg.plots is False and cfg.warmup_ratio == 0.25
    with pytest.raises(ConfigError, match="both"):
        load_config(PretrainConfig, None, ["corpus=a.txt", "out=o", "plot=false", "plots=true"])


def test_presets_load_and_document_their_command():
    from pathlib import Path

    root = Path(__file__).resolve().parent.parent / "configs" / "pretrain"
    for name in ("tiny", "small", "base"):
        path = root / f"{name}.yaml"
        first = path.read_text(encoding="utf-8").splitlines()[0]
        assert first.startswith("# koelectra-kit pretrain") and f"{name}.yaml" in first
        cfg = load_config(PretrainConfig, path, ["corpus=a.txt", "out=o"])
        assert cfg.model.num_layers >= 2
    small = load_config(PretrainConfig, root / "small.yaml", ["corpus=a.txt", "out=o"])
    assert (small.model.hidden_size, small.model.num_layers, small.model.num_heads, small.model.intermediate_size,
            small.model.embedding_size, small.generator.size, small.lr, small.batch_size, small.seq_len) == \
        (256, 12, 4, 1024, 128, 0.25, 5e-4, 128, 128)
    base = load_config(PretrainConfig, root / "base.yaml", ["corpus=a.txt", "out=o"])
    assert (base.model.hidden_size, base.model.num_layers, base.lr) == (768, 12, 2e-4)
    assert base.generator.size == pytest.approx(1 / 3, abs=1e-3)


# --- data -------------------------------------------------------------------------------------


def test_pack_sequences_keeps_every_token_in_order():
    texts = [[10, 11, 12], [], [20] * 25, [30, 31]]
    stats = {"texts": 0}
    rows = list(pack_sequences(iter(texts), 8, cls_id=2, sep_id=3, stats=stats))
    assert stats["texts"] == 3
    assert all(len(r) == 8 for r in rows[:-1]) and 1 < len(rows[-1]) <= 8
    assert all(r[0] == 2 for r in rows)
    stream = [t for r in rows for t in r[1:]]
    assert stream == [10, 11, 12, 3] + [20] * 25 + [3, 30, 31, 3]


def test_row_order_is_a_permutation_per_epoch_and_deterministic():
    order = RowOrder(10, seed=7, shuffle=True)
    first = order.rows(0, 10)
    assert sorted(first.tolist()) == list(range(10))
    straddle = order.rows(8, 5)  # last two of epoch 0, first three of epoch 1
    assert straddle[:2].tolist() == first[8:].tolist()
    assert straddle[2:].tolist() == order.rows(10, 3).tolist()
    assert RowOrder(10, 7, True).rows(0, 25).tolist() == order.rows(0, 25).tolist()
    assert order.rows(10, 10).tolist() != first.tolist()  # a new order each epoch
    assert RowOrder(10, 7, False).rows(0, 10).tolist() == list(range(10))


class FakeTok:
    """Enough of KoTokenizer for build_packed_cache: one id list per line, ids from characters."""

    vocab_size, pad_token_id, unk_token_id, cls_token_id, sep_token_id = 300, 0, 1, 2, 3

    def __init__(self):
        self.calls = 0

    def iter_corpus_ids(self, paths, text_column=None, num_workers=None, cache_dir=None, progress=True):
        self.calls += 1
        for p in paths:
            for line in open(p, encoding="utf-8"):
                if line.strip():
                    yield [5 + (ord(c) % 290) for c in line.strip()]


def test_packed_cache_is_memory_mapped_reused_and_arrow(tmp_path):
    from koelectra_kit.pretrain import PackedRows, build_packed_cache

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"text number {i} {'x' * (i % 30)}\n" for i in range(3000)), encoding="utf-8")
    cfg = cfg_with(seq_len=32)
    cfg.corpus = [str(corpus)]
    tok = FakeTok()
    cache = build_packed_cache(cfg, tok, "tokfp", [corpus], tmp_path / "cache")
    again = build_packed_cache(cfg, tok, "tokfp", [corpus], tmp_path / "cache")
    assert again == cache and tok.calls == 1  # reused, not re-tokenized
    other = build_packed_cache(cfg, tok, "another-tokenizer", [corpus], tmp_path / "cache")
    assert other != cache and tok.calls == 2
    data = PackedRows(cache)
    meta = json.loads((cache / "meta.json").read_text())
    assert data.n == meta["rows"] > 100 and len(data.blocks) >= 1
    rows = data.take(np.array([0, 5, data.n - 1]))
    assert rows.shape == (3, 32) and (rows[:, 0] == 2).all()
    stored = sum(int((data.stored(np.arange(i, min(i + 500, data.n))) != 0).sum()) for i in range(0, data.n, 500))
    assert stored == meta["tokens"]
    assert 0 < meta["last_row_len"] < 32  # this corpus leaves the last row short: the case below
    assert (data.take(np.arange(data.n)) != 0).all()  # training rows are full
    assert data.real_tokens(np.array([0, data.n - 1])) == 64
    # the blocks are views into the mapped file, not copies in RAM
    assert not data.blocks[0].flags.owndata
    import datasets

    ds = datasets.Dataset.from_file(str(cache / "rows.arrow"))
    assert len(ds) == data.n and ds[5]["input_ids"] == data.take(np.array([5]))[0].tolist()


def test_a_packed_cache_says_again_what_reading_its_corpus_warned(tmp_path, capfd):
    """A skipped malformed record was said when the packed rows were built, and never on the runs that used them."""
    from koelectra_kit.pretrain import build_packed_cache
    from koelectra_kit.runtime import warn

    class WarningTok(FakeTok):
        def iter_corpus_ids(self, paths, **kw):
            warn("c.txt: 1 malformed record(s) skipped (first: line 11) (as read when cached in /c/presplit)")
            yield from super().iter_corpus_ids(paths, **kw)

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"text number {i}\n" for i in range(200)), encoding="utf-8")
    cfg = cfg_with(seq_len=32)
    tok = WarningTok()
    cache = build_packed_cache(cfg, tok, "tokfp", [corpus], tmp_path / "cache")
    assert capfd.readouterr().err.count("1 malformed record(s) skipped") == 1
    assert build_packed_cache(cfg, tok, "tokfp", [corpus], tmp_path / "cache") == cache and tok.calls == 1
    err = capfd.readouterr().err
    assert f"c.txt: 1 malformed record(s) skipped (first: line 11) (as read when the packed rows were cached in " \
           f"{cache})" in err and "/c/presplit" not in err
    build_packed_cache(cfg, tok, "tokfp", [corpus], tmp_path / "cache", say_again=False)  # another rank: silent
    assert "malformed" not in capfd.readouterr().err


def test_pretrain_trains_its_tokenizer_with_the_presplit_it_is_given(tmp_path):
    """presplit= reaches the tokenizer a run trains for itself (the word-level mode's pretraining comparison in
    docs/RESULTS.md §6 is run this way), and a mode that does not exist is refused before any work."""
    from koelectra_kit.pretrain.data import prepare_tokenizer

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"오늘 {i}번째 댓글 ㅋㅋ 진짜 재밌네요\n" for i in range(300)), encoding="utf-8")
    cfg = load_config(PretrainConfig, "tiny", [f"corpus={corpus}", f"out={tmp_path / 'run'}", "presplit=kiwi_word",
                                               "vocab_size=300", f"cache_dir={tmp_path / 'cache'}"])
    tok = prepare_tokenizer(cfg, tmp_path / "run", SimpleNamespace(is_main=True, barrier=lambda: None))
    assert tok.presplit == "kiwi_word"
    assert json.loads((tmp_path / "run" / "tokenizer" / "koelectra_tokenizer.json").read_text())["presplit"] == "kiwi_word"
    with pytest.raises(ConfigError, match="presplit"):
        load_config(PretrainConfig, "tiny", [f"corpus={corpus}", "out=x", "presplit=mecab"])


def test_the_short_last_row_is_completed_and_no_batch_needs_a_mask(tmp_path):
    """The packed stream's last row is completed with the stream's start, so no batch carries padding: a batch
    with the padded row once per epoch gave the compiled step an attention mask where it had None, and it
    recompiled (about half a minute on an H100, in the middle of a 2-minute run). The stored file, and so the
    checkpoint's data fingerprint, are unchanged."""
    import torch

    from koelectra_kit.pretrain import PackedRows, build_packed_cache
    from koelectra_kit.pretrain.data import BatchSource, data_fingerprint

    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(f"review {i} {'y' * (i % 7)}\n" for i in range(40)), encoding="utf-8")
    cfg = cfg_with(seq_len=32, batch_size=4)
    cfg.corpus = [str(corpus)]
    cache = build_packed_cache(cfg, FakeTok(), "tokfp", [corpus], tmp_path / "cache")
    data = PackedRows(cache)
    m, n = data.meta["last_row_len"], data.n
    assert 1 < m < 32 and n > 2
    stored_last, first = data.stored(np.array([n - 1]))[0], data.stored(np.array([0]))[0]
    last = data.take(np.array([n - 1]))[0]
    assert last[:m].tolist() == stored_last[:m].tolist()  # its own tokens first
    assert last[m:].tolist() == first[1:1 + 32 - m].tolist()  # then the stream from its start, without [CLS]
    assert (stored_last[m:] == 0).all()  # the file keeps its padding: the fingerprint reads the file
    padded = PackedRows(cache)
    padded.last_row = stored_last  # as before this change
    assert data_fingerprint(data) == data_fingerprint(padded)

    tok = SimpleNamespace(all_special_ids=[0, 1, 2, 3, 4], pad_token_id=0, mask_token_id=4, vocab_size=300)
    src = BatchSource(cfg, data, tok, torch.device("cpu"), torch.Generator().manual_seed(0),
                      rank=0, world=1)
    for pos in range(0, 2 * n, cfg.batch_size):  # two epochs: every row, the completed one included
        mbs, n_tok = src.micro_batches(pos)
        assert all(mb.attention_mask is None for mb in mbs)
        assert n_tok == cfg.batch_size * 32 and (mbs[0].input_ids != 0).all()


def test_one_short_row_is_completed_by_repeating_itself(tmp_path):
    from koelectra_kit.pretrain import PackedRows, build_packed_cache

    corpus = tmp_path / "c.txt"
    corpus.write_text("abcdef\n", encoding="utf-8")
    cfg = cfg_with(seq_len=16)
    cfg.corpus = [str(corpus)]
    data = PackedRows(build_packed_cache(cfg, FakeTok(), "tokfp", [corpus], tmp_path / "cache"))
    assert data.n == 1 and data.meta["last_row_len"] == 8  # [CLS] a..f [SEP]
    row = data.take(np.array([0]))[0].tolist()
    assert row[:8] == data.stored(np.array([0]))[0][:8].tolist() and row[8:] == row[1:8] + row[1:2]


def test_a_step_far_slower_than_usual_is_said_once_and_kept():
    """A recompile mid-run showed up in no metrics row (on an H100, ~57 s inside a 2-minute run). The first steps
    compile by design and are not reported; ordinary noise is not either."""
    from koelectra_kit.pretrain.report import SlowSteps

    watch = SlowSteps()
    said = [watch.add(i, t) for i, t in enumerate([90.0, 3.0, 2.0] + [0.03, 0.035, 0.5, 0.03] * 20, start=1)]
    assert said == [None] * len(said)  # compiling steps and a 0.5 s hiccup: nothing said
    note = watch.add(84, 57.0)
    assert note.startswith("note: step 84 took 57.0 s") and "recompile" in note
    assert watch.add(85, 0.03) is None and watch.steps == [[84, 57.0]]
    assert watch.usual < 0.2  # the slow step did not become the usual one
