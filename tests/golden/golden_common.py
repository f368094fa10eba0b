"""What make_golden.py writes and test_golden.py recomputes: one definition of each reference, so the
two cannot drift apart. Only public entry points (the CLI and KoTokenizer), so the references survive
any internal reorganisation."""
from __future__ import annotations

import csv
import hashlib
import json
from pathlib import Path

# Fields of a metrics row that depend on the clock, not on the maths.
CLOCK_FIELDS = {"tokens_per_s", "elapsed_s", "elapsed", "time", "step_s", "seq_per_s", "minutes"}


def sample_texts(sample: Path) -> list[str]:
    texts = (sample / "comments.txt").read_text(encoding="utf-8").splitlines()
    for name in ("reviews_labelled.csv", "reviews_unlabelled.csv"):
        with open(sample / name, encoding="utf-8", newline="") as f:
            texts += [row["review"] for row in csv.DictReader(f)]
    # edge cases the fast character path and Kiwi must agree on
    texts += ["", "   ", "ㅋㅋㅋㅋㅋㅋ 진짜 웃기네ㅋㅋ", "##해시 #태그", "[URL] 여기 https://a.b/c 봐", "內面 衝動 😀😀😀",
              "a" * 300, "탭\t두  칸", "영화는봤는데별로였음"]
    return texts


def real_texts(shared: Path, n: int = 10_000) -> list[str]:
    """The first 5,000 nsmc3 dev reviews and the first 5,000 comments."""
    texts = []
    with open(shared / "nsmc3" / "dev.tsv", encoding="utf-8") as f:
        next(f)
        for line in f:
            texts.append(line.rstrip("\n").split("\t")[4])
            if len(texts) == n // 2:
                break
    with open(shared / "pretrain" / "comments_mix.txt", encoding="utf-8") as f:
        for line in f:
            texts.append(line.rstrip("\n"))
            if len(texts) == n:
                break
    return texts


def encode_rows(tok_dir: Path, texts: list[str]) -> list[dict]:
    from koelectra_kit.tokenizer import KoTokenizer

    tok = KoTokenizer.from_pretrained(tok_dir)
    enc = tok.encode_batch(texts, max_length=128)
    return [{"ids": list(ids), "offsets": [list(o) for o in offs], "truncated": bool(tr)}
            for ids, offs, tr in zip(enc["input_ids"], enc["offsets"], enc["truncated"])]


def digest(row: dict) -> str:
    return hashlib.sha1(json.dumps(row, separators=(",", ":")).encode()).hexdigest()[:12]


def pretrain_rows(root: Path, sample: Path, tok_dir: Path, tmp: Path) -> list[dict]:
    from koelectra_kit.cli import main

    out = tmp / "run"
    rc = main(["pretrain", "--config", str(root / "configs" / "pretrain" / "tiny.yaml"),
               f"corpus={sample / 'comments.txt'}", f"tokenizer={tok_dir}", f"out={out}", f"cache_dir={tmp / 'c'}",
               "max_steps=50", "log_every=1", "save_every=0", "progress=false", "plots=false", "precision=fp32",
               "threads=1", "seed=7"])
    assert rc == 0
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines() if line.strip()]
    return [{k: v for k, v in r.items() if k not in CLOCK_FIELDS} for r in rows]


def finetune_label(root: Path, sample: Path, tok_dir: Path, tmp: Path) -> Path:
    """Fine-tune a seeded random-init tiny encoder on the sample, then label the unlabelled sample."""
    import torch
    from transformers import ElectraConfig, ElectraModel

    from koelectra_kit.cli import main
    from koelectra_kit.tokenizer import KoTokenizer

    tok = KoTokenizer.from_pretrained(tok_dir)
    torch.manual_seed(0)
    cfg = ElectraConfig(vocab_size=tok.vocab_size, hidden_size=64, embedding_size=64, num_hidden_layers=2,
                        num_attention_heads=2, intermediate_size=128, max_position_embeddings=128,
                        pad_token_id=tok.pad_token_id)
    enc = tmp / "encoder"
    ElectraModel(cfg).save_pretrained(enc)
    tok.save(enc)
    clf = tmp / "clf"
    assert main(["finetune", "--config", str(root / "configs" / "finetune" / "tiny.yaml"), f"model={enc}",
                 f"train={sample / 'reviews_labelled.csv'}", f"out={clf}", "precision=fp32", "progress=false",
                 "token_cache=false", "plots=false"]) == 0
    out = tmp / "labelled.csv"
    assert main(["label", "--model", str(clf), "--input", str(sample / "reviews_unlabelled.csv"),
                 "--text-column", "review", "--output", str(out), "--precision", "fp32"]) == 0
    return out
