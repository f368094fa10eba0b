"""``koelectra-kit pretrain``: ELECTRA (or MLM) pretraining on a text corpus; also ``pretrain plot RUN``."""
from __future__ import annotations

import argparse

from . import add_config_args
from .launch import nproc_arg

EPILOG = """\
examples:
  koelectra-kit pretrain --config configs/pretrain/tiny.yaml corpus=corpora/sample/comments.txt out=runs/tiny
  koelectra-kit pretrain --config configs/pretrain/small.yaml corpus=[a.txt,b.csv] text_column=comment \\
      tokenizer=runs/tok out=runs/small max_minutes=600
  koelectra-kit pretrain --config configs/pretrain/small.yaml ... out=runs/small resume=true   # continue
  koelectra-kit pretrain --nproc 4 --config configs/pretrain/base.yaml ...   # DDP: 4 ranks, one a GPU
  torchrun --nproc_per_node=4 -m koelectra_kit pretrain --config configs/pretrain/base.yaml ...  # the same
  koelectra-kit pretrain plot runs/small           # redraw runs/small/curves.png from metrics.jsonl
  koelectra-kit pretrain --config gpu-10min prepared=data/comments out=runs/gpu10   # from `koelectra-kit prepare`

Every key of PretrainConfig (koelectra_kit/pretrain/config.py; all listed with comments in the presets)
can be overridden: model.hidden_size=128 generator.size=0.5 lr=1e-3 schedule=one_cycle
warmup_ratio=0.1 mask_prob=0.25 seq_len=64 max_minutes=30 objective=mlm ...
Writes OUT/: config.yaml, metrics.jsonl, checkpoints/, discriminator/ (the encoder to fine-tune,
with its tokenizer), generator/, curves.png, summary.json (and tokenizer/ when it trained one)."""


def register(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", help="pretrain an ELECTRA discriminator (or an MLM encoder) on a text corpus",
        description="ELECTRA pretraining (replaced token detection) on your corpus: packed data cache, "
                    "bf16/fp16, gradient accumulation, exact resume, torchrun DDP; exports a Hugging Face "
                    "model dir. 'pretrain plot RUN_DIR' redraws a run's learning curves.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    add_config_args(p, None)
    p.add_argument("--print-config", action="store_true",
                   help="print the resolved config (defaults <- YAML <- overrides) and exit")
    p.add_argument("--plot", metavar="RUN_DIR", default=None,
                   help="only redraw RUN_DIR/curves.png from RUN_DIR/metrics.jsonl (same as 'pretrain plot RUN_DIR')")
    p.add_argument("--nproc", metavar="N", type=nproc_arg, default=None,
                   help="DDP on this machine: N ranks (auto: one per GPU), started as torchrun --standalone would, "
                        "after the config is checked once; rank 0 writes to the terminal, the others to logs")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import ConfigError

    overrides = list(args.overrides)
    plot_dir = args.plot
    if plot_dir is not None and not plot_dir.strip():  # --plot= (an unset variable): was a training run's errors
        raise ConfigError("--plot is empty: give the run folder whose curves to redraw (--plot RUN_DIR)")
    if overrides and overrides[0] == "plot":
        if len(overrides) != 2:
            raise ConfigError("usage: koelectra-kit pretrain plot RUN_DIR")
        if plot_dir is not None:
            raise ConfigError("give the run folder once: pretrain plot RUN_DIR, or pretrain --plot RUN_DIR")
        plot_dir, overrides = overrides[1], []
    if plot_dir:
        # a redraw reads RUN_DIR/metrics.jsonl only: a key=value, --config, --print-config or --nproc given with it
        # was ignored
        ignored = [*overrides, *(["--config"] if args.config else []),
                   *(["--print-config"] if args.print_config else []), *(["--nproc"] if args.nproc else [])]
        if ignored:
            raise ConfigError(f"pretrain plot only redraws {plot_dir}/curves.png from its metrics.jsonl; it takes no "
                              f"{' '.join(ignored)}: drop them")
        from ..pretrain import plot_curves

        print(f"wrote {plot_curves(plot_dir)}")
        return 0

    from ..config import dump_yaml, load_config
    from ..pretrain import PretrainConfig, pretrain

    cfg = load_config(PretrainConfig, args.config, overrides)
    if args.print_config:
        print(dump_yaml(cfg), end="")
        return 0
    if args.nproc is not None:
        from .launch import launch, resolve_nproc

        nproc = resolve_nproc(args.nproc, cfg.device)
        if nproc > 1:
            from ..pretrain.preflight import check_run

            check_run(cfg, nproc)
            from .launch import STOP_GRACE_S

            return launch(["pretrain", *(["--verbose"] if args.verbose else [])], nproc, config=cfg,
                          resume="rerun the same command with resume=true to continue from the last checkpoint",
                          grace_s=STOP_GRACE_S)
    from ..errors import Interrupted

    try:
        summary = pretrain(cfg)
    except Interrupted as e:  # Ctrl-C, after the checkpoint and the export: said below, as a SIGTERM's stop is
        summary = e.result
    if summary.get("stopped") == "interrupted":
        # the checkpoint and the encoder at that step are written, but the budget is not used up: as finetune,
        # a script must be able to tell
        from .launch import note_interrupted

        note_interrupted()  # (a rank of --nproc: it said how to go on)
        return 130
    return 0
