"""Labelling speed against transformers' pipeline, quantization accuracy, repeated texts, and memory on a 1M-row
file.

    python benchmarks/bench_label.py --model runs/experiments/recipe/ft-cpu30-s1 [--rows 20000] [--dup-rows 20000]
        [--big-rows 1000000]

One run, one machine:
(a) ``transformers.pipeline("text-classification")`` on the same model, fed the tokenizer's pre-split text
    (so it gets the same ids), batch size 32 (pre-splitting is done beforehand and NOT counted for it);
(a+) the same pipeline with the pre-split timed: the whole job from raw reviews, as a pipeline user runs it;
(b) ``koelectra-kit label`` with default settings (pre-split included in its time), and (c) with --quantize;
rows/s and ratios; quantized vs unquantized accuracy on nsmc3 dev;
(d) repeated texts: a --dup-rows file with the duplicate rate of real app reviews (24% of the rows of a public
    crawl of Korean app-store reviews repeat an earlier text exactly: "굿", "좋아요", "최고"), made from nsmc3 dev by
    repeating its texts (short ones most, as in app stores), labelled with --no-dedupe, with deduplication (the
    default) and with --backend onnx where the classifier has that backend; the outputs must be identical;
peak RSS of ``koelectra-kit label`` on a generated --big-rows CSV (a subprocess, its VmHWM);
(e) with --models OLD NEW: the nsmc3 dev accuracy and macro-F1 of two fine-tuned classifiers side by side.

The word-level pre-split (issue 31), speed on random weights of the cpu-30min-subword shape, no fine-tuned model
needed (--tokenizer: an 8,000 WordPiece tokenizer folder; its pre-split mode is rewritten to --presplit):

    python benchmarks/bench_label.py --shape cpu-30min-subword --tokenizer TOK8K --presplit kiwi_word
        [--model NEW_CLF --models OLD_CLF NEW_CLF]

A kiwi_word tokenizer's word cache is emptied before every timed `label` run (as a fresh process starts); the
pipeline's pre-split, untimed, does not count either way. More rows say what the cache can and cannot do: `label`
with the words cached (a second file in one process, the app); a fresh process that finds the words of an earlier
run in the word file (tokenizer/wordfile.py: it reads the file, then labels); and the cold bound: Kiwi on the file's
distinct words once each plus the warm run, the least a fresh process with no word file must spend (Kiwi's workers
and the model each use every core).

On a GPU (or any --device): (a) the pipeline on that device, fp32 as it loads, batch 32, and its best batch of
--pipeline-batches, fp32 and bf16 (chosen on the first --sweep-rows rows, one run each; the turns time all --rows);
(b) `label`'s in-process path on that device (the model loaded once, as the app and a long file see it; and loaded
in each run, as the command), at the precision it really runs (bf16 weights where Classifier.load converts them);
then one more run of `label` (not in the ratios) timed in parts: tokenizing, the model, and the rest (read, check,
dedupe, write), to say where its time goes. No Kiwi and no fine-tuned model are needed: a
random-init classifier of --shape, with --tokenizer's vocabulary or, without one, an 8,000 WordPiece vocabulary
trained here on the rows' texts with presplit=none (--presplit rewrites a given tokenizer's mode):

    python benchmarks/bench_label.py --device cuda --shape issue39-6x256 [--tokenizer TOK --presplit none] \
        [--rows 50000] [--json label_gpu.json]

The pre-split is Kiwi's for a subword vocabulary; a character vocabulary (the cpu-30min preset) gets the same ids
without Kiwi for every text made of characters it knows (KoTokenizer.needs_kiwi), so Kiwi runs only on the rest:
the figures say how many texts that was and how fast Kiwi on every text would be.
"""
from __future__ import annotations

import argparse
import csv
import json
import os
import random
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from common import (NSMC_DEV, ROOT, Parser, check_classifiers, check_model_options, input_errors,  # noqa: E402
                    interleaved, median, non_negative_int, output_file, positive_int,
                    shape_file)  # (benchmarks/common.py)
DEV = NSMC_DEV


def random_model_like(model_dir: str | None, shape: str, out: Path, tokenizer: str | None = None,
                      presplit: str | None = None, labels: list[str] | None = None,
                      max_length: int | None = None) -> str:
    """A random-init classifier of a preset's shape (or a benchmark shape: ``common.shape_file``; its ``base:`` chain
    followed) with ``model_dir``'s tokenizer and labels: labelling speed does not depend on the weights, only on the
    shape.
    ``tokenizer``: another tokenizer folder instead (e.g. an 8,000 WordPiece one for cpu-30min-subword's shape);
    ``labels`` when there is no ``model_dir``. ``presplit``: the tokenizer's pre-split mode rewritten (kiwi |
    kiwi_word | none; the same vocabulary, so only the pre-split differs: a model's ids from the other mode are
    meaningless, which random weights do not mind; rewritten before the tokenizer is loaded, so a ``none`` needs no
    Kiwi, and with ``none`` the unknown-character fallback off: a subword preset's vocabulary, whose fallback
    rewrites Kiwi's pieces, refused to load). ``max_length``: recorded as the classifier's (`label` truncates there;
    default its 512 positions)."""
    import shutil

    from transformers import AutoConfig, ElectraConfig, ElectraForSequenceClassification

    from koelectra_kit.config import read_yaml
    from koelectra_kit.tokenizer import KoTokenizer

    tok_dir = Path(tokenizer or model_dir)
    m = read_yaml(shape_file(shape))["model"]
    if model_dir:
        src = AutoConfig.from_pretrained(model_dir)
        label_args = {"num_labels": src.num_labels, "id2label": src.id2label, "label2id": src.label2id}
    else:
        label_args = {"num_labels": len(labels), "id2label": dict(enumerate(labels)),
                      "label2id": {x: i for i, x in enumerate(labels)}}
    out.mkdir(parents=True, exist_ok=True)
    for f in tok_dir.iterdir():
        if "token" in f.name or f.name == "vocab.txt":
            shutil.copy(f, out / f.name)
    if presplit:
        settings = out / "koelectra_tokenizer.json"
        s = json.loads(settings.read_text(encoding="utf-8"))
        s["presplit"] = presplit
        if presplit == "none":  # the unknown-character fallback rewrites Kiwi's pieces: there are none to rewrite
            s["fallback"] = "none"
        settings.write_text(json.dumps(s, ensure_ascii=False, indent=2), encoding="utf-8")
    cfg = ElectraConfig(vocab_size=KoTokenizer.from_pretrained(out).vocab_size, hidden_size=m["hidden_size"],
                        num_hidden_layers=m["num_layers"], num_attention_heads=m["num_heads"],
                        intermediate_size=m["intermediate_size"], embedding_size=m["embedding_size"],
                        max_position_embeddings=512, pad_token_id=0, **label_args)
    if model_dir and getattr(src, "koelectra_kit", None):
        cfg.koelectra_kit = src.koelectra_kit
    else:
        cfg.koelectra_kit = {"task": "text-classification", "labels": list(label_args["label2id"])}
    if max_length:
        cfg.koelectra_kit = {**cfg.koelectra_kit, "max_length": max_length}
    ElectraForSequenceClassification(cfg).save_pretrained(out)
    return str(out)


def timed_model(args, dev, out: Path) -> str:
    """The classifier whose speed is measured: --model, or with --shape a random-init one of that shape (with
    --tokenizer's or --model's tokenizer, --presplit's mode)."""
    if not args.shape:
        return args.model
    labels = sorted(set(dev["label"].astype(str)))
    return random_model_like(args.model, args.shape, out, tokenizer=args.tokenizer, presplit=args.presplit,
                             labels=labels)


def cold_word_cache(tok) -> None:
    """A kiwi_word tokenizer's word cache emptied (it is per process, see tokenizer/wordsplit.py): each timed
    `label` run starts as a fresh process would, not with the words an earlier round left."""
    if tok.presplit == "kiwi_word":
        from koelectra_kit.tokenizer import wordsplit

        wordsplit.word_cache(0).clear()


def side_by_side(dev, models: list[str], tmp: Path) -> None:
    """(e) nsmc3 dev accuracy and macro-F1 of fine-tuned classifiers side by side (e.g. the same preset pretrained
    with the kiwi and the kiwi_word pre-split), each labelling dev with `label`'s defaults."""
    from koelectra_kit.label import label_file
    from koelectra_kit.classify.metrics import classification_report
    from koelectra_kit.tokenizer import KoTokenizer

    src = tmp / "dev.csv"
    dev[["id", "document", "label"]].to_csv(src, index=False)
    labels = sorted(set(dev["label"].astype(str)))
    print(f"\n(e) nsmc3 dev ({len(dev):,} rows), each model labelling it with `label`'s defaults:")
    print(f"{'model':<60}{'pre-split':>11}{'accuracy':>10}{'macro-F1':>10}")
    for i, m in enumerate(models):
        label_file(m, src, tmp / f"side{i}.csv", "document", progress=False, overwrite=True)
        o = pd_read(tmp / f"side{i}.csv")  # the input's own "label" column kept, the prediction in pred_label
        r = classification_report([labels.index(x) for x in o["label"]], [labels.index(x) for x in o["pred_label"]],
                                  labels)
        print(f"{m[-60:]:<60}{KoTokenizer.from_pretrained(m).presplit:>11}{r['accuracy']:>10.4f}{r['macro_f1']:>10.4f}")


def hf_pipeline(model_dir: str, device=-1, dtype=None):
    """(a): transformers' pipeline on tokenizer.json alone (fed pre-split text): the plain fast tokenizer, no
    koelectra class. ``device``: where it runs (-1: the CPU); ``dtype``: the weights' dtype (None: fp32, as they
    load). A function that calls the pipeline in its own process's environment (``in_pipeline_env``)."""
    from transformers import AutoModelForSequenceClassification, PreTrainedTokenizerFast, pipeline

    hf_tok = PreTrainedTokenizerFast(tokenizer_file=str(Path(model_dir) / "tokenizer.json"), unk_token="[UNK]",
                                     pad_token="[PAD]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]")
    model = AutoModelForSequenceClassification.from_pretrained(model_dir, **({"dtype": dtype} if dtype else {}))
    pipe = pipeline("text-classification", model=model, tokenizer=hf_tok, device=device, truncation=True,
                    max_length=128)
    return lambda *args, **kwargs: in_pipeline_env(pipe, *args, **kwargs)


def in_pipeline_env(pipe, *args, **kwargs):
    """``pipe(*args, **kwargs)`` with TOKENIZERS_PARALLELISM as a pipeline's process has it, then put back. The first
    call of a pipeline sets it to "false" for the whole process when it is unset (its DataLoader and tokenizers'
    threads would share the cores), and tokenizers reads it on every call: left set, every `label` run after the
    first pipeline call encoded on one core, which a `label` process (no pipeline in it) never does. On 4,000
    rows of the tiny shape on 2 cores, label with the leak ran at 0.83x the rows/s it has with the variable put
    back (two runs minutes apart; docs/benchmarks.md)."""
    before = os.environ.get("TOKENIZERS_PARALLELISM")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")  # what the pipeline would set (a user's value is kept)
    try:
        return pipe(*args, **kwargs)
    finally:
        if before is None:
            os.environ.pop("TOKENIZERS_PARALLELISM", None)
        else:
            os.environ["TOKENIZERS_PARALLELISM"] = before


def bench_tokenizer(texts: list[str], out: Path) -> str:
    """An 8,000 WordPiece vocabulary trained on ``texts`` with presplit=none (no Kiwi; seconds): the device
    comparison's tokenizer when no --tokenizer or --model gives one."""
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    corpus = out.parent / "bench_tokenizer_corpus.txt"
    corpus.write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n", encoding="utf-8")
    train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(out), vocab_size=8000, presplit="none",
                                    progress=False))
    return str(out)


def device_compare(args, dev, tmp: Path, device) -> dict:
    """(a) transformers' pipeline vs (b) `label`'s in-process path, both on ``device``, rows/s, in turns; no Kiwi
    (with a presplit=none tokenizer) and no fine-tuned model (random weights of --shape). The pipeline's batch sweep
    runs on the first --sweep-rows rows (it only picks the best batch and precision); the turns on all --rows."""
    import pandas as pd
    import torch

    from transformers.utils import logging as hf_logging

    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.label import label_file
    from koelectra_kit.label.config import LabelConfig
    from koelectra_kit.tokenizer import KoTokenizer

    hf_logging.disable_progress_bar()  # transformers' "Loading weights" bars between the rows
    reps = -(-args.rows // len(dev))
    data = pd.concat([dev] * reps, ignore_index=True).iloc[:args.rows]
    src = tmp / "reviews.csv"
    data[["id", "document", "label"]].to_csv(src, index=False)
    texts = data["document"].tolist()
    if args.shape:
        tokenizer = args.tokenizer or (None if args.model else bench_tokenizer(dev["document"].tolist(),
                                                                              tmp / "bench-tokenizer"))
        model_dir = random_model_like(args.model, args.shape, tmp / f"random-{args.shape}", tokenizer=tokenizer,
                                      presplit=args.presplit, labels=sorted(set(dev["label"].astype(str))),
                                      max_length=128)
    else:
        model_dir = args.model
    tok = KoTokenizer.from_pretrained(model_dir)
    device_name = (torch.cuda.get_device_name(device) if device.type == "cuda"
                   else f"CPU, {torch.get_num_threads()} threads")
    repeated = len(data) - len(set(texts))  # answered once by label (dedupe), every time by the pipeline
    print(f"{len(data):,} reviews from nsmc3/dev ({repeated:,} repeat an earlier text); {device_name}; "
          f"torch {torch.__version__}; median of {args.rounds} rounds in turns")
    print(f"model: {model_dir if not args.shape else f'random-init {args.shape} shape'}, vocab {tok.vocab_size}, "
          f"pre-split {tok.presplit}{' (Kiwi untimed for the pipeline)' if tok.needs_kiwi('가') else ''}")
    presplit = tok.presplit_batch(texts)  # the pipeline's input (not timed): for presplit none the normalized text
    sync = (lambda: torch.cuda.synchronize(device)) if device.type == "cuda" else (lambda: None)

    # (a) a quick sweep of the pipeline's batch sizes, fp32 and bf16, on the first --sweep-rows rows: one timed
    # call each after a warm one; its best goes into the turns below (all --rows) beside fp32 batch 32, the pipeline
    # as it loads. The sweep only picks; on all rows it labelled the file 8 times before the turns began.
    pipes = {"fp32": hf_pipeline(model_dir, device), "bf16": hf_pipeline(model_dir, device, torch.bfloat16)}
    sample = presplit[:min(args.sweep_rows, len(presplit))]
    sweep = {}
    for kind, pipe in pipes.items():
        for bs in args.pipeline_batches:
            pipe(sample[:4 * bs], batch_size=bs)
            sync()
            t = time.perf_counter()
            pipe(sample, batch_size=bs)
            sync()
            sweep[(kind, bs)] = len(sample) / (time.perf_counter() - t)
    best_kind, best_bs = max(sweep, key=sweep.get)
    print(f"pipeline sweep on the first {len(sample):,} rows (one run each, rows/s): "
          + ", ".join(f"{k} batch {b}: {r:,.0f}" for (k, b), r in sweep.items()))
    outs: dict[str, list] = {}

    def pipeline_run(kind, bs):
        def run():
            outs[f"{kind}-{bs}"] = pipe_out = pipes[kind](presplit, batch_size=bs)
            sync()
            return pipe_out
        return run

    clf = Classifier.load(model_dir, device=str(device), max_length=128)
    label_dtype, label_how = label_precision(clf)
    competitors = {"(a) transformers pipeline, fp32, batch 32": pipeline_run("fp32", 32)}
    if (best_kind, best_bs) != ("fp32", 32):
        competitors[f"(a*) transformers pipeline, {best_kind}, batch {best_bs} (its best)"] = \
            pipeline_run(best_kind, best_bs)

    def labeller(key, **opts):
        def run():
            label_file(model_dir, src, tmp / f"{key}.csv", "document", progress=False, overwrite=True, **opts)
            sync()
        return run
    competitors["(b) koelectra-kit label, model loaded once"] = labeller("label", classifier=clf)
    competitors["(b) koelectra-kit label --no-dedupe, model loaded once"] = labeller("label-nodedupe", classifier=clf,
                                                                                      dedupe=False)
    competitors["(b) koelectra-kit label, loading the model each run"] = labeller("label-load", device=str(device))
    runs = interleaved(competitors, rounds=args.rounds, warmup=1)
    n = len(data)
    t_a = median(runs["(a) transformers pipeline, fp32, batch 32"])
    t_best = min(median(ts) for name, ts in runs.items() if name.startswith("(a"))
    print()
    print(f"{'method':<62}{'rows/s':>10}{'vs (a)':>9}{'vs best (a)':>13}")
    rows = {}
    for name, ts in runs.items():
        t = median(ts)
        rows[name] = {"rows_per_s": n / t, "vs_a": t_a / t, "vs_best_pipeline": t_best / t, "seconds": ts}
        print(f"{name:<62}{n / t:>10,.0f}{t_a / t:>8.2f}x{t_best / t:>12.2f}x")
    got = pd_read(tmp / "label.csv")["pred_label"]
    agree = (pd.Series([o["label"] for o in outs["fp32-32"]]) == got).mean()
    print(f"({'random weights: ' if args.shape else ''}the pipeline's fp32 labels agree with label's ({label_how}) "
          f"on {agree:.2%} of rows; near-ties flip with the precision)")
    parts = label_parts(clf, src, tmp / "label-parts.csv", sync)
    parts["timed_median"] = median(runs["(b) koelectra-kit label, model loaded once"])
    print("label's parts (one more run, model loaded once, tokenizing not overlapped, seconds): tokenize "
          "{tokenize:.3f}, model {model:.3f}, the rest {rest:.3f} (read, check, dedupe, write); total {total:.3f} "
          "(the timed run's median {timed_median:.3f})".format(**parts))
    # judged against the pipeline at its best batch and precision: the baseline a careful pipeline user gets; and on
    # the same work: where the file repeats texts (more --rows than nsmc3 dev has), label answers each text once and
    # the pipeline every row, so the --no-dedupe run is the one judged
    judged = ("(b) koelectra-kit label --no-dedupe, model loaded once" if repeated else
              "(b) koelectra-kit label, model loaded once")
    ours = rows[judged]
    ratio, ratio_32 = ours["vs_best_pipeline"], ours["vs_a"]
    print(f"acceptance: label{' --no-dedupe (the file repeats texts)' if repeated else ''} {ratio:.2f}x "
          f"transformers' pipeline at its best ({best_kind}, batch {best_bs}; {ratio_32:.2f}x its fp32 batch 32) on "
          f"{device} (bar 2x): {'met' if ratio >= 2 else 'NOT met'}"
          f"{'' if device.type == 'cuda' else ' (the bar is for a GPU)'}")
    return {"device": str(device), "device_name": device_name, "torch": torch.__version__, "rows": n,
            "repeated_rows": repeated, "shape": args.shape, "vocab": tok.vocab_size,
            "presplit": tok.presplit, "label_dtype": label_dtype, "label_precision": label_how,
            "label_batch_size": LabelConfig.batch_size, "sweep_rows": len(sample),
            "pipeline_sweep": {f"{k} batch {b}": r for (k, b), r in sweep.items()}, "methods": rows,
            "label_parts": parts,
            "agreement": agree, "acceptance": {"ratio": ratio, "judged": judged,
                                               "against": f"pipeline {best_kind} batch {best_bs}",
                                               "ratio_fp32_batch32": ratio_32, "bar": 2.0, "met": ratio >= 2}}


def label_precision(clf) -> tuple[str, str]:
    """What `label` with ``clf`` computes in: its autocast dtype where it has one, else its weights' dtype
    (Classifier.load turns bf16 into bf16 weights and autocast off), else fp32 (onnx, int8). (short name, phrase)"""
    import torch

    short = {torch.bfloat16: "bf16", torch.float16: "fp16", torch.float32: "fp32"}
    if clf.dtype is not None:
        name = short.get(clf.dtype, str(clf.dtype).replace("torch.", ""))
        return name, f"{name} autocast"
    weights = next(iter(clf.model.parameters()), None) if isinstance(clf.model, torch.nn.Module) else None
    if weights is not None and weights.dtype != torch.float32:
        name = short.get(weights.dtype, str(weights.dtype).replace("torch.", ""))
        return name, f"{name} weights"
    return "fp32", "fp32"


def label_parts(clf, src: Path, out: Path, sync) -> dict:
    """One `label_file` run on ``src`` with ``clf``, through Classifier.predict itself with overlap=False (its
    tokenizing and its model take turns), the two calls it makes timed: the tokenizer's encode_batch and
    classifier.predict_logits (the device synchronized before the clock stops). The rest of the run's time (read,
    check, normalize and dedupe, write) is the total less those. Seconds. Both are wrapped for this run only."""
    import copy
    from functools import partial

    from koelectra_kit.classify import classifier
    from koelectra_kit.label import label_file

    spent = {"tokenize": 0.0, "model": 0.0}

    def timed(fn, part, after=lambda: None):
        def call(*args, **kwargs):
            t = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                after()
                spent[part] += time.perf_counter() - t
        return call

    run = copy.copy(clf)
    run.predict = partial(classifier.Classifier.predict, run, overlap=False)
    real = classifier.predict_logits
    clf.tok.encode_batch = timed(clf.tok.encode_batch, "tokenize")  # an instance attribute, deleted below
    classifier.predict_logits = timed(real, "model", sync)
    try:
        t = time.perf_counter()
        label_file(clf.source, src, out, "document", progress=False, overwrite=True, classifier=run)
        sync()
        total = time.perf_counter() - t
    finally:
        classifier.predict_logits = real
        del clf.tok.encode_batch
    return {**spent, "rest": total - spent["tokenize"] - spent["model"], "total": total}


def compare(args, dev, tmp: Path) -> None:
    """(a) pipeline vs (b) label vs (c) label --quantize on --rows reviews; accuracies on nsmc3 dev."""
    import pandas as pd
    import torch

    from koelectra_kit.label import label_file
    from koelectra_kit.tokenizer import KoTokenizer, kiwi_instance, presplit_texts, wordfile, wordsplit

    reps = -(-args.rows // len(dev))
    data = pd.concat([dev] * reps, ignore_index=True).iloc[:args.rows]
    src = tmp / "reviews.csv"
    data[["id", "document", "label"]].to_csv(src, index=False)
    print(f"{len(data):,} reviews from nsmc3/dev; torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {args.rounds} rounds in turns")

    model_dir = timed_model(args, dev, tmp / f"random-{args.shape}")
    if args.shape:
        print(f"speed measured on a random-init classifier of the {args.shape} preset's shape "
              f"(configs/pretrain/{args.shape}.yaml) with {args.tokenizer or args.model}'s tokenizer"
              f"{', pre-split ' + args.presplit if args.presplit else ''}; accuracy on {args.model or '(none)'}")
    # (a) transformers pipeline on pre-split text
    tok = KoTokenizer.from_pretrained(model_dir)
    texts = data["document"].tolist()
    tok.presplit_batch(texts[:256])  # load Kiwi (the all-cores instance: > 64 texts) and, kiwi_word, the word file
    # ... which may hold all of those words, and then Kiwi is not loaded (a fresh process whose words are all in the
    # file never loads it): load it here, untimed, as the timed runs below find it loaded
    list(kiwi_instance(tok.num_workers).tokenize(texts[:256]))
    cold_word_cache(tok)  # the pipeline user's pre-split, cold like `label`'s
    t0 = time.perf_counter()
    presplit = tok.presplit_batch(texts)
    t_split = time.perf_counter() - t0
    kiwi_texts = sum(tok.needs_kiwi(tok.normalize(t)) for t in texts)
    for _ in presplit_texts(tok.normalize(t) for t in texts[:256]):  # a character vocabulary had not loaded Kiwi
        pass
    t0 = time.perf_counter()
    for _ in presplit_texts(tok.normalize(t) for t in texts):
        pass
    t_kiwi = time.perf_counter() - t0
    pipe = hf_pipeline(model_dir)
    pipe(presplit[:64], batch_size=32)  # warm
    pipe_out = []

    # (b), (c) koelectra-kit label, each engine; the same file, the same options otherwise
    methods = [("label", {}), ("label --backend onnx", {"backend": "onnx"}),
               ("label --quantize (onnxruntime int8)", {"quantize": True}),
               ("label --quantize --backend torch (torch int8)", {"quantize": True, "backend": "torch"})]
    for i, (name, opts) in enumerate(methods):
        label_file(model_dir, src, tmp / f"warm{i}.csv", "document", progress=False, **opts)  # export, load

    def labeller(i, opts):
        def run():
            cold_word_cache(tok)
            label_file(model_dir, src, tmp / f"out{i}.csv", "document", progress=False, overwrite=True, **opts)
        return run
    # in turns (pipeline, each engine, pipeline, ...), the median of --rounds: single timings on this shared
    # machine wobble by 10-15%, more than the differences being measured
    def pipeline_run():
        pipe_out[:] = pipe(presplit, batch_size=32)  # kept for the agreement line below

    competitors = {"pipe": pipeline_run, **{name: labeller(i, opts) for i, (name, opts) in enumerate(methods)}}
    if tok.presplit == "kiwi_word":  # the same, its word cache kept from the run before: Kiwi almost out of the way,
        # so this is what the model side allows (a second file in one process, the app)
        competitors["label, word cache warm"] = lambda: label_file(model_dir, src, tmp / "out-warm.csv", "document",
                                                                   progress=False, overwrite=True)
        if wordfile.enabled():  # a fresh process after an earlier run on this file: the word file, then label
            wordfile.save(wordsplit.word_cache(0))  # (the warm-up runs' words, written as a process's exit writes)

            def from_file():
                cold_word_cache(tok)
                wordfile.forget()
                label_file(model_dir, src, tmp / "out-file.csv", "document", progress=False, overwrite=True)
            competitors["label, a fresh process with the word file"] = from_file
        # what a cold cache must send to Kiwi at the least: the file's distinct words, once each, in one batched call
        # on all cores (wordsplit.analyse's call); with the warm run, the bound on a cold `label` (see the note below)
        words = list(dict.fromkeys(w for t in texts for w in tok.normalize(t).split()))
        kiwi_all = kiwi_instance(None)
        competitors["kiwi words"] = lambda: sum(1 for _ in kiwi_all.tokenize(words))
    runs = interleaved(competitors, rounds=args.rounds, warmup=0)
    t_pipe = median(runs.pop("pipe"))
    t_words = median(runs.pop("kiwi words")) if "kiwi words" in runs else None
    timings = {name: median(ts) for name, ts in runs.items()}
    if model_dir != args.model and args.model:  # accuracy needs the trained model: label dev with it, every way
        for i, (_, opts) in enumerate(methods):
            label_file(args.model, src, tmp / f"out{i}.csv", "document", progress=False, overwrite=True, **opts)
        pipe_out = None
    n = len(data)
    print()
    print(f"{'method':<58}{'rows/s':>10}{'vs (a)':>9}{'vs (a+)':>9}")
    print(f"{'(a) transformers pipeline, batch 32 (pre-split not timed)':<58}{n / t_pipe:>10,.0f}{1.0:>8.2f}x")
    # (a+): the same job from raw reviews: the pipeline's tokenizer.json expects pre-split text, so a user of the
    # pipeline runs the pre-split first (our presplit_batch, all cores), then the pipeline
    e2e = t_split + t_pipe
    print(f"{'(a+) pre-split (timed) + transformers pipeline':<58}{n / e2e:>10,.0f}{t_pipe / e2e:>8.2f}x"
          f"{1.0:>8.2f}x")
    for name, t in timings.items():
        print(f"{'koelectra-kit ' + name:<58}{n / t:>10,.0f}{t_pipe / t:>8.2f}x{e2e / t:>8.2f}x")
    print(f"(pre-split alone: {n / t_split:,.0f} rows/s, Kiwi run on {kiwi_texts:,} of {n:,} texts"
          f"{': a character vocabulary needs it only for characters it lacks' if not tok.needs_kiwi('') else ''};"
          f"\n Kiwi on every text: {n / t_kiwi:,.0f} rows/s, the ceiling for a subword vocabulary; "
          f"{n - len(set(texts)):,} rows repeat an earlier text)")
    if tok.presplit == "kiwi_word":
        print(" kiwi_word: the word cache emptied before every timed `label` run, as a fresh process starts, but the "
              "warm one")
        bound = t_words + timings["label, word cache warm"]
        print(f"cold bound: Kiwi on the file's {len(words):,} distinct words once each, all cores ({t_words:.2f}s), "
              f"then `label` with them cached ({timings['label, word cache warm']:.2f}s): {n / bound:,.0f} rows/s, "
              f"{t_pipe / bound:.2f}x (a); Kiwi's workers and the model each fill every core, so a cold `label` "
              "cannot overlap them to beat it")
    if not args.model:
        print("\n(no --model: no accuracy, the weights are random)")
        return

    # accuracy of every engine on nsmc3 dev labels, and agreement with the default
    outs = [pd.read_csv(tmp / f"out{i}.csv", dtype=str, keep_default_na=False, encoding="utf-8-sig")
            for i in range(len(methods))]
    m = min(len(dev), n)
    base = outs[0]["pred_label"]  # the input's own "label" column -> pred_*
    acc0 = (base[:m] == outs[0]["label"][:m]).mean()
    print(f"\nnsmc3 dev accuracy ({m:,} rows):")
    for (name, _), o in zip(methods, outs):
        acc = (o["pred_label"][:m] == o["label"][:m]).mean()
        print(f"  {name:<52} {acc:.4f} ({(acc - acc0) * 100:+.2f} points), same label as `label` on "
              f"{(o['pred_label'] == base).mean():.2%} of rows")
    a = outs[0]
    if pipe_out is not None:
        pipe_agree = (pd.Series([o["label"] for o in pipe_out]) == a["pred_label"]).mean()
        print(f"pipeline's labels agree with koelectra-kit label's on {pipe_agree:.2%} of rows")


def app_review_like(dev, rows: int, repeat_rate: float = 0.24, seed: int = 0):
    """``rows`` reviews of which ``repeat_rate`` repeat an earlier row's text exactly. The distinct texts are nsmc3
    dev's (two joined where more are needed); the repeats are drawn Zipf-like from its shorter texts, the way "굿"
    and "좋아요" dominate app-store repeats."""
    import pandas as pd

    rng = random.Random(seed)
    texts = list(dict.fromkeys(t for t in dev["document"].tolist() if t.strip()))  # distinct, in file order
    n_unique = rows - round(rows * repeat_rate)
    distinct, seen = texts[:n_unique], set(texts[:n_unique])
    while len(distinct) < n_unique:
        joined = f"{rng.choice(texts)} {rng.choice(texts)}"
        if joined not in seen:
            distinct.append(joined)
            seen.add(joined)
    popular = sorted(distinct, key=len)[:2000]
    repeats = rng.choices(popular, weights=[1 / (r + 1) for r in range(len(popular))], k=rows - n_unique)
    all_texts = distinct + repeats
    rng.shuffle(all_texts)
    return pd.DataFrame({"id": range(len(all_texts)), "document": all_texts})


def dedupe_effect(args, dev, tmp: Path, model_dir: str) -> None:
    """(d) label --no-dedupe vs label (dedupe) vs label --backend onnx on the app-review-like file, and (a) on it;
    median of --rounds in turns."""
    from koelectra_kit.classify.classifier import Classifier
    from koelectra_kit.label import label_file

    data = app_review_like(dev, args.dup_rows)
    src = tmp / "app_reviews.csv"
    data.to_csv(src, index=False)
    repeats = len(data) - data["document"].nunique()
    print(f"\n(d) {len(data):,} app-review-like rows from nsmc3/dev, {repeats / len(data):.1%} exact repeats")
    from koelectra_kit.tokenizer import KoTokenizer, kiwi_instance

    runs = [("label --no-dedupe", {"dedupe": False}), ("label (dedupe, the default)", {}),
            ("label --backend onnx (dedupe)", {"backend": "onnx"})]
    warm = tmp / "app_reviews_warm.csv"
    data.iloc[:256].to_csv(warm, index=False)
    # (a) on this file too: the pipeline on its pre-split texts (not timed), every row scored
    presplit = KoTokenizer.from_pretrained(model_dir).presplit_batch(data["document"].tolist())
    list(kiwi_instance(None).tokenize(presplit[:256]))  # loaded untimed, whatever the word file spared the line above
    pipe = hf_pipeline(model_dir)
    pipe(presplit[:64], batch_size=32)  # warm
    outputs, competitors, summaries = [], {"pipe": lambda: pipe(presplit, batch_size=32)}, {}
    for i, (name, opts) in enumerate(runs):
        out = tmp / f"dup{i}.csv"
        outputs.append(out)
        # untimed: loading the model (and the ONNX export), Kiwi's start and torch's first calls are not the
        # steady state a big file sees
        clf = Classifier.load(model_dir, backend=opts.get("backend", "auto"))
        tok = clf.tok
        label_file(model_dir, warm, tmp / "warm_out.csv", "document", progress=False, overwrite=True, classifier=clf,
                   **opts)

        def run(name=name, out=out, clf=clf, opts=opts, tok=tok):
            cold_word_cache(tok)
            summaries[name] = label_file(model_dir, src, out, "document", progress=False, overwrite=True,
                                         classifier=clf, **opts)
        competitors[name] = run
    times = {name: median(ts) for name, ts in interleaved(competitors, rounds=args.rounds, warmup=0).items()}
    t_pipe, n = times.pop("pipe"), len(data)
    base = times[runs[0][0]]
    print(f"{'method':<58}{'rows/s':>10}{'vs (a)':>9}{'vs first':>9}{'reused rows':>13}")
    print(f"{'(a) transformers pipeline, batch 32 (pre-split not timed)':<58}{n / t_pipe:>10,.0f}{1.0:>8.2f}x")
    for name, t in times.items():
        print(f"{'koelectra-kit ' + name:<58}{n / t:>10,.0f}{t_pipe / t:>8.2f}x{base / t:>8.2f}x"
              f"{summaries[name].reused:>13,}")
    same = outputs[0].read_bytes() == outputs[1].read_bytes()
    if same:
        print("deduplicated output identical to --no-dedupe: yes")
    else:  # bf16 rounds by batch shape: a repeat scored in another batch than its first occurrence may differ
        a, b = pd_read(outputs[0]), pd_read(outputs[1])
        probs = [c for c in a.columns if c.startswith("prob_")]
        diff = (a[probs].astype(float) - b[probs].astype(float)).abs().to_numpy().max()
        print(f"deduplicated output vs --no-dedupe: same label on {(a['label'] == b['label']).mean():.2%} of rows, "
              f"probabilities within {diff:.4f} (not byte-identical: bf16 rounding depends on the batch a text is "
              "scored in; in fp32 the two are identical, tests/test_label_scale.py)")
    a, b = (pd_read(o)["label"] for o in outputs[1:3])
    print(f"onnx labels agree with torch's on {(a == b).mean():.2%} of rows")


def pd_read(path: Path):
    import pandas as pd

    return pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")


def batch_list(text: str) -> list[int]:
    try:
        out = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        out = []
    if not out or min(out) < 1:
        raise argparse.ArgumentTypeError(f"{text!r}: comma-separated batch sizes >= 1 (32,64,128)")
    return out


def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", help="a fine-tuned model dir (koelectra-kit finetune output); with --shape and "
                    "--tokenizer it may be left out (speed only, no accuracy)")
    ap.add_argument("--rows", type=non_negative_int, default=10000, help="reviews for the speed comparison, from "
                    "nsmc3 dev (more than its 10,000 repeat it, and repeated texts are answered once: 0 skips it)")
    ap.add_argument("--rounds", type=positive_int, default=3,
                    help="timed rounds of (a) and each engine, in turns")
    ap.add_argument("--shape", default=None, help="time a random-init classifier of this pretrain preset's "
                    "shape (e.g. small: 12 x 256, ELECTRA-Small) instead of --model; accuracy still uses --model")
    ap.add_argument("--tokenizer", help="with --shape: this tokenizer folder instead of --model's (e.g. an 8,000 "
                    "WordPiece one for cpu-30min-subword)")
    ap.add_argument("--presplit", choices=["kiwi", "kiwi_word", "none"], help="with --shape: the random-init model's "
                    "tokenizer uses this pre-split mode (same vocabulary; speed only; none: no Kiwi)")
    ap.add_argument("--device", default=None, help="cpu | cuda | cuda:N | auto: the pipeline and `label` both on this "
                    "device, no Kiwi needed (with --shape and no --tokenizer, a presplit=none vocabulary is trained "
                    "here); left out: the CPU comparison above, with Kiwi's pre-split timed")
    ap.add_argument("--pipeline-batches", type=batch_list, default=[32, 64, 128, 256], help="with --device: the "
                    "pipeline's batch sizes tried (fp32 and bf16, one run each); its best is timed beside batch 32")
    ap.add_argument("--sweep-rows", type=positive_int, default=None, help="with --device: the pipeline's batch "
                    "sweep runs on the first N rows (default 2,048; more than --rows: --rows); the turns on all --rows")
    ap.add_argument("--json", metavar="PATH", type=output_file,
                    help="with --device: write every figure to PATH as JSON")
    ap.add_argument("--models", nargs=2, metavar=("OLD", "NEW"), help="two fine-tuned classifier dirs whose nsmc3 "
                    "dev accuracy and macro-F1 are printed side by side (e.g. pretrained with kiwi and kiwi_word)")
    ap.add_argument("--dup-rows", type=non_negative_int, default=None, help="rows of the app-review-like file with "
                    "24%% exact repeats, labelled with and without deduplication (0: skip; default 20,000, 0 with "
                    "--device)")
    ap.add_argument("--big-rows", type=non_negative_int, default=None, help="rows of the memory test file (0: skip; "
                    "default 1,000,000, 0 with --device)")
    args = ap.parse_args(argv)
    if args.device is None:
        if args.model is None and not (args.shape and args.tokenizer):
            ap.error("--model is required (or --shape and --tokenizer: speed on random weights, no accuracy)")
        if args.presplit == "none":
            ap.error("--presplit none is for the --device comparison (the CPU comparison times Kiwi's pre-split)")
    else:
        if args.model is None and not args.shape:
            ap.error("--device needs --model or --shape (a random-init classifier of that preset's shape)")
        if args.dup_rows or args.big_rows:
            ap.error("--dup-rows and --big-rows belong to the CPU comparison: leave them out with --device")
        from koelectra_kit.runtime import resolve_device

        with input_errors(ap):
            args.device = resolve_device(args.device)
    if args.json and args.device is None:
        ap.error("--json goes with --device")
    if args.sweep_rows and args.device is None:
        ap.error("--sweep-rows goes with --device")
    args.sweep_rows = args.sweep_rows or 2048
    args.dup_rows = (0 if args.device is not None else 20000) if args.dup_rows is None else args.dup_rows
    args.big_rows = (0 if args.device is not None else 1_000_000) if args.big_rows is None else args.big_rows
    if (args.tokenizer or args.presplit) and not args.shape:
        ap.error("--tokenizer and --presplit apply to the random-init model of --shape: add --shape (e.g. "
                 "cpu-30min-subword)")
    check_model_options(ap, args.shape, args.tokenizer, args.presplit, [args.model, *(args.models or [])])
    if not DEV.exists():
        ap.error(f"needs {DEV}: benchmarks read the real data beside the repository (set KOELECTRA_SHARED_DATA)")
    # a folder with a tokenizer but no model (or a damaged one) is one line here, not a traceback minutes in
    check_classifiers(ap, [("--model", args.model)] * bool(args.model) + [("--models", m) for m in args.models or []])
    import pandas as pd

    dev = pd.read_csv(DEV, sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False)
    tmp = Path(tempfile.mkdtemp())
    if args.device is not None:
        if args.rows:
            report = device_compare(args, dev, tmp, args.device)
            if args.json:
                Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    elif args.rows:
        compare(args, dev, tmp)
    if args.dup_rows:
        dedupe_effect(args, dev, tmp, timed_model(args, dev, tmp / f"random-dup-{args.shape}"))
    if args.models:
        side_by_side(dev, args.models, tmp)

    # memory on a big generated file
    if args.big_rows:
        big = tmp / "big.csv"
        texts = dev["document"].tolist()
        with open(big, "w", encoding="utf-8", newline="") as f:
            w = csv.writer(f)
            w.writerow(["id", "review"])
            for i in range(args.big_rows):
                w.writerow([i, texts[i % len(texts)]])
        # VmHWM, not ru_maxrss: Linux carries the parent's peak through fork + exec into the child's ru_maxrss
        # (after the speed comparison above, the parent's 1.6 GB showed up as the child's peak)
        big_model = args.model or timed_model(args, dev, tmp / "random-big")
        code = ("import re,time;from koelectra_kit.label import label_file;t=time.time();"
                f"s=label_file({big_model!r},{str(big)!r},{str(tmp / 'big_out.csv')!r},'review',progress=False);"
                "hwm=re.search(r'VmHWM:\\s+(\\d+)',open('/proc/self/status').read()).group(1);"
                "print(s.rows, time.time()-t, hwm)")
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT)
        if out.returncode:
            sys.exit(out.stderr[-2000:])
        rows, secs, rss_kb = out.stdout.split()[-3:]
        print(f"\n{int(rows):,}-row file: {float(secs):.0f}s ({int(rows) / float(secs):,.0f} rows/s), "
              f"peak RSS {int(rss_kb) / 1024 ** 2:.2f} GB (target < 2 GB)")
    print(f"(this process's peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024 ** 2:.2f} GB)")


if __name__ == "__main__":
    main()
