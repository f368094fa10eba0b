"""Pretraining step speed against the straightforward transformers implementation, measured in one run.

    python benchmarks/bench_pretrain.py                 # small preset, batch 32 x seq 128
    python benchmarks/bench_pretrain.py --threads 1     # on a shared CPU, 1 thread avoids thread thrash
    python benchmarks/bench_pretrain.py --rss           # peak RSS of pretraining `tiny` on the 56 MB corpus
    python benchmarks/bench_pretrain.py --profile 5     # where the toolkit step's time goes, by kind of op

(a) baseline: ``ElectraForMaskedLM`` computing logits at every position (its own ``labels=`` loss) +
    ``ElectraForPreTraining`` (its own loss), embeddings shared, multinomial sampling, fp32, eager attention,
    ``torch.optim.AdamW`` defaults: what you get by wiring transformers' classes together.
(b) the toolkit: ``electra.build_pretrain_model`` / ``mask_batch`` / ``train_step`` with ``electra_cpu``'s
    kernels, exactly what ``koelectra-kit pretrain`` runs (bf16 autocast where the CPU has it, masked-only
    generator logits, SDPA / CPU attention, cheaper dropout masks, fused AdamW).
Both run the same model shapes (configs/pretrain/small.yaml), the same batch, interleaved in rounds so a
noisy neighbour hits both; the figures are ratios and fractions of a bf16 matmul measured in the same run.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import NSMC_DEV, ROOT, SHARED, interleaved, median  # noqa: E402,F401  (benchmarks/common.py)


def model_flops_per_step(disc, gen, B: int, L: int, K: int, V: int, E: int) -> float:
    """Matmul FLOPs of one training step (forward + backward = 3 x forward) of the toolkit's model."""
    def encoder(H, F, layers):
        per_token_layer = 2 * (4 * H * H + 2 * H * F) + 2 * 2 * L * H  # projections + FFN + QK^T and PV
        return B * L * (layers * per_token_layer + (2 * E * H if E != H else 0))

    fwd = encoder(disc["hidden_size"], disc["intermediate_size"], disc["num_layers"])
    fwd += B * L * (2 * disc["hidden_size"] ** 2 + 2 * disc["hidden_size"])  # discriminator head
    fwd += encoder(gen["hidden_size"], gen["intermediate_size"], gen["num_layers"])
    fwd += B * K * (2 * gen["hidden_size"] * E + 2 * E * V)  # generator head at masked slots only
    return 3.0 * fwd


def bf16_matmul_flops(device, n: int = 2048, reps: int = 5) -> float:
    import torch

    a = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    b = torch.randn(n, n, dtype=torch.bfloat16, device=device)
    a @ b
    sync(device)
    t = time.perf_counter()
    for _ in range(reps):
        a @ b
    sync(device)
    return 2 * n ** 3 * reps / (time.perf_counter() - t)


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def straightforward_step(cfg, ids, V: int, special: list[int], device):
    """(a) transformers' classes wired the straightforward way: a function doing one training step on ``ids``."""
    import torch
    from transformers import ElectraConfig, ElectraForMaskedLM, ElectraForPreTraining

    from koelectra_kit.electra import model as electra

    m, (B, L) = cfg.model, ids.shape
    gshape = electra.generator_shape(m, cfg.generator)

    def hf_config(shape, attn):
        c = ElectraConfig(vocab_size=V, embedding_size=m.embedding_size, hidden_size=shape["hidden_size"],
                          num_hidden_layers=shape["num_layers"], num_attention_heads=shape["num_heads"],
                          intermediate_size=shape["intermediate_size"], hidden_dropout_prob=m.hidden_dropout,
                          attention_probs_dropout_prob=m.attention_dropout, max_position_embeddings=512)
        c._attn_implementation = attn
        return c

    dshape = dict(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                  intermediate_size=m.intermediate_size)
    b_gen, b_disc = ElectraForMaskedLM(hf_config(gshape, "eager")), ElectraForPreTraining(hf_config(dshape, "eager"))
    b_gen.electra.embeddings = b_disc.electra.embeddings
    b_gen.generator_lm_head.weight = b_disc.electra.embeddings.word_embeddings.weight
    b_gen.to(device), b_disc.to(device)
    b_params = list({id(p): p for p in [*b_gen.parameters(), *b_disc.parameters()]}.values())
    b_opt = torch.optim.AdamW(b_params, lr=5e-4, eps=1e-6, weight_decay=0.01)
    attn = torch.ones_like(ids)
    specials = torch.tensor(special, device=device)

    def baseline_step():
        masked = (torch.rand(B, L, device=device) < cfg.mask_prob) & ~torch.isin(ids, specials)
        inp = torch.where(masked & (torch.rand(B, L, device=device) < 0.85), torch.full_like(ids, 4), ids)
        out = b_gen(inp, attention_mask=attn, labels=ids.masked_fill(~masked, -100))
        with torch.no_grad():
            probs = torch.softmax(out.logits[masked], -1)
            fake = ids.clone()
            fake[masked] = torch.multinomial(probs, 1).squeeze(-1)
        d = b_disc(fake, attention_mask=attn, labels=(fake != ids).long())
        (out.loss + cfg.disc_weight * d.loss).backward()
        torch.nn.utils.clip_grad_norm_(b_params, 1.0)
        b_opt.step()
        b_opt.zero_grad(set_to_none=True)

    return baseline_step


def speed(args) -> None:
    import torch

    from koelectra_kit.electra import cpu as electra_cpu, model as electra
    from koelectra_kit.config import load_config
    from koelectra_kit.pretrain import PretrainConfig
    from koelectra_kit.runtime import autocast_dtype

    if args.threads:
        torch.set_num_threads(args.threads)
    cfg = load_config(PretrainConfig, ROOT / "configs" / "pretrain" / "small.yaml", ["corpus=x", "out=x"])
    m, B, L, V = cfg.model, args.batch, args.seq, args.vocab
    special = [0, 1, 2, 3, 4]  # pad unk cls sep mask
    gshape = electra.generator_shape(m, cfg.generator)
    dshape = dict(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                  intermediate_size=m.intermediate_size)
    device = torch.device(args.device)
    torch.manual_seed(0)
    ids = torch.randint(5, V, (B, L))
    ids[:, 0] = 2
    ids[:, ::16] = 3  # a [SEP] every 16 tokens, as packed short comments have
    ids = ids.to(device)

    baseline_step = straightforward_step(cfg, ids, V, special, device)  # (a)

    # (b) the toolkit's own code path
    electra_cpu.register_cpu_sdpa()
    model = electra.build_pretrain_model(V, 0, special, m, cfg.generator, attn_implementation=electra_cpu.CPU_SDPA)
    electra_cpu.use_fast_dropout(model)
    model.to(device)
    opt = electra.build_optimizer(model, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps)
    wrapped = torch.compile(model) if args.compile else None
    amp = autocast_dtype(device, "auto")
    rng = torch.Generator(device=device).manual_seed(0)
    mask_p, rand_p = cfg.mask_probs()
    specials = torch.tensor(special, device=device)

    def toolkit_step():
        mb = electra.mask_batch(ids, None, specials, 4, V, cfg.mask_prob, mask_p, rand_p, rng, B * L)
        electra.train_step(model, opt, [mb], disc_weight=cfg.disc_weight, lr=cfg.lr, amp_dtype=amp,
                           device_type=device.type, max_grad_norm=cfg.max_grad_norm, rng=rng, wrapped=wrapped)

    print(f"small preset: discriminator {dshape}, generator {gshape}, embedding {m.embedding_size}, vocab {V}, "
          f"batch {B} x seq {L}, dropout {m.hidden_dropout}/{m.attention_dropout}; torch {torch.__version__}, "
          f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else f'{torch.get_num_threads()} threads'}, toolkit precision {str(amp).replace('torch.', '') if amp else 'fp32'}"
          f"{', torch.compile' if args.compile else ''}", flush=True)
    t = time.perf_counter()
    for _ in range(args.warmup):
        baseline_step()
        toolkit_step()
    print(f"warm-up ({args.warmup} step(s) each{', compiling' if args.compile else ''}): "
          f"{time.perf_counter() - t:.1f}s", flush=True)
    if args.profile:
        profile(toolkit_step, args.profile, B * L, model_flops_per_step(
            dshape, gshape, B, L, electra.num_mask_slots(L, cfg.mask_prob), V, m.embedding_size),
            bf16_matmul_flops(device, 2048))
        return
    # interleaved: a noisy neighbour slows both, not one
    times = interleaved({"baseline": baseline_step, "toolkit": toolkit_step}, args.rounds * args.steps,
                        sync=lambda: sync(device), warmup=0)
    peak = bf16_matmul_flops(device, 8192 if device.type == "cuda" else 2048)
    tb, tt = median(times["baseline"]), median(times["toolkit"])
    tokens = B * L
    K = electra.num_mask_slots(L, cfg.mask_prob)
    flops = model_flops_per_step(dshape, gshape, B, L, K, V, m.embedding_size)
    print(f"(a) transformers, fp32, eager, full logits : {tokens / tb:9,.0f} tokens/s  ({tb * 1000:.0f} ms/step, "
          f"median of {len(times['baseline'])})")
    print(f"(b) koelectra-kit train_step               : {tokens / tt:9,.0f} tokens/s  ({tt * 1000:.0f} ms/step, "
          f"median of {len(times['toolkit'])})")
    print(f"speed-up (b)/(a): {tb / tt:.2f}x  (target >= 3.5x)")
    n = 8192 if device.type == "cuda" else 2048
    print(f"toolkit model FLOP/s: {flops / tt / 1e9:.1f} GFLOP/s = {flops / tt / peak:.0%} of a bf16 {n}^3 matmul "
          f"measured now ({peak / 1e9:.0f} GFLOP/s); {flops / tokens / 1e6:.1f} MFLOP per token")


# Where a step's CPU time goes, by the kind of work: each aten op's self time lands in the first group whose
# name it contains (order matters: "addmm" is a matmul, not an "add").
OP_GROUPS = [
    ("matmul (linear layers, QK^T, PV, heads)", ("mm", "matmul", "linear", "bmm", "baddbmm", "addmm", "mkldnn")),
    ("attention kernel (softmax + masks inside SDPA)", ("scaled_dot_product", "flash_attention", "_softmax",
                                                       "softmax")),
    ("losses (log-softmax, cross-entropy, BCE)", ("log_softmax", "nll_loss", "cross_entropy", "binary_cross")),
    ("layer norm", ("layer_norm",)),
    ("activations (gelu) and dropout", ("gelu", "dropout", "bernoulli")),
    ("optimizer (fused AdamW) and grad clipping", ("adam", "_foreach", "norm", "clamp")),
    ("embedding gather / scatter", ("embedding", "index", "gather", "scatter")),
    ("sampling and masking (rand, multinomial, where)", ("rand", "multinomial", "where", "masked", "argmax",
                                                         "isin", "topk")),
    ("dtype casts (bf16 autocast)", ("to_copy", "_to", "copy_", "contiguous")),
    ("elementwise add/mul and reductions", ("add", "mul", "div", "sum", "mean", "sub", "exp", "pow", "sqrt")),
]


def profile(step, n: int, tokens: int, flops: float, peak: float) -> None:
    """Profile ``n`` toolkit steps: self CPU time per group of ops, and what the matmuls alone reach."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    t = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU]) as prof:
        for _ in range(n):
            step()
    wall = (time.perf_counter() - t) / n
    groups: dict[str, float] = {name: 0.0 for name, _ in OP_GROUPS}
    groups["other"] = 0.0
    ops = []
    for ev in prof.key_averages():
        us = ev.self_cpu_time_total
        if us <= 0:
            continue
        ops.append((us, ev.key))
        name = ev.key.lower()
        group = next((g for g, keys in OP_GROUPS if any(k in name for k in keys)), "other")
        groups[group] += us
    total = sum(groups.values())
    print(f"profile of {n} toolkit steps: {wall * 1000:.0f} ms/step wall ({tokens / wall:,.0f} tokens/s); "
          f"self CPU time summed over threads' ops {total / n / 1000:.0f} ms/step")
    for g, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {us / total:6.1%}  {us / n / 1000:8.1f} ms/step  {g}")
    mm = groups[OP_GROUPS[0][0]] / n / 1e6
    print(f"matmul time alone runs the model's {flops / 1e9:.1f} GFLOP at {flops / max(mm, 1e-9) / 1e9:.0f} GFLOP/s "
          f"= {flops / max(mm, 1e-9) / peak:.0%} of a bf16 2048^3 matmul measured now ({peak / 1e9:.0f} GFLOP/s); "
          f"the whole step: {flops / wall / 1e9:.0f} GFLOP/s = {flops / wall / peak:.0%}")
    print("top ops by self CPU time:")
    for us, key in sorted(ops, reverse=True)[:15]:
        print(f"  {us / total:6.1%}  {key}")


def _tree_rss(pid: int) -> tuple[int, int]:
    """(sum, max) resident KiB over ``pid`` and its descendants, from /proc."""
    children: dict[int, list[int]] = {}
    rss: dict[int, int] = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open(f"/proc/{d}/stat") as f:
                parts = f.read().rsplit(")", 1)[1].split()
            with open(f"/proc/{d}/status") as f:
                kb = next((int(line.split()[1]) for line in f if line.startswith("VmRSS:")), 0)
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(int(parts[1]), []).append(int(d))
        rss[int(d)] = kb
    total, biggest, todo = 0, 0, [pid]
    while todo:
        p = todo.pop()
        total += rss.get(p, 0)
        biggest = max(biggest, rss.get(p, 0))
        todo.extend(children.get(p, []))
    return total, biggest


def rss(args) -> None:
    corpus = Path(args.corpus)
    if not corpus.exists():
        sys.exit(f"corpus not found: {corpus} (pass --corpus)")
    with tempfile.TemporaryDirectory() as tmp:
        cmd = [sys.executable, "-m", "koelectra_kit", "pretrain", "--config",
               str(ROOT / "configs" / "pretrain" / "tiny.yaml"), f"corpus={corpus}", f"out={tmp}/run",
               f"cache_dir={args.cache_dir or tmp + '/cache'}", f"max_steps={args.rss_steps}", "log_every=50",
               "save_every=100", "progress=false"]
        if args.tokenizer:
            cmd.append(f"tokenizer={args.tokenizer}")
        print("running:", " ".join(cmd), flush=True)
        t0 = time.time()
        proc = subprocess.Popen(cmd, cwd=ROOT, stderr=subprocess.PIPE, text=True, env={**os.environ,
                                "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))})
        peak_sum = peak_one = 0
        lines = []
        import threading

        def reader():
            for line in proc.stderr:
                lines.append((time.time() - t0, line.rstrip()))

        th = threading.Thread(target=reader, daemon=True)
        th.start()
        while proc.poll() is None:
            s, one = _tree_rss(proc.pid)
            peak_sum, peak_one = max(peak_sum, s), max(peak_one, one)
            time.sleep(0.2)
        th.join(5)
        for t, line in lines:
            if line.startswith(("data:", "model:", "done:", "training a", "step ")) or "error" in line:
                print(f"  [{t:6.1f}s] {line}")
        print(f"exit code {proc.returncode}; wall {time.time() - t0:.0f}s")
        print(f"peak RSS: {peak_sum / 2**20:.2f} GiB summed over the process tree (largest single process "
              f"{peak_one / 2**20:.2f} GiB); target < 3 GB")


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--vocab", type=int, default=32000, help="vocabulary size (small.yaml's vocab_size)")
    p.add_argument("--steps", type=int, default=2, help="timed steps per round per implementation")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds")
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--threads", type=int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--device", default="cpu", help="cpu | cuda (both implementations run there)")
    p.add_argument("--compile", action="store_true", help="torch.compile the toolkit's model (minutes to compile)")
    p.add_argument("--profile", type=int, default=0, metavar="N",
                   help="profile N toolkit steps (torch.profiler): where a step's time goes, by kind of op")
    p.add_argument("--rss", action="store_true", help="measure peak RSS of pretraining tiny on --corpus instead")
    p.add_argument("--corpus", default=str(SHARED / "pretrain" / "nsmc_reviews.txt"))
    p.add_argument("--rss-steps", type=int, default=300)
    p.add_argument("--tokenizer", default=None, help="--rss: reuse a trained tokenizer dir instead of training one")
    p.add_argument("--cache-dir", default=None, help="--rss: packed-data cache dir (default: a fresh temp dir)")
    args = p.parse_args()
    rss(args) if args.rss else speed(args)


if __name__ == "__main__":
    main()
