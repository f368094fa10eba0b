"""``koelectra-kit prepare``: the CPU half of pretraining (tokenizer, Kiwi's pre-split, packing) into a folder that
``pretrain prepared=DIR`` trains from on another machine, without the corpus or Kiwi there."""
from __future__ import annotations

import argparse

from . import add_config_args

EPILOG = """\
examples:
  koelectra-kit prepare --config gpu-10min corpus=comments.txt out=data/comments          # on a CPU machine
  koelectra-kit pretrain --config gpu-10min prepared=data/comments out=runs/gpu10         # on the GPU machine
  koelectra-kit prepare --config gpu-10min corpus=[a.txt,b.csv] text_column=comment tokenizer=runs/tok out=data/ab

The keys are pretrain's (the same --config works for both): corpus, text_column, tokenizer (else one is trained:
vocab_size, tokenizer_model, presplit), init (continued pretraining: its tokenizer), seq_len, cache_dir,
num_workers. Writes OUT/: tokenizer/, rows.arrow, meta.json, prepared.json (what made them)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "prepare", help="prepare pretraining data once (tokenizer + packed ids) to train from anywhere",
        description="Tokenize and pack a corpus for pretraining into a folder; `koelectra-kit pretrain "
                    "prepared=DIR` trains from it on another machine, with neither the corpus nor Kiwi there.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, None)
    p.add_argument("--print-config", action="store_true", help="print the resolved config and exit")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..config import dump_yaml, load_config, parse_overrides
    from ..errors import ConfigError
    from ..runtime import warn
    from ..pretrain import PretrainConfig
    from ..pretrain.prepared import prepare

    cfg = load_config(PretrainConfig, args.config, list(args.overrides))
    if args.print_config:
        print(dump_yaml(cfg), end="")
        return 0
    if cfg.prepared:
        raise ConfigError("prepare makes a prepared folder (out=DIR) from corpus=; it takes no prepared=")
    ignored = sorted(set(parse_overrides(list(args.overrides))) - PREPARE_KEYS)
    if ignored:  # a pretrain command line given to prepare (resume=true, lr=...): accepted, and nothing said
        warn(f"note: prepare packs the data; {', '.join(ignored)} {'is' if len(ignored) == 1 else 'are'} for the "
             "training run: give them to `koelectra-kit pretrain prepared=...`")
    prepare(cfg)
    return 0


# The keys prepare uses: the corpus, the tokenizer (given, init's, or the one it trains) and the packing
PREPARE_KEYS = {"corpus", "text_column", "tokenizer", "init", "vocab_size", "tokenizer_model", "presplit", "seq_len",
                "num_workers", "cache_dir", "out", "overwrite", "progress"}
