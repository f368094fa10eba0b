"""What a GPU run relies on, checked on a CPU in seconds (issue 39): the training loop reads nothing back from the
device between its logging steps, padded lengths fall on a few widths, the GPU scoring path gives the CPU's logits,
a tokenizer without Kiwi pre-split runs where kiwipiepy is not installed (and a Kiwi one loads there), and a device
that is not there is one line of error. What only a GPU can show (the speed) is for benchmarks/ on a GPU machine."""
from __future__ import annotations

import collections
import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

import numpy as np
import pytest
import torch

from koelectra_kit.cli import main
from koelectra_kit.config import load_config
from koelectra_kit.finetune import FinetuneConfig

from .fixtures_finetune import TINY_CONFIG

ROOT = Path(__file__).resolve().parent.parent
# The aten ops that make the host wait for the device on CUDA: a Python scalar read (.item(), float(t), bool(t),
# `if t:`), and the ops whose output size depends on the values (nonzero, torch.where(cond), masked_select, unique).
SYNC_OPS = {"_local_scalar_dense", "item", "is_nonzero", "equal", "nonzero", "nonzero_numpy", "masked_select",
            "_unique", "_unique2", "unique_dim", "unique_consecutive"}
# Boolean-mask indexing (x[mask], x[mask] = v) runs nonzero inside the index kernel, out of the dispatcher's sight:
# recorded as the index op with a bool index.
INDEX_OPS = {"index", "index_put", "index_put_", "_index_put_impl_"}


def _recipe(tmp_path, model_dir, sample_dir, *overrides):
    from koelectra_kit.finetune.recipe import FinetuneRecipe

    cfg = load_config(FinetuneConfig, TINY_CONFIG, [
        f"model={model_dir}", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'out'}",
        "progress=false", "plots=false", "references=false", "ensemble=none", "token_cache=false", *overrides])
    return FinetuneRecipe(cfg)


class SyncRecorder:
    """A TorchDispatchMode that counts the host-sync ops run, by the loop's phase at the time (``phase``: "step"
    unless the recipe is in log_train or evaluate) and where they come from. The optimizer's step counters are left
    out: non-fused AdamW keeps them as CPU tensors on every device (reading them never waits for a GPU), and the
    fused AdamW a GPU run uses keeps them on the GPU and never reads them."""

    def __init__(self, recipe=None):
        from torch.utils._python_dispatch import TorchDispatchMode

        rec = self
        self.phase, self.calls, self.sites = "step", collections.Counter(), collections.Counter()
        def counters():  # (AdamW makes its state at the first step)
            return [] if recipe is None else [s.get("step") for s in recipe.optimizer.state.values()]

        class Mode(TorchDispatchMode):
            def __torch_dispatch__(self, func, types, args=(), kwargs=None):
                name = func.overloadpacket.__name__
                if name in INDEX_OPS and rec._bool_index(args):
                    name = "boolean-mask index"
                if (name in SYNC_OPS or name == "boolean-mask index") and not rec._counter(args, counters):
                    rec.calls[(rec.phase, name)] += 1
                    frames = [f for f in traceback.extract_stack()
                              if "koelectra_kit" in f.filename or "transformers" in f.filename]
                    rec.sites[f"{Path(frames[-1].filename).name}:{frames[-1].lineno}" if frames else "?"] += 1
                return func(*args, **(kwargs or {}))

        self.mode = Mode()

    @staticmethod
    def _bool_index(args) -> bool:
        indices = args[1] if len(args) > 1 and isinstance(args[1], (list, tuple)) else ()
        return any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices)

    @staticmethod
    def _counter(args, counters) -> bool:
        t = args[0] if args else None
        return isinstance(t, torch.Tensor) and any(c is not None and c.data_ptr() == t.data_ptr() for c in counters())

    def during(self, fn, phase: str):
        def inner(*a, **k):
            before, self.phase = self.phase, phase
            try:
                return fn(*a, **k)
            finally:
                self.phase = before
        return inner

    def per_phase(self, phase: str) -> int:
        return sum(n for (p, _), n in self.calls.items() if p == phase)


def test_the_recorder_sees_what_syncs():
    """The control: .item(), float(t), boolean-mask indexing, torch.where(cond) and `if t:` are recorded."""
    rec = SyncRecorder()
    x = torch.arange(4.0)
    with rec.mode:
        x.sum().item()
        float(x.max())
        x[x > 1].sum()
        x[x > 2] = 0
        torch.where(x > 0)
        if x.any():
            pass
    assert rec.per_phase("step") == 6, rec.calls


@pytest.mark.parametrize("precision", ["fp32", "bf16"])
def test_training_steps_read_nothing_back_between_logging_steps(tmp_path, plain_encoder_dir, sample_dir, precision):
    """The real loop (FinetuneRecipe.train: batches, train_step, the loss window, the schedule) over 7 steps, logging
    every 3 and evaluating at the end: no host-sync op outside log_train and evaluate. Before issue 39 each step made
    2: train_step's loss.item() and transformers' mask factory asking whether a batch has padding (mask.all())."""
    from koelectra_kit.finetune.report import MetricsLog

    r = _recipe(tmp_path, plain_encoder_dir, sample_dir, "epochs=0.25", "log_every=3", "eval_every=1000",
                "class_weights=balanced", f"precision={precision}",
                "cuda_graphs=false")  # the eager loop's syncs (on a GPU, auto would record a graph: a sync of its own)
    r.setup_model()
    r.setup_data()
    r.setup_optimizer()
    assert r.total_steps == 7
    r.metrics = MetricsLog(tmp_path / "metrics.jsonl")
    rec = SyncRecorder(r)
    r.log_train, r.evaluate = rec.during(r.log_train, "log"), rec.during(r.evaluate, "eval")
    with rec.mode:
        r.train()
    r.metrics.close()
    assert r.state.step == 7
    assert rec.per_phase("step") == 0, (rec.calls, rec.sites)
    rows = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    assert [x["step"] for x in rows if x["kind"] == "train"] == [3, 6, 7]
    assert all(np.isfinite(x["loss"]) and x["examples_per_s"] > 0 for x in rows if x["kind"] == "train")
    assert [x["step"] for x in rows if x["kind"] == "eval"] == [7]


def test_the_window_mean_is_the_mean_of_the_step_losses():
    """Read back at once, summed in Python floats in step order: the number the per-step .item() sum gave."""
    from koelectra_kit.finetune.report import Window

    values = [0.1, 1 / 3, 2.7182817, 1e-7]
    w = Window()
    for v in values:
        w.add(torch.tensor(v), 16)
    assert w.steps == 4 and w.examples == 64
    assert w.mean_loss() == sum(torch.tensor(v).item() for v in values) / 4
    rows = Window()  # steps that add a vector (distillation's loss, kl, ce): the mean of each entry
    for v in values:
        rows.add(torch.tensor([v, 2 * v]), 16)
    assert rows.mean_loss() == [w.mean_loss(), sum(torch.tensor(2 * v).item() for v in values) / 4]


def test_padded_widths_are_multiples_and_never_past_max_length():
    from koelectra_kit.classify.classifier import collate
    from koelectra_kit.runtime import pad_multiple

    assert pad_multiple(torch.device("cpu")) == 1  # a CPU pads to the batch's longest, as before
    assert pad_multiple(torch.device("cuda")) == 16 and pad_multiple(torch.device("cuda"), 32) == 32
    rng = np.random.default_rng(0)
    ids = [[2] + [7] * int(n) + [3] for n in rng.integers(1, 97, size=500)]  # 3..98 tokens, max_length 100
    widths = set()
    for idx in np.array_split(rng.permutation(500), 40):
        input_ids, mask = collate(ids, idx, pad_id=0, multiple=16, max_width=100)
        longest = max(len(ids[i]) for i in idx)
        assert input_ids.shape == mask.shape and input_ids.shape[1] >= longest
        assert mask.sum(1).tolist() == [len(ids[i]) for i in idx]
        widths.add(input_ids.shape[1])
    assert widths <= {16, 32, 48, 64, 80, 96, 100}, widths  # 112 would pass the position table of a 100 model
    assert collate(ids, [0], pad_id=0)[0].shape[1] == len(ids[0])  # multiple 1: the longest, as before


def test_a_training_batch_on_a_gpu_is_padded_to_16(tmp_path, plain_encoder_dir, sample_dir):
    """pad_to_multiple_of (None: by device) reaches the batches the loop trains on."""
    r = _recipe(tmp_path, plain_encoder_dir, sample_dir, "pad_to_multiple_of=16")
    r.setup_model()
    r.setup_data()
    r.y_train = torch.from_numpy(r.splits.train.y)
    shapes = {r.batch(idx)[0].shape[1] for idx in np.array_split(np.arange(len(r.train_ids)), 20)}
    assert shapes <= {16, 32, 48, 64}, shapes
    assert r.multiple == 16 and not r.pin  # pinned memory only where there is a GPU to copy to


def test_the_4d_mask_and_the_gpu_scoring_path_give_the_same_logits():
    from transformers import ElectraConfig, ElectraForSequenceClassification

    from koelectra_kit.classify.classifier import _device_logits, attention_mask_for, collate, predict_logits

    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=100, hidden_size=32, embedding_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=64, num_labels=3)
    model = ElectraForSequenceClassification(cfg).eval()
    rng = np.random.default_rng(0)
    ids = [[2] + rng.integers(5, 100, size=int(n)).tolist() + [3] for n in rng.integers(1, 40, size=50)]
    input_ids, mask = collate(ids, range(8), pad_id=0)
    assert attention_mask_for(model, mask).shape == (8, 1, 1, input_ids.shape[1])  # SDPA + the mask factory
    with torch.inference_mode():
        a = model(input_ids=input_ids, attention_mask=mask).logits
        b = model(input_ids=input_ids, attention_mask=attention_mask_for(model, mask)).logits
    assert torch.equal(a, b)
    eager = ElectraForSequenceClassification._from_config(cfg, attn_implementation="eager")
    assert attention_mask_for(eager, mask) is mask  # an additive-mask implementation keeps the 2D mask
    kw = dict(pad_id=0, device=torch.device("cpu"), dtype=None, batch_size=16)
    want = predict_logits(model, ids, **kw)
    order = np.argsort(-np.array([len(x) for x in ids]), kind="stable")
    batches = [order[s:s + 16] for s in range(0, 50, 16)]
    got = np.zeros_like(want)
    got[order] = _device_logits(model, ids, batches, 0, torch.device("cpu"), None, 16, 64)  # padded to 16s
    np.testing.assert_allclose(got, want, atol=1e-5)


def test_compile_is_in_place_static_and_has_room_for_every_shape(tmp_path, plain_encoder_dir, sample_dir,
                                                                 monkeypatch):
    import torch._dynamo

    calls = []
    monkeypatch.setattr(torch.nn.Module, "compile", lambda self, **kw: calls.append((type(self).__name__, kw)))
    # config.patch, not monkeypatch: dynamo's config module does not take a monkeypatch's undo (the setting
    # vanished for every later test in the process)
    with torch._dynamo.config.patch(recompile_limit=8):
        r = _recipe(tmp_path, plain_encoder_dir, sample_dir, "compile=true", "compile_mode=reduce-overhead",
                    "pad_to_multiple_of=8")
        r.setup_model()
        assert calls == [("ElectraForSequenceClassification", {"dynamic": False, "mode": "reduce-overhead"})]
        assert torch._dynamo.config.recompile_limit == 32  # 4 x (64 / 8) widths
    assert not any(k.startswith("_orig_mod") for k in r.model.state_dict())  # the checkpoint's keys as before


def test_label_batch_size_default_is_the_devices():
    from koelectra_kit.classify.classifier import default_batch_size
    from koelectra_kit.label.config import LabelConfig

    assert default_batch_size(torch.device("cpu")) == 128 and default_batch_size(torch.device("cuda")) == 256
    assert LabelConfig().batch_size is None  # the classifier's default, unless given


# -- where kiwipiepy is not installed (the GPU machine) ------------------------------------------------------------

NO_KIWI = "import sys; sys.modules['kiwipiepy'] = None; sys.modules['kiwipiepy_model'] = None\n"


def _python(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_KIWI + code], capture_output=True, text=True, timeout=120,
                          cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})


def test_a_tokenizer_without_kiwi_presplit_needs_no_kiwipiepy(plain_encoder_dir, tmp_path):
    """Loaded, used to encode (as fine-tuning and labelling do), fingerprinted and saved with kiwipiepy unimportable."""
    done = _python(f"""
from koelectra_kit.tokenizer import KoTokenizer, tokenizer_fingerprint
from koelectra_kit.finetune.tokens import encode_texts
tok = KoTokenizer.from_pretrained({str(plain_encoder_dir)!r})
ids, truncated = encode_texts(tok, ["배송 빠르고 좋아요", "별로예요 ㅠㅠ"], 32)
assert len(ids) == 2 and all(ids) and not truncated.any()
tokenizer_fingerprint(tok)
tok.save({str(tmp_path / 'saved')!r})
assert 'kiwipiepy' in sys.modules and sys.modules['kiwipiepy'] is None  # never replaced by a real import
print("ok")
""")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr


def test_a_kiwi_tokenizer_loads_without_kiwipiepy(sample_tokenizer_dir, tmp_path):
    """A GPU machine fed a token cache: the tokenizer loads, and its fingerprint and saved files are those of the
    machine whose Kiwi split the texts (the versions it was saved with); only a text that needs Kiwi needs kiwipiepy.
    (With kiwipiepy, the version check where Kiwi first runs: tests/test_tokenizer.py.)"""
    import shutil

    old = tmp_path / "old"
    shutil.copytree(sample_tokenizer_dir, old)
    settings = json.loads((old / "koelectra_tokenizer.json").read_text(encoding="utf-8"))
    settings["kiwi"] = {"kiwipiepy": "0.1.0", "kiwipiepy_model": "0.1.0"}
    (old / "koelectra_tokenizer.json").write_text(json.dumps(settings), encoding="utf-8")
    done = _python(f"""
from koelectra_kit.tokenizer import KoTokenizer, tokenizer_fingerprint
tok = KoTokenizer.from_pretrained({str(old)!r})
tokenizer_fingerprint(tok)
tok.save({str(tmp_path / 'copy')!r})
try:
    tok.encode_batch(["영화 재밌었는데 ㅋㅋ"])
except ImportError:
    print("ok")
""")
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr
    assert json.loads((tmp_path / "copy" / "koelectra_tokenizer.json").read_text())["kiwi"] == settings["kiwi"]


# -- a device that is not there ---------------------------------------------------------------------------------

def _one_line_error(rc, err, *needles):
    lines = [ln for ln in err.strip().splitlines() if ln.strip()]
    assert rc == 2 and len(lines) == 1 and lines[0].startswith("error: "), err
    for n in needles:
        assert n in lines[0], (n, lines[0])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_cuda_asked_for_without_a_gpu_is_one_line(capsys, tmp_path, sample_dir, plain_encoder_dir,
                                                  tiny_classifier_dir):
    data = sample_dir / "reviews_labelled.csv"
    rc = main(["finetune", "--config", str(TINY_CONFIG), f"model={plain_encoder_dir}", f"train={data}",
               f"out={tmp_path / 'o'}", "device=cuda", "progress=false"])
    _one_line_error(rc, capsys.readouterr().err, "device=cuda", "no CUDA GPU")
    rc = main(["finetune", "--config", str(TINY_CONFIG), f"model={plain_encoder_dir}", f"train={data}",
               f"out={tmp_path / 'o'}", "device=gpu", "progress=false"])
    _one_line_error(rc, capsys.readouterr().err, "device='gpu'")
    rc = main(["label", "--model", str(tiny_classifier_dir), "--input", str(data), "--output",
               str(tmp_path / "l.csv"), "--device", "cuda", "--no-progress"])
    _one_line_error(rc, capsys.readouterr().err, "device=cuda", "no CUDA GPU")
    assert not (tmp_path / "o").exists() and not (tmp_path / "l.csv").exists()


@pytest.mark.parametrize("override, needle", [
    ("pad_to_multiple_of=0", "pad_to_multiple_of"), ("pad_to_multiple_of=1000", "pad_to_multiple_of"),
    ("compile_mode=fastest", "compile_mode"), ("compile=maybe", "compile"), ("eval_batch_size=0", "eval_batch_size"),
])
def test_new_finetune_keys_are_checked(capsys, tmp_path, sample_dir, override, needle):
    rc = main(["finetune", "--config", str(TINY_CONFIG), "model=m", f"train={sample_dir / 'reviews_labelled.csv'}",
               f"out={tmp_path / 'o'}", override])
    _one_line_error(rc, capsys.readouterr().err, needle)
