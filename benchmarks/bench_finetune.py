"""Fine-tuning throughput: the toolkit's training step fed the toolkit's way (length-grouped batches,
dynamic padding, bf16 autocast) vs a straightforward loop (every batch padded to max_length, fp32,
plain shuffle, ``model(..., labels=...)``), same model, same rows, same run.

    python benchmarks/bench_finetune.py                      # nsmc3 rows if $KOELECTRA_SHARED_DATA has them, else the sample
    python benchmarks/bench_finetune.py --rows 2048 --model runs/pretrain/discriminator
    python benchmarks/bench_finetune.py --device cuda --shape issue39-6x256 --rows 8192 --cache-rows 0 --json ft.json

First, the token cache: tokenizing --cache-rows texts (Kiwi + WordPiece) and writing them, vs reading them back.

The variants run interleaved, a few batches each per round, and each variant's figure is the
median over rounds: this machine is shared and stalls for seconds at a time, which would otherwise
land on whichever variant happened to be running. Ratios are to the straightforward loop.

The model is a random-init ELECTRA of a small pretraining run's size (4 layers, hidden 256, embedding
128, FFN 1024) unless --shape names a pretraining preset whose encoder to take (or a benchmark shape:
issue39-6x256, the 6 x 256 of issue 39's fine-tune bar) or --model names a model; speed does not depend
on the weights. Its WordPiece vocabulary is trained on the bench texts with Kiwi's pre-split, or with none
where kiwipiepy is not installed (--presplit).

--device cuda (or auto on a GPU machine): every variant runs there; the toolkit's batches are padded to a
multiple of 16 as the recipe pads them on a GPU (runtime.pad_multiple). There the last line compares the
toolkit's examples/s with --reference (issue 39: 1,066 examples/s, `finetune` of a 6 x 256 encoder at batch 32 on an H100 before the GPU
work; the bar is 5x).

CUDA graphs. On the H100 (docs/benchmarks/gpu_check-h100.txt) a batch of 32 short reviews was a few milliseconds
of arithmetic inside 19-45 ms steps: the host's launches were the step. Two more variants remove them:
--graphs (on by default on a GPU): `finetune cuda_graphs=true`'s step (finetune.graphs.GraphedStep): the whole step
recorded once as a CUDA graph, every batch padded to batch-size x max-length; on a CPU it runs the same padded
step eagerly. --compiled: the step with the model compiled as `finetune compile=true compile_mode=reduce-overhead
pad_to_multiple_of=<max_length>` compiles it (tens of seconds of compiling). Recording and compiling are warm-up,
not timed; a fine-tune pays them once.

What the toolkit's variant calls, so that it times what `finetune` runs: ``finetune.train_step`` (the step the
recipe's loop calls), ``finetune.collate`` and ``finetune.length_grouped_batches`` (the recipe's batches), and
``finetune.build_optimizer`` (the recipe's AdamW with layer-wise lr decay, fused on a GPU).
"""
from __future__ import annotations

import argparse
import importlib
import json
import shutil
import statistics
import tempfile
import time
from pathlib import Path

from common import (NSMC_TRAIN, ROOT, SHARED, Parser, input_errors, non_negative_int, output_file,  # noqa: E402
                    positive_float, positive_int, shape_file, shape_names)  # (benchmarks/common.py)

DEFAULT_SHAPE = dict(hidden_size=256, num_layers=4, num_heads=4, intermediate_size=1024, embedding_size=128)
REFERENCE = 1066.0  # issue 39: examples/s of `finetune` (6 x 256, batch 32) on an H100 before the GPU work
BAR = 5.0
POSITIONS = 512  # the random-init model's max_position_embeddings (build_model)
MIN_LENGTH = 3  # the shortest max_length `finetune` takes: [CLS], a token, [SEP]
GRAPHS = "ours + one CUDA graph a step (cuda_graphs=true, bf16)"
COMPILED = "ours compiled + CUDA graphs (reduce-overhead, bf16)"


def load_rows(n: int, seed: int):
    """(texts, class ids, source) of n rows: nsmc3 if available (real lengths), else the sample repeated."""
    import numpy as np

    from koelectra_kit.finetune import read_labelled

    path = SHARED / "nsmc3" / NSMC_TRAIN.name  # train.tsv, or a GPU bundle's train.parquet (SHARED: a test's)
    if not path.is_file():
        path = ROOT / "corpora" / "sample" / "reviews_labelled.csv"
    data = read_labelled(path, ["negative", "neutral", "positive"])
    idx = np.resize(np.random.default_rng(seed).permutation(len(data.texts)), n)
    return [data.texts[i] for i in idx], data.y[idx], path


def encoder_shape(preset: str | None) -> dict:
    """The encoder's shape: a pretraining preset's discriminator (or a benchmark-only shape: ``common.shape_file``,
    its ``base:`` chain followed), or the built-in 4 x 256."""
    if not preset:
        return dict(DEFAULT_SHAPE)
    from koelectra_kit.config import read_yaml

    m = read_yaml(shape_file(preset))["model"]
    return {k: m[k] for k in DEFAULT_SHAPE}


def default_presplit() -> str:
    """The tokenizer's default pre-split where Kiwi is installed; ``none`` where it is not (a GPU machine)."""
    from koelectra_kit.tokenizer import TokenizerConfig

    try:
        importlib.import_module("kiwipiepy")
    except ImportError:
        return "none"
    return TokenizerConfig.presplit


def build_model(work: Path, texts: list[str], shape: dict, presplit: str) -> Path:
    """Random-init ELECTRA of ``shape`` with a WordPiece vocab trained on the bench texts."""
    import torch
    from transformers import ElectraConfig, ElectraModel

    from koelectra_kit.tokenizer import KoTokenizer, TokenizerConfig, train_tokenizer

    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n", encoding="utf-8")
    train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(work / "tok"), vocab_size=8000, presplit=presplit))
    tok = KoTokenizer.from_pretrained(work / "tok")
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=tok.vocab_size, embedding_size=shape["embedding_size"],
                        hidden_size=shape["hidden_size"], num_hidden_layers=shape["num_layers"],
                        num_attention_heads=shape["num_heads"], intermediate_size=shape["intermediate_size"],
                        max_position_embeddings=POSITIONS, pad_token_id=tok.pad_token_id)
    ElectraModel(cfg).save_pretrained(work / "model")
    tok.save(work / "model")
    return work / "model"


def model_positions(model: str | None) -> int:
    """The positions a text of the benchmark may fill: --model's max_position_embeddings (its config.json; a hub id's
    is not read here: 512, as Classifier.load assumes), or the random-init model's."""
    if model and Path(model, "config.json").is_file():
        try:
            return int(json.loads(Path(model, "config.json").read_text(encoding="utf-8"))["max_position_embeddings"])
        except (OSError, ValueError, KeyError, TypeError):
            pass  # (a config without it: transformers' ELECTRA default)
    return POSITIONS


def token_cache(tok, n: int, max_length: int, cache: Path) -> None:
    """The fine-tune token cache: the first pass tokenizes (Kiwi) and writes, the second reads it back."""
    from koelectra_kit.finetune import encode_texts

    texts = load_rows(n, seed=1)[0]
    tok.encode_batch(texts[:256])  # load Kiwi outside the timing
    t0 = time.perf_counter()
    first = encode_texts(tok, texts, max_length, cache_dir=cache)
    t1 = time.perf_counter()
    second = encode_texts(tok, texts, max_length, cache_dir=cache)
    t2 = time.perf_counter()
    assert first[0] == second[0]
    print(f"token cache, {len(texts):,} texts: tokenize + write {t1 - t0:.2f}s, read back {t2 - t1:.2f}s "
          f"-> {(t1 - t0) / (t2 - t1):.0f}x faster on a repeated fine-tune\n")


def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=positive_int, default=1024, help="rows per variant (one epoch each)")
    ap.add_argument("--max-length", type=positive_int, default=128,
                    help=f"tokens a text is cut to ({MIN_LENGTH} up to the model's positions)")
    ap.add_argument("--batch-size", type=positive_int, default=32)
    ap.add_argument("--per-round", type=positive_int, default=4, help="batches of each variant per interleaved round")
    ap.add_argument("--model", help="model dir (default: random-init 4-layer hidden-256 ELECTRA)")
    ap.add_argument("--shape", help="with no --model: the random-init encoder takes this pretraining preset's "
                    "shape (configs/pretrain/<shape>.yaml, or benchmarks/shapes/: issue39-6x256, the shape of "
                    "issue 39's fine-tune bar)")
    ap.add_argument("--presplit", choices=["kiwi", "kiwi_word", "none"], default=None,
                    help="with no --model: the bench tokenizer's pre-split (default: the tokenizer's default, none "
                    "where kiwipiepy is not installed)")
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda | cuda:N: where every variant runs")
    ap.add_argument("--threads", type=positive_int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--cache-rows", type=non_negative_int, default=20000,
                    help="texts for the token-cache figure: tokenizing them vs reading them back (0: skip)")
    ap.add_argument("--reference", type=positive_float, default=REFERENCE,
                    help=f"on a GPU: the examples/s the toolkit's loop is compared with at the end (default "
                    f"{REFERENCE:,.0f}: issue 39's figure, bar {BAR:g}x)")
    ap.add_argument("--graphs", choices=["auto", "on", "off"], default="auto",
                    help="the cuda_graphs=true variant (auto: on a GPU only; on a CPU its padded step runs eagerly)")
    ap.add_argument("--compiled", action="store_true",
                    help="the compile=true compile_mode=reduce-overhead variant too (tens of seconds of compiling)")
    ap.add_argument("--json", metavar="PATH", type=output_file, help="write every figure to PATH as JSON")
    args = ap.parse_args(argv)
    if args.model and (args.shape or args.presplit):
        ap.error("--shape and --presplit shape the random-init model: leave them out with --model")
    if args.shape and shape_file(args.shape) is None:
        ap.error(f"--shape {args.shape}: no such YAML, preset or benchmark shape ({', '.join(shape_names())})")
    if args.rows < 2 * args.batch_size:
        ap.error("--rows must be at least 2 x --batch-size")
    tok = None
    if args.model:  # a folder that is no model (or has no tokenizer): one line now, not a traceback later
        from koelectra_kit.hub.modelio import check_model_source
        from koelectra_kit.tokenizer import KoTokenizer

        with input_errors(ap):
            check_model_source(args.model, "--model")
        with input_errors(ap, f"--model {args.model}"):
            tok = KoTokenizer.from_pretrained(args.model)
    positions = model_positions(args.model)
    if not MIN_LENGTH <= args.max_length <= positions:
        ap.error(f"--max-length {args.max_length}: between {MIN_LENGTH} ([CLS], a token, [SEP]) and the "
                 f"{positions} positions of {args.model or 'the random-init model'}")

    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    from koelectra_kit.finetune import build_optimizer, collate, length_grouped_batches, train_step
    from koelectra_kit.finetune.graphs import WARMUP, GraphedStep
    from koelectra_kit.finetune.model import compile_model
    from koelectra_kit.runtime import cpu_has_bf16, pad_multiple, resolve_device
    from koelectra_kit.tokenizer import KoTokenizer

    with input_errors(ap):
        device = resolve_device(args.device)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)
    texts, y, source = load_rows(args.rows, seed=0)
    labels = torch.from_numpy(y)
    tmp = Path(tempfile.mkdtemp())
    presplit = args.presplit or default_presplit()
    model_dir = Path(args.model) if args.model else build_model(tmp, texts, encoder_shape(args.shape), presplit)
    if tok is None:  # (the random-init model's; --model's was loaded above)
        tok = KoTokenizer.from_pretrained(model_dir)
    if args.cache_rows:
        try:
            importlib.import_module("datasets")  # (the token cache's format)
        except ImportError:
            print("token cache: skipped, the `datasets` package is not installed (the fine-tune token cache needs "
                  "it)\n")
        else:
            token_cache(tok, args.cache_rows, args.max_length, tmp / "cache")
    ids = [list(x) for x in tok.encode_batch(texts, max_length=args.max_length)["input_ids"]]
    fixed = tok.encode_batch(texts, max_length=args.max_length, padding="max_length", return_tensors="pt")
    multiple = pad_multiple(device)  # as FinetuneRecipe: 16 on a GPU (tensor cores, few shapes), 1 on a CPU
    gpu = device.type == "cuda"
    models = []

    def new_model():
        torch.manual_seed(0)
        models.append(AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=3).to(device))
        return models[-1]

    lengths = np.array([len(x) for x in ids])
    grouped = length_grouped_batches(lengths, args.batch_size, np.random.default_rng(0))
    shuffled = np.array_split(np.random.default_rng(0).permutation(len(ids)), len(grouped))

    def straightforward(dtype):
        """The tutorial loop: tokenizer pads to max_length, model computes its own loss."""
        model = new_model().train()
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)

        def step(idx):
            idx = torch.from_numpy(idx)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=dtype is not None):
                out = model(input_ids=fixed["input_ids"][idx].to(device),
                            attention_mask=fixed["attention_mask"][idx].to(device), labels=labels[idx].to(device))
            out.loss.backward()
            opt.step()
            opt.zero_grad()
        return step, shuffled

    def ours(dtype, compiled: bool = False):
        """The recipe's step (finetune.step.train_step): collate to the batch's longest, autocast, fp32 loss,
        clip, layer decay; the optimizer as FinetuneRecipe.setup_optimizer builds it (lr 3e-4: the default for
        hidden <= 256). ``compiled``: as `finetune compile=true compile_mode=reduce-overhead
        pad_to_multiple_of=<max_length>` runs it: the model compiled (finetune.model.compile_model, as the recipe
        calls it), every batch padded to max_length (one shape, one graph), a new CUDA-graphs step marked before
        each batch as the recipe's loop marks it."""
        model = new_model()
        if compiled:
            compile_model(model, "reduce-overhead", shapes=4)
        opt = build_optimizer(model, 3e-4, 0.8, 0.01, 1e-6, device)  # FinetuneRecipe.setup_optimizer's

        def step(idx):
            if compiled:
                torch.compiler.cudagraph_mark_step_begin()
            input_ids, mask = collate(ids, idx, tok.pad_token_id, multiple, max_width=args.max_length, pin=gpu,
                                      pad_to=args.max_length if compiled else None)
            train_step(model, opt, input_ids, mask, labels[torch.from_numpy(idx)], device=device, dtype=dtype)
        return step, grouped

    def ours_graphed(dtype):
        """``ours`` as `finetune cuda_graphs=true` runs it: GraphedStep over batches padded to max_length."""
        model = new_model()
        opt = build_optimizer(model, 3e-4, 0.8, 0.01, 1e-6, device)
        graphed = GraphedStep(model, opt, batch_size=args.batch_size, width=args.max_length, device=device,
                              dtype=dtype)

        def step(idx):
            input_ids, mask = collate(ids, idx, tok.pad_token_id, pad_to=args.max_length, pin=gpu)
            graphed(input_ids, mask, labels[torch.from_numpy(idx)])
        return step, grouped

    bf16 = torch.bfloat16
    variants = {
        "straightforward: pad to max_length, fp32": straightforward(None),
        "straightforward + bf16 autocast": straightforward(bf16),
        "ours without bf16 (length-grouped, dynamic padding, fp32)": ours(None),
        "ours: length-grouped dynamic padding + bf16 autocast": ours(bf16),
    }
    if args.graphs == "on" or (args.graphs == "auto" and gpu):
        variants[GRAPHS] = ours_graphed(bf16)
    if args.compiled:
        variants[COMPILED] = ours(bf16, compiled=True)
    shutil.rmtree(tmp)  # every model is loaded
    sync = torch.cuda.synchronize if device.type == "cuda" else (lambda: None)
    for name, (step, batches) in variants.items():  # warm-up: first-call allocations and kernel choices
        t = time.perf_counter()
        # GraphedStep: its eager warm-up steps, then the recording; compiled: compiling, warm-up run, recording
        for _ in range({GRAPHS: WARMUP + 1, COMPILED: 3}.get(name, 1)):
            step(batches[0])
        sync()
        if name in (GRAPHS, COMPILED):
            print(f"{name}: warm-up (recording{', compiling' if name == COMPILED else ''}) "
                  f"{time.perf_counter() - t:.1f}s, not timed")
    rates: dict[str, list[float]] = {name: [] for name in variants}
    n_batches = len(grouped)
    for start in range(1, n_batches, args.per_round):
        for name, (step, batches) in variants.items():
            chunk = batches[start:start + args.per_round]
            t = time.perf_counter()
            for idx in chunk:
                step(idx)
            sync()  # the GPU's queued work is part of the chunk's time
            rates[name].append(sum(len(i) for i in chunk) / (time.perf_counter() - t))

    real = lengths.sum()
    where = (f"{torch.cuda.get_device_name(device)}" if device.type == "cuda"
             else f"{torch.get_num_threads()} threads; CPU bf16: {cpu_has_bf16()}")
    shape = {k: getattr(models[0].config, k) for k in ("num_hidden_layers", "hidden_size", "intermediate_size",
                                                         "embedding_size")}
    print(f"data: {len(ids)} rows of {source}; tokens per text: mean {lengths.mean():.1f}, max {lengths.max()}; "
          f"max_length {args.max_length}, batch {args.batch_size}; {where}; "
          f"{len(rates[next(iter(rates))])} interleaved rounds")
    if device.type != "cpu" or args.shape or args.presplit:
        print(f"model: {shape['num_hidden_layers']} layers x hidden {shape['hidden_size']} (FFN "
              f"{shape['intermediate_size']}, embedding {shape['embedding_size']}), vocab {tok.vocab_size}, "
              f"pre-split {tok.presplit}; device {device}; torch {torch.__version__}")
    fixed_share = real / (len(ids) * args.max_length)
    grouped_share = real / sum(len(b) * -(-lengths[b].max() // multiple) * multiple for b in grouped)
    print(f"real tokens / computed tokens: fixed padding {fixed_share:.1%}, length-grouped {grouped_share:.1%}")
    base = statistics.median(rates[next(iter(rates))])
    w = max(len(n) for n in rates)
    print(f"{'loop':<{w}}  examples/s (median)  ratio")
    report = {"device": str(device), "machine": where, "torch": torch.__version__, "rows": len(ids),
              "source": str(source), "batch_size": args.batch_size, "max_length": args.max_length,
              "model": shape | {"vocab_size": tok.vocab_size, "presplit": tok.presplit},
              "tokens_mean": float(lengths.mean()), "real_over_computed": {"fixed": fixed_share,
                                                                           "grouped": grouped_share},
              "variants": {}}
    for name, r in rates.items():
        med = statistics.median(r)
        report["variants"][name] = {"examples_per_s": med, "ratio": med / base, "rounds": r}
        print(f"{name:<{w}}  {med:19.1f}  {med / base:5.2f}x")
    if device.type == "cuda":
        ours_rate = statistics.median(rates["ours: length-grouped dynamic padding + bf16 autocast"])
        ratio = ours_rate / args.reference
        report["acceptance"] = {"examples_per_s": ours_rate, "reference": args.reference, "ratio": ratio,
                                "bar": BAR, "met": ratio >= BAR}
        print(f"acceptance: finetune {ours_rate:,.0f} examples/s = {ratio:.2f}x the reference {args.reference:,.0f} "
              f"(bar {BAR:g}x): {'met' if ratio >= BAR else 'NOT met'}")
        for key, name, how in (("acceptance_graphs", GRAPHS, "cuda_graphs=true"),
                               ("acceptance_compiled", COMPILED, "compile=true compile_mode=reduce-overhead")):
            if name in rates:
                g = statistics.median(rates[name])
                report[key] = {"examples_per_s": g, "reference": args.reference, "ratio": g / args.reference,
                               "bar": BAR, "met": g / args.reference >= BAR, "how": how}
                print(f"acceptance with {how}: {g:,.0f} examples/s = {g / args.reference:.2f}x (bar {BAR:g}x): "
                      f"{'met' if g / args.reference >= BAR else 'NOT met'}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
