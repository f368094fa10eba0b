"""A tokenizer on disk: the files ``KoTokenizer.save`` writes and ``from_pretrained`` reads, and the fingerprint
that ties checkpoints and caches to them.

A saved directory holds tokenizer.json (+ vocab.txt for WordPiece), tokenizer_config.json and
special_tokens_map.json for transformers, and koelectra_tokenizer.json with the normalization and pre-split
settings and the Kiwi versions (another Kiwi model build can split differently, changing token ids).
"""
from __future__ import annotations

import hashlib
import json
import warnings
from pathlib import Path

from ..config import from_dict, to_dict
from ..errors import ConfigError, InputError
from ..fileio import atomic_path, write_json_atomic
from ..normalize import NormalizeConfig
from .config import FORMAT, SETTINGS_FILE
from .kiwi import kiwi_versions

SPECIAL_TOKENS_MAP = {"pad_token": "[PAD]", "unk_token": "[UNK]", "cls_token": "[CLS]", "sep_token": "[SEP]",
                      "mask_token": "[MASK]"}
# The transformers class that reads a saved folder (koelectra_kit.tokenizer.hf, registered with AutoTokenizer when
# koelectra_kit is imported). Folders saved before it say PreTrainedTokenizerFast and still load with KoTokenizer.
HF_TOKENIZER_CLASS = "KoElectraKitTokenizer"
# Without koelectra_kit imported, transformers does not fail on an unknown tokenizer_class: it silently loads
# tokenizer.json as a plain fast tokenizer that skips the normalizer and the Kiwi pre-split (wrong ids). An
# invalid padding_side is the one value its generic loader rejects with the value in the message, so that message
# tells the user what to install; KoElectraKitTokenizer never reads it (it pads on the right).
HF_LOAD_GUARD = ("right -- this tokenizer normalizes and Kiwi-splits Korean text in Python: pip install koelectra-kit "
                 "and `import koelectra_kit` before AutoTokenizer / pipeline (tokenizer_class KoElectraKitTokenizer)")
# tokenizer_config.json as written before the two above: fingerprints hash it in place of the current one (it is
# loading metadata, no id depends on it), so checkpoints, caches and label runs made before them stay valid.
_LEGACY_CONFIG = json.dumps({
    "tokenizer_class": "PreTrainedTokenizerFast", **SPECIAL_TOKENS_MAP, "model_max_length": 512,
    "clean_up_tokenization_spaces": False,
    "koelectra_note": "tokenizer.json expects Kiwi-pre-split text (KoTokenizer.presplit_batch); "
                      "load with koelectra_kit.tokenizer.KoTokenizer.from_pretrained for raw text"},
    ensure_ascii=False, indent=2).encode() + b"\n"


def save_tokenizer(tok, directory: str | Path) -> Path:
    """Write ``tok``'s files into ``directory`` (each written beside its name, then renamed); other files in the
    directory (a model's) are kept."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if tok.hf is not None:
        tok.hf.save_pretrained(str(d))
        return d
    with atomic_path(d / "tokenizer.json") as tmp:
        tok.backend.save(str(tmp))
    if tok.model == "wordpiece":
        vocab = tok.backend.get_vocab(with_added_tokens=True)
        with atomic_path(d / "vocab.txt") as tmp:
            Path(tmp).write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])),
                                 encoding="utf-8")
    write_json_atomic(d / "special_tokens_map.json", SPECIAL_TOKENS_MAP)
    write_json_atomic(d / "tokenizer_config.json", {
        "tokenizer_class": HF_TOKENIZER_CLASS, **SPECIAL_TOKENS_MAP, "model_max_length": 512,
        "clean_up_tokenization_spaces": False, "padding_side": HF_LOAD_GUARD,
        "koelectra_note": "raw text: `import koelectra_kit`, then AutoTokenizer.from_pretrained / pipeline (or "
                          "koelectra_kit.tokenizer.KoTokenizer.from_pretrained); tokenizer.json alone expects "
                          "Kiwi-pre-split text (KoTokenizer.presplit_batch)"})
    write_json_atomic(d / SETTINGS_FILE, {
        "format": FORMAT, "model": tok.model, "presplit": tok.presplit,
        "normalize": to_dict(tok.normalize_cfg), **({"kiwi": kiwi_versions()} if tok.presplit == "kiwi" else {}),
        # only when set: a tokenizer from before the fallback saves (and fingerprints) exactly as it did
        **({"fallback": tok.fallback} if tok.fallback else {})})
    return d


def load_tokenizer_parts(name_or_dir: str | Path) -> dict:
    """The ``KoTokenizer`` constructor arguments for a directory saved by ``save_tokenizer`` (or any model dir
    carrying one), a plain Hugging Face tokenizer directory, or a hub model id (downloads with transformers on a
    machine with internet)."""
    from tokenizers import Tokenizer

    d = Path(name_or_dir)
    settings_path = d / SETTINGS_FILE
    if settings_path.is_file():
        try:
            s = json.loads(settings_path.read_text(encoding="utf-8"))
            backend = Tokenizer.from_file(str(d / "tokenizer.json"))
        except (OSError, ValueError, Exception) as e:  # noqa: BLE001 - corrupt files: one clear message
            raise InputError(f"cannot read the tokenizer in {d}: {e}") from None
        if not isinstance(s, dict) or not isinstance(s.get("normalize", {}), dict):
            raise InputError(f"cannot read the tokenizer in {d}: {SETTINGS_FILE} is not a settings mapping "
                             "(save the tokenizer again)")
        if s.get("presplit") == "kiwi":
            saved, now = s.get("kiwi", {}), kiwi_versions()
            if saved != now:
                # stacklevel 4: the caller of KoTokenizer.from_pretrained
                warnings.warn(f"tokenizer in {d} was made with {saved}, this machine has {now}: Kiwi may split "
                              "some texts differently, changing token ids; install the saved versions for "
                              "identical results", stacklevel=4)
        try:
            norm = from_dict(NormalizeConfig, s.get("normalize", {}))
        except ConfigError as e:
            raise InputError(f"cannot read the tokenizer in {d}: {SETTINGS_FILE} normalize: {e}") from None
        return {"backend": backend, "normalize": norm, "presplit": s.get("presplit", "kiwi"),
                "model": s.get("model", "wordpiece"), "fallback": s.get("fallback")}  # absent: saved before it
    if d.is_dir() and not (d / "tokenizer.json").exists() and not (d / "vocab.txt").exists() \
            and not (d / "tokenizer_config.json").exists():
        raise InputError(f"no tokenizer in {d}: expected {SETTINGS_FILE} + tokenizer.json (saved by "
                         "koelectra-kit) or a Hugging Face tokenizer")
    if not d.exists() and (str(name_or_dir).startswith((".", "/")) or str(name_or_dir).count("/") > 1):
        raise InputError(f"tokenizer directory not found: {name_or_dir}")
    from ..hub import koelectra_snapshot

    snapshot = koelectra_snapshot(str(name_or_dir))  # a hub repo saved by this toolkit: read its files as above
    if snapshot is not None:
        return load_tokenizer_parts(snapshot)
    from transformers import AutoTokenizer

    try:
        hf = AutoTokenizer.from_pretrained(str(name_or_dir), use_fast=True)
    except (OSError, ValueError) as e:
        raise InputError(f"cannot load a tokenizer from {name_or_dir}: {str(e).splitlines()[0]}") from None
    if not getattr(hf, "is_fast", False):
        raise InputError(f"{name_or_dir}: only fast (tokenizer.json) Hugging Face tokenizers are supported")
    return {"backend": hf.backend_tokenizer, "normalize": None, "presplit": "none", "model": "hf", "hf_tokenizer": hf}


def tokenizer_fingerprint(tok) -> str:
    """Hash of the tokenizer's saved files (vocabulary, normalization and pre-split settings, Kiwi versions): a
    checkpoint or data cache made with another tokenizer must not be reused. Remembered on the object, since a
    loaded tokenizer does not change (a fine-tune keys both its train and dev token caches with it)."""
    import tempfile

    fp = getattr(tok, "fingerprint", None)
    if isinstance(fp, str) and fp:
        return fp
    h = hashlib.sha256()
    with tempfile.TemporaryDirectory() as d:
        tok.save(d)
        for f in sorted(Path(d).rglob("*")):
            if f.is_file():
                data = f.read_bytes()
                if f.name == "tokenizer_config.json" and getattr(tok, "hf", None) is None:
                    data = _LEGACY_CONFIG
                h.update(f.relative_to(d).as_posix().encode() + b"\0" + data)
    fp = h.hexdigest()[:16]
    try:
        tok.fingerprint = fp
    except AttributeError:  # an object that takes no new attributes: recomputed next time
        pass
    return fp
