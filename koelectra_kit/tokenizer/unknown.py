"""The [UNK] check: one warning line when a tokenizer turns much of the text it is given into [UNK].

The commonest cause is a published checkpoint's folder without tokenizer_config.json (vocab.txt, config.json and
the weights): transformers then loads BERT's defaults, do_lower_case=true, and lowercasing strips accents, which
takes every Hangul syllable apart into its jamo (NFD): 배송 빠르고 좋아요 ㅋㅋ became [UNK] [UNK] [UNK] ㅋㅋ, 74% of
the tokens of nsmc3 dev reviews, and fine-tuning and continued pretraining ran on it without a word. Counted on
ids already made (the fine-tune's token ids, the packed corpus's counts), so it costs nothing to say.

A warning, not a refusal: a corpus can be legitimately [UNK]-heavy for a vocabulary (another script, a tokenizer
trained elsewhere), and the run may still be what the user wants; but it is said where the data is reported.
"""
from __future__ import annotations

from pathlib import Path

# Above this share of text tokens, [UNK] is a finding, not noise. Measured on 3,000 nsmc3 dev reviews: a trained
# tokenizer with the fallback 0%, a KcELECTRA-like vocabulary (1,500 characters + 1,000 words) 0.16%, a 2,000-token
# vocabulary trained on the bundled sample without the fallback 5.1-5.7%, the lowercasing folder above 74%.
UNK_WARN_RATE = 0.05
_HANGUL = "한국어"  # a probe: a normalizer that strips accents returns it decomposed into jamo


def unk_report(tok, unknown: int, tokens: int, what: str) -> str | None:
    """A ``warning: ...`` line when more than ``UNK_WARN_RATE`` of ``tokens`` (text tokens, no [CLS]/[SEP]) are
    the ``unknown`` [UNK]s of ``what`` (e.g. "the train and dev texts"), else None. When the tokenizer's normalizer
    takes Hangul syllables apart (lowercasing / accent stripping), the line names that cause and the fix."""
    if tokens <= 0 or unknown <= UNK_WARN_RATE * tokens:
        return None
    line = f"warning: {unknown / tokens:.0%} of the tokens of {what} are [UNK] ({unknown:,} of {tokens:,})"
    folder = _decomposing_folder(tok)
    if folder is None:
        return (line + ": the model learns nothing from them; the tokenizer's vocabulary does not cover this text "
                "(train one on it, or use a model made for it)")
    config = Path(folder) / "tokenizer_config.json"
    how = (f'set "do_lower_case": false in {config}' if config.is_file()
           else f'add {config} holding {{"do_lower_case": false}} (without it transformers loads BERT\'s default, '
                "do_lower_case=true)")
    return (line + f": the tokenizer of {folder} lowercases and strips accents, which takes every Hangul syllable "
            f"apart into jamo its vocabulary lacks; {how}, then run again")


def _decomposing_folder(tok) -> str | None:
    """The folder of a Hugging Face tokenizer whose normalizer rewrites Hangul syllables, else None."""
    hf = getattr(tok, "hf", None)
    normalizer = getattr(getattr(tok, "backend", None), "normalizer", None)
    if hf is None or normalizer is None:
        return None
    try:
        if normalizer.normalize_str(_HANGUL) == _HANGUL:
            return None
    except Exception:  # noqa: BLE001 - a normalizer that cannot be probed: no cause named
        return None
    return str(getattr(hf, "name_or_path", "") or "?")


def count_unknown(ids, unk_id: int | None, specials_per_text: int = 0) -> tuple[int, int]:
    """([UNK] count, text-token count) of id lists that each carry ``specials_per_text`` added tokens."""
    if unk_id is None:
        return 0, 0
    return (sum(x.count(unk_id) for x in ids), sum(len(x) for x in ids) - specials_per_text * len(ids))
