"""A flood of [UNK] is said where the data is reported. A published-style folder without tokenizer_config.json
(vocab.txt, config.json, weights) loads with transformers' BERT default do_lower_case=true, whose accent stripping
takes every Hangul syllable apart into jamo: most tokens became [UNK] and fine-tuning and continued pretraining
ran on them without a word. One warning line names the rate, the cause and the fix; a healthy folder says
nothing. Tiny random models: seconds."""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pandas as pd
import pytest

from koelectra_kit.cli import main

ROOT = Path(__file__).resolve().parent.parent
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def _published(folder: Path, sample_dir: Path, tokenizer_config: dict | None) -> Path:
    """A KoELECTRA-like discriminator folder: vocab.txt of the sample's characters (+ ## forms), config.json and
    weights; tokenizer_config.json only when given."""
    from transformers import ElectraConfig, ElectraForPreTraining

    texts = (sample_dir / "comments.txt").read_text(encoding="utf-8").splitlines()
    texts += pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].dropna().astype(str).tolist()
    chars = sorted({c for t in texts for c in t if not c.isspace() and ord(c) < 0x10000})
    vocab = list(dict.fromkeys(SPECIALS + chars + [f"##{c}" for c in chars]))
    ElectraForPreTraining(ElectraConfig(vocab_size=len(vocab), hidden_size=32, embedding_size=16, num_hidden_layers=2,
                                        num_attention_heads=2, intermediate_size=64)).save_pretrained(folder)
    (folder / "vocab.txt").write_text("".join(t + "\n" for t in vocab), encoding="utf-8")
    if tokenizer_config is not None:
        (folder / "tokenizer_config.json").write_text(json.dumps(tokenizer_config), encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory, sample_dir) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("unk")
    return {"nocfg": _published(root / "nocfg", sample_dir, None),
            "lower": _published(root / "lower", sample_dir, {"do_lower_case": True}),
            "cased": _published(root / "cased", sample_dir, {"do_lower_case": False})}


def _warning(text: str) -> list[str]:
    return [line for line in text.splitlines() if "[UNK]" in line and line.startswith("warning:")]


def test_the_check_names_the_rate_the_cause_and_the_fix(folders, sample_dir):
    from koelectra_kit.tokenizer import KoTokenizer
    from koelectra_kit.tokenizer.unknown import count_unknown, unk_report

    texts = pd.read_csv(sample_dir / "reviews_labelled.csv")["review"].dropna().astype(str).tolist()
    lines = {}
    for name, folder in folders.items():
        tok = KoTokenizer.from_pretrained(folder)
        ids = tok.encode_batch(texts, return_offsets=False)["input_ids"]
        lines[name] = unk_report(tok, *count_unknown(ids, tok.unk_token_id, 2), "the reviews")
    assert lines["cased"] is None  # the same vocabulary, cased: hardly an [UNK]
    nocfg = lines["nocfg"]
    rate = int(re.match(r"warning: (\d+)% of the tokens of the reviews are \[UNK\] \(", nocfg).group(1))
    assert rate > 50 and "\n" not in nocfg
    assert f"add {folders['nocfg'] / 'tokenizer_config.json'}" in nocfg and '{"do_lower_case": false}' in nocfg
    assert f'set "do_lower_case": false in {folders["lower"] / "tokenizer_config.json"}' in lines["lower"]
    # another cause (a vocabulary that does not cover the text) is said without naming lowercasing
    tok = KoTokenizer.from_pretrained(folders["cased"])
    other = unk_report(tok, 30, 100, "the corpus")
    assert other.startswith("warning: 30% of the tokens of the corpus are [UNK] (30 of 100)")
    assert "do_lower_case" not in other
    assert unk_report(tok, 5, 100, "the corpus") is None and unk_report(tok, 0, 0, "nothing") is None


def test_finetune_says_it_and_a_damaged_vocabulary_is_named_for_its_folder(folders, sample_dir, tmp_path, capsys):
    args = ["finetune", "--config", str(ROOT / "configs" / "finetune" / "tiny.yaml"),
            f"train={sample_dir / 'reviews_labelled.csv'}", "epochs=1", "precision=fp32", "references=false",
            "plots=false", "progress=false"]
    assert main(args + [f"model={folders['nocfg']}", f"out={tmp_path / 'a'}"]) == 0
    said = capsys.readouterr()
    (line,) = _warning(said.out + said.err)
    assert "train and dev texts" in line and "do_lower_case" in line
    report = json.loads((tmp_path / "a" / "data_report.json").read_text(encoding="utf-8"))
    assert report["tokens"]["unk_rate"] > 0.5
    assert main(args + [f"model={folders['cased']}", f"out={tmp_path / 'b'}"]) == 0
    said = capsys.readouterr()
    assert _warning(said.out + said.err) == []

    # the fine-tuned folder with another vocab.txt (and no tokenizer.json): the error names the files such a folder
    # has, not those of a koelectra-kit tokenizer (tokenizer.json + koelectra_tokenizer.json), which it never had
    damaged = tmp_path / "damaged"
    shutil.copytree(tmp_path / "b", damaged)
    (damaged / "tokenizer.json").unlink()
    (damaged / "vocab.txt").write_text("".join(t + "\n" for t in SPECIALS + list("가나다라마")), encoding="utf-8")
    texts = tmp_path / "texts.csv"
    texts.write_text("review\n좋아요\n", encoding="utf-8")
    out = tmp_path / "out.csv"
    assert main(["label", f"model={damaged}", f"input={texts}", f"output={out}", "progress=false"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "\n" not in err and "has 10 tokens (vocab.txt)" in err, err
    assert "koelectra_tokenizer.json" not in err and "published checkpoint" in err, err


def test_prepare_and_continued_pretraining_say_it(folders, sample_dir, tmp_path, capsys):
    corpus = f"corpus={sample_dir / 'comments.txt'}"
    assert main(["prepare", "--config", "cpu-continue", f"init={folders['nocfg']}", corpus,
                 f"out={tmp_path / 'prepared'}", f"cache_dir={tmp_path / 'c'}", "progress=false"]) == 0
    (line,) = _warning(capsys.readouterr().err)
    assert "of the corpus" in line and "do_lower_case" in line
    # the run that packs the corpus (here from the cache prepare left) says it too, once
    assert main(["pretrain", "--config", "cpu-continue", f"init={folders['nocfg']}", corpus, f"out={tmp_path / 'r'}",
                 f"cache_dir={tmp_path / 'c'}", "max_steps=1", "batch_size=8", "progress=false", "plots=false"]) == 0
    (line,) = _warning(capsys.readouterr().err)
    assert "do_lower_case" in line
    assert main(["prepare", "--config", "cpu-continue", f"init={folders['cased']}", corpus,
                 f"out={tmp_path / 'prepared2'}", f"cache_dir={tmp_path / 'c'}", "progress=false"]) == 0
    assert _warning(capsys.readouterr().err) == []
