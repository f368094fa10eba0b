"""benchmarks/bench_pretrain.py at tiny sizes on the CPU (seconds): a batch sweep in which the straightforward step
runs out of memory prints one line for that batch, frees it, still prints the toolkit's row and compares at the
largest batch both fit; --json writes the figures; the presets resolve (base's shape without building it); the
summary's acceptance line against issue 39's bars; --compile-mode reaches torch.compile; bad options are one
error line."""
from __future__ import annotations

import json
import sys
import time
import weakref
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import bench_pretrain  # noqa: E402
from tests.test_bad_input import assert_one_line_error  # noqa: E402

pytestmark = pytest.mark.fast

TINY = ["--shape", "tiny", "--seq", "32", "--vocab", "500", "--steps", "1", "--rounds", "1", "--threads", "1"]


def test_a_batch_the_straightforward_step_cannot_fit_is_one_line_and_the_sweep_goes_on(tmp_path, monkeypatch,
                                                                                       capsys):
    real_a, real_b = bench_pretrain.straightforward_step, bench_pretrain.toolkit_step
    held = {}  # batch -> a weak reference to what the straightforward step of that batch held

    def straightforward_step(cfg, ids, V, special, device):
        step = real_a(cfg, ids, V, special, device)
        weights = torch.nn.Linear(4, 4)
        held[ids.shape[0]] = weakref.ref(weights)
        if ids.shape[0] <= 2:
            return step

        def out_of_memory():  # as CUDA raises it at the full-vocabulary logits
            weights.weight.sum()
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 16.00 GiB")
        return out_of_memory

    def toolkit_step(cfg, ids, *args, **kwargs):
        if ids.shape[0] == 4:  # the failed step's memory is given back before the next step is built
            assert held[4]() is None
        step, amp = real_b(cfg, ids, *args, **kwargs)
        if ids.shape[0] == 2:  # slower at batch 2, so the toolkit's best batch is 4, where (a) does not fit
            return (lambda: (step(), time.sleep(0.05))), amp
        return step, amp

    monkeypatch.setattr(bench_pretrain, "straightforward_step", straightforward_step)
    monkeypatch.setattr(bench_pretrain, "toolkit_step", toolkit_step)
    out_json = tmp_path / "figures.json"
    bench_pretrain.main(TINY + ["--batch", "2,4", "--json", str(out_json)])
    out = capsys.readouterr().out
    assert "Traceback" not in out
    lines = out.splitlines()
    oom = [line for line in lines if "does not fit" in line and line.startswith("(a)")]
    assert oom == ["(a) straightforward step does not fit at batch 4 on this machine (out of memory)"]
    batch4 = out[out.index("batch 4 x seq 32"):]
    assert "(b) koelectra-kit train_step               :" in batch4  # the toolkit's row still printed
    assert "speed-up (b)/(a)" not in batch4.split("tiny: sweep")[0]  # no ratio where (a) has no time
    assert "the straightforward step does not fit at batch 4; at batch 2, the largest batch both fit:" in out
    assert any(line.startswith("acceptance: tiny: ") and "at batch 2" in line for line in lines)

    figures = json.loads(out_json.read_text())
    shape = figures["shapes"][0]
    assert [b["batch"] for b in shape["batches"]] == [2, 4]
    b2, b4 = shape["batches"]
    assert b4["straightforward"] == {"fits": False, "error": "out of memory"} and b4["speedup"] is None
    assert b4["toolkit"]["fits"] and b4["toolkit"]["tokens_per_s"] > 0 and b4["toolkit"]["fraction_of_peak"] > 0
    assert b2["straightforward"]["fits"] and b2["speedup"] == pytest.approx(
        b2["straightforward"]["ms_per_step"] / b2["toolkit"]["ms_per_step"])
    assert shape["best"]["batch"] == 4
    assert shape["comparison"]["batch"] == 2 and shape["comparison"]["at_best_batch"] is False
    assert shape["acceptance"]["met"] is None  # no bar for tiny
    assert figures["peak_flops_measured"] and shape["peak_flops"] == max(figures["peak_flops_measured"])
    assert not Path(f"{out_json}.tmp").exists()


def test_a_toolkit_step_out_of_memory_is_one_line_too(monkeypatch, capsys):
    real_b = bench_pretrain.toolkit_step

    def toolkit_step(cfg, ids, *args, **kwargs):
        if ids.shape[0] > 2:
            raise torch.OutOfMemoryError("CUDA out of memory")
        return real_b(cfg, ids, *args, **kwargs)

    monkeypatch.setattr(bench_pretrain, "toolkit_step", toolkit_step)
    bench_pretrain.main(TINY + ["--batch", "2,4"])
    out = capsys.readouterr().out
    assert "(b) koelectra-kit train_step does not fit at batch 4 on this machine (out of memory)" in out
    assert "toolkit's best batch 2:" in out and "against the straightforward step at the same batch 2:" in out


def test_a_cpu_allocation_failure_counts_as_out_of_memory_and_other_errors_do_not():
    assert bench_pretrain.is_out_of_memory(torch.OutOfMemoryError("CUDA out of memory"))
    assert bench_pretrain.is_out_of_memory(RuntimeError(
        "[enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not enough memory: you tried to allocate 8 "
        "bytes."))
    assert bench_pretrain.is_out_of_memory(MemoryError())
    assert not bench_pretrain.is_out_of_memory(RuntimeError("mat1 and mat2 shapes cannot be multiplied"))
    assert not bench_pretrain.is_out_of_memory(ValueError("out of memory"))


def test_an_error_that_is_not_out_of_memory_is_raised(monkeypatch):
    def broken(*args, **kwargs):
        def step():
            raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")
        return step

    monkeypatch.setattr(bench_pretrain, "straightforward_step", broken)
    with pytest.raises(RuntimeError, match="shapes cannot be multiplied"):
        bench_pretrain.main(TINY + ["--batch", "2"])


def test_the_presets_resolve_base_without_building_it():
    base = bench_pretrain.load_shape("base")
    disc, gen = bench_pretrain.shapes_of(base)
    assert disc == {"hidden_size": 768, "num_layers": 12, "num_heads": 12, "intermediate_size": 3072}
    assert gen["hidden_size"] == 256 and gen["num_heads"] == 4
    assert (base.seq_len, base.vocab_size, base.model.embedding_size) == (512, 32000, 768)
    small = bench_pretrain.load_shape("small")
    assert (small.model.hidden_size, small.model.num_layers, small.seq_len, small.vocab_size) == (256, 12, 128, 32000)
    gpu = bench_pretrain.load_shape("gpu-1h")  # its base: chain (gpu-10min-subword, gpu-10min, cpu-30min) followed
    assert (gpu.model.num_layers, gpu.model.hidden_size, gpu.model.init, gpu.vocab_size) == \
        (12, 512, "positional", 8000)
    bar = bench_pretrain.load_shape("issue39-6x256")  # a benchmark-only shape: issue 39's fine-tune bar's encoder
    assert (bar.model.num_layers, bar.model.hidden_size, bar.model.intermediate_size) == (6, 256, 1024)
    with pytest.raises(ValueError, match="issue39-6x256"):  # the error lists what --shape takes by name
        bench_pretrain.load_shape("nosuch")


def test_the_shape_sets_the_default_seq_and_vocab(tmp_path, capsys):
    out_json = tmp_path / "f.json"
    bench_pretrain.main(["--shape", "tiny", "--batch", "2", "--steps", "1", "--rounds", "1", "--threads", "1",
                         "--json", str(out_json)])
    out = capsys.readouterr().out
    assert out.startswith("tiny preset: discriminator {'hidden_size': 64,") and "vocab 2000, batch 2 x seq 64" in out
    assert "tiny: sweep" not in out  # one batch on a CPU: the rows it always printed, no summary
    shape = json.loads(out_json.read_text())["shapes"][0]
    assert (shape["seq"], shape["vocab"]) == (64, 2000)
    # gpu_check reads the compiled step's acceptance from this JSON, whatever the device and number of batches
    assert shape["best"]["batch"] == 2 and shape["acceptance"]["line"].startswith("tiny: ")


def _row(batch, toolkit, straightforward, flops=1e9):
    """A summary row as print_batch makes it: tokens/s of each (None: did not fit), one step's FLOPs."""
    row = {"batch": batch}
    for name, rate in (("toolkit", toolkit), ("straightforward", straightforward)):
        row[name] = {"fits": False, "error": "out of memory"} if rate is None else {"fits": True,
                                                                                    "tokens_per_s": rate}
    if toolkit is not None:
        row["toolkit"]["model_flops_per_s"] = toolkit * flops
    row["speedup"] = toolkit / straightforward if toolkit and straightforward else None
    return row


@pytest.mark.parametrize("shape,rows,line", [
    ("small", [_row(128, 20, 4), _row(256, 25, None)],
     "small: 25.0% of bf16 peak (bar 20%), 5.0x straightforward (bar 5x) at batch 128: met"),
    ("small", [_row(128, 20, 5), _row(256, 18, 3)],
     "small: 20.0% of bf16 peak (bar 20%), 4.0x straightforward (bar 5x): NOT met"),
    ("base", [_row(64, 30, 10)], "base: 30.0% of bf16 peak (bar 35%), 3.0x straightforward: NOT met"),
    ("base", [_row(64, 40, None)], "base: 40.0% of bf16 peak (bar 35%), no straightforward figure: met"),
])
def test_the_acceptance_line_holds_the_bars(shape, rows, line, capsys):
    cuda = torch.device("cuda")  # only its type is read: the bars are for a GPU
    summary = bench_pretrain.summarize(shape, rows, peak=100e9, device=cuda)
    assert summary["acceptance"]["line"] == line
    assert capsys.readouterr().out.splitlines()[-1] == f"acceptance: {line}"


def test_compile_mode_reaches_torch_compile(monkeypatch, capsys):
    modes = []

    def fake_compile(model, mode=None, **kwargs):
        modes.append(mode)
        return model

    monkeypatch.setattr(torch, "compile", fake_compile)
    bench_pretrain.main(TINY + ["--batch", "2", "--compile-mode", "reduce-overhead"])
    assert modes == ["reduce-overhead"]
    assert "torch.compile mode=reduce-overhead" in capsys.readouterr().out


def test_compile_scope_layers_compiles_each_layer_in_place(monkeypatch, capsys):
    from koelectra_kit.electra import model as electra

    calls = []
    monkeypatch.setattr(torch, "compile", lambda model, **kw: calls.append("whole") or model)
    monkeypatch.setattr(electra, "compile_layers", lambda model, mode=None: calls.append(("layers", mode)))
    bench_pretrain.main(TINY + ["--batch", "2", "--compile-scope", "layers", "--compile-mode", "reduce-overhead"])
    assert calls == [("layers", "reduce-overhead")]
    assert "torch.compile mode=reduce-overhead of each layer" in capsys.readouterr().out


@pytest.mark.parametrize("argv,message", [
    (["--shape", "nope"], "--shape nope: no such YAML, preset or benchmark shape (base, "),
    (["--batch", "2,x"], "a batch size or a comma-separated list"),
    (["--batch", "0"], "batch sizes are whole numbers >= 1"),
    (["--vocab", "3"], "--vocab must be more than the 5 special tokens"),
    (["--profile", "2", "--batch", "2,4"], "--profile takes one --batch"),
    (["--compile-mode", "fast"], "invalid choice"),
    (["--compile-scope", "blocks"], "invalid choice"),
])
def test_bad_options_are_one_error_line(argv, message, capsys):
    with pytest.raises(SystemExit) as e:
        bench_pretrain.main(argv)
    assert_one_line_error(e.value.code, capsys.readouterr().err, message)


def test_rss_of_a_run_that_failed_is_no_figure(tmp_path, capsys):
    """--rss printed "peak RSS: 0.42 GiB ... target < 3 GB" and exited 0 when the run it measured had refused its
    corpus (exit 2)."""
    corpus = tmp_path / "two.txt"
    corpus.write_text("좋아요\n별로\n", encoding="utf-8")
    assert bench_pretrain.main(["--rss", "--corpus", str(corpus), "--rss-steps", "3"]) == 2
    captured = capsys.readouterr()
    assert "peak RSS" not in captured.out and "error: the pretraining run measured ended with exit code 2" in captured.err
