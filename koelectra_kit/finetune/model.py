"""The model to fine-tune: ``AutoModelForSequenceClassification`` with our labels and a head that means them,
and AdamW parameter groups with ELECTRA's layer-wise lr decay."""
from __future__ import annotations

import pickle
import re

from ..classify.classifier import placeholder_labels
from ..errors import InputError
from ..runtime import quiet_transformers
from .config import FinetuneConfig


def _source_labels(config) -> list[str] | None:
    """The label names a checkpoint was fine-tuned with, or None for a bare encoder (LABEL_0 ...)."""
    id2label = getattr(config, "id2label", None) or {}
    names = [id2label[i] for i in sorted(id2label)]
    if not names or placeholder_labels(names):
        return None
    return names


def _head_linears(model):
    import torch

    head = getattr(model, "classifier", None) or getattr(model, "score", None)
    if head is None:
        return []
    return [m for m in head.modules() if isinstance(m, torch.nn.Linear)] if not isinstance(head, torch.nn.Linear) else [head]


def align_head(model, source_labels: list[str] | None, labels: list[str]) -> str:
    """Make an already fine-tuned head agree with ``labels``. HF loads a head whenever the shapes
    match, whatever the names mean, so: same names in another order -> permute the output rows;
    other names with the same count -> re-initialize the head; otherwise HF already did (sizes)."""
    import torch

    if source_labels is None:
        return "new classification head"
    if source_labels == labels:
        return f"classification head kept (same labels {labels})"
    linears = _head_linears(model)
    if sorted(source_labels) == sorted(labels) and linears:
        out = linears[-1]
        perm = torch.tensor([source_labels.index(lab) for lab in labels])
        with torch.no_grad():
            out.weight.copy_(out.weight[perm])
            if out.bias is not None:
                out.bias.copy_(out.bias[perm])
        return f"classification head kept, rows reordered {source_labels} -> {labels}"
    if len(source_labels) == len(labels):
        # Re-initialize as HF initializes a fresh head (normal(0, initializer_range), zero bias);
        # model._init_weights is no help here: transformers 5 skips modules it marked initialized.
        std = float(getattr(model.config, "initializer_range", 0.02))
        with torch.no_grad():
            for lin in linears:
                lin.weight.normal_(0.0, std)
                if lin.bias is not None:
                    lin.bias.zero_()
    return f"new classification head (checkpoint had labels {source_labels})"


def check_finite(model, what: str = "the run") -> None:
    """Refuse to save weights that are NaN or infinite: a loss that diverged (an lr of 1e6) left a model folder
    whose every label was the first class, exit 0. One ``InputError`` line; the caller's staging folder goes."""
    from ..runtime import nonfinite_weights

    bad = nonfinite_weights(model)
    if bad:
        raise InputError(f"{what} diverged: {len(bad)} of the model's weight tensors are NaN or infinite (the loss "
                         "overflowed: a smaller lr, or the preset's); nothing was saved")


def load_model(cfg: FinetuneConfig, labels: list[str]):
    """``AutoModelForSequenceClassification`` for the model dir/hub id with our labels set, and notes on
    what happened to its head. ``ignore_mismatched_sizes`` lets a classifier be re-fine-tuned on another
    label set. Never ``trust_remote_code``: only architectures that ship with transformers load."""
    import torch
    from safetensors import SafetensorError
    from transformers import AutoConfig, AutoModelForSequenceClassification

    from ..hub.modelio import check_model_source, refused_pickle

    name = check_model_source(cfg.model)
    with quiet_transformers():
        try:
            source = AutoConfig.from_pretrained(name, trust_remote_code=False)
            config = AutoConfig.from_pretrained(
                name, num_labels=len(labels), id2label=dict(enumerate(labels)),
                label2id={lab: i for i, lab in enumerate(labels)},
                problem_type="single_label_classification", trust_remote_code=False)
            if cfg.dropout is not None:  # names every BERT-family config has; others keep their own
                for key in ("hidden_dropout_prob", "attention_probs_dropout_prob"):
                    if hasattr(config, key):
                        setattr(config, key, cfg.dropout)
            if cfg.init == "random":
                model = AutoModelForSequenceClassification.from_config(config, trust_remote_code=False)
                info = {"missing_keys": [], "mismatched_keys": []}
            else:
                # fp32 master weights whatever the checkpoint was saved in: transformers loads a bf16/fp16 upload
                # as it is (dtype="auto"), and AdamW steps of ~1e-5 vanish in bf16 weights (autocast does the
                # low-precision maths)
                model, info = AutoModelForSequenceClassification.from_pretrained(
                    name, config=config, ignore_mismatched_sizes=True, output_loading_info=True,
                    trust_remote_code=False, dtype=torch.float32)
        except SafetensorError as e:
            raise InputError(f"model={cfg.model}: model.safetensors is damaged or truncated "
                             f"({str(e).splitlines()[0]}); copy or export the model again") from None
        except pickle.UnpicklingError:  # was a traceback whose text advised weights_only=False
            raise InputError(refused_pickle(f"model={cfg.model}")) from None
        except (OSError, ValueError, KeyError, RuntimeError) as e:  # RuntimeError: a truncated .bin (was a traceback)
            first = str(e).strip().splitlines()[0] if str(e).strip() else type(e).__name__
            raise InputError(f"model={cfg.model}: can't load a sequence-classification model ({first}); "
                             "give a Hugging Face model dir (config.json + weights) or hub id") from None
    notes = []
    if cfg.init == "random":
        notes.append("random initialization (init=random): the checkpoint's weights are NOT used")
    else:
        notes.append(align_head(model, _source_labels(source), labels))
        if (getattr(source, "architectures", None) or []) == ["ElectraForMaskedLM"]:  # `pretrain init=` says so too
            notes.append(f"warning: {cfg.model} is an ELECTRA generator (ElectraForMaskedLM), the small model that "
                         "fills the masked slots in pretraining; the encoder to fine-tune is its discriminator "
                         "(ElectraForPreTraining: a run's discriminator/ folder, or the -discriminator checkpoint)")
        head = ("classifier", "score", "pooler")
        body = [k for k in info["missing_keys"] if not k.split(".")[0] in head and ".pooler." not in k]
        if body:
            notes.append(f"warning: {len(body)} encoder weights were not in the checkpoint and start random "
                         f"(e.g. {sorted(body)[0]}); is {cfg.model} a pretrained encoder?")
    return model, notes


def _layer_depth(name: str, num_layers: int) -> int:
    """0 = embeddings, 1..L = transformer layer, L+1 = everything above (head, pooler)."""
    if "embeddings" in name:  # also ELECTRA's embeddings_project (embedding_size != hidden_size)
        return 0
    m = re.search(r"\.layers?\.(\d+)\.", name)
    return int(m.group(1)) + 1 if m else num_layers + 1


def _num_layers(model) -> int:
    return int(getattr(model.config, "num_hidden_layers", 0) or 0)


def param_groups(model, lr: float, layer_decay: float, weight_decay: float) -> list[dict]:
    """AdamW groups with layer-wise lr decay as in ELECTRA's fine-tuning: lr * decay^(L+1-depth),
    so the head trains at ``lr`` and lower layers, which hold more general features, move less.
    No weight decay on biases and LayerNorm weights (1-d tensors). Each group carries its ``depth``
    too (for reports): drop that key before handing the groups to an optimizer."""
    num_layers = _num_layers(model)
    groups: dict[tuple[int, bool], dict] = {}
    for name, p in model.named_parameters():
        if not p.requires_grad:
            continue
        depth = _layer_depth(name, num_layers)
        no_decay = p.ndim < 2
        g = groups.setdefault((depth, no_decay), {
            "params": [], "lr": lr * layer_decay ** (num_layers + 1 - depth),
            "weight_decay": 0.0 if no_decay else weight_decay, "depth": depth})
        g["params"].append(p)
    return [groups[k] for k in sorted(groups)]


def default_lr(model) -> float:
    """The ELECTRA paper's fine-tuning lr by model width: Small (256) 3e-4, Base (768) 1e-4, Large (1024) 5e-5;
    between Small and Base inversely with the width (3e-4 x 256/hidden: 2e-4 at 384), which meets both of the
    paper's points, where a step at 257 gave a 384-wide encoder a third of a 256-wide one's lr."""
    hidden = int(getattr(model.config, "hidden_size", 768))
    return 3e-4 if hidden <= 256 else 3e-4 * 256 / hidden if hidden <= 768 else 5e-5


AUTO_DECAY_MAX_LAYERS = 6  # deeper encoders fine-tune without layer decay (layer_decay=null)


def default_layer_decay(model) -> float:
    """Layer decay by depth (``layer_decay: null``): the ELECTRA paper's 0.8 for encoders of up to
    ``AUTO_DECAY_MAX_LAYERS`` layers, 1.0 (every layer at the top's lr) for deeper ones. Measured on nsmc3
    (docs/RESULTS.md §11): a 12-layer encoder fine-tuned 3.3 points better at 1,000 labels and 2.4 at 10,000
    without decay; for a 2-layer one the two were within noise (+0.6, -0.9), and every earlier figure was made
    with 0.8. KoELECTRA's own NSMC fine-tuning (12 layers) uses no layer decay either."""
    return 0.8 if _num_layers(model) <= AUTO_DECAY_MAX_LAYERS else 1.0


def build_optimizer(model, lr: float, layer_decay: float, weight_decay: float, eps: float, device):
    """AdamW over ``param_groups`` (layer-wise lr decay). Fused on a GPU: one kernel per parameter group updates every
    tensor in it (foreach: several per group), and its step counters live on the GPU. On a CPU the default
    implementation, as before."""
    import torch

    groups = param_groups(model, lr, layer_decay, weight_decay)
    fused = {"fused": True} if device.type == "cuda" else {}
    return torch.optim.AdamW([{k: v for k, v in g.items() if k != "depth"} for g in groups], lr=lr, eps=eps,
                             betas=(0.9, 0.999), **fused)


def compile_model(model, mode: str = "default", shapes: int = 32) -> None:
    """``torch.compile`` the model in place (``Module.compile``: its state_dict keys stay as they were, so the best
    checkpoint saves and loads unchanged), ``dynamic=False``: one graph per batch shape, each specialized. ``shapes``:
    about how many to expect (widths x training and evaluation batch sizes); dynamo's recompile limit is raised to
    it, since past the limit a new shape would run uncompiled."""
    import torch._dynamo

    for key in ("recompile_limit", "cache_size_limit"):  # the name changed in torch 2.6; set whichever exists
        if hasattr(torch._dynamo.config, key):
            setattr(torch._dynamo.config, key, max(getattr(torch._dynamo.config, key), shapes))
            break
    model.compile(dynamic=False, mode=None if mode == "default" else mode)
