"""Experiment 2: which tokenizer? (issue 7) -> docs/results/tokenizers.md

    python examples/experiments/tokenizers_compare.py --minutes 10 --ft max_train_rows=30000

Kiwi pre-split + WordPiece vs plain WordPiece (BERT pre-tokenizer, no Kiwi) vs sentencepiece unigram (byte
fallback), all 8k vocabularies trained on ../shared/data/pretrain/*.txt, the same cpu-30min encoder pretrained
for the same wall-clock budget, fine-tuned and scored the same way.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from common import CORPUS, ROOT, check_data, show, finetune_all, ft_row, parser, pretrain_all, run, tail_mean, write_table  # noqa: E402

TOKENIZERS = {
    "Kiwi pre-split + WordPiece 8k": ["presplit=kiwi", "model=wordpiece"],
    "plain WordPiece 8k (no Kiwi)": ["presplit=none", "model=wordpiece"],
    "sentencepiece unigram 8k": ["presplit=none", "model=unigram"],
}


def main() -> None:
    args = parser(__doc__).parse_args()
    check_data()
    runs = Path(args.runs) / f"tokenizers-{args.minutes:g}min"
    rows, notes, tok_cmds = [], [], []
    for i, (name, settings) in enumerate(TOKENIZERS.items()):
        tok_dir = runs / f"tok{i}"
        argv = ["tokenizer", "train", "--config", "configs/tokenizer/small-budget.yaml",
                f"input=[{','.join(str(p) for p in CORPUS)}]", f"out={tok_dir}", "progress=false", *settings]
        if not (tok_dir / "tokenizer.json").exists():
            run(argv, runs / f"tok{i}.log")
        tok_cmds.append(show(argv))
    pres = pretrain_all([(runs / f"pre{i}", "cpu-30min", [f"tokenizer={runs / f'tok{i}'}"]) for i in range(len(TOKENIZERS))],
                        args.minutes, args.fresh, args.pretrain_parallel or args.parallel)
    specs, names = [], []
    for i, (name, pre) in enumerate(zip(TOKENIZERS, pres)):
        notes.append(f"| {name} | {pre['data']['tokens'] / 1e6:.1f}M | {pre['tokens'] / 1e6:.1f}M | "
                     f"{tail_mean(runs / f'pre{i}', 'gen_acc'):.3f} | {tail_mean(runs / f'pre{i}', 'disc_auc'):.3f} | "
                     f"`{tok_cmds[i]}` |")
        for seed in args.seeds:
            specs.append((runs / f"ft{i}-s{seed}", runs / f"pre{i}" / "discriminator", seed, "pretrained"))
            names.append((name, pre, seed))
    for (name, pre, seed), ft in zip(names, finetune_all(specs, args.ft, args.fresh, args.parallel)):
        rows.append(ft_row(name, pre, ft, seed))
    extra = ["## Tokenizers and pretraining", "", "Corpus size in tokens differs by tokenizer (a finer split gives "
             "more tokens for the same text); the pretraining budget is the same wall-clock.", "",
             "| tokenizer | corpus tokens | tokens seen | gen acc | disc AUC | tokenizer command |",
             "|---|---|---|---|---|---|", *notes]
    write_table(ROOT / "docs" / "results" / "tokenizers.md", "Experiment 2: tokenizers",
                f"cpu-30min encoder, {args.minutes:g} minutes of pretraining each, fine-tuned with "
                "configs/finetune/sentiment.yaml" + (f" plus `{' '.join(args.ft)}`" if args.ft else "") +
                "; nsmc3/dev scores.", rows, extra)


if __name__ == "__main__":
    main()
