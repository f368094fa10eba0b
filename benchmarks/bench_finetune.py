"""Fine-tuning throughput: the toolkit's training step fed the toolkit's way (length-grouped batches,
dynamic padding, bf16 autocast) vs a straightforward loop (every batch padded to max_length, fp32,
plain shuffle, ``model(..., labels=...)``), same model, same rows, same run.

    python benchmarks/bench_finetune.py                      # nsmc3 rows if $KOELECTRA_SHARED_DATA has them, else the sample
    python benchmarks/bench_finetune.py --rows 2048 --model runs/pretrain/discriminator

First, the token cache: tokenizing --cache-rows texts (Kiwi + WordPiece) and writing them, vs reading them back.

The variants run interleaved, a few batches each per round, and each variant's figure is the
median over rounds: this machine is shared and stalls for seconds at a time, which would otherwise
land on whichever variant happened to be running. Ratios are to the straightforward loop.

The model is a random-init ELECTRA of a small pretraining run's size (4 layers, hidden 256, embedding
128, FFN 1024) unless --model names one; speed does not depend on the weights.
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

from common import NSMC_DEV, ROOT, SHARED, interleaved, median  # noqa: E402,F401  (benchmarks/common.py)


def load_rows(n: int, seed: int):
    """(texts, class ids, source) of n rows: nsmc3 if available (real lengths), else the sample repeated."""
    import numpy as np

    from koelectra_kit.finetune import read_labelled

    path = SHARED / "nsmc3" / "train.tsv"
    if not path.is_file():
        path = ROOT / "corpora" / "sample" / "reviews_labelled.csv"
    data = read_labelled(path, ["negative", "neutral", "positive"])
    idx = np.resize(np.random.default_rng(seed).permutation(len(data.texts)), n)
    return [data.texts[i] for i in idx], data.y[idx], path


def build_model(work: Path, texts: list[str]) -> Path:
    """Random-init ELECTRA (4 x 256) with a WordPiece vocab trained on the bench texts."""
    import torch
    from transformers import ElectraConfig, ElectraModel

    from koelectra_kit.tokenizer import KoTokenizer, TokenizerConfig, train_tokenizer

    corpus = work / "corpus.txt"
    corpus.write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n", encoding="utf-8")
    train_tokenizer(TokenizerConfig(input=[str(corpus)], out=str(work / "tok"), vocab_size=8000))
    tok = KoTokenizer.from_pretrained(work / "tok")
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=tok.vocab_size, embedding_size=128, hidden_size=256, num_hidden_layers=4,
                        num_attention_heads=4, intermediate_size=1024, max_position_embeddings=512,
                        pad_token_id=tok.pad_token_id)
    ElectraModel(cfg).save_pretrained(work / "model")
    tok.save(work / "model")
    return work / "model"


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1024, help="rows per variant (one epoch each)")
    ap.add_argument("--max-length", type=int, default=128)
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--per-round", type=int, default=4, help="batches of each variant per interleaved round")
    ap.add_argument("--model", help="model dir (default: random-init 4-layer hidden-256 ELECTRA)")
    ap.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's choice)")
    ap.add_argument("--cache-rows", type=int, default=20000,
                    help="texts for the token-cache figure: tokenizing them vs reading them back (0: skip)")
    args = ap.parse_args()

    import numpy as np
    import torch
    from transformers import AutoModelForSequenceClassification
    from transformers.utils import logging as hf_logging

    from koelectra_kit.classify.classifier import collate
    from koelectra_kit.finetune import length_grouped_batches, param_groups, train_step
    from koelectra_kit.tokenizer import KoTokenizer
    from koelectra_kit.runtime import cpu_has_bf16

    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()
    if args.threads:
        torch.set_num_threads(args.threads)
    texts, y, source = load_rows(args.rows, seed=0)
    labels = torch.from_numpy(y)
    cpu = torch.device("cpu")
    tmp = Path(tempfile.mkdtemp())
    model_dir = Path(args.model) if args.model else build_model(tmp, texts)
    tok = KoTokenizer.from_pretrained(model_dir)
    if args.cache_rows:
        token_cache(tok, args.cache_rows, args.max_length, tmp / "cache")
    ids = [list(x) for x in tok.encode_batch(texts, max_length=args.max_length)["input_ids"]]
    fixed = tok.encode_batch(texts, max_length=args.max_length, padding="max_length", return_tensors="pt")
    models = []

    def new_model():
        torch.manual_seed(0)
        models.append(AutoModelForSequenceClassification.from_pretrained(model_dir, num_labels=3))
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
            with torch.autocast("cpu", dtype=torch.bfloat16, enabled=dtype is not None):
                out = model(input_ids=fixed["input_ids"][idx], attention_mask=fixed["attention_mask"][idx],
                            labels=labels[idx])
            out.loss.backward()
            opt.step()
            opt.zero_grad()
        return step, shuffled

    def ours(dtype):
        """The recipe's step (finetune.recipe.train_step): collate to the batch's longest, autocast, fp32 loss, clip, layer decay."""
        model = new_model()
        opt = torch.optim.AdamW([{k: v for k, v in g.items() if k != "depth"}
                                 for g in param_groups(model, 3e-4, 0.8, 0.01)], eps=1e-6)

        def step(idx):
            input_ids, mask = collate(ids, idx, tok.pad_token_id)
            train_step(model, opt, input_ids, mask, labels[torch.from_numpy(idx)], device=cpu, dtype=dtype)
        return step, grouped

    bf16 = torch.bfloat16
    variants = {
        "straightforward: pad to max_length, fp32": straightforward(None),
        "straightforward + bf16 autocast": straightforward(bf16),
        "ours without bf16 (length-grouped, dynamic padding, fp32)": ours(None),
        "ours: length-grouped dynamic padding + bf16 autocast": ours(bf16),
    }
    shutil.rmtree(tmp)  # every model is loaded
    for step, batches in variants.values():  # warm-up: first-call allocations and kernel choices
        step(batches[0])
    rates: dict[str, list[float]] = {name: [] for name in variants}
    n_batches = len(grouped)
    for start in range(1, n_batches, args.per_round):
        for name, (step, batches) in variants.items():
            chunk = batches[start:start + args.per_round]
            t = time.perf_counter()
            for idx in chunk:
                step(idx)
            rates[name].append(sum(len(i) for i in chunk) / (time.perf_counter() - t))

    real = lengths.sum()
    print(f"data: {len(ids)} rows of {source}; tokens per text: mean {lengths.mean():.1f}, max {lengths.max()}; "
          f"max_length {args.max_length}, batch {args.batch_size}; {torch.get_num_threads()} threads; "
          f"CPU bf16: {cpu_has_bf16()}; {len(rates[next(iter(rates))])} interleaved rounds")
    print(f"real tokens / computed tokens: fixed padding {real / (len(ids) * args.max_length):.1%}, "
          f"length-grouped {real / sum(len(b) * lengths[b].max() for b in grouped):.1%}")
    base = statistics.median(rates[next(iter(rates))])
    w = max(len(n) for n in rates)
    print(f"{'loop':<{w}}  examples/s (median)  ratio")
    for name, r in rates.items():
        med = statistics.median(r)
        print(f"{name:<{w}}  {med:19.1f}  {med / base:5.2f}x")


if __name__ == "__main__":
    main()
