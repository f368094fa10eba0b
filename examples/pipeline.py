"""The main job as a readable script: tokenizer -> ELECTRA pretraining -> sentiment fine-tuning -> labelling.

    python examples/pipeline.py                      # the bundled sample, tiny presets, ~2 minutes on a CPU
    python examples/pipeline.py --corpus my_comments.txt --labelled my_reviews.csv --unlabelled new.csv

Each step is the Python API behind one CLI command (shown in the comment above it), so you can stop after
any step, inspect its output directory, and go on from there.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from koelectra_kit.config import load_config
from koelectra_kit.finetune import FinetuneConfig, finetune
from koelectra_kit.label import format_summary, label_file
from koelectra_kit.pretrain import PretrainConfig, pretrain
from koelectra_kit.tokenizer import TokenizerConfig, train_tokenizer

ROOT = Path(__file__).resolve().parents[1]
SAMPLE = ROOT / "corpora" / "sample"
PRESETS = ROOT / "configs"  # the same files are installed with the package: load_config(cls, "tiny") finds them

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--corpus", default=str(SAMPLE / "comments.txt"))
ap.add_argument("--labelled", default=str(SAMPLE / "reviews_labelled.csv"))
ap.add_argument("--unlabelled", default=str(SAMPLE / "reviews_unlabelled.csv"))
ap.add_argument("--text-column", default="review")
ap.add_argument("--out", default="runs/pipeline")
ap.add_argument("--preset", default="tiny")
args = ap.parse_args()
out = Path(args.out)

# 1. Tokenizer: normalize -> Kiwi morpheme pre-split -> WordPiece
#    koelectra-kit tokenizer train --config configs/tokenizer/tiny.yaml input=CORPUS out=OUT/tokenizer
tok_cfg = load_config(TokenizerConfig, PRESETS / "tokenizer" / f"{args.preset}.yaml",
                      [f"input={args.corpus}", f"out={out / 'tokenizer'}"])
tok = train_tokenizer(tok_cfg)
print("pieces of a noisy comment:", tok.encode("배우들 연기 ㅋㅋㅋㅋ 대박이었음!!!").tokens)

# 2. Pretrain ELECTRA: generator + discriminator, replaced token detection; exports OUT/pretrain/discriminator
#    koelectra-kit pretrain --config configs/pretrain/tiny.yaml corpus=CORPUS tokenizer=OUT/tokenizer out=OUT/pretrain
pre_cfg = load_config(PretrainConfig, PRESETS / "pretrain" / f"{args.preset}.yaml",
                      [f"corpus={args.corpus}", f"tokenizer={out / 'tokenizer'}", f"out={out / 'pretrain'}",
                       "overwrite=true"])
summary = pretrain(pre_cfg)
print("pretraining:", summary["steps"], "steps; final metrics:", {k: summary["final"].get(k) for k in
                                                                 ("gen_acc", "disc_auc")})

# 3. Fine-tune positive / negative / neutral from the discriminator (dev: a stratified split of the file)
#    koelectra-kit finetune --config configs/finetune/tiny.yaml model=OUT/pretrain/discriminator train=LABELLED out=OUT/sentiment
ft_cfg = load_config(FinetuneConfig, PRESETS / "finetune" / f"{args.preset}.yaml",
                     [f"model={out / 'pretrain' / 'discriminator'}", f"train={args.labelled}",
                      f"out={out / 'sentiment'}"])
result = finetune(ft_cfg)  # Ctrl-C: the best model so far is written, then KeyboardInterrupt stops the script
# best_model: the folder that scored best on dev (OUT/sentiment, or its ensemble/ or tfidf/ with ensemble=tfidf)
print("best on dev:", result["best_model"])

# 4. Label every row of a CSV (streaming, resumable; status column flags empty/truncated/malformed rows)
#    koelectra-kit label --model BEST_MODEL --input UNLABELLED --text-column review --output OUT/labelled.csv
s = label_file(result["best_model"], args.unlabelled, out / "labelled.csv", args.text_column, overwrite=True)
print(format_summary(s))
