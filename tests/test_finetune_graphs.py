"""cuda_graphs=true (koelectra_kit/finetune/graphs.py), what a CPU can check of it: the padded static-batch step it
records trains as ``train_step`` does (the rows that fill a short batch and the columns that widen it change
nothing), it reads nothing back to the host (a host read inside a CUDA graph's recording is an error), the option
is refused where it cannot run, and its default (auto) is on with a CUDA device only. The recording itself needs a
GPU: benchmarks/bench_finetune.py runs it there."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from koelectra_kit.cli import main
from koelectra_kit.config import load_config
from koelectra_kit.errors import ConfigError
from koelectra_kit.finetune import FinetuneConfig, build_optimizer, train_step
from koelectra_kit.finetune.graphs import GraphedStep

from .fixtures_finetune import TINY_CONFIG
from .test_bad_input import assert_one_line_error
from .test_gpu_path import SyncRecorder

CPU = torch.device("cpu")


def _model(model_dir):
    from transformers import AutoModelForSequenceClassification

    torch.manual_seed(0)  # the same new head for both sides
    return AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=3, hidden_dropout_prob=0.0,
                                                              attention_probs_dropout_prob=0.0)


def _batches(vocab: int, width: int):
    """(input_ids, attention_mask, labels): full batches of 4, one short batch of 3, one narrower than ``width``."""
    g = torch.Generator().manual_seed(1)
    out = []
    for n, w in ((4, width), (3, width), (4, width - 5), (4, width)):
        lengths = torch.randint(3, w + 1, (n,), generator=g)
        lengths[0] = w
        ids = torch.randint(5, vocab, (n, w), generator=g)
        mask = (torch.arange(w)[None, :] < lengths[:, None]).long()
        out.append((ids * mask, mask, torch.randint(0, 3, (n,), generator=g)))
    return out


def test_the_padded_step_trains_as_train_step(plain_encoder_dir):
    eager, padded = _model(plain_encoder_dir), _model(plain_encoder_dir)
    opt_e = build_optimizer(eager, 1e-3, 0.8, 0.01, 1e-6, CPU)
    opt_p = build_optimizer(padded, 1e-3, 0.8, 0.01, 1e-6, CPU)
    step = GraphedStep(padded, opt_p, batch_size=4, width=16, device=CPU, dtype=None, capture=False)
    assert not step.capture  # (no CUDA here: the eager path with the same static batch)
    for ids, mask, labels in _batches(eager.config.vocab_size, 16):
        a = train_step(eager, opt_e, ids, mask, labels, device=CPU, dtype=None)
        b = step(ids, mask, labels)
        assert torch.allclose(a, b, atol=1e-5), (a, b)
    assert step.steps == 4
    for (name, p), q in zip(eager.named_parameters(), padded.parameters()):
        assert torch.allclose(p, q, atol=1e-5), name
    assert not torch.equal(padded.classifier.dense.weight, _model(plain_encoder_dir).classifier.dense.weight)


def test_the_padded_step_reads_nothing_back(plain_encoder_dir):
    """No host-sync op in the step (what a CUDA graph cannot record), the loss window's reads aside."""
    model = _model(plain_encoder_dir)
    opt = build_optimizer(model, 1e-3, 0.8, 0.01, 1e-6, CPU)
    step = GraphedStep(model, opt, batch_size=4, width=16, device=CPU, dtype=torch.bfloat16,
                       class_weights=torch.tensor([1.0, 2.0, 0.5]), capture=False)
    rec = SyncRecorder(SimpleNamespace(optimizer=opt))
    with rec.mode:
        for ids, mask, labels in _batches(model.config.vocab_size, 16):
            step(ids, mask, labels)
    assert rec.per_phase("step") == 0, (rec.calls, rec.sites)


def test_a_recording_that_fails_is_one_warning_and_the_step_runs_eagerly(plain_encoder_dir, capsys):
    """Here recording fails as it would on a GPU for any op a graph cannot hold (a CPU cannot record at all):
    the step is still taken, eagerly, and every later one too."""
    model = _model(plain_encoder_dir)
    opt = build_optimizer(model, 1e-3, 0.8, 0.01, 1e-6, CPU)
    step = GraphedStep(model, opt, batch_size=4, width=16, device=CPU, dtype=None, capture=False)
    before = model.classifier.dense.weight.detach().clone()
    ids, mask, labels = _batches(model.config.vocab_size, 16)[0]
    step._load(ids, mask, labels)
    step.capture = True
    capsys.readouterr()  # (transformers' loading bars)
    loss = step._record()
    err = [ln for ln in capsys.readouterr().err.splitlines() if ln.strip()]
    assert len(err) == 1 and err[0].startswith("warning: cuda_graphs: recording the step failed"), err
    assert err[0].endswith("the run goes on without CUDA graphs")
    assert not step.capture and step.graph is None and torch.isfinite(loss)
    assert not torch.equal(before, model.classifier.dense.weight)  # the step was taken
    assert all(p.grad is None for p in model.parameters())
    assert torch.isfinite(step(ids, mask, labels))


def test_a_batch_bigger_than_the_recorded_one_is_refused(plain_encoder_dir):
    model = _model(plain_encoder_dir)
    step = GraphedStep(model, build_optimizer(model, 1e-3, 0.8, 0.01, 1e-6, CPU), batch_size=2, width=8,
                       device=CPU, dtype=None, capture=False)
    with pytest.raises(ValueError, match="does not fit the recorded 2 x 8"):
        step(torch.ones((3, 8), dtype=torch.long), torch.ones((3, 8), dtype=torch.long), torch.zeros(3).long())


@pytest.mark.parametrize("other", ["compile=true", "precision=fp16"])
def test_cuda_graphs_with_compile_or_fp16_is_refused(other):
    with pytest.raises(ConfigError, match="cuda_graphs=true"):
        load_config(FinetuneConfig, TINY_CONFIG, ["model=m", "train=t.csv", "out=o", "cuda_graphs=true", other])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the machine without a GPU")
def test_cuda_graphs_without_a_gpu_is_one_line(capsys, tmp_path, sample_dir, plain_encoder_dir):
    rc = main(["finetune", "--config", str(TINY_CONFIG), f"model={plain_encoder_dir}",
               f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}", "cuda_graphs=true",
               "progress=false"])
    assert_one_line_error(rc, capsys.readouterr().err, "cuda_graphs=true needs a CUDA GPU")
    assert not (tmp_path / "o").exists()


# -- cuda_graphs=auto, the default: on with a CUDA GPU (graphs.wants_graphs), off on a CPU --------------------------

def test_the_default_is_auto_and_a_cpu_run_says_nothing_of_cuda_graphs(capsys, tmp_path, sample_dir,
                                                                         plain_encoder_dir):
    from koelectra_kit.finetune.recipe import FinetuneRecipe

    assert FinetuneConfig().cuda_graphs == "auto"
    args = [f"model={plain_encoder_dir}", f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}",
            "epochs=1", "progress=false", "plots=false", "references=false", "ensemble=none", "token_cache=false"]
    cfg = load_config(FinetuneConfig, TINY_CONFIG, args)  # (tiny.yaml's base, sentiment.yaml, says auto too)
    assert cfg.cuda_graphs == "auto"
    recipe = FinetuneRecipe(cfg)
    recipe.setup_model()
    assert recipe.graphs is False and recipe.multiple == 1  # a CPU pads to the batch's longest, not max_length
    capsys.readouterr()
    assert main(["finetune", "--config", str(TINY_CONFIG), *args]) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    assert "model: " in text and "parameters on cpu" in text
    assert "graph" not in text.lower(), text


@pytest.mark.parametrize("dtype, compile, on", [(torch.bfloat16, False, True), (None, False, True),
                                                (torch.float16, False, False), (torch.bfloat16, True, False)])
def test_auto_is_on_with_a_cuda_device_in_bf16_or_fp32_and_not_compiled(dtype, compile, on):
    """No GPU needed: the resolver reads the device's type, the step's dtype (None: fp32) and compile."""
    from koelectra_kit.finetune.graphs import wants_graphs

    cuda = torch.device("cuda")
    assert wants_graphs("auto", cuda, dtype, compile) is on
    assert wants_graphs("auto", CPU, dtype, compile) is False
    assert wants_graphs(True, CPU, dtype, compile) is True  # as asked: the recipe says why it cannot run
    assert wants_graphs(False, cuda, dtype, compile) is False


@pytest.mark.parametrize("other", ["compile=true", "precision=fp16"])
def test_auto_with_compile_or_fp16_is_no_error(other):
    cfg = load_config(FinetuneConfig, TINY_CONFIG, ["model=m", "train=t.csv", "out=o", other])
    assert cfg.cuda_graphs == "auto"


@pytest.mark.parametrize("value, read", [("auto", "auto"), ("true", True), ("yes", True), ("on", True),
                                         ("false", False), ("no", False), ("off", False)])
def test_cuda_graphs_reads_auto_and_the_usual_booleans(value, read):
    cfg = load_config(FinetuneConfig, TINY_CONFIG, ["model=m", "train=t.csv", "out=o", f"cuda_graphs={value}"])
    assert cfg.cuda_graphs == read and type(cfg.cuda_graphs) is type(read)


def test_a_bad_cuda_graphs_value_is_one_line_naming_the_choices(capsys, tmp_path, sample_dir, plain_encoder_dir):
    rc = main(["finetune", "--config", str(TINY_CONFIG), f"model={plain_encoder_dir}",
               f"train={sample_dir / 'reviews_labelled.csv'}", f"out={tmp_path / 'o'}", "cuda_graphs=maybe",
               "progress=false"])
    assert_one_line_error(rc, capsys.readouterr().err, "cuda_graphs", "auto", "true", "false", "'maybe'")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("value", ["null", "AUTO", "1", "''", "'true'"])
def test_a_bad_tri_state_is_one_message_naming_the_choices_in_every_command(value):
    """finetune's cuda_graphs and pretrain's data_on_device are both auto | true | false: the same spellings, the same
    words back. null was "expected bool or str, got None", data_on_device said "expected bool or Literal"."""
    from koelectra_kit.pretrain.config import PretrainConfig

    messages = []
    for cls, key in ((FinetuneConfig, "cuda_graphs"), (PretrainConfig, "data_on_device")):
        with pytest.raises(ConfigError) as e:
            load_config(cls, None, [f"{key}={value}"])
        messages.append(str(e.value).split(": ", 1))
    assert messages[0][0] == "cuda_graphs" and messages[1][0] == "data_on_device"
    assert messages[0][1] == messages[1][1] and messages[0][1].startswith("expected true/false or auto, got "), messages
