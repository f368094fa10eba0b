"""A tokenizer on disk: the files ``KoTokenizer.save`` writes and ``from_pretrained`` reads, and the fingerprint
that ties checkpoints and caches to them.

A saved directory holds tokenizer.json (+ vocab.txt for WordPiece), tokenizer_config.json and
special_tokens_map.json for transformers, and koelectra_tokenizer.json with the normalization and pre-split
settings and the Kiwi versions (another Kiwi model build can split differently, changing token ids).

A published checkpoint's tokenizer (KoELECTRA, KcELECTRA: ``vocab.txt`` + tokenizer_config.json, BERT-style
WordPiece with its own normalizer) is read by transformers and kept as it is: no normalization or Kiwi step of ours
is put in front of it, since the checkpoint was trained on its own tokenization. It is saved the way transformers
saves it, so the folders made from it load in plain transformers.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ..config import from_dict, to_dict
from ..errors import ConfigError, InputError
from ..io.fileio import atomic_path, write_json_atomic
from .normalize import NormalizeConfig
from . import wordlist
from .config import FORMAT, KIWI_PRESPLITS, PRESPLITS, SETTINGS_FILE

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


# Keys transformers' from_pretrained records among a tokenizer's arguments that say how it was loaded, not what it
# is; save_pretrained writes them back (transformers 5: is_local, and local_files_only, true only under
# HF_HUB_OFFLINE), so one published tokenizer had one fingerprint online and another offline: token caches
# missed, and a pretraining run started online refused to resume offline ("another tokenizer").
_LOADER_KEYS = ("is_local", "local_files_only", "cache_dir", "revision", "token", "use_auth_token", "_commit_hash",
                "trust_remote_code", "use_fast", "_from_auto", "name_or_path")
# How many rows a model's embedding may have beyond its tokenizer's tokens: tables are padded up to a multiple
# of 8..128 for speed. A larger gap is a truncated or foreign vocab.txt, whose ids mean other tokens.
_PADDED_ROWS = 128


def model_max_length(folder: Path) -> int:
    """The length the model in ``folder`` was trained and is served with: the classifier's max_length (config.json,
    the rule ``Classifier.load`` uses), else its position table (at most 512), else tokenizer_config.json's."""
    try:
        cfg = json.loads((folder / "config.json").read_text(encoding="utf-8"))
        kit = cfg.get("koelectra_kit") or {}
        return int(kit.get("max_length", 0) or min(512, cfg.get("max_position_embeddings", 512)))
    except (OSError, ValueError, AttributeError):
        pass
    try:
        return int(json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))["model_max_length"])
    except (OSError, ValueError, KeyError, TypeError):
        return 512


def save_tokenizer(tok, directory: str | Path, word_list: bool = True) -> Path:
    """Write ``tok``'s files into ``directory`` (each written beside its name, then renamed); other files in the
    directory (a model's) are kept. ``word_list``: its folder's Kiwi word list too (wordlist.py)."""
    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    if tok.hf is not None:
        _save_published(tok, d)
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
        "normalize": to_dict(tok.normalize_cfg),
        **({"kiwi": tok.kiwi_record()} if tok.presplit in KIWI_PRESPLITS else {}),
        # only when set: a tokenizer from before the fallback saves (and fingerprints) exactly as it did
        **({"fallback": tok.fallback} if tok.fallback else {})})
    if word_list and tok.presplit == "kiwi_word":  # its word list goes with it: the model encodes those files anywhere
        wordlist.copy_into(getattr(tok, "source", None), d)
    return d


def _save_published(tok, d: Path) -> None:
    """A published checkpoint's tokenizer as transformers saves it (tokenizer.json carries its normalizer), plus
    its vocab.txt, the file the published folder had (transformers 5 no longer writes it; slow BertTokenizer /
    ElectraTokenizer users and older stacks read it). tokenizer_config.json loses the loader's keys, and in a
    model folder its model_max_length is the length the model is served with: ``pipeline(..., truncation=True)``
    then cuts a text where ``Classifier.predict`` does (a plain BERT tokenizer does not truncate unless asked)."""
    tok.hf.save_pretrained(str(d))
    path = d / "tokenizer_config.json"
    config = json.loads(path.read_text(encoding="utf-8"))
    for key in _LOADER_KEYS:
        config.pop(key, None)
    if (d / "config.json").is_file():
        config["model_max_length"] = model_max_length(d)
    write_json_atomic(path, config)
    vocab = tok.backend.get_vocab(with_added_tokens=False)
    if type(tok.backend.model).__name__ == "WordPiece" and sorted(vocab.values()) == list(range(len(vocab))):
        with atomic_path(d / "vocab.txt") as tmp:  # one token a line, line number = id
            Path(tmp).write_text("".join(t + "\n" for t, _ in sorted(vocab.items(), key=lambda kv: kv[1])),
                                 encoding="utf-8")


def _check_fits_model(hf, d: Path) -> None:
    """A published model folder's tokenizer must have the model's vocabulary: as many tokens as config.json's
    vocab_size (up to ``_PADDED_ROWS`` fewer). A vocab.txt cut short by a copy or download (specials first, so it
    still loads) would otherwise turn most text into [UNK] or ids of other tokens, silently; one past the table
    crashes the model mid-run."""
    try:
        rows = int(json.loads((d / "config.json").read_text(encoding="utf-8"))["vocab_size"])
    except (OSError, ValueError, KeyError, TypeError):
        return  # a tokenizer folder, not a model's
    n = len(hf)
    if n > rows or rows - n > _PADDED_ROWS:
        source = "tokenizer.json" if (d / "tokenizer.json").is_file() else "vocab.txt"
        raise InputError(f"the tokenizer in {d} has {n} tokens ({source}) but its model has {rows} "
                         f"(config.json vocab_size): {'truncated or ' if n < rows else ''}not the vocabulary the "
                         "model was trained with; copy the checkpoint's tokenizer files again")


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
        presplit = s.get("presplit", "kiwi")
        if presplit not in PRESPLITS:  # e.g. a mode of a newer koelectra-kit: encoding without it gives wrong ids
            raise InputError(f"cannot read the tokenizer in {d}: {SETTINGS_FILE} says presplit {presplit!r}, which "
                             f"this koelectra-kit does not know ({', '.join(PRESPLITS)}); upgrade koelectra-kit")
        # The Kiwi versions it was saved with, compared with this machine's at its first Kiwi call, not here: a run
        # whose texts never reach Kiwi (read from a token cache) needs no kiwipiepy. (No presplit key: an early
        # folder, loaded as kiwi without the check.)
        saved_kiwi = s.get("kiwi", {}) if s.get("presplit") in KIWI_PRESPLITS else None
        try:
            norm = from_dict(NormalizeConfig, s.get("normalize", {}))
        except ConfigError as e:
            raise InputError(f"cannot read the tokenizer in {d}: {SETTINGS_FILE} normalize: {e}") from None
        return {"backend": backend, "normalize": norm, "presplit": presplit,
                "model": s.get("model", "wordpiece"), "fallback": s.get("fallback"),  # absent: saved before it
                "saved_kiwi": saved_kiwi, "source": str(d)}
    if d.is_file():  # tokenizer.json itself, say: transformers took the path for a hub id and said so
        raise InputError(f"{d} is a file; a tokenizer is the folder that holds {SETTINGS_FILE} and tokenizer.json"
                         f" (or a Hugging Face tokenizer's files): pass {d.parent}")
    if d.is_dir() and not (d / "tokenizer.json").exists() and not (d / "vocab.txt").exists() \
            and not (d / "tokenizer_config.json").exists():
        # a run or prepared folder (tokenizer=runs/x for runs/x/tokenizer) holds its tokenizer one level down: say so
        inside = next((str(d / sub) for sub in ("tokenizer", "discriminator") if (d / sub / SETTINGS_FILE).is_file()),
                      None)
        raise InputError(f"no tokenizer in {d}: expected {SETTINGS_FILE} + tokenizer.json (saved by "
                         "koelectra-kit) or a Hugging Face tokenizer" + (f"; its tokenizer is in {inside}" if inside
                                                                           else ""))
    if not d.exists() and (str(name_or_dir).startswith((".", "/")) or str(name_or_dir).count("/") > 1):
        raise InputError(f"tokenizer directory not found: {name_or_dir}")
    from ..io.hubreach import check_reachable
    from ..hub.repo import koelectra_snapshot

    if not d.exists():
        check_reachable(str(name_or_dir), "tokenizer")

    snapshot = koelectra_snapshot(str(name_or_dir), SETTINGS_FILE)  # a hub repo saved by this toolkit: read its files as above
    if snapshot is not None:
        return load_tokenizer_parts(snapshot)
    from transformers import AutoTokenizer

    vocab_file = d / "vocab.txt"
    if d.is_dir() and not (d / "tokenizer.json").exists() and vocab_file.is_file() \
            and not vocab_file.read_text(encoding="utf-8", errors="replace").strip():
        raise InputError(f"{vocab_file} is empty: copy the checkpoint's tokenizer files again")
    try:
        hf = AutoTokenizer.from_pretrained(str(name_or_dir), use_fast=True)
    except Exception as e:  # noqa: BLE001 - the Rust loader raises plain Exception ("WordPiece error: Missing [UNK]")
        text = str(e).strip()
        raise InputError(f"cannot load a tokenizer from {name_or_dir}: "
                         f"{text.splitlines()[0] if text else type(e).__name__}") from None
    if not getattr(hf, "is_fast", False):
        raise InputError(f"{name_or_dir}: only fast (tokenizer.json) Hugging Face tokenizers are supported")
    if d.is_dir():
        _check_fits_model(hf, d)
    return {"backend": hf.backend_tokenizer, "normalize": None, "presplit": "none", "model": "hf", "hf_tokenizer": hf}


def tokenizer_files_hint(folder: str | Path) -> str:
    """Which tokenizer files a model folder of this kind carries, for the message of one whose tokenizer cannot
    be used: a folder made by koelectra-kit's own tokenizer (its koelectra_tokenizer.json, or a
    tokenizer_config.json that names the toolkit), one fine-tuned from a published checkpoint (that checkpoint's
    BERT-style files, which never include koelectra_tokenizer.json), or, with no tokenizer file left, either."""
    d = Path(folder)
    own = "a model dir made with a koelectra-kit tokenizer carries tokenizer.json + " + SETTINGS_FILE
    published = ("a model dir fine-tuned from a published checkpoint carries that checkpoint's tokenizer files "
                 "(vocab.txt, tokenizer_config.json, special_tokens_map.json)")
    if (d / SETTINGS_FILE).is_file():
        return own
    try:
        config = json.loads((d / "tokenizer_config.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        config = None
    if isinstance(config, dict) and (config.get("tokenizer_class") == HF_TOKENIZER_CLASS or "koelectra_note" in config):
        return own
    if config is not None or (d / "vocab.txt").is_file() or (d / "tokenizer.json").is_file():
        return published
    return f"{own}; {published}"


def vocab_digest(tok) -> str:
    """A digest of the token -> id table alone: what a model's weights depend on. Recorded in the config.json of
    every model folder the toolkit writes (``koelectra_kit.vocab_digest``), so that another tokenizer copied beside
    the weights is told apart at load (``check_model_vocab``); unlike ``tokenizer_fingerprint`` it ignores settings
    and file layout, so a folder keeps loading across versions."""
    vocab = tok.backend.get_vocab(with_added_tokens=True)
    # the tokens in id order, then the ids (gaps included): one join, not an update a token (4x: ~6 ms for 8,000)
    h = hashlib.sha256("\n".join(sorted(vocab, key=vocab.__getitem__)).encode())
    h.update(",".join(map(str, sorted(vocab.values()))).encode())
    return h.hexdigest()[:16]


def check_model_vocab(tok, config, rows: int, where: str) -> None:
    """``tok`` must be the vocabulary the model (its ``config``, an embedding of ``rows`` rows) was trained with:
    one more token than rows was an IndexError at the first batch; fewer, or other tokens, gave every id another
    meaning, silently. The second is told only where config.json records the digest (the toolkit's own folders)."""
    fix = "give the folder the tokenizer files that came with the model"
    if tok.vocab_size > rows:
        raise InputError(f"{where}: its tokenizer has {tok.vocab_size:,} tokens but the model's embedding has "
                         f"{rows:,} rows: not the vocabulary the model was trained with; {fix}")
    recorded = (getattr(config, "koelectra_kit", None) or {}).get("vocab_digest")
    if recorded and recorded != vocab_digest(tok):
        raise InputError(f"{where}: its tokenizer is not the one the model was saved with (the vocabulary differs "
                         f"from the one config.json records); {fix}")


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
        save_tokenizer(tok, d, word_list=False)  # (no id depends on the word list: Kiwi's cuts, kept)
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
