"""Export: the trained models as Hugging Face model dirs, each with the tokenizer beside it, so fine-tuning
and demos load them with ``from_pretrained`` and nothing of this toolkit.
"""
from __future__ import annotations

from pathlib import Path

from ..errors import KitError
from ..fileio import staged_dir
from ..runtime import quiet_transformers


def export_models(model, tok, out: Path) -> dict[str, Path]:
    """``out/discriminator``: the encoder (``ElectraForPreTraining``; for mlm the ``ElectraModel`` of the masked
    LM) + tokenizer, loadable by ``AutoModel`` / ``ElectraForSequenceClassification``. ``out/generator``:
    ``ElectraForMaskedLM`` + tokenizer (fill-mask demos). Each dir is written beside and swapped in whole."""
    encoder = model.discriminator if model.discriminator is not None else model.encoder()
    written = {}
    for name, m in (("discriminator", encoder), ("generator", model.generator)):
        final = out / name
        impl = m.config._attn_implementation
        m.config._attn_implementation = "sdpa"  # our CPU attention is a training-time detail (not saved anyway)
        try:
            with staged_dir(final) as tmp, quiet_transformers():
                m.save_pretrained(tmp, safe_serialization=True)
                tok.save(tmp)
        except OSError as e:
            raise KitError(f"could not write {final} ({e.strerror or e}); the checkpoints in {out / 'checkpoints'} "
                           "are intact: free disk space and rerun with resume=true to export") from None
        finally:
            m.config._attn_implementation = impl
        written[name] = final
    return written
