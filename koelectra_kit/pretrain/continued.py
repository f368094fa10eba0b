"""Continued (domain-adaptive) pretraining: ``init=`` starts the run from an existing ELECTRA discriminator (and
its generator when there is one) instead of random weights, with that model's tokenizer and shape.

    koelectra-kit pretrain --config cpu-30min corpus=reviews.txt init=runs/general out=runs/reviews

Where the weights come from (``init_sources``): a run folder of ours (``RUN/discriminator`` + ``RUN/generator``),
``RUN/discriminator`` (its sibling ``generator/`` is used), any ELECTRA model folder or a hub id (then a fresh
generator of ``generator.size``, sharing the loaded embeddings as usual), or an explicit ``init_generator=``: the
way published checkpoints ship, the generator in its own folder or hub repo (ElectraForMaskedLM)::

    init=monologg/koelectra-small-v3-discriminator init_generator=monologg/koelectra-small-v3-generator

Decisions, for a config that says something else than the checkpoint:
- shape (``model.*`` sizes, the generator's when one is loaded): the checkpoint's wins, one notice lists what was
  replaced. Presets set a shape for a fresh model; refusing them would make every preset unusable with ``init=``.
- ``model.init=positional``: forced to ``normal`` with a notice (the prior is an initialization; the weights
  already encode positions, and overwriting attention weights would undo pretraining).
- ``tokenizer=`` with another vocabulary than the checkpoint's: an error naming both (ids would mean other
  tokens). ``vocab_size`` and ``tokenizer_model`` only size a tokenizer trained here, which never happens.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from ..errors import ConfigError, InputError
from ..hub.modelio import check_model_source, loading
from ..runtime import quiet_transformers
from .config import PretrainConfig

# ModelConfig field -> ElectraConfig attribute: the discriminator's shape, read from the checkpoint.
SHAPE = {"hidden_size": "hidden_size", "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
         "intermediate_size": "intermediate_size", "embedding_size": "embedding_size",
         "max_position_embeddings": "max_position_embeddings", "hidden_act": "hidden_act"}
GEN_SHAPE = {"hidden_size": "hidden_size", "num_layers": "num_hidden_layers", "num_heads": "num_attention_heads",
             "intermediate_size": "intermediate_size"}


@dataclass
class InitSource:
    """The checkpoint a continued run starts from: sources (folder or hub id) and their configs."""

    discriminator: str
    generator: str | None  # None: a fresh generator of generator.size
    config: object  # the discriminator's ElectraConfig
    gen_config: object | None


def init_sources(cfg: PretrainConfig) -> tuple[str, str | None]:
    """(discriminator source, generator source or None), checked for existence (no weights read)."""
    path = Path(os.path.expanduser(cfg.init))
    sibling = None
    if path.is_dir() and (path / "discriminator" / "config.json").is_file():  # a run folder of ours
        disc, sibling = str(path / "discriminator"), path / "generator"
    else:
        disc = check_model_source(cfg.init, "init")
        if Path(disc).is_dir():
            sibling = Path(disc).parent / "generator"
    if cfg.init_generator:
        return disc, check_model_source(cfg.init_generator, "init_generator")
    if sibling is not None and sibling != Path(disc) and (sibling / "config.json").is_file():
        return disc, str(sibling)
    return disc, None


def _electra_config(source: str, key: str, want: str | None = None):
    """The ElectraConfig of ``source``; a model saved as the other half of the pair (``want``: the class the slot
    loads, ElectraForPreTraining or ElectraForMaskedLM) is an error: its encoder would load under a fresh head and
    train in the other role, silently (``init_generator=...-discriminator`` is an easy slip)."""
    from transformers import AutoConfig

    with loading(source, key), quiet_transformers():
        config = AutoConfig.from_pretrained(source, trust_remote_code=False)
    if getattr(config, "model_type", None) != "electra":
        raise InputError(f"{key}={source} is a {getattr(config, 'model_type', 'unknown')!r} model; continued "
                         "pretraining needs an ELECTRA discriminator (model_type electra)")
    other = {"ElectraForPreTraining": "ElectraForMaskedLM", "ElectraForMaskedLM": "ElectraForPreTraining"}.get(want)
    if other is not None and (getattr(config, "architectures", None) or []) == [other]:
        role = "generator" if other == "ElectraForMaskedLM" else "discriminator"
        raise InputError(f"{key}={source} is an ELECTRA {role} ({other}); {key}= takes the "
                         f"{'discriminator' if role == 'generator' else 'generator'} ({want})")
    check_pickled_weights(source, key)
    return config


def check_pickled_weights(source: str, key: str) -> None:
    """A local folder whose weights are only pytorch_model*.bin, read now with ``weights_only=True`` (memory-mapped:
    the tensors' bytes are not read): a pickle that holds more than tensors was refused only when the model was
    built, after the corpus had been pre-split and packed (minutes to hours). safetensors need no such check."""
    import torch

    folder = Path(os.path.expanduser(source))
    if not folder.is_dir() or any(folder.glob("model*.safetensors")):
        return
    for weights in sorted(folder.glob("pytorch_model*.bin")):
        with loading(source, key):
            try:
                torch.load(weights, map_location="cpu", weights_only=True, mmap=True)
            except RuntimeError as e:  # a legacy (not zip) file cannot be mapped: read it whole, still weights only
                if "mmap" not in str(e):
                    raise
                torch.load(weights, map_location="cpu", weights_only=True)


def resolve_init(cfg: PretrainConfig) -> InitSource:
    """The sources and their configs; a generator that can't share the discriminator's embeddings is an error."""
    disc, gen = init_sources(cfg)
    # (objective=mlm continues any encoder as a masked LM: a generator or a discriminator will do)
    config = _electra_config(disc, "init", "ElectraForPreTraining" if cfg.objective == "electra" else None)
    gen_config = None
    if gen is not None and cfg.objective == "electra":
        gen_config = _electra_config(gen, "init_generator" if cfg.init_generator else "init (its generator)",
                                     "ElectraForMaskedLM")
        for attr in ("vocab_size", "embedding_size"):
            if getattr(gen_config, attr) != getattr(config, attr):
                raise InputError(f"generator {gen} has {attr} {getattr(gen_config, attr)} but discriminator {disc} "
                                 f"has {getattr(config, attr)}: they can't share embeddings; pass "
                                 "init_generator= another generator, or drop it for a fresh one")
    return InitSource(disc, gen if gen_config is not None else None, config, gen_config)


def apply_init_shape(cfg: PretrainConfig, src: InitSource) -> list[str]:
    """Set ``cfg``'s model (and loaded generator) shape to the checkpoint's, in place, so the saved config.yaml
    and resume checks describe the model really trained; returns the notices to print."""
    notes, replaced = [], []
    for field_name, attr in SHAPE.items():
        value = getattr(src.config, attr)
        if getattr(cfg.model, field_name) != value:
            replaced.append(f"model.{field_name} {getattr(cfg.model, field_name)} -> {value}")
            setattr(cfg.model, field_name, value)
    if src.gen_config is not None:
        for field_name, attr in GEN_SHAPE.items():
            value = getattr(src.gen_config, attr)
            if getattr(cfg.generator, field_name) not in (None, value):
                replaced.append(f"generator.{field_name} {getattr(cfg.generator, field_name)} -> {value}")
            setattr(cfg.generator, field_name, value)  # explicit: generator_shape then reports the loaded one
    if replaced:
        notes.append(f"note: init={cfg.init} fixes the model's shape; config values replaced: {', '.join(replaced)}")
    arch = [str(a) for a in getattr(src.config, "architectures", None) or []]
    if cfg.objective == "electra" and arch and "ElectraForPreTraining" not in arch:
        # (a fine-tuned classifier continued on in-domain text is a fair use; its head simply has no role here)
        notes.append(f"note: init={cfg.init} is {', '.join(arch)}, not a pretraining discriminator: its encoder "
                     "continues; its own head is left out and the replaced-token detection head starts fresh")
    if cfg.model.init != "normal":
        notes.append(f"note: model.init={cfg.model.init} ignored with init= (the weights already encode positions)")
        cfg.model.init = "normal"
    if cfg.seq_len > cfg.model.max_position_embeddings:
        raise ConfigError(f"seq_len {cfg.seq_len} exceeds init={cfg.init}'s max_position_embeddings "
                          f"{cfg.model.max_position_embeddings}; lower seq_len")
    return notes


def _vocab(tok) -> dict:
    return tok.backend.get_vocab()


def init_tokenizer(cfg: PretrainConfig):
    """The checkpoint's own tokenizer; ``tokenizer=`` may name another copy of the same vocabulary, nothing else."""
    from ..tokenizer import KoTokenizer
    from ..tokenizer.saving import check_model_vocab

    disc, _ = init_sources(cfg)
    try:
        tok = KoTokenizer.from_pretrained(disc)
    except InputError as e:
        if not cfg.tokenizer:
            raise InputError(f"init={cfg.init} has no usable tokenizer ({e}); pass tokenizer=DIR with the "
                             "vocabulary it was trained with") from None
        tok = None
    if cfg.tokenizer:
        if not Path(cfg.tokenizer).is_dir():
            raise InputError(f"tokenizer dir not found: {cfg.tokenizer}")
        given = KoTokenizer.from_pretrained(cfg.tokenizer)
        if tok is not None and _vocab(given) != _vocab(tok):
            raise InputError(f"tokenizer={cfg.tokenizer} ({given.vocab_size} tokens) is not the vocabulary of "
                             f"init={cfg.init} ({tok.vocab_size} tokens): ids would mean other tokens; drop "
                             "tokenizer= to use init's own")
        tok = given
    config = _electra_config(disc, "init")
    check_model_vocab(tok, config, getattr(config, "vocab_size", 0), f"init={cfg.init}")
    return tok


def init_line(cfg: PretrainConfig, src: InitSource) -> str:
    """What the run continues, for the log."""
    if cfg.objective != "electra":
        return f"continuing from {src.discriminator}; a masked LM (objective=mlm: no generator)"
    return f"continuing from {src.discriminator}; generator: " + (
        src.generator or f"a fresh one (generator.size {cfg.generator.size:g})")


def load_init_model(cfg: PretrainConfig, src: InitSource, tok, attn_implementation: str = "sdpa"):
    """(the ``ElectraPretrainModel`` with the checkpoint's weights (a fresh generator when there is none), notices
    to print); the config's dropout applies (a training knob, not part of the shape). Master weights in fp32."""
    import torch
    from transformers import ElectraForMaskedLM, ElectraForPreTraining

    from ..electra.model import ElectraPretrainModel, electra_config, generator_shape

    m = cfg.model
    kw = dict(hidden_dropout_prob=m.hidden_dropout, attention_probs_dropout_prob=m.attention_dropout,
              attn_implementation=attn_implementation, dtype=torch.float32, trust_remote_code=False)
    special = sorted(set(tok.all_special_ids))

    def load(cls, source: str, key: str, head: str):
        with loading(source, key), quiet_transformers():
            model, info = cls.from_pretrained(source, output_loading_info=True, **kw)
        body = [k for k in info["missing_keys"] if not k.startswith(head)]
        if body:
            raise InputError(f"{key}={source}: {len(body)} encoder weights are missing (e.g. {sorted(body)[0]}); "
                             "is it an ELECTRA model?")
        return model

    if cfg.objective == "mlm":  # the discriminator's encoder continues as a masked LM (its MLM head starts fresh)
        return ElectraPretrainModel(load(ElectraForMaskedLM, src.discriminator, "init", "generator_"), None,
                                    special, cfg.temperature), []
    notes = []
    disc = load(ElectraForPreTraining, src.discriminator, "init", "discriminator_predictions")
    if src.generator is not None:
        gen = load(ElectraForMaskedLM, src.generator, "init_generator", "generator_")
        # ElectraPretrainModel gives the generator the discriminator's embedding block (token, position, type
        # tables, LayerNorm) and ties its output layer to it; the loaded generator keeps its encoder, its
        # embeddings_project (E -> its hidden size) and its head's dense, LayerNorm and bias. A published pair
        # trained by the official code shares one embedding variable, so the two copies are equal and nothing is
        # lost; a generator trained with embeddings of its own loses them (said once, with how far apart they were).
        own = gen.electra.embeddings.word_embeddings.weight
        shared = disc.electra.embeddings.word_embeddings.weight
        if not torch.equal(own, shared):
            notes.append(f"note: generator {src.generator} has word embeddings of its own (max |difference| "
                         f"{(own - shared).abs().max().item():.3g} from init's); it continues with init's, shared "
                         "as ELECTRA trains them, and keeps its encoder and head")
    else:
        c = src.config
        gen = ElectraForMaskedLM(electra_config(
            c.vocab_size, tok.pad_token_id, **generator_shape(m, cfg.generator), embedding_size=c.embedding_size,
            max_position_embeddings=c.max_position_embeddings, hidden_dropout=m.hidden_dropout,
            attention_dropout=m.attention_dropout, initializer_range=c.initializer_range, hidden_act=c.hidden_act,
            layer_norm_eps=c.layer_norm_eps, attn_implementation=attn_implementation))
    return ElectraPretrainModel(gen, disc, special, cfg.temperature), notes
