"""Export: the trained models as Hugging Face model dirs, each with the tokenizer beside it, so fine-tuning
and demos load them with ``from_pretrained`` (the tokenizer through ``import koelectra_kit``); the discriminator
with its model card (README.md), pushed to the hub when the run's ``push_to_hub`` says so.
"""
from __future__ import annotations

import json
from pathlib import Path

from ..errors import KitError
from ..io.fileio import staged_dir
from ..runtime import quiet_transformers


def run_record(out: Path) -> tuple[dict, dict | None]:
    """The run's resolved config (from the final checkpoint, written just before export) and its last metrics
    row, for the model card and the push; ({}, None) when the run left none."""
    from .checkpoint import latest_checkpoint
    from .curves import read_metrics

    ckpt = latest_checkpoint(out)
    try:
        run = json.loads((ckpt / "meta.json").read_text(encoding="utf-8")).get("config", {}) if ckpt else {}
    except (OSError, ValueError):
        run = {}
    rows = read_metrics(out / "metrics.jsonl") if (out / "metrics.jsonl").exists() else []
    return run, (rows[-1] if rows else None)


def export_models(model, tok, out: Path, ended: dict | None = None) -> dict[str, Path]:
    """``out/discriminator``: the encoder (``ElectraForPreTraining``; for mlm the ``ElectraModel`` of the masked
    LM) + tokenizer, loadable by ``AutoModel`` / ``ElectraForSequenceClassification``. ``out/generator``:
    ``ElectraForMaskedLM`` + tokenizer (fill-mask demos). Each dir is written beside and swapped in whole.
    ``ended``: how the run ended (steps, tokens, stopped, the precision used), for the model card: the last metrics
    row is not the end of a run stopped between two rows."""
    from ..classify.modelcard import encoder_card, write_card
    from ..tokenizer.saving import vocab_digest

    encoder = model.discriminator if model.discriminator is not None else model.encoder()
    run, last_row = run_record(out)
    if run.get("prepared") and not run.get("corpus"):
        from .prepared import prepared_corpus

        run["corpus"] = prepared_corpus(run["prepared"])  # the card names the text the folder was made from
    written = {}
    for name, m in (("discriminator", encoder), ("generator", model.generator)):
        final = out / name
        impl = m.config._attn_implementation
        # which vocabulary the weights were trained with: a tokenizer copied over it later is told apart at load
        m.config.koelectra_kit = {**(getattr(m.config, "koelectra_kit", None) or {}), "vocab_digest": vocab_digest(tok)}
        m.config._attn_implementation = "sdpa"  # our CPU attention is a training-time detail (not saved anyway)
        try:
            with staged_dir(final) as tmp, quiet_transformers():
                m.save_pretrained(tmp, safe_serialization=True)
                tok.save(tmp)
                if name == "discriminator":
                    n_params = sum(p.numel() for p in m.parameters())
                    run_info = {"out": str(out), **run, "device": str(next(m.parameters()).device),
                                **(ended or {})}
                    write_card(encoder_card(run_info, last_row, tok, n_params), tmp)
        except OSError as e:
            raise KitError(f"could not write {final} ({e.strerror or e}); the checkpoints in {out / 'checkpoints'} "
                           "are intact: free disk space and rerun with resume=true to export") from None
        finally:
            m.config._attn_implementation = impl
        written[name] = final
    return written


def push_discriminator(out: Path, repo_id: str, private: bool) -> str:
    """Upload ``out/discriminator`` (called last, after summary.json and the plot: a failed push loses nothing)."""
    from ..hub.repo import push_folder

    return push_folder(out / "discriminator", repo_id, private)
