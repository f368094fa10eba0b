"""Writes the refactor-safety references in this folder (run from the repository root):

    python tests/golden/make_golden.py

They pin behaviour, not code: token ids and offsets of two committed tokenizers on the bundled texts (full
output) and on 10,000 real texts (one digest per text, so nothing of the real data is stored), 50 seeded
steps of tiny pretraining (every metrics row), and fine-tune + label predictions on the bundled sample.
tests/test_golden.py compares the current code with them. Re-run this only when a change of behaviour
is intended, and say so in the commit."""
from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ["KOELECTRA_CACHE"] = tempfile.mkdtemp(prefix="golden-cache-")

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
sys.path.insert(0, str(ROOT))
SAMPLE = ROOT / "corpora" / "sample"
SHARED = Path(os.environ.get("KOELECTRA_SHARED_DATA", ROOT.parent / "shared" / "data"))

import golden_common as gc  # noqa: E402  (this folder)


def make_tokenizers() -> None:
    from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

    for name, model in (("tok_wordpiece", "wordpiece"), ("tok_characters", "characters")):
        out = HERE / name
        if not out.exists():
            train_tokenizer(TokenizerConfig(input=[str(SAMPLE / "comments.txt")], out=str(out), vocab_size=2000,
                                            model=model, progress=False))


def main() -> None:
    import torch

    torch.set_num_threads(1)
    make_tokenizers()
    # 1. tokenizer output on the bundled texts (full) and on real texts (digests)
    for name in ("tok_wordpiece", "tok_characters"):
        rows = gc.encode_rows(HERE / name, gc.sample_texts(SAMPLE))
        (HERE / f"{name}.sample.jsonl").write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows),
                                                   encoding="utf-8")
        if SHARED.is_dir():
            rows = gc.encode_rows(HERE / name, gc.real_texts(SHARED))
            (HERE / f"{name}.real.txt").write_text("".join(gc.digest(r) + "\n" for r in rows), encoding="utf-8")
    # 2. 50 seeded steps of tiny pretraining
    with tempfile.TemporaryDirectory() as tmp:
        rows = gc.pretrain_rows(ROOT, SAMPLE, HERE / "tok_wordpiece", Path(tmp))
    (HERE / "pretrain_metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    # 3. fine-tune + label on the sample
    with tempfile.TemporaryDirectory() as tmp:
        out = gc.finetune_label(ROOT, SAMPLE, HERE / "tok_wordpiece", Path(tmp))
        (HERE / "label_predictions.csv").write_bytes(out.read_bytes())
    print("golden files written")


if __name__ == "__main__":
    main()
