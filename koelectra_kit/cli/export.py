"""``koelectra-kit export``: a classifier folder to ONNX (optionally int8), and/or a finished folder to the hub."""
from __future__ import annotations

import argparse

EPILOG = """\
examples:
  koelectra-kit export --model runs/sentiment --onnx                  # runs/sentiment/onnx/model.onnx
  koelectra-kit export --model runs/sentiment --onnx --int8           # + onnx/model_quantized.onnx
  koelectra-kit export --model runs/sentiment --push-to-hub me/koelectra-sentiment --private

ONNX: inputs input_ids, attention_mask and token_type_ids (zeros) [batch, sequence] (both axes dynamic), output
logits; each export is checked against the torch model's logits. The folder's onnx/ files are what
Classifier.load(folder, backend="onnx") and `koelectra-kit label --backend onnx` use (they export into the cache
when it has none). A folder with the toolkit's tokenizer: its tokenizer.json (what transformers.js and optimum
read) expects text pre-split by KoTokenizer.presplit_batch and gives other ids on raw text, without an error (the
model card's ONNX section).
Needs the onnx extra: pip install 'koelectra-kit[onnx]'. The hub push uploads the whole folder (model card
included) and needs a token (hf auth login, or HF_TOKEN)."""


MIN_OPSET = 14  # scaled_dot_product_attention exports from opset 14 on


def max_opset() -> int:
    """The newest opset the exporter ``export_onnx`` uses writes (torch 2.13's TorchScript exporter: 20): asked
    beyond it, the exporter failed after printing ~180 lines of the traced graph."""
    try:
        from torch.onnx import _constants

        return int(getattr(_constants, "ONNX_TORCHSCRIPT_EXPORTER_MAX_OPSET", _constants.ONNX_MAX_OPSET))
    except (ImportError, AttributeError):  # a torch that moved them: the exporter's own error line still stands
        return 10**6


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "export", help="classifier folder -> ONNX (int8 optional); push a folder to the Hugging Face hub",
        description="Export a fine-tuned classifier folder to ONNX for onnxruntime, and/or push a folder "
                    "(pretrained discriminator or classifier) to the Hugging Face hub.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="a classifier folder written by finetune (or any folder to push)")
    p.add_argument("--onnx", action="store_true", help="write ONNX (fp32) into OUT")
    p.add_argument("--int8", action="store_true", help="also an int8 copy (onnxruntime dynamic quantization)")
    p.add_argument("--out", default=None, help="a folder of its own for the .onnx files, not a model folder "
                   "(default: MODEL/onnx)")
    p.add_argument("--opset", type=int, default=None, help="ONNX opset (default 17)")
    p.add_argument("--push-to-hub", default=None, metavar="OWNER/NAME", help="upload MODEL (after any export)")
    p.add_argument("--private", action="store_true", help="create the hub repo private")
    p.set_defaults(func=run)


def run(args) -> int:
    from pathlib import Path

    from ..errors import InputError
    from ..hub.repo import check_repo_id
    from ..runtime import log

    if args.int8 and not args.onnx:  # (first: alone, it was "nothing to do")
        raise InputError("--int8 quantizes the ONNX export: add --onnx")
    if not args.onnx and not args.push_to_hub:
        raise InputError("nothing to do: pass --onnx (and --int8) and/or --push-to-hub OWNER/NAME")
    check_repo_id(args.push_to_hub, "--push-to-hub")
    if args.opset is not None and args.opset < MIN_OPSET:
        raise InputError(f"--opset {args.opset}: the model's attention needs ONNX opset {MIN_OPSET} or later "
                         "(leave it out for the default 17)")
    if args.opset is not None and args.opset > max_opset():
        raise InputError(f"--opset {args.opset}: this torch exports ONNX opsets up to {max_opset()} (leave it out "
                         "for the default 17)")
    if args.onnx:
        from ..classify.registry import toolkit_kind

        kind = toolkit_kind(args.model)
        if kind:  # (a --push-to-hub of such a folder is fine: it is files)
            raise InputError(f"--model {args.model} is {'an' if kind == 'ensemble' else 'a'} {kind} folder: --onnx "
                             "exports fine-tuned encoders; "
                             f"{'its encoder member' if kind == 'ensemble' else 'label reads it as it is'} "
                             f"{'can be exported on its own' if kind == 'ensemble' else '(no export needed)'}")
        if args.out is not None and not args.out.strip():  # "" silently meant MODEL/onnx, " " made a folder " " here
            raise InputError(f"--out {args.out!r} is empty (an unset shell variable?): give a folder for the .onnx "
                             "files, or leave --out out for MODEL/onnx")
        out = Path(args.out) if args.out else Path(args.model) / "onnx"
        if any((out / name).is_file() for name in ("config.json", "classifier.json")):
            # --out MODEL put model.onnx beside config.json, where label --backend onnx never looks; --out OTHER_MODEL
            # added it to another model's folder
            raise InputError(f"--out {out} is a model folder: the .onnx files go in a folder of their own (leave "
                             "--out out for MODEL/onnx, which label --backend onnx reads)")
        for line in export_classifier(args.model, out, int8=args.int8, opset=args.opset):
            print(line)
    if args.push_to_hub:
        from ..hub.repo import push_folder

        if not Path(args.model).is_dir():
            raise InputError(f"--model {args.model}: no such folder to push")
        if not any((Path(args.model) / name).is_file() for name in ("config.json", "classifier.json")):
            # a run's root (checkpoints/ and all), a tokenizer folder, or / would be uploaded as a model repo
            raise InputError(f"--model {args.model} is not a model folder (no config.json or classifier.json): push "
                             "a fine-tuned classifier folder or a pretraining run's discriminator/")
        log(f"pushed {args.model} to {push_folder(args.model, args.push_to_hub, args.private)}")
    return 0


def export_classifier(model_dir: str, out, int8: bool = False, opset: int | None = None) -> list[str]:
    """Export ``model_dir``'s classifier into ``out`` (model.onnx, and model_quantized.onnx with ``int8``), each
    checked against torch on a probe batch; returns the report lines."""
    from pathlib import Path

    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification

    from ..errors import InputError, KitError
    from ..hub.modelio import check_model_source, loading
    from ..io.fileio import check_output_parent
    from ..classify.onnx_backend import (FP32_FILE, FP32_TOLERANCE, INT8_FILE, OPSET, OnnxModel, export_onnx,
                                         max_logit_difference, probe_batch, quantize_onnx, recorded_digest,
                                         require_onnxruntime)
    from ..runtime import quiet_transformers
    from ..tokenizer import KoTokenizer

    require_onnxruntime()
    source = check_model_source(model_dir, "--model")
    _check_classifier(source)
    try:  # the .onnx runs with the folder's tokenizer (Classifier.load(MODEL, backend="onnx"), label --backend onnx)
        tok = KoTokenizer.from_pretrained(source)
    except InputError as e:
        if not Path(source).is_dir():  # a name that is no folder here, tried as a hub id: not "no usable tokenizer"
            raise InputError(f"--model {source}: no such folder, and as a hub id it can't be loaded ({e})") from None
        raise InputError(f"--model {source} has no usable tokenizer ({e}); the .onnx would run with none: export a "
                         "folder written by `koelectra-kit finetune`") from None
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder for the .onnx files")
    earlier = [name for name in (FP32_FILE, INT8_FILE) if (out / name).is_file()]
    if out.is_dir() and not earlier and any(out.iterdir()):  # --out ~/thesis wrote model.onnx among its files
        raise InputError(f"--out {out} holds other files and no earlier export ({FP32_FILE}); give a new or empty "
                         "folder for the .onnx files")
    try:  # before the model loads (it failed at the write, "Permission denied (MODEL/onnx)": a read-only model folder)
        check_output_parent(out / FP32_FILE)
    except InputError as e:
        raise InputError(f"{e}; or pass --out FOLDER for the .onnx files") from None
    with loading(source, "--model"), quiet_transformers():
        model = AutoModelForSequenceClassification.from_pretrained(source, trust_remote_code=False).float().eval()
    made = not out.exists()
    try:
        fp32 = export_onnx(model, out / FP32_FILE, opset or OPSET)
    except Exception as e:  # noqa: BLE001 - an opset the exporter cannot do; with the default opset it is a bug
        if made and out.is_dir() and not any(out.iterdir()):
            out.rmdir()  # nothing written: no empty folder left where the export was asked for
        if opset is None:
            raise
        raise KitError(f"--opset {opset}: the ONNX exporter failed ({str(e).strip().splitlines()[0]}); leave --opset "
                       f"out for the default {OPSET}") from None
    diff = max_logit_difference(OnnxModel(fp32, model).session, model)
    if diff > FP32_TOLERANCE:
        fp32.unlink()
        raise KitError(f"the ONNX export differs from torch by {diff:.2g} in the logits (tolerance "
                       f"{FP32_TOLERANCE:g}); nothing written; use the torch backend")
    lines = [f"wrote {fp32} ({fp32.stat().st_size / 2**20:.1f} MiB): max |logit - torch| {diff:.2g}"
             + (" (replaced the earlier export)" if FP32_FILE in earlier else "")]
    stale = out / INT8_FILE
    if not int8 and stale.is_file() and recorded_digest(stale) != recorded_digest(fp32):
        # an int8 graph of earlier weights: label checks the digest, but a push uploads the folder as it is
        stale.unlink()
        lines.append(f"removed {stale}: made from earlier weights (export with --int8 to make it again)")
    if int8:
        q = quantize_onnx(fp32, out / INT8_FILE)
        ids, mask = probe_batch(model.config.vocab_size, model.config.pad_token_id or 0, seed=1,
                                positions=model.config.max_position_embeddings)
        with torch.no_grad():
            ref = torch.softmax(model(input_ids=ids, attention_mask=mask).logits, -1).numpy()
        got = torch.softmax(OnnxModel(q, model)(ids, mask).logits, -1).numpy()
        lines.append(f"wrote {q} ({q.stat().st_size / 2**20:.1f} MiB): max |prob - torch fp32| "
                     f"{float(np.abs(got - ref).max()):.2g} on random ids; int8 moves probabilities: check its "
                     "labels on your dev set (Classifier.load(MODEL, backend='onnx', quantize=True))")
    if tok.hf is None:  # the toolkit's tokenizer: a user of the .onnx outside koelectra-kit must hear it here
        lines.append("outside koelectra-kit: tokenizer.json alone (transformers.js, optimum) expects text pre-split by "
                     "KoTokenizer.presplit_batch; on raw text it gives other ids and labels, without an error "
                     "(docs/huggingface.md#onnx)")
    return lines


def _check_classifier(source: str) -> None:
    """A local folder must hold a sequence classifier: a pretraining discriminator (ElectraForPreTraining) or a bare
    encoder would get a random classification head, and its export would label at random."""
    import json
    from pathlib import Path

    from ..errors import InputError

    config = Path(source) / "config.json"
    if not config.is_file():
        return  # a hub id: transformers says what it is
    try:
        arch = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (ValueError, AttributeError):
        raise InputError(f"--model {source}: config.json is not a model config") from None
    if arch and not any(str(a).endswith("ForSequenceClassification") for a in arch):
        raise InputError(f"--model {source} is not a fine-tuned classifier (architectures: "
                         f"{', '.join(map(str, arch))}; a pretraining discriminator or a bare encoder?); fine-tune it "
                         "with `koelectra-kit finetune` first")
