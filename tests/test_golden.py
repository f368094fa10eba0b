"""Refactor safety: the current code against references written by tests/golden/make_golden.py before the
package was reorganised. Each test fails on any change of token ids/offsets, pretraining maths or
predictions; re-make the references only for an intended change of behaviour."""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

GOLDEN = Path(__file__).resolve().parent / "golden"
sys.path.insert(0, str(GOLDEN))
import golden_common as gc  # noqa: E402

TOKENIZERS = ["tok_wordpiece", "tok_characters"]


def _first_difference(got: list, want: list, texts: list[str] | None = None) -> str:
    for i, (g, w) in enumerate(zip(got, want)):
        if g != w:
            where = f" (text {texts[i]!r:.80})" if texts else ""
            return f"row {i}{where}: got {g!s:.300} want {w!s:.300}"
    return f"lengths differ: {len(got)} vs {len(want)}"


@pytest.mark.parametrize("name", TOKENIZERS)
def test_tokenizer_output_on_bundled_texts_is_unchanged(name, sample_dir):
    texts = gc.sample_texts(sample_dir)
    want = [json.loads(line) for line in (GOLDEN / f"{name}.sample.jsonl").read_text(encoding="utf-8").splitlines()]
    got = gc.encode_rows(GOLDEN / name, texts)
    assert got == want, _first_difference(got, want, texts)


@pytest.mark.parametrize("name", TOKENIZERS)
def test_tokenizer_output_on_10000_real_texts_is_unchanged(name, shared_data):
    texts = gc.real_texts(shared_data)
    assert len(texts) == 10_000
    want = (GOLDEN / f"{name}.real.txt").read_text(encoding="utf-8").split()
    got = [gc.digest(r) for r in gc.encode_rows(GOLDEN / name, texts)]
    assert got == want, _first_difference(got, want, texts)


def test_seeded_tiny_pretraining_gives_the_same_metrics_rows(tmp_path, sample_dir):
    want = [json.loads(line) for line in (GOLDEN / "pretrain_metrics.jsonl").read_text().splitlines()]
    got = gc.pretrain_rows(gc_root(), sample_dir, GOLDEN / "tok_wordpiece", tmp_path)
    assert len(got) == len(want) == 50
    for g, w in zip(got, want):
        assert g.keys() == w.keys()
        for k, v in w.items():
            if isinstance(v, float):
                # float sums differ by CPU (AVX2 vs AVX-512); a change of the maths moves them far more. The AUC (a
                # rank statistic: a rounding that swaps two logits moves it a step) and the gradient norm (a sum of
                # squares over every weight) move most: 4.4e-4 and 2.3e-4 on an AVX2 EPYC against the AVX-512 golden
                rel = 2e-3 if k in ("disc_auc", "grad_norm") else 1e-4
                assert g[k] == pytest.approx(v, rel=rel, abs=1e-5), (g["step"], k)
            else:
                assert g[k] == v, (g["step"], k)


def test_finetune_and_label_give_the_same_predictions(tmp_path, sample_dir):
    import pandas as pd

    got = pd.read_csv(gc.finetune_label(gc_root(), sample_dir, GOLDEN / "tok_wordpiece", tmp_path),
                      encoding="utf-8-sig", keep_default_na=False, dtype=str)
    want = pd.read_csv(GOLDEN / "label_predictions.csv", encoding="utf-8-sig", keep_default_na=False, dtype=str)
    assert list(got.columns) == list(want.columns) and len(got) == len(want)
    probs = [c for c in want.columns if c == "confidence" or c.startswith("prob_")]
    # every column as written; the probabilities to one unit of their 4th decimal: float sums round differently on
    # AVX2 and AVX-512 CPUs (0.2945 vs 0.2946), a change of the maths or of the labels moves far more
    pd.testing.assert_frame_equal(got.drop(columns=probs), want.drop(columns=probs))
    for c in probs:
        g, w = (pd.to_numeric(t[c].where(t[c] != "", None)).astype(float) for t in (got, want))
        assert ((g - w).abs().fillna(0) <= 1.5e-4).all() and (g.isna() == w.isna()).all(), c


def gc_root() -> Path:
    return GOLDEN.parent.parent
