"""The pretraining step's structure for a GPU (issue 39 item 1-2), checked on the CPU: no operation that makes the
host wait for the device in any step but a logging one, one compiled graph for the whole forward (no graph breaks,
no recompiling when lambda changes), and the packed ids on the device giving exactly the file's batches."""
from __future__ import annotations

import collections

import numpy as np
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from koelectra_kit.electra import model as electra
from koelectra_kit.pretrain.data import DeviceRows, RowOrder

# Ops that read device memory back to the host on CUDA (the stream must drain first): a scalar read, and every op
# whose output shape depends on the data (nonzero inside a boolean index, bincount's max, unique).
SYNCING = {"_local_scalar_dense", "item", "nonzero", "masked_select", "bincount", "unique_consecutive", "_unique2",
           "unique_dim", "is_nonzero", "equal", "repeat_interleave"}


class SyncCounter(TorchDispatchMode):
    def __init__(self):
        super().__init__()
        self.counts = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        name = func.overloadpacket.__name__
        if name in SYNCING:
            self.counts[name] += 1
        if name in ("index", "index_put", "index_put_") and len(args) > 1 and any(
                isinstance(t, torch.Tensor) and t.dtype == torch.bool for t in (args[1] or [])):
            self.counts[f"{name} with a boolean mask"] += 1
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("on_device", [False, True])
def test_no_step_but_a_logging_one_waits_for_the_device(tiny_cfg, on_device):
    from koelectra_kit.pretrain.distributed import DistContext
    from koelectra_kit.pretrain.recipe import PretrainRecipe

    cfg = tiny_cfg("max_steps=6", "log_every=3", f"data_on_device={str(on_device).lower()}")
    probe, per_step = SyncCounter(), {}

    def on_step(step, row):
        per_step[step] = dict(probe.counts)
        probe.counts.clear()

    recipe = PretrainRecipe(cfg, DistContext("cpu", 1), on_step)
    recipe.setup()
    assert (recipe.batches.on_device is not None) == on_device
    with probe:
        recipe.train()
    assert {s: c for s, c in per_step.items() if s % 3} == {1: {}, 2: {}, 4: {}, 5: {}}
    assert per_step[3]  # the logging step does read the window (the probe sees what it is built to see)


def tiny_model(V=300, *overrides):
    from koelectra_kit.config import load_config
    from koelectra_kit.pretrain import PretrainConfig

    cfg = load_config(PretrainConfig, "configs/pretrain/tiny.yaml", ["corpus=x", "out=x", *overrides])
    torch.manual_seed(0)
    return electra.build_pretrain_model(V, 0, [0, 1, 2, 3, 4], cfg.model, cfg.generator), V


def batch(V, rng, B=4, L=32):
    ids = torch.randint(5, V, (B, L), generator=torch.Generator().manual_seed(1))
    ids[:, 0] = 2
    return electra.mask_batch(ids, None, torch.tensor([0, 1, 2, 3, 4]), 4, V, 0.15, 0.85, 0.0, rng, B * L)


def test_the_forward_compiles_to_one_graph_and_lambda_changes_do_not_recompile():
    import torch._dynamo as dynamo
    from torch._dynamo.utils import counters

    model, V = tiny_model()
    rng = torch.Generator().manual_seed(0)
    mb = batch(V, rng)
    explained = dynamo.explain(model)(mb.input_ids, None, mb.masked_ids, mb.positions, mb.valid,
                                      torch.tensor(50.0), None, mb.sample_u)
    assert (explained.graph_count, explained.graph_break_count) == (1, 0), explained.break_reasons
    dynamo.reset()
    counters.clear()
    compiled = torch.compile(model, backend="eager")
    opt = electra.build_optimizer(model, 1e-3, 0.01)
    for lam in (50.0, 40.0, 30.5, 1.0):  # a lambda warm-up changes it every step
        electra.train_step(model, opt, [batch(V, rng)], disc_weight=lam, lr=1e-3, wrapped=compiled, rng=rng)
    assert counters["stats"]["unique_graphs"] == 1
    dynamo.reset()


def test_compile_layers_compiles_one_layer_per_encoder_shape_and_trains_as_eager():
    """compile_scope=layers: every transformer layer compiled in place, one graph per encoder shape (generator and
    discriminator; the other layers reuse it, no symbolic hidden size), the same losses as the eager model, the
    parameter names (checkpoints, exports) unchanged."""
    from torch._dynamo.utils import counters

    graphs = []

    def recorder(gm, example_inputs):  # a backend that runs the traced graph as it is, noting symbolic sizes
        graphs.append(any(isinstance(x, torch.SymInt) or (isinstance(x, torch.Tensor) and any(
            isinstance(d, torch.SymInt) for d in x.shape)) for x in example_inputs))
        return gm.forward

    losses = {}
    for scope in ("eager", "layers"):
        # an embedding wider than both encoders, as in gpu-10min: each projects it, each layer's input is a view;
        # without dynamic=False, torch then compiles the second shape again with a symbolic hidden size
        model, V = tiny_model(300, "model.embedding_size=128")
        names = [n for n, _ in model.named_parameters()]
        torch._dynamo.reset()
        counters.clear()
        if scope == "layers":
            electra.compile_layers(model, backend=recorder)
        opt = electra.build_optimizer(model, 1e-3, 0.01)
        rng = torch.Generator().manual_seed(0)
        losses[scope] = [float(electra.train_step(model, opt, [batch(V, rng)], disc_weight=50.0, lr=1e-3,
                                                  rng=rng)[1]["loss"]) for _ in range(3)]
        assert [n for n, _ in model.named_parameters()] == names and "_orig_mod" not in "".join(model.state_dict())
    assert model.compiled_layers and counters["stats"]["unique_graphs"] == 2 and graphs == [False, False]
    assert losses["layers"] == pytest.approx(losses["eager"], rel=1e-5)
    torch._dynamo.reset()


def test_the_samples_come_from_the_batchs_uniforms():
    """The generator's samples are the inverse CDF at mask_batch's uniforms: the same draws give the same
    replacements whatever device or compiled graph runs the forward, and resume continues them exactly."""
    logits = torch.randn(3, 5, 50)
    banned = torch.tensor([0, 1])
    u = torch.rand(3, 5)
    got = electra.sample_softmax(logits, 1.0, banned, uniform=u)
    probs = torch.softmax(logits.index_fill(-1, banned, float("-inf")), -1)
    expected = (probs.cumsum(-1) < u.unsqueeze(-1) * probs.sum(-1, keepdim=True)).sum(-1)
    assert torch.equal(got, expected.clamp(max=49)) and not bool(torch.isin(got, banned).any())


def test_rows_on_the_device_are_the_files_rows_in_the_same_order(tiny_cfg):
    from koelectra_kit.pretrain.distributed import DistContext
    from koelectra_kit.pretrain.recipe import PretrainRecipe

    recipe = PretrainRecipe(tiny_cfg(), DistContext("cpu", 1))
    recipe.setup()
    data = recipe.data
    order = RowOrder(data.n, 3, True)
    rows = DeviceRows(data, order, torch.device("cpu"))
    for start, count in [(0, 16), (data.n - 5, 16), (3 * data.n - 1, 2 * data.n + 3)]:  # within, across epochs
        expected = order.rows(start, count)
        got = rows.rows(start, count)
        assert np.array_equal(got.numpy(), expected)
        assert np.array_equal(rows.take(got).numpy(), data.take(expected))
    assert rows.ids.dtype == torch.int32 and rows.ids.shape == (data.n, data.seq_len)


def test_compile_mode_needs_compile(tiny_cfg):
    from koelectra_kit.errors import ConfigError

    with pytest.raises(ConfigError, match="needs compile=true"):
        tiny_cfg("compile_mode=reduce-overhead")
    assert tiny_cfg("compile=true", "compile_mode=reduce-overhead").compile_mode == "reduce-overhead"
    with pytest.raises(ConfigError, match="compile_scope=layers needs compile=true"):
        tiny_cfg("compile_scope=layers")
    with pytest.raises(ConfigError, match="compile_scope"):
        tiny_cfg("compile=true", "compile_scope=blocks")


def test_ranks_read_rank_0s_clock_with_one_broadcast_every_log_interval():
    """Under torchrun every rank must stop at the same step with the same lr: each reads rank 0's clock, but a
    broadcast stalls the GPU's queue, so it happens every ``every`` steps and the steps between are extrapolated
    from broadcast values only: two ranks whose own clocks disagree read the same numbers."""
    from koelectra_kit.pretrain.distributed import SharedClock

    class Ranks:  # rank 0's elapsed is what every broadcast returns
        enabled, broadcasts = True, 0

        def broadcast_float(self, value):
            Ranks.broadcasts += 1
            return rank0[self.step]

    rank0 = {s: 0.5 * s for s in range(40)}  # rank 0: 0.5 s a step
    ranks = [Ranks(), Ranks()]
    clocks = [SharedClock(r, every=10) for r in ranks]
    seen = []
    for step in range(31):
        reads = []
        for r, clock, local in zip(ranks, clocks, (0.5 * step, 0.9 * step + 3)):  # rank 1's clock runs otherwise
            r.step = step
            reads.append(clock.read(step, local, 0.123))
        assert reads[0] == reads[1]
        seen.append(reads[0])
    assert Ranks.broadcasts == 2 * 4  # steps 0, 10, 20 and 30, on each rank
    assert seen[15] == (7.5, 0.5) and seen[30] == (15.0, 0.5)
    single = SharedClock(type("One", (), {"enabled": False})(), every=10)
    assert single.read(7, 3.25, 0.4) == (3.25, 0.4)  # one process: its own clock, as before


@pytest.mark.parametrize("scope", ["model", "layers"])
def test_a_compiled_run_trains_as_the_eager_one(tiny_cfg, tmp_path, scope):
    """compile=true through the real recipe (inductor on the CPU here; CUDA graphs on a GPU), the whole forward or
    each layer: the same losses as the eager run up to kernel rounding, checkpoint and export included."""
    from koelectra_kit.pretrain import pretrain, read_metrics

    eager = pretrain(tiny_cfg(f"out={tmp_path / 'eager'}", "fast_cpu_kernels=false"))
    torch._dynamo.reset()
    compiled = pretrain(tiny_cfg(f"out={tmp_path / 'compiled'}", "fast_cpu_kernels=false", "compile=true",
                                 f"compile_scope={scope}"))
    torch._dynamo.reset()
    assert eager["steps"] == compiled["steps"] == 4
    a, b = (read_metrics(tmp_path / n / "metrics.jsonl") for n in ("eager", "compiled"))
    assert all(abs(x["loss"] - y["loss"]) < 0.02 * abs(x["loss"]) for x, y in zip(a, b)), (a, b)
    assert (tmp_path / "compiled" / "discriminator" / "model.safetensors").is_file()


@pytest.mark.parametrize("scope", ["model", "layers"])
def test_the_compiled_step_has_no_reason_to_skip_cuda_graphs(tiny_cfg, tmp_path, monkeypatch, scope):
    """compile_mode=reduce-overhead replays the step as CUDA graphs only if inductor finds no reason to skip them,
    and it falls back silently (one log line) if it does: an input the graph mutates, a non-tensor input (a Python
    float lambda would be one), an op that cannot be captured. Those checks do not depend on the device, so they run
    here with the CPU-device check set aside and the capture itself replaced by a recorder, through the real
    recipe: forward and backward graphs, no reason given."""
    import torch._inductor.config as inductor_config
    import torch._inductor.cudagraph_utils as cudagraph_utils
    import torch._inductor.output_code as output_code

    from koelectra_kit.pretrain import pretrain

    hooks = [(output_code, "cudagraph_post_compile"), (output_code, "cudagraph_partition_post_compile"),
             (cudagraph_utils, "check_lowering_disable_cudagraph")]
    if not all(hasattr(m, name) for m, name in hooks):  # seen in torch 2.11 and 2.13
        pytest.skip(f"torch {torch.__version__}'s inductor lays out its CUDA-graph checks otherwise")
    graphs = []

    def record(example_inputs, compiled, cudagraphs, *args, **kwargs):  # instead of capturing (no CUDA here)
        info = compiled.cudagraph_info
        reasons = list(info.cudagraph_fail_reasons) if info else ["no cudagraph info"]
        # input mutation is judged at capture time (cudagraph trees accept it on static inputs only: parameters)
        static = set(compiled.fx_kwargs.get("static_input_idxs") or ())
        if mutated := sorted(set(compiled.mutated_input_idxs) - static):
            reasons.append(f"mutated inputs {mutated}")
        graphs.append(("backward" if compiled.fx_kwargs.get("is_backward") else "forward", reasons,
                       compiled.disabled_cudagraphs_reason))

    monkeypatch.setattr(output_code, "cudagraph_post_compile", record)
    monkeypatch.setattr(output_code, "cudagraph_partition_post_compile", record)
    monkeypatch.setattr(cudagraph_utils, "check_lowering_disable_cudagraph", lambda device_nodes: None)
    torch._dynamo.reset()
    with inductor_config.patch(fx_graph_cache=False), torch._functorch.config.patch(enable_autograd_cache=False):
        summary = pretrain(tiny_cfg(f"out={tmp_path / 'run'}", "fast_cpu_kernels=false", "compile=true",
                                    "compile_mode=reduce-overhead", f"compile_scope={scope}"))
    torch._dynamo.reset()
    assert summary["steps"] == 4
    assert {kind for kind, _, _ in graphs} == {"forward", "backward"}, graphs
    assert all(reasons == [] and disabled is None for _, reasons, disabled in graphs), graphs
