"""ONNX Runtime inference for a classifier: export (``torch.onnx``, dynamic batch and sequence axes), optional int8
(onnxruntime's dynamic quantizer, the replacement for torch's deprecated ``quantize_dynamic``), each export checked
against torch's logits, and ``OnnxModel``, which stands in for the torch model in ``classifier.predict_logits``.

    koelectra-kit export --model runs/sentiment --onnx --int8      # runs/sentiment/onnx/model{,_quantized}.onnx
    Classifier.load("runs/sentiment", backend="onnx", quantize=True)

Classifier.load(backend="onnx") uses the folder's onnx/ files when they record its weights' digest, else exports
into the cache (keyed by a digest of the weights, so a retrained model never meets a stale graph).
Needs the ``onnx`` extra: ``pip install 'koelectra-kit[onnx]'``.
"""
from __future__ import annotations

import hashlib
import os
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np

from ..errors import InputError, KitError
from ..io.fileio import atomic_path, cache_dir

ONNX_DIR = "onnx"  # transformers.js / optimum's layout on the hub: onnx/model.onnx, onnx/model_quantized.onnx
FP32_FILE, INT8_FILE = "model.onnx", "model_quantized.onnx"
OPSET = 17  # LayerNormalization is a single op from 17 on; onnxruntime >= 1.14 runs it
FP32_TOLERANCE = 1e-3  # max |logit difference| accepted between torch fp32 and the exported graph
# metadata_props key of an export: the weights_digest of the torch weights it was made from. A folder's onnx/ file
# is used only for those weights: by file times alone, `export --model A --out B/onnx` (or B's weights replaced by
# an older file) had B label with A's graph, exit 0.
DIGEST_KEY = "koelectra_kit.weights_digest"
# The graph's inputs, in the model's forward order. Exports made before token_type_ids was one take the first two:
# ``feeds`` gives a session the inputs it names.
INPUTS = ("input_ids", "attention_mask", "token_type_ids")


def require_onnxruntime():
    try:
        import onnxruntime
    except ImportError:
        raise InputError("backend=onnx needs onnxruntime: pip install 'koelectra-kit[onnx]' (or use backend=torch)") \
            from None
    return onnxruntime


def onnx_available() -> bool:
    import importlib.util

    return importlib.util.find_spec("onnxruntime") is not None and importlib.util.find_spec("onnx") is not None


def probe_batch(vocab_size: int, pad_id: int, seed: int = 0, positions: int = 24):
    """Input ids [4, at most 24] of mixed lengths (padding included) from the non-special range of the vocabulary:
    what an export is checked on (no tokenizer, no Kiwi needed). ``positions``: the model's position embeddings (a
    model of 16 crashed on 24-token rows)."""
    import torch

    width = max(1, min(24, positions))
    rng = np.random.default_rng(seed)
    ids = rng.integers(min(5, vocab_size - 1), vocab_size, size=(4, width))
    mask = np.ones_like(ids)
    for row, n in enumerate((width, max(1, width * 2 // 3), max(1, width // 3), min(2, width))):
        ids[row, n:], mask[row, n:] = pad_id, 0
    return torch.from_numpy(ids), torch.from_numpy(mask)


def export_onnx(model, dest: str | Path, opset: int = OPSET) -> Path:
    """``model`` (a sequence classifier, fp32) -> ``dest``: inputs input_ids, attention_mask and token_type_ids
    [batch, sequence], output logits [batch, num_labels]. token_type_ids as optimum's ELECTRA export takes them:
    transformers' tokenizers return them, and ``sess.run(None, dict(tok(texts, return_tensors="np")))`` failed on
    a graph without them ("Invalid input name"). The TorchScript exporter (``dynamo=False``): ~10x faster than the
    dynamo one on these models and needs no onnxscript; the dynamo exporter where the old one is gone."""
    import torch

    dest = Path(dest)
    dest.parent.mkdir(parents=True, exist_ok=True)
    model = model.eval()
    ids, mask = probe_batch(model.config.vocab_size, model.config.pad_token_id or 0,
                            positions=model.config.max_position_embeddings)
    args = (ids, mask, torch.zeros_like(ids))  # forward's order: input_ids, attention_mask, token_type_ids
    axes = {**{name: {0: "batch", 1: "sequence"} for name in INPUTS}, "logits": {0: "batch"}}
    with atomic_path(dest, suffix=".onnx") as tmp, warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore")  # tracer notes about shapes the mask makes constant: checked below
        try:
            torch.onnx.export(model, args, str(tmp), input_names=list(INPUTS), output_names=["logits"],
                              dynamic_axes=axes, opset_version=opset, dynamo=False)
        except TypeError:  # a torch without the TorchScript exporter
            torch.onnx.export(model, args, str(tmp), input_names=list(INPUTS), output_names=["logits"],
                              dynamic_axes=axes, opset_version=opset, dynamo=True)
        _stamp(tmp, weights_digest(model))
    return dest


def _stamp(path: Path, digest: str | None) -> None:
    """Record ``digest`` (the weights an export was made from) in the .onnx file's metadata."""
    import onnx

    if digest is None:
        return
    graph = onnx.load(str(path))
    kept = [p for p in graph.metadata_props if p.key != DIGEST_KEY]
    del graph.metadata_props[:]
    graph.metadata_props.extend(kept)
    graph.metadata_props.add(key=DIGEST_KEY, value=digest)
    onnx.save(graph, str(path))


def recorded_digest(path: Path) -> str | None:
    """The weights digest an export records (None: an export made before exports recorded it)."""
    import onnx

    graph = onnx.load(str(path), load_external_data=False)
    return next((p.value for p in graph.metadata_props if p.key == DIGEST_KEY), None)


def quantize_onnx(src: str | Path, dest: str | Path) -> Path:
    """int8 weights, activations quantized per batch at run time (onnxruntime's dynamic quantization of MatMul
    and Gather: the embedding table shrinks too)."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    root = logging.getLogger()
    level = root.level
    # it logs "consider pre-processing" on the root logger at every call; its pre-processing (symbolic shape
    # inference) fails on these graphs and dynamic quantization does not need it
    root.setLevel(logging.ERROR)
    try:
        with atomic_path(Path(dest), suffix=".onnx") as tmp:
            quantize_dynamic(str(src), str(tmp), weight_type=QuantType.QInt8)
            _stamp(tmp, recorded_digest(Path(src)))  # made from the same weights as its fp32 source
    finally:
        root.setLevel(level)
    return Path(dest)


def max_logit_difference(session, model) -> float:
    """Max |logits| difference between the ONNX session and the torch model on the probe batch."""
    import torch

    ids, mask = probe_batch(model.config.vocab_size, model.config.pad_token_id or 0, seed=1,
                            positions=model.config.max_position_embeddings)
    with torch.no_grad():
        ref = model(input_ids=ids, attention_mask=mask).logits.float().numpy()
    got = session.run(["logits"], feeds(session, ids, mask))[0]
    return float(np.abs(got - ref).max())


def feeds(session, input_ids, attention_mask) -> dict:
    """The inputs ``session`` names, from (input_ids, attention_mask) tensors: token_type_ids all zeros (one
    segment, as the classifier is trained), left out for an export made before the graph took them."""
    ids = input_ids.cpu().numpy()
    given = {"input_ids": ids, "attention_mask": attention_mask.cpu().numpy(), "token_type_ids": np.zeros_like(ids)}
    return {i.name: given[i.name] for i in session.get_inputs()}


def weights_digest(model) -> str:
    """A digest of the weights as loaded: the cache key of their ONNX export."""
    h = hashlib.sha256()
    for name, value in sorted(model.state_dict().items()):
        h.update(name.encode())
        h.update(value.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:24]


def _fresh(path: Path, folder: Path, digest: str) -> bool:
    """An export in the model folder counts only when made from these weights (``digest``); one that records no
    digest (an older export) only when newer than the weights."""
    if not path.is_file():
        return False
    recorded = recorded_digest(path)
    if recorded is not None:
        return recorded == digest
    weights = [p for p in folder.glob("*.safetensors")] + [p for p in folder.glob("*.bin")]
    return all(path.stat().st_mtime >= w.stat().st_mtime for w in weights)


def onnx_files(model, source: str, quantize: bool) -> Path:
    """The ONNX file for ``model`` (loaded from ``source``): the folder's own export when fresh, else one in the
    cache, exported (and quantized) now if missing; a fresh fp32 export must match torch within FP32_TOLERANCE."""
    name = INT8_FILE if quantize else FP32_FILE
    folder = Path(source) / ONNX_DIR
    digest = weights_digest(model)
    if _fresh(folder / name, Path(source), digest):
        return folder / name
    where = cache_dir() / "onnx" / digest
    try:
        if not (where / FP32_FILE).is_file():
            export_onnx(model, where / FP32_FILE)
            diff = max_logit_difference(_session(where / FP32_FILE, 1), model)
            if diff > FP32_TOLERANCE:
                (where / FP32_FILE).unlink()
                raise KitError(f"the ONNX export of {source} differs from torch by {diff:.2g} in the logits; use "
                               "backend=torch")
        if quantize and not (where / INT8_FILE).is_file():
            quantize_onnx(where / FP32_FILE, where / INT8_FILE)
    except PermissionError as e:  # the graph must be a file: was a bare "Permission denied (CACHE/onnx)"
        raise InputError(f"can't write the ONNX export of {source} into the cache {where} (permission denied: "
                         f"{e.filename}); set KOELECTRA_CACHE to a folder you can write, or export it into the model "
                         f"folder once: koelectra-kit export --model {source} --onnx{' --int8' if quantize else ''}") \
            from None
    return where / name


def _session(path: Path, threads: int | None, device=None):
    ort = require_onnxruntime()
    if not os.access(path, os.R_OK):  # onnxruntime's own failure is a traceback ("system error number 13")
        raise InputError(f"{path}: this user can't read it (permission denied); make it readable, or delete it to "
                         "have it exported again")
    opts = ort.SessionOptions()
    opts.intra_op_num_threads = int(threads or 0)  # 0: onnxruntime's default, one per core
    opts.inter_op_num_threads = 1
    opts.log_severity_level = 3  # errors only: its warnings about unused initializers are noise here
    providers = ["CPUExecutionProvider"]
    if device is not None and device.type == "cuda" and "CUDAExecutionProvider" in ort.get_available_providers():
        providers.insert(0, "CUDAExecutionProvider")
    return ort.InferenceSession(str(path), opts, providers=providers)


_INHERITED: list = []  # sessions a forked child copied from its parent: kept, never run, never freed


class OnnxModel:
    """An onnxruntime session behind the interface ``predict_logits`` uses: ``config``, ``eval()``, a call on
    (input_ids, attention_mask) tensors returning ``.logits``. ``state_dict`` is the torch weights' (the model's
    identity for resume digests); the torch model is kept for it and for re-exports."""

    def __init__(self, path: Path, torch_model, threads: int | None = None, device=None):
        self.path = Path(path)
        self._threads, self._device = threads, device
        self.session, self._pid = _session(self.path, threads, device), os.getpid()
        self.torch_model = torch_model
        self.config = torch_model.config

    def _live_session(self):
        """The session, or in a forked child a new one: the parent's has none of its threads there, and a run
        waited forever. The inherited copy is kept, not freed (tearing it down would wait for them too)."""
        if self._pid != os.getpid():
            _INHERITED.append(self.session)
            self.session, self._pid = _session(self.path, self._threads, self._device), os.getpid()
        return self.session

    def eval(self) -> "OnnxModel":
        return self

    def state_dict(self) -> dict:
        return self.torch_model.state_dict()

    def __call__(self, input_ids, attention_mask):
        import torch

        session = self._live_session()
        logits = session.run(["logits"], feeds(session, input_ids, attention_mask))[0]
        return SimpleNamespace(logits=torch.from_numpy(logits))

    def __repr__(self) -> str:
        return f"OnnxModel({self.path})"


def load_onnx(model, source: str, device, quantize: bool = False, threads: int | None = None) -> OnnxModel:
    require_onnxruntime()
    return OnnxModel(onnx_files(model.float().eval(), source, quantize), model, threads, device)
