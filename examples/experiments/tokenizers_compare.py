"""Experiment 2: which tokenizer? -> docs/results/tokenizers-<minutes>min.md

    python examples/experiments/tokenizers_compare.py --minutes 30 --parallel 2 --pretrain-parallel 1 --ft max_train_rows=50000

Kiwi pre-split + WordPiece vs plain WordPiece (BERT pre-tokenizer, no Kiwi) vs sentencepiece unigram (byte
fallback), all 8k vocabularies trained on the shared pretraining corpora (common.CORPUS), the same cpu-30min encoder pretrained
for the same wall-clock budget, fine-tuned and scored the same way.

When it exists, the cpu-30min preset's own run (experiment 3's 1/4 arm, runs/experiments/generator-30min/gen0.25)
joins the table, fine-tuned the same way: the preset trains a character vocabulary (`tokenizer_model: characters`:
the corpus's 4,604 characters and their "##" forms, no merged pieces), unlike the WordPiece arms above, which are
real subword vocabularies (half their entries are merged pieces).
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import (CORPUS, ROOT, Arm, check_data, ft_setting, parser, run, run_arms, show, tail_mean,  # noqa: E402
                    write_table)

TOKENIZERS = {
    "Kiwi pre-split + WordPiece 8k": ["presplit=kiwi", "model=wordpiece"],
    "plain WordPiece 8k (no Kiwi)": ["presplit=none", "model=wordpiece"],
    "sentencepiece unigram 8k": ["presplit=none", "model=unigram"],
}
PRESET = ("Kiwi + characters (the cpu-30min preset)", "generator-30min/gen0.25")


def vocab_shape(run_dir: Path) -> str:
    """Share of the vocabulary that is longer than one character (WordPiece "##" and sentencepiece "▁" aside)."""
    import json

    vocab = json.loads((run_dir / "discriminator" / "tokenizer.json").read_text(encoding="utf-8"))["model"]["vocab"]
    pieces = [v[0] if isinstance(v, list) else v for v in vocab]
    pieces = [t.removeprefix("##").removeprefix("\u2581") for t in pieces if not t.startswith(("[", "<0x"))]
    return f"{sum(len(t) > 1 for t in pieces) / len(pieces):.0%}"


def train_tokenizers(runs: Path) -> list[tuple[str, Path, str]]:
    """The three 8k tokenizers under ``runs``/tok<i> (trained unless present): (name, dir, command)."""
    out = []
    for i, (name, settings) in enumerate(TOKENIZERS.items()):
        tok_dir = runs / f"tok{i}"
        argv = ["tokenizer", "train", "--config", "configs/tokenizer/small-budget.yaml",
                f"input=[{','.join(str(p) for p in CORPUS)}]", f"out={tok_dir}", "progress=false", *settings]
        if not (tok_dir / "tokenizer.json").exists():
            run(argv, runs / f"tok{i}.log")
        out.append((name, tok_dir, show(argv)))
    return out


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"tokenizers-{args.minutes:g}min"
    tokenizers = train_tokenizers(runs)
    arms = [Arm(name, runs / f"pre{i}", runs / f"ft{i}", [f"tokenizer={tok_dir}"])
            for i, (name, tok_dir, _) in enumerate(tokenizers)]
    tok_cmds = [f"`{cmd}`" for _, _, cmd in tokenizers]
    preset = Path(args.runs) / PRESET[1]
    if (preset / "summary.json").exists():
        arms.append(Arm(PRESET[0], preset, runs / f"ft{len(arms)}"))
        tok_cmds.append("trained by the pretrain command (no tokenizer=; the preset's `tokenizer_model: characters`)")
    pres, rows = run_arms(args, arms)
    notes = [f"| {arm.label} | {vocab_shape(arm.out)} | {pre['data']['tokens'] / 1e6:.1f}M | "
             f"{pre['tokens'] / 1e6:.1f}M | {tail_mean(arm.out, 'gen_acc'):.3f} | "
             f"{tail_mean(arm.out, 'disc_auc'):.3f} | {tok_cmd} |" for arm, pre, tok_cmd in zip(arms, pres, tok_cmds)]
    extra = ["## Tokenizers and pretraining", "", "Multi-character: share of the vocabulary longer than one character. "
             "Corpus tokens differ by tokenizer (a finer split gives more tokens for the same text); the pretraining "
             "budget is the same wall-clock. Gen acc and disc AUC: mean of the last 5 logged rows; they are not "
             "comparable across vocabularies (predicting one of 8k characters is easier than one of 8k subwords).", "",
             "| tokenizer | multi-character | corpus tokens | tokens seen | gen acc | disc AUC | tokenizer command |",
             "|---|---|---|---|---|---|---|", *notes]
    write_table(ROOT / "docs" / "results" / f"tokenizers-{args.minutes:g}min.md", "Experiment 2: tokenizers",
                f"cpu-30min encoder, {args.minutes:g} minutes of pretraining each on 2 CPU cores, fine-tuned with "
                f"{ft_setting(args)}; nsmc3/dev scores.", rows, extra)


if __name__ == "__main__":
    main()
