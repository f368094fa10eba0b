"""Pretraining step speed against the straightforward transformers implementation, measured in one run.

    python benchmarks/bench_pretrain.py                 # small preset, batch 32 x seq 128
    python benchmarks/bench_pretrain.py --threads 1     # on a shared CPU, 1 thread avoids thread thrash
    python benchmarks/bench_pretrain.py --rss           # peak RSS of pretraining `tiny` on the 56 MB corpus
    python benchmarks/bench_pretrain.py --profile 5     # where the toolkit step's time goes, by kind of op
    python benchmarks/bench_pretrain.py --compile-scope layers  # each layer compiled (pretrain's compile_scope);
                                                        # its warm-up line is the compiling, beside --compile's
    python benchmarks/bench_pretrain.py --device cuda --shape small,base --batch 64,128,256,512,1024 \\
        --json bench_pretrain_gpu.json                  # a GPU sweep: best batch, % of bf16 peak, acceptance

(a) baseline: ``ElectraForMaskedLM`` computing logits at every position (its own ``labels=`` loss) +
    ``ElectraForPreTraining`` (its own loss), embeddings shared, multinomial sampling, fp32, eager attention,
    ``torch.optim.AdamW`` defaults: what you get by wiring transformers' classes together.
(b) the toolkit: ``electra.build_pretrain_model`` / ``mask_batch`` / ``train_step`` with ``electra_cpu``'s
    kernels, exactly what ``koelectra-kit pretrain`` runs (bf16 autocast where the device has it, masked-only
    generator logits, SDPA / CPU attention, cheaper dropout masks, fused AdamW).
Both run the same model shapes (``--shape``: configs/pretrain/<name>.yaml, small by default), the same batch,
interleaved in rounds so a noisy neighbour hits both; the figures are ratios and fractions of a bf16 matmul
(2048^3 on a CPU, 8192^3 on a GPU) measured in the same run.

A sweep (``--batch 128,256,512``) times both at every batch. A batch at which one of them runs out of memory is
one line ("does not fit") and the sweep goes on. At the end: the toolkit's best batch (highest tokens/s), its
fraction of the bf16 matmul peak (the highest of the run's measurements), and the speed-up over the straightforward
step at that batch, or, where that did not fit, at the largest batch both fit; then one acceptance line per
shape against issue 39's bars (small: 20% of the peak and 5x; base: 35%). ``--json PATH``: every figure.
"""
from __future__ import annotations

import argparse
import contextlib
import functools
import gc
import io
import json
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from common import (ROOT, SHARED, Parser, input_errors, interleaved, median,  # noqa: E402
                    non_negative_int, output_file, positive_int, shape_file, shape_names)  # (benchmarks/common.py)

# Issue 39's bars for a GPU, per shape: (fraction of the bf16 matmul peak at the best batch, speed-up over the
# straightforward step at the same batch); None: no bar for that figure.
BARS = {"small": (0.20, 5.0), "base": (0.35, None)}
SPECIAL = [0, 1, 2, 3, 4]  # pad unk cls sep mask
MIN_SEQ = 8  # the shortest seq_len pretrain takes (PretrainConfig)
MASK_ID = 4


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


def peak_size(device) -> int:
    """The side of the square bf16 matmul that stands for the device's peak: 8192 fills a GPU, 2048 a CPU with bf16
    units (AMX, AVX-512 BF16). A CPU without them emulates bf16 at ~1 GFLOP/s (an AVX2 EPYC: 1.35), where five
    2048^3 calls took minutes and held a test run up: there the side that keeps the five calls near a second (at
    least 256; emulated bf16 runs at one rate whatever the size)."""
    return 8192 if device.type == "cuda" else _cpu_peak_size()


@functools.cache
def _cpu_peak_size() -> int:
    import torch

    rate, n = bf16_matmul_flops(torch.device("cpu"), 256, 2), 2048
    while n > 256 and 5 * 2 * n ** 3 / rate > 1.0:
        n //= 2
    return n


def measure_peak(device) -> float:
    """bf16 matmul FLOP/s now: 5 calls on a CPU (as before the GPU sweep), 20 on a GPU (a call is ~2 ms there)."""
    return bf16_matmul_flops(device, peak_size(device), 20 if device.type == "cuda" else 5)


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize(device)


def is_out_of_memory(e: BaseException) -> bool:
    """A step that does not fit: CUDA's ``torch.OutOfMemoryError``, or the CPU allocator's RuntimeError."""
    import torch

    if isinstance(e, torch.OutOfMemoryError):
        return True
    text = str(e).lower()
    return isinstance(e, (RuntimeError, MemoryError)) and (
        isinstance(e, MemoryError) or any(s in text for s in ("out of memory", "not enough memory",
                                                              "can't allocate memory", "defaultcpuallocator")))


def free_memory(device) -> None:
    """What a step that ran out of memory (or a finished batch) held, given back before the next one: the
    caller has dropped its references; the collector breaks the exception's frame cycles, then the CUDA
    caching allocator returns its blocks."""
    import torch

    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def load_shape(shape: str):
    """The pretraining config of ``shape``: a preset name (configs/pretrain/<shape>.yaml, its ``base:`` chain
    followed) or a YAML path. Its model, generator, vocab_size and seq_len are what the benchmark runs."""
    from koelectra_kit.config import load_config
    from koelectra_kit.pretrain import PretrainConfig

    path = shape_file(shape)
    if path is None:
        raise ValueError(f"--shape {shape}: no such YAML, preset or benchmark shape ({', '.join(shape_names())})")
    return load_config(PretrainConfig, path, ["corpus=x", "out=x"])


def shapes_of(cfg) -> tuple[dict, dict]:
    """(discriminator, generator) shapes as dicts of hidden_size, num_layers, num_heads, intermediate_size."""
    from koelectra_kit.electra import model as electra

    m = cfg.model
    dshape = dict(hidden_size=m.hidden_size, num_layers=m.num_layers, num_heads=m.num_heads,
                  intermediate_size=m.intermediate_size)
    return dshape, electra.generator_shape(m, cfg.generator)


def batch_ids(B: int, L: int, V: int, device):
    """[B, L] token ids as packed short comments look: [CLS] first, a [SEP] every 16 tokens; seeded."""
    import torch

    torch.manual_seed(0)
    ids = torch.randint(5, V, (B, L))
    ids[:, 0] = 2
    ids[:, ::16] = 3
    return ids.to(device)


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
                          attention_probs_dropout_prob=m.attention_dropout,
                          max_position_embeddings=m.max_position_embeddings)
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


def toolkit_step(cfg, ids, V: int, special: list[int], device, compile_mode: str | None = None,
                 compile: bool = False, compile_scope: str = "model"):
    """(b) the toolkit's own code path, set up as ``pretrain.recipe`` sets it up (its kernels, its optimizer,
    torch.compile when asked): a function doing one training step on ``ids``, and the autocast dtype."""
    import torch

    from koelectra_kit.electra import cpu as electra_cpu, model as electra
    from koelectra_kit.runtime import autocast_dtype

    m, (B, L) = cfg.model, ids.shape
    electra_cpu.register_cpu_sdpa()
    model = electra.build_pretrain_model(V, 0, special, m, cfg.generator, attn_implementation=electra_cpu.CPU_SDPA,
                                         max_position_embeddings=m.max_position_embeddings)  # as pretrain builds it
    electra_cpu.use_fast_dropout(model)
    model.to(device)
    opt = electra.build_optimizer(model, cfg.lr, cfg.weight_decay, (cfg.adam_beta1, cfg.adam_beta2), cfg.adam_eps,
                                  device.type)
    wrapped = None
    if (compile or compile_mode) and compile_scope == "layers":
        electra.compile_layers(model, compile_mode)  # as pretrain's compile_scope=layers
    elif compile or compile_mode:
        wrapped = torch.compile(model, mode=compile_mode)
    amp = autocast_dtype(device, "auto")
    rng = torch.Generator(device=device).manual_seed(0)
    mask_p, rand_p = cfg.mask_probs()
    specials = torch.tensor(special, device=device)

    def step():
        mb = electra.mask_batch(ids, None, specials, MASK_ID, V, cfg.mask_prob, mask_p, rand_p, rng, B * L)
        electra.train_step(model, opt, [mb], disc_weight=cfg.disc_weight, lr=cfg.lr, amp_dtype=amp,
                           device_type=device.type, max_grad_norm=cfg.max_grad_norm, rng=rng, wrapped=wrapped)

    return step, amp


# The two competitors, by the key the figures use: (the row's label, how a "does not fit" line names it).
ROWS = {"straightforward": ("(a) transformers, fp32, eager, full logits", "(a) straightforward step"),
        "toolkit": ("(b) koelectra-kit train_step              ", "(b) koelectra-kit train_step")}


@dataclass
class Timed:
    """One implementation at one batch: its step times (seconds), or why it has none."""
    times: list[float] = field(default_factory=list)
    error: str | None = None  # "out of memory"
    peak_memory: int | None = None  # bytes (CUDA) allocated at most during its warm-up (the other's weights too)
    warmup_s: float = 0.0  # its untimed warm-up calls (compiling, with --compile)

    @property
    def fits(self) -> bool:
        return self.error is None and bool(self.times)

    @property
    def seconds(self) -> float:
        return median(self.times)


def warmed(build, warmup: int, device, timed: Timed):
    """``build()``'s step after ``warmup`` untimed calls (their seconds and peak memory noted in ``timed``), or
    None when building or stepping ran out of memory (this frame, and with it the step's model, is gone once it
    returns: the caller then frees the memory)."""
    import torch

    if device.type == "cuda":
        torch.cuda.reset_peak_memory_stats(device)
    try:
        step = build()
        t = time.perf_counter()
        for _ in range(warmup):
            step()
        sync(device)
        timed.warmup_s = time.perf_counter() - t
        return step
    except Exception as e:  # noqa: BLE001 - only out of memory is caught; anything else is raised again
        if not is_out_of_memory(e):
            raise
        timed.error = "out of memory"
    finally:
        if device.type == "cuda":
            timed.peak_memory = torch.cuda.max_memory_allocated(device)
    return None


class Guarded:
    """A warmed step for ``interleaved``: an out-of-memory error in a timed call (memory fragments) turns it into
    a no-op and marks it, so the other implementation's timing goes on."""

    def __init__(self, step, device):
        self.step, self.device, self.error = step, device, None

    def __call__(self):
        if self.step is None:
            return
        try:
            self.step()
            return
        except Exception as e:  # noqa: BLE001 - see warmed()
            if not is_out_of_memory(e):
                raise
            self.error = "out of memory"
        self.step = None
        free_memory(self.device)


def time_batch(args, cfg, B: int, L: int, V: int, device) -> dict[str, Timed]:
    """Both implementations at batch ``B``: built and warmed one after the other (a step that does not fit is
    freed before the next is built), then timed in turns."""
    import torch

    ids = batch_ids(B, L, V, device)
    builders = {"straightforward": lambda: straightforward_step(cfg, ids, V, SPECIAL, device),
                "toolkit": lambda: toolkit_step(cfg, ids, V, SPECIAL, device, args.compile_mode, args.compile,
                                                  args.compile_scope)[0]}
    if args.compile or args.compile_mode:
        torch._dynamo.reset()  # each batch compiles for its own static shapes (no automatic dynamic batch dim)
    out, steps = {}, {}
    for name, build in builders.items():
        out[name] = Timed()
        step = warmed(build, args.warmup, device, out[name])
        if step is None:
            free_memory(device)
        else:
            steps[name] = Guarded(step, device)
    if steps:
        times = interleaved(steps, args.rounds * args.steps, sync=lambda: sync(device), warmup=0)
        for name, guarded in steps.items():
            out[name].error = guarded.error
            out[name].times = [] if guarded.error else times[name]
    # the batch's models and optimizer states (the loops' last references to them too) go before the memory is
    # given back for the next batch
    steps.clear()
    step = guarded = None
    free_memory(device)
    return out


def where(device) -> str:
    return "this GPU" if device.type == "cuda" else "this machine"


def print_batch(timed: dict[str, Timed], B: int, L: int, flops: float, peak: float, device) -> dict:
    """The batch's rows (the lines a single-batch run has always printed), and its figures for the summary."""
    tokens = B * L
    row = {"batch": B, "tokens_per_step": tokens, "model_flops_per_step": flops, "peak_flops": peak}
    for name, t in timed.items():
        label, short = ROWS[name]
        if not t.fits:
            print(f"{short} does not fit at batch {B} on {where(device)} ({t.error})")
            row[name] = {"fits": False, "error": t.error}
            continue
        print(f"{label} : {tokens / t.seconds:9,.0f} tokens/s  ({t.seconds * 1000:.0f} ms/step, "
              f"median of {len(t.times)})")
        row[name] = {"fits": True, "ms_per_step": t.seconds * 1000, "tokens_per_s": tokens / t.seconds,
                     "times_s": t.times, "warmup_s": t.warmup_s, "peak_memory_bytes": t.peak_memory}
    a, b = timed["straightforward"], timed["toolkit"]
    row["speedup"] = a.seconds / b.seconds if a.fits and b.fits else None
    if row["speedup"] is not None:
        print(f"speed-up (b)/(a): {row['speedup']:.2f}x" + ("  (target >= 3.5x)" if device.type == "cpu" else ""))
    if b.fits:
        n = peak_size(device)
        row["toolkit"]["model_flops_per_s"] = flops / b.seconds
        row["toolkit"]["fraction_of_peak"] = flops / b.seconds / peak
        print(f"toolkit model FLOP/s: {flops / b.seconds / 1e9:.1f} GFLOP/s = {flops / b.seconds / peak:.0%} of a "
              f"bf16 {n}^3 matmul measured now ({peak / 1e9:.0f} GFLOP/s); {flops / tokens / 1e6:.1f} MFLOP per token")
    return row


def summarize(shape: str, rows: list[dict], peak: float, device) -> dict:
    """The toolkit's best batch, its fraction of the run's peak, and the speed-up at the same batch (or at the
    largest batch both fit); the acceptance line against ``BARS``. Printed, and returned for --json."""
    fits = [r for r in rows if r["toolkit"]["fits"]]
    both = [r for r in fits if r["straightforward"]["fits"]]
    summary: dict = {"peak_flops": peak}
    print(f"\n{shape}: sweep of batches {', '.join(str(r['batch']) for r in rows)}")
    if not fits:
        print(f"{shape}: the toolkit's step fit at no batch of the sweep: nothing to compare")
        summary["acceptance"] = line = f"{shape}: no batch fit"
        print(f"acceptance: {line}")
        return summary
    best = max(fits, key=lambda r: r["toolkit"]["tokens_per_s"])
    frac = best["toolkit"]["model_flops_per_s"] / peak
    summary["best"] = {"batch": best["batch"], "tokens_per_s": best["toolkit"]["tokens_per_s"],
                       "model_flops_per_s": best["toolkit"]["model_flops_per_s"], "fraction_of_peak": frac}
    print(f"toolkit's best batch {best['batch']}: {best['toolkit']['tokens_per_s']:,.0f} tokens/s, "
          f"{best['toolkit']['model_flops_per_s'] / 1e9:,.0f} GFLOP/s = {frac:.1%} of the bf16 "
          f"{peak_size(device)}^3 matmul peak ({peak / 1e9:,.0f} GFLOP/s, the highest measured in this run)")
    if best["speedup"] is not None:
        at, speedup = best, best["speedup"]
        print(f"against the straightforward step at the same batch {best['batch']}: {speedup:.2f}x")
    elif both:
        at = max(both, key=lambda r: r["batch"])
        speedup = at["speedup"]
        print(f"the straightforward step does not fit at batch {best['batch']}; at batch {at['batch']}, the largest "
              f"batch both fit: {speedup:.2f}x ({at['toolkit']['tokens_per_s']:,.0f} vs "
              f"{at['straightforward']['tokens_per_s']:,.0f} tokens/s)")
    else:
        at, speedup = None, None
        print("the straightforward step fit at no batch of the sweep: no speed-up figure")
    summary["comparison"] = None if at is None else {
        "batch": at["batch"], "speedup": speedup, "at_best_batch": at is best,
        "toolkit_tokens_per_s": at["toolkit"]["tokens_per_s"],
        "straightforward_tokens_per_s": at["straightforward"]["tokens_per_s"]}
    a_fits = [r for r in rows if r["straightforward"]["fits"]]
    if a_fits:  # what a user of either gets: each at its own best batch
        a_best = max(a_fits, key=lambda r: r["straightforward"]["tokens_per_s"])
        a_rate = a_best["straightforward"]["tokens_per_s"]
        summary["each_at_its_best"] = {"toolkit_batch": best["batch"], "straightforward_batch": a_best["batch"],
                                       "speedup": best["toolkit"]["tokens_per_s"] / a_rate}
        print(f"each at its own best batch: toolkit {best['batch']} vs straightforward {a_best['batch']}: "
              f"{best['toolkit']['tokens_per_s'] / a_rate:.2f}x")
    bar_peak, bar_speedup = BARS.get(shape, (None, None))
    parts = [f"{frac:.1%} of bf16 peak" + (f" (bar {bar_peak:.0%})" if bar_peak else "")]
    parts.append(f"{speedup:.1f}x straightforward" if speedup is not None else "no straightforward figure")
    if bar_speedup:
        parts[-1] += f" (bar {bar_speedup:g}x)"
    if at is not None and at is not best:
        parts[-1] += f" at batch {at['batch']}"
    met = [frac >= bar_peak] if bar_peak else []
    if bar_speedup:
        met.append(speedup is not None and speedup >= bar_speedup)
    verdict = ("met" if all(met) else "NOT met") if met else "no bar for this shape"
    line = f"{shape}: {', '.join(parts)}: {verdict}"
    if device.type != "cuda" and met:
        line += " (the bars are for a GPU; this ran on the CPU)"
    summary["acceptance"] = {"line": line, "fraction_of_peak": frac, "bar_fraction": bar_peak, "speedup": speedup,
                             "speedup_batch": None if at is None else at["batch"], "bar_speedup": bar_speedup,
                             "met": all(met) if met else None}
    print(f"acceptance: {line}")
    return summary


def write_json(path: str | None, report: dict) -> None:
    """--json: written after every batch (beside, then renamed), so a run cut short still leaves its figures."""
    if not path:
        return
    tmp = Path(f"{path}.tmp")
    tmp.write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def speed(args) -> None:
    import torch
    import transformers

    from koelectra_kit.electra import model as electra
    from koelectra_kit.runtime import autocast_dtype, resolve_device

    if args.threads:
        torch.set_num_threads(args.threads)
    device = resolve_device(args.device)
    warmup = args.warmup if args.warmup is not None else (3 if device.type == "cuda" else 1)
    args.warmup = warmup
    sweep = len(args.batch) > 1 or len(args.shape) > 1 or device.type == "cuda"
    report = {"device": str(device), "device_name": torch.cuda.get_device_name(device) if device.type == "cuda"
              else f"CPU, {torch.get_num_threads()} threads", "torch": torch.__version__,
              "transformers": transformers.__version__, "compile": bool(args.compile or args.compile_mode),
              "compile_mode": args.compile_mode, "compile_scope": args.compile_scope, "warmup": warmup, "timed_steps": args.rounds * args.steps,
              "peak_matmul": f"bf16 {peak_size(device)}^3", "peak_flops_measured": [], "shapes": []}
    for shape in args.shape:
        cfg = load_shape(shape)
        m = cfg.model
        L, V = args.seq or cfg.seq_len, args.vocab or cfg.vocab_size
        dshape, gshape = shapes_of(cfg)
        amp = autocast_dtype(device, "auto")
        compiled = args.compile or args.compile_mode
        print(f"{shape} preset: discriminator {dshape}, generator {gshape}, embedding {m.embedding_size}, vocab {V}, "
              f"batch {','.join(map(str, args.batch))} x seq {L}, dropout {m.hidden_dropout}/{m.attention_dropout}; "
              f"torch {torch.__version__}, "
              f"{torch.cuda.get_device_name(device) if device.type == 'cuda' else f'{torch.get_num_threads()} threads'}"
              f", toolkit precision {str(amp).replace('torch.', '') if amp else 'fp32'}"
              f"{', torch.compile' if compiled else ''}{f' mode={args.compile_mode}' if args.compile_mode else ''}"
              f"{' of each layer' if compiled and args.compile_scope == 'layers' else ''}",
              flush=True)
        K = electra.num_mask_slots(L, cfg.mask_prob)
        entry = {"shape": shape, "seq": L, "vocab": V, "discriminator": dshape, "generator": gshape,
                 "embedding": m.embedding_size, "precision": str(amp).replace("torch.", "") if amp else "fp32",
                 "batches": []}
        report["shapes"].append(entry)
        if args.profile:
            B = args.batch[0]
            ids = batch_ids(B, L, V, device)
            step, _ = toolkit_step(cfg, ids, V, SPECIAL, device, args.compile_mode, args.compile, args.compile_scope)
            t = time.perf_counter()
            for _ in range(warmup):
                step()
            print(f"warm-up ({warmup} step(s){', compiling' if compiled else ''}): {time.perf_counter() - t:.1f}s",
                  flush=True)
            profile(step, args.profile, B * L, model_flops_per_step(dshape, gshape, B, L, K, V, m.embedding_size),
                    bf16_matmul_flops(device, peak_size(device)), device)
            return
        for B in args.batch:
            if sweep:
                print(f"\nbatch {B} x seq {L} ({B * L:,} tokens/step):", flush=True)
            timed = time_batch(args, cfg, B, L, V, device)
            print(f"warm-up ({warmup} step(s) each{', compiling' if compiled else ''}): "
                  f"{sum(x.warmup_s for x in timed.values()):.1f}s", flush=True)
            peak = measure_peak(device)
            report["peak_flops_measured"].append(peak)
            flops = model_flops_per_step(dshape, gshape, B, L, K, V, m.embedding_size)
            entry["batches"].append(print_batch(timed, B, L, flops, peak, device))
            sys.stdout.flush()
            write_json(args.json, report)
        if sweep or args.json:  # one batch on a CPU prints its rows alone; its JSON still has the acceptance
            with contextlib.nullcontext() if sweep else contextlib.redirect_stdout(io.StringIO()):
                entry.update(summarize(shape, entry["batches"], max(report["peak_flops_measured"]), device))
            write_json(args.json, report)
        if len(args.shape) > 1:
            print()
    if sweep and len(args.shape) > 1:
        print("acceptance, every shape:")
        for e in report["shapes"]:
            a = e.get("acceptance")
            print(f"  {a['line'] if isinstance(a, dict) else a}")
    write_json(args.json, report)


# Where a step's CPU time goes, by the kind of work: each aten op's self time lands in the first group whose
# name it contains (order matters: "addmm" is a matmul, not an "add").
OP_GROUPS = [
    ("matmul (linear layers, QK^T, PV, heads)", ("mm", "matmul", "linear", "bmm", "baddbmm", "addmm", "mkldnn",
                                                 "gemm", "nvjet", "cutlass", "xmma")),  # (the last four: CUDA's)
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


def self_time_us(ev, on_gpu: bool) -> float:
    """An op's (or kernel's) own time in a profile: on the GPU the device's (kernels, by name), else the CPU's."""
    if not on_gpu:
        return ev.self_cpu_time_total
    return getattr(ev, "self_device_time_total", None) or getattr(ev, "self_cuda_time_total", 0)


def profile(step, n: int, tokens: int, flops: float, peak: float, device=None) -> None:
    """Profile ``n`` toolkit steps: self time per group of ops (on a GPU the kernels' own GPU time: a compiled
    step's fused Triton kernels carry their ops' names), and what the matmuls alone reach. Profile a compiled step
    with ``--compile`` (no CUDA graphs): inside a replayed graph the profiler sees one launch, not its kernels."""
    import torch
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    on_gpu = device is not None and device.type == "cuda"
    sync = torch.cuda.synchronize if on_gpu else (lambda: None)
    sync()
    t = time.perf_counter()
    with torch_profile(activities=[ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if on_gpu else [])) as prof:
        for _ in range(n):
            step()
        sync()
    wall = (time.perf_counter() - t) / n
    groups: dict[str, float] = {name: 0.0 for name, _ in OP_GROUPS}
    groups["other"] = 0.0
    ops = []
    for ev in prof.key_averages():
        if on_gpu and getattr(ev, "device_type", None) != torch.autograd.DeviceType.CUDA:
            continue  # (an op's device time is its kernels': counted once, as the kernels)
        us = self_time_us(ev, on_gpu)
        if us <= 0:
            continue
        ops.append((us, ev.key))
        name = ev.key.lower()
        group = next((g for g, keys in OP_GROUPS if any(k in name for k in keys)), "other")
        groups[group] += us
    total = sum(groups.values())
    print(f"profile of {n} toolkit steps: {wall * 1000:.0f} ms/step wall ({tokens / wall:,.0f} tokens/s); "
          f"{'the GPU kernels own time' if on_gpu else 'self CPU time summed over threads' + chr(39) + ' ops'} "
          f"{total / n / 1000:.0f} ms/step")
    for g, us in sorted(groups.items(), key=lambda kv: -kv[1]):
        print(f"  {us / total:6.1%}  {us / n / 1000:8.1f} ms/step  {g}")
    mm = groups[OP_GROUPS[0][0]] / n / 1e6
    print(f"matmul time alone runs the model's {flops / 1e9:.1f} GFLOP at {flops / max(mm, 1e-9) / 1e9:.0f} GFLOP/s "
          f"= {flops / max(mm, 1e-9) / peak:.0%} of a bf16 {peak_size(device) if device else 2048}^3 matmul "
          f"measured now ({peak / 1e9:.0f} GFLOP/s); "
          f"the whole step: {flops / wall / 1e9:.0f} GFLOP/s = {flops / wall / peak:.0%}")
    print(f"top {'kernels by GPU' if on_gpu else 'ops by self CPU'} time:")
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


def rss(args) -> int:
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
        if proc.returncode != 0:  # a run that failed (its error line above) has no peak of a run to report
            print(f"error: the pretraining run measured ended with exit code {proc.returncode} (its lines above): "
                  "no peak RSS of a run to report", file=sys.stderr)
            return 2
        print(f"peak RSS: {peak_sum / 2**20:.2f} GiB summed over the process tree (largest single process "
              f"{peak_one / 2**20:.2f} GiB); target < 3 GB")
    return 0


def batches(text: str) -> list[int]:
    """--batch: one size or a comma-separated sweep (``128,256,512``)."""
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: a batch size or a comma-separated list (128,256,512)") from None
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: batch sizes are whole numbers >= 1")
    return out


def main(argv: list[str] | None = None) -> None:
    p = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--shape", default="small", help="the model shape (and default vocab and seq): a preset of "
                   "configs/pretrain (small, base, gpu-1h, tiny, ...) or a YAML path; a comma-separated list runs "
                   "each (small,base)")
    p.add_argument("--batch", type=batches, default=[32], help="sequences per step; a comma-separated list is a "
                   "sweep (128,256,512,1024): both implementations at each, the toolkit's best batch at the end")
    p.add_argument("--seq", type=positive_int, default=None, help="sequence length (default: the preset's seq_len; "
                   f"at least {MIN_SEQ}, at most the shape's model.max_position_embeddings)")
    p.add_argument("--vocab", type=positive_int, default=None, help="vocabulary size (default: the preset's "
                   "vocab_size; a character-vocabulary preset's real size is its alphabet's, pass it)")
    p.add_argument("--steps", type=positive_int, default=2, help="timed steps per round per implementation")
    p.add_argument("--rounds", type=positive_int, default=3, help="interleaved rounds")
    p.add_argument("--warmup", type=non_negative_int, default=None, help="untimed steps of each first (default 1 "
                   "on a CPU, 3 on a GPU: CUDA graphs and the allocator settle)")
    p.add_argument("--threads", type=non_negative_int, default=0, help="torch threads (0: torch's default)")
    p.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N | auto (both implementations run there)")
    p.add_argument("--compile", action="store_true", help="torch.compile the toolkit's model (minutes to compile)")
    p.add_argument("--compile-mode", default=None, choices=["default", "reduce-overhead", "max-autotune",
                                                            "max-autotune-no-cudagraphs"],
                   help="torch.compile(mode=...) for the toolkit's model (implies --compile)")
    p.add_argument("--compile-scope", default="model", choices=["model", "layers"],
                   help="what --compile compiles, as pretrain's compile_scope: the whole forward (model) or each "
                        "transformer layer in place (layers: a shorter compile; implies --compile)")
    p.add_argument("--json", default=None, metavar="PATH", type=output_file, help="write every figure to PATH as "
                   "JSON (rewritten after each batch, so a run cut short leaves what it measured; its folder must "
                   "exist)")
    p.add_argument("--profile", type=non_negative_int, default=0, metavar="N",
                   help="profile N toolkit steps (torch.profiler): where a step's time goes, by kind of op")
    p.add_argument("--rss", action="store_true", help="measure peak RSS of pretraining tiny on --corpus instead")
    p.add_argument("--corpus", default=str(SHARED / "pretrain" / "nsmc_reviews.txt"))
    p.add_argument("--rss-steps", type=positive_int, default=300)
    p.add_argument("--tokenizer", default=None, help="--rss: reuse a trained tokenizer dir instead of training one")
    p.add_argument("--cache-dir", default=None, help="--rss: packed-data cache dir (default: a fresh temp dir)")
    args = p.parse_args(argv)
    args.compile = args.compile or args.compile_scope == "layers"
    if args.rss:
        if not Path(args.corpus).is_file():
            p.error(f"--corpus {args.corpus}: no such file (pass --corpus)")
        return rss(args)
    args.shape = [s.strip() for s in args.shape.split(",") if s.strip()]
    if not args.shape:
        p.error("--shape: no shape named (small, base, ... or a comma-separated list)")
    if args.vocab is not None and args.vocab <= len(SPECIAL):
        p.error(f"--vocab must be more than the {len(SPECIAL)} special tokens")
    if args.profile and (len(args.batch) > 1 or len(args.shape) > 1):
        p.error("--profile takes one --batch and one --shape")
    from koelectra_kit.runtime import resolve_device

    with input_errors(p):
        for shape in args.shape:
            try:
                cfg = load_shape(shape)
            except ValueError as e:
                p.error(str(e))
            positions = cfg.model.max_position_embeddings
            if args.seq is not None and not MIN_SEQ <= args.seq <= positions:
                p.error(f"--seq {args.seq}: between {MIN_SEQ} and shape {shape}'s {positions} positions "
                        "(model.max_position_embeddings), as pretrain takes seq_len")
        resolve_device(args.device)
    speed(args)


if __name__ == "__main__":
    sys.exit(main())
