"""The predictor: a fine-tuned model directory (or hub id) + its tokenizer -> labels and probabilities.

    clf = Classifier.load("runs/sentiment")
    out = clf.predict(["배송 빠르고 좋아요", "별로예요"])   # out.labels, out.probs [n, k], out.confidence

Fast on CPU for the reasons the labeller needs: texts sorted by length so each batch pads only to its own
longest text, bf16 autocast where the CPU/GPU has it, optional int8 (onnxruntime or torchao; ``backend="onnx"``
runs the exported graph in onnxruntime, see onnx_backend),
``torch.inference_mode``; on a GPU, tokenization of the next batch group (Kiwi, which releases the GIL)
overlapped with the model's forward pass of the current one, bf16 weights, lengths padded to multiples of 16, batches
copied from pinned memory without waiting, and a group's logits kept on the GPU and copied back once. On a CPU the two run one after the other, each
with every core: overlapped, Kiwi's workers and torch's OpenMP threads fight over the same cores and the
model ran 3x slower (benchmarks/bench_label.py, 2 cores). On a CPU the model scores whole batches side by side,
one per core on one thread each (``cpu_streams``), rather than one batch split over the cores.

Inference lives here: ``collate`` and ``predict_logits`` are the one padding and scoring path, and fine-tuning
scores its dev set with them, so the scores it reports are the predictor's.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError
from ..hub.modelio import check_model_source, loading
from .predictions import Predictions, predict_args
from .registry import load_kind, toolkit_kind  # noqa: F401 - toolkit_kind: callers take it from here too
from ..runtime import autocast, autocast_dtype, check_precision_name, pad_multiple, quiet_transformers, resolve_device


def placeholder_labels(labels) -> bool:
    """Whether ``labels`` are transformers' placeholders (LABEL_0, LABEL_1, ...): a checkpoint whose head was
    never trained for a task (a pretraining discriminator, a bare encoder)."""
    return bool(labels) and all(re.fullmatch(r"LABEL_\d+", str(lab)) for lab in labels)


def collate(ids: list[list[int]], idx, pad_id: int, multiple: int = 1, pad_to: int | None = None, *,
            max_width: int | None = None, pin: bool = False):
    """Batch ``ids[idx]`` -> (input_ids, attention_mask) LongTensors [B, T], T = longest in the batch
    rounded up to ``multiple`` (``runtime.pad_multiple``: 16 on GPUs) but not past ``max_width`` (the max_length
    the ids were truncated to: a model's position table may end there), or ``pad_to`` for fixed padding.
    ``pin``: in page-locked memory, so a ``.to(cuda, non_blocking=True)`` copy does not hold up the host."""
    import torch

    seqs = [ids[i] for i in idx]
    longest = max(len(s) for s in seqs)
    width = pad_to or max(longest, min(-(-longest // multiple) * multiple, max_width or longest + multiple))
    input_ids = torch.full((len(seqs), width), pad_id, dtype=torch.long, pin_memory=pin)
    mask = torch.zeros((len(seqs), width), dtype=torch.long, pin_memory=pin)
    a, m = input_ids.numpy(), mask.numpy()  # filled through numpy views: no second copy
    for r, s in enumerate(seqs):
        a[r, :len(s)] = s
        m[r, :len(s)] = 1
    return input_ids, mask


def attention_mask_for(model, mask):
    """The attention mask to hand ``model``: the 2D mask [B, T] as it is, except for a transformers model whose
    attention is SDPA and whose masks come from transformers' mask factory (ELECTRA, BERT, RoBERTa, ...). That one
    gets the 4D boolean mask [B, 1, 1, T] (True: attend) the factory would build and passes through as it is
    (``create_bidirectional_mask``'s documented 4D case): given a 2D mask, the factory first asks whether any
    position is padding (``mask.all()``), a host read that on a GPU waits at every step for every kernel queued
    so far, so the CPU can never run ahead of the GPU. Same logits (bit for bit on a CPU in fp32, tested), same
    speed on a CPU."""
    import sys

    if mask.dim() != 2 or getattr(getattr(model, "config", None), "_attn_implementation", None) != "sdpa":
        return mask
    module = sys.modules.get(type(getattr(model, "_orig_mod", model)).__module__)
    if not hasattr(module, "create_bidirectional_mask"):
        return mask
    return mask.bool()[:, None, None, :]


def default_batch_size(device) -> int:
    """Texts per model call where the caller names none: 128 on a CPU (fewer, fuller calls amortize a small
    model's per-call overhead; little gain past it), 256 on a GPU (a batch of 128 short reviews leaves a large GPU
    mostly idle; more rows per kernel launch)."""
    return 256 if device.type == "cuda" else 128


def predict_logits(model, ids: list[list[int]], *, pad_id: int, device, dtype, batch_size: int = 128,
                   multiple: int = 1, streams: int = 1, max_width: int | None = None) -> np.ndarray:
    """Logits [n, num_labels] (fp32) for pre-tokenized texts, in input order. Batches are formed
    longest-first so padding is minimal; rows are put back in order afterwards. Fine-tuning scores its
    dev set with this too, so the reported scores are the predictor's. ``streams`` > 1 (CPU): that many
    threads, each with one intra-op thread, take the batches in turn (see ``cpu_streams``). ``multiple`` and
    ``max_width``: how ``collate`` pads."""
    import torch

    model.eval()
    lengths = np.array([len(x) for x in ids])
    order = np.argsort(-lengths, kind="stable")
    out = np.zeros((len(ids), model.config.num_labels), dtype=np.float32)
    batches = [order[s:s + batch_size] for s in range(0, len(order), batch_size)]
    if device.type != "cpu" and isinstance(model, torch.nn.Module):
        out[order] = _device_logits(model, ids, batches, pad_id, device, dtype, multiple, max_width)
        return out

    def score(idx) -> None:
        # inference_mode and autocast are per thread: entered on the thread that scores
        with torch.inference_mode():
            input_ids, mask = collate(ids, idx, pad_id, multiple, max_width=max_width)
            with autocast(device, dtype):
                logits = model(input_ids=input_ids.to(device),
                               attention_mask=attention_mask_for(model, mask.to(device))).logits
            out[idx] = logits.float().cpu().numpy()  # rows of different batches: no two threads share one

    # a few batches do not share out evenly (500 texts, 4 batches: 0.72x one at a time; 1,000 texts: 1.15x)
    if streams <= 1 or len(batches) < 4 * streams:
        for idx in batches:
            score(idx)
        return out
    # Each free stream takes the next batch, longest first, so the streams finish together. Batches dealt out in
    # advance (round-robin) left one core idle at the end of every call while the other finished its longer
    # share: 0.71-0.79x one-at-a-time on 500-1,000-text calls.
    list(_stream_pool(streams).map(score, batches))
    return out


def _device_logits(model, ids, batches, pad_id: int, device, dtype, multiple: int, max_width: int | None) -> np.ndarray:
    """``predict_logits`` on a GPU: the logits [n, k] in the batches' (length) order. Batches go over from pinned
    memory without waiting and their logits stay on the GPU until one copy back at the end: a ``.cpu()`` per batch
    would make the host wait for each batch before it could queue the next."""
    import torch

    pin = device.type == "cuda"
    with torch.inference_mode():
        logits_sorted = torch.empty((sum(len(b) for b in batches), model.config.num_labels), dtype=torch.float32,
                                    device=device)
        start = 0
        for idx in batches:
            input_ids, mask = collate(ids, idx, pad_id, multiple, max_width=max_width, pin=pin)
            input_ids, mask = input_ids.to(device, non_blocking=True), mask.to(device, non_blocking=True)
            with autocast(device, dtype):
                logits = model(input_ids=input_ids, attention_mask=attention_mask_for(model, mask)).logits
            # copied (and cast to fp32) into a buffer of our own: CUDA graphs (compile mode reduce-overhead)
            # overwrite their output at the next call
            logits_sorted[start:start + len(idx)] = logits
            start += len(idx)
        return logits_sorted.cpu().numpy()


_POOLS: dict[int, ThreadPoolExecutor] = {}
_POOLS_LOCK = threading.Lock()
_LOADED = {"torch": False}  # whether this process loaded a classifier (torch's OpenMP threads then exist)


def _after_fork_in_child() -> None:
    """A forked child (multiprocessing's default on Linux) has none of its parent's threads. A stream pool it
    inherited would take tasks and never run them: forgotten, the child starts its own. And once the parent has
    run torch on several OpenMP threads (loading weights does), a parallel op in the child waits for them forever
    (GNU OpenMP is not fork-safe; plain torch does the same): the child runs torch on one thread, as torch's
    DataLoader workers do."""
    global _POOLS_LOCK
    _POOLS.clear()
    _POOLS_LOCK = threading.Lock()
    if _LOADED["torch"]:
        import torch

        torch.set_num_threads(1)


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)


def _stream_pool(streams: int) -> ThreadPoolExecutor:
    """One long-lived pool per stream count whose threads run torch on one intra-op thread each, so a call starts
    no threads and changes no thread count. torch's count is per thread, but ``set_num_threads`` also sets the
    default a thread copies at its first torch call: set in each pool thread as it starts, that default is put
    back once they all have, so threads started later (a web service's workers) keep the caller's count."""
    import torch

    with _POOLS_LOCK:
        if streams not in _POOLS:
            caller = torch.get_num_threads()
            pool = ThreadPoolExecutor(max_workers=streams, thread_name_prefix="koelectra-stream",
                                      initializer=_one_intra_op_thread)
            started = threading.Barrier(streams, timeout=60)
            list(pool.map(lambda _: started.wait(), range(streams)))  # one task per thread: all have started
            torch.set_num_threads(caller)
            _POOLS[streams] = pool
    return _POOLS[streams]


def _one_intra_op_thread() -> None:
    import torch

    # get first: a thread's first torch call copies the default count, and set_num_threads does not count as
    # that call, so a later first call would overwrite the 1 with the default put back in _stream_pool
    torch.get_num_threads()
    torch.set_num_threads(1)


def cpu_streams(model, device) -> int:
    """How many batches a torch model on a CPU scores at once: one per core torch may use, each on one thread.
    A small encoder's matmuls (the cpu-30min shape: 2 layers x 128) are too small to split well over cores;
    whole batches side by side keep every core busy (model-only, 10,000 nsmc3 dev reviews in one call on 2 cores:
    1.30x the rows/s of one batch at a time on 2 threads for the cpu-30min shape, 1.28x for cpu-30min-subword;
    1.08x in a second measurement of the same call, median of 3; benchmarks/bench_label.py times
    `label` with it). 1 on GPUs and for onnxruntime, which has its own pool."""
    import torch

    if device.type != "cpu" or not isinstance(model, torch.nn.Module):
        return 1
    return max(1, torch.get_num_threads())


def _resolve_backend(backend: str, quantize: bool) -> str:
    if backend not in ("auto", "torch", "onnx"):
        raise InputError(f"backend={backend}: choose torch, onnx or auto")
    if backend == "auto":
        from .onnx_backend import onnx_available

        return "onnx" if quantize and onnx_available() else "torch"
    return backend


def check_precision(precision: str, quantize: bool, backend: str) -> None:
    """A precision other than auto or fp32 where nothing would compute in it: int8 (``quantize``, either engine) and
    ONNX (the exported fp32 graph, on CPU and GPU alike) take no dtype (``load``), and bf16 or fp16 was ignored
    without a word, the output the same bytes as fp32's."""
    if precision in ("auto", "fp32") or not (quantize or backend == "onnx"):
        return
    if quantize:
        raise ConfigError(f"precision={precision} with quantize: int8 weights compute in int8 and fp32, whatever the "
                          f"precision; leave precision out (auto), or drop quantize to run in {precision}")
    raise ConfigError(f"precision={precision} with backend=onnx: onnxruntime runs the exported fp32 graph, whatever "
                      f"the precision; leave precision out (auto), or use backend=torch to run in {precision}")


def _int8_torch(model):
    """int8 Linear layers in torch: torchao's dynamic int8 when installed; else torch's own quantize_dynamic,
    deprecated (and removed in a later torch), with a warning that names the replacements."""
    import torch

    try:
        from torchao.quantization import Int8DynamicActivationInt8WeightConfig, quantize_
    except ImportError:
        import warnings

        from torch.ao.quantization import quantize_dynamic

        warnings.warn("quantize with backend=torch uses torch's deprecated quantize_dynamic: install torchao, or "
                      "use backend=onnx (pip install 'koelectra-kit[onnx]')", FutureWarning, stacklevel=3)
        with warnings.catch_warnings():
            # torch's own word for the deprecation just warned of, raised from inside quantize_dynamic (torch 2.13):
            # a second warning, with a site-packages path and a line of torch's source
            warnings.filterwarnings("ignore", message=r"torch\.quantize_per_tensor.* deprecated",
                                    category=UserWarning)
            return quantize_dynamic(model, {torch.nn.Linear}, dtype=torch.qint8)
    quantize_(model, Int8DynamicActivationInt8WeightConfig())
    return model


class Classifier:
    backend, quantized = "torch", False  # set by load: the engine the model runs on, int8 or not
    _weights_digest: str | None = None  # digest(), once computed

    def __init__(self, model, tok, labels: list[str], max_length: int, device, dtype, source: str = ""):
        self.model, self.tok, self.labels = model, tok, labels
        self.max_length, self.device, self.dtype, self.source = max_length, device, dtype, source

    @classmethod
    def load(cls, name_or_dir: str | Path, device: str = "auto", precision: str = "auto", quantize: bool = False,
             threads: int | None = None, max_length: int | None = None, backend: str = "auto") -> "Classifier":
        """A model dir written by ``koelectra-kit finetune`` or any Hugging Face sequence-classification model
        (local dir or hub id). ``backend``: torch, onnx (onnxruntime on the exported graph, see onnx_backend) or
        auto (onnx when quantizing and onnxruntime is installed, else torch). ``quantize``: int8 weights and
        dynamic activations, CPU only: onnxruntime's quantizer (onnx) or torchao (torch)."""
        check_precision_name(precision)  # before anything loads: a TF-IDF folder uses none, its members may
        kind = toolkit_kind(name_or_dir)
        if kind:  # the toolkit's own folders (classifier.json): their classes, found through the registry
            if quantize or backend == "onnx":
                raise InputError(f"{name_or_dir} is {'an' if kind[0] in 'aeiou' else 'a'} {kind} folder: --quantize and backend=onnx apply to fine-tuned "
                                 "encoders only")
            if device not in ("auto", "cpu"):  # checked as for an encoder (a TF-IDF folder uses none): device=banana
                resolve_device(device)  # was accepted, and a mistyped device passed unnoticed until an encoder came
            return load_kind(kind, name_or_dir, device=device, precision=precision, threads=threads,
                             max_length=max_length)
        import torch
        from transformers import AutoConfig, AutoModelForSequenceClassification

        from ..tokenizer import KoTokenizer
        from ..tokenizer.saving import check_model_vocab, tokenizer_files_hint

        if threads:
            torch.set_num_threads(threads)
        _LOADED["torch"] = True
        check_precision(precision, quantize, backend)
        name_or_dir = check_model_source(name_or_dir)
        dev = resolve_device(device)  # device=cuda without a GPU: said before the weights are read
        with loading(name_or_dir), quiet_transformers():
            config = AutoConfig.from_pretrained(name_or_dir, trust_remote_code=False)
            # fp32 whatever the file holds (a half-precision upload loads as it is by default): `precision`
            # decides the arithmetic, below
            model = AutoModelForSequenceClassification.from_pretrained(name_or_dir, trust_remote_code=False,
                                                                       dtype=torch.float32)
        try:
            tok = KoTokenizer.from_pretrained(name_or_dir)
        except InputError as e:
            raise InputError(f"{name_or_dir} has no usable tokenizer ({e}); {tokenizer_files_hint(name_or_dir)}"
                             ) from None
        check_model_vocab(tok, config, model.get_input_embeddings().num_embeddings, str(name_or_dir))
        labels = [config.id2label[i] for i in sorted(config.id2label)]
        kit = getattr(config, "koelectra_kit", None) or {}
        _check_recorded_labels(name_or_dir, labels, kit.get("labels"))
        max_length = max_length or int(kit.get("max_length", 0) or min(512, getattr(config,
                                                                                   "max_position_embeddings", 512)))
        model.eval().to(dev)
        dtype = autocast_dtype(dev, precision)
        if quantize and dev.type != "cpu":
            raise InputError("quantize works on CPU only (int8 dynamic quantization); drop --quantize or use "
                             "--device cpu")
        backend = _resolve_backend(backend, quantize)
        if backend == "onnx":
            from .onnx_backend import load_onnx

            model, dtype = load_onnx(model, str(name_or_dir), dev, quantize=quantize, threads=threads), None
        elif quantize:
            model, dtype = _int8_torch(model), None  # bf16 autocast does not mix with int8 kernels
        elif dtype == torch.bfloat16:
            # Inference only: bf16 weights instead of bf16 autocast. Autocast re-casts every weight on every call,
            # a large share of a small model's time (the cpu-30min shape); with bf16 weights `label` went from
            # 3.1x to 4.1x transformers' pipeline in benchmarks/bench_label.py, at the same dev accuracy. On a GPU
            # the same saves a cast kernel per weight per batch. (fp16, older GPUs: autocast, which keeps the
            # softmax and LayerNorm in fp32, since fp16's range is narrow.)
            model, dtype = model.to(torch.bfloat16), None
        clf = cls(model, tok, labels, max_length, dev, dtype, str(name_or_dir))
        clf.backend, clf.quantized = backend, bool(quantize)
        return clf

    def predict(self, texts, batch_size: int | None = None, group: int | None = None, overlap: bool | None = None,
                normalized: bool = False) -> Predictions:
        """Labels and probabilities for ``texts`` (any sequence of str), in order. None, NaN and values that hold no
        text (a dict, a list, bytes that are not UTF-8) are scored as the empty text is; ``label_dataframe`` and
        ``label`` give such rows no label (status ``empty``, or ``error: ...`` with the reason).
        ``batch_size``: texts per model call (None: ``default_batch_size``, 128 on a CPU, 256 on a GPU).
        ``normalized``: the texts are ``self.tok.normalize``'s output already (skips normalizing them again).
        ``overlap``: tokenize the next group in a thread while the model runs (default: on GPUs only; on a CPU,
        Kiwi's workers and torch's OpenMP threads would fight over the same cores). ``group``: texts tokenized,
        then sorted by length and scored, at a time (default 2048 when overlapping; else 20,000, a label chunk:
        sorting more texts at once pads less, 1.12x label's rows/s over 2048 on nsmc3 dev with the cpu-30min
        shape, and 20,000 texts' ids are a few tens of MB)."""
        import torch

        texts = predict_args(texts, batch_size)
        batch_size = batch_size or default_batch_size(self.device)
        n = len(texts)
        k = len(self.labels)
        probs = np.zeros((n, k), dtype=np.float32)
        truncated: list[bool] = []
        if overlap is None:
            overlap = self.device.type != "cpu"
        group = group or (2048 if overlap else 20000)
        groups = [(s, texts[s:s + group]) for s in range(0, n, group)]
        streams = cpu_streams(self.model, self.device)

        def encode(chunk):
            return self.tok.encode_batch(chunk, max_length=self.max_length, truncation=True, return_offsets=False,
                                         return_attention_mask=False, normalized=normalized)

        def encoded():
            if not overlap:
                yield from (encode(chunk) for _, chunk in groups)
                return
            with ThreadPoolExecutor(max_workers=1) as pool:  # Kiwi releases the GIL while the model runs
                pending = [pool.submit(encode, chunk) for _, chunk in groups[:1]]
                for gi in range(len(groups)):
                    if gi + 1 < len(groups):
                        pending.append(pool.submit(encode, groups[gi + 1][1]))
                    yield pending.pop(0).result()

        for (start, _), enc in zip(groups, encoded()):
            logits = predict_logits(self.model, enc["input_ids"], pad_id=self.tok.pad_token_id,
                                    device=self.device, dtype=self.dtype, batch_size=batch_size, streams=streams,
                                    multiple=pad_multiple(self.device), max_width=self.max_length)
            probs[start:start + len(logits)] = torch.softmax(torch.from_numpy(logits), dim=-1).numpy()
            truncated.extend(enc["truncated"])
        labels = [self.labels[i] for i in probs.argmax(axis=1)] if n else []
        return Predictions(labels, probs, truncated, list(self.labels))

    def digest(self) -> str:
        """``model_digest``'s hash of the weights, once per loaded classifier: its weights never change after loading
        (inference only; retraining loads a new one), and hashing them cost every file labelled with it ~55 ms for a
        12 x 256 model on a CPU (on a GPU each tensor is copied back to the host first). A method, so that the
        digest is kept here when the call comes through a wrapper that forwards reads only: the app's file jobs each
        pin a SharedClassifier, on which a digest stored by ``model_digest`` was lost with the job."""
        if self._weights_digest is None:
            self._weights_digest = _hash_weights(self)
        return self._weights_digest

    def __repr__(self) -> str:
        return (f"Classifier({self.source!r}, labels={self.labels}, max_length={self.max_length}, "
                f"device={self.device}, dtype={self.dtype}, backend={getattr(self, 'backend', 'torch')}"
                f"{', int8' if getattr(self, 'quantized', False) else ''})")


def _check_recorded_labels(source, labels: list[str], recorded) -> None:
    """A folder fine-tuned here records its labels twice in config.json: ``id2label``, which names the head's rows,
    and ``koelectra_kit.labels``, the toolkit's own record. A hand-edited ``id2label`` would name every row wrong, so
    the two must agree; a model from elsewhere (a hub model) has no record and loads as before."""
    if isinstance(recorded, list) and [str(x) for x in recorded] != labels:
        raise InputError(f"{source}/config.json: id2label lists {labels} but the model was fine-tuned with "
                         f"{[str(x) for x in recorded]} (koelectra_kit.labels; names and order must match); put "
                         "id2label back or fine-tune again")


def head_labels(model_dir: str | Path) -> list[str] | None:
    """The labels a local model folder's trained head answers in, read from its files without loading it: a TF-IDF or
    ensemble folder's classifier.json, a ...ForSequenceClassification's config.json id2label. [] where config.json
    names transformers' placeholders (LABEL_0, LABEL_1, ...; none at all reads as those): a pretraining
    discriminator or a bare encoder, no trained head. None where the files can't tell (a hub id, a config.json that
    can't be read, an architecture that is no classifier's): loading the model decides."""
    path = Path(os.path.expanduser(str(model_dir)))
    if not path.is_dir():
        return None
    if toolkit_kind(path):
        from .registry import read_manifest

        return [str(name) for name in read_manifest(path).get("labels") or []] or None
    try:
        config = json.loads((path / "config.json").read_text(encoding="utf-8"))
        names = [str(v) for _, v in sorted((config.get("id2label") or {}).items(), key=lambda kv: int(kv[0]))]
        archs = " ".join(config.get("architectures") or [])
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    if not names or placeholder_labels(names):
        return []
    return names if "ForSequenceClassification" in archs else None


def model_info(model_dir: str | Path) -> dict:
    """The training summary a fine-tuned dir carries (eval.json), for reports; {} when absent."""
    p = Path(model_dir) / "eval.json"
    return json.loads(p.read_text(encoding="utf-8")) if p.exists() else {}


def model_digest(clf) -> str:
    """A digest of the weights as loaded (and whether they were quantized): two folders with the same weights
    agree, a retrained model does not. What ``label --resume`` compares; here, beside the loaders, so that an
    ensemble digests its members without importing the labeller."""
    # every kind has its own: a TF-IDF or ensemble folder's of what it computes with (and no torch import: 3.5 s of a
    # TF-IDF file job's first run went to it, issue 41), a fine-tuned model's of its weights, hashed once
    return clf.digest() if hasattr(clf, "digest") else _hash_weights(clf)


def _hash_weights(clf) -> str:
    import torch

    # the engine too (onnx logits differ from torch's in the 4th decimal): a resume must not mix the two in one
    # file; a torch run hashes as before backends existed, so its records still resume
    backend = getattr(clf, "backend", "torch")
    engine = "" if backend == "torch" else f";backend={backend}"
    h = hashlib.sha256(f"quantized={getattr(clf, 'quantized', False)}{engine}".encode())
    for name, value in clf.model.state_dict().items():
        if torch.is_tensor(value) and not value.is_quantized:
            h.update(name.encode())
            h.update(value.detach().to("cpu", torch.float32).contiguous().numpy().tobytes())
    return h.hexdigest()[:24]
