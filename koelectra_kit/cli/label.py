"""``koelectra-kit label``: label every row of review files with a fine-tuned classifier; ``koelectra-kit
label-merge``: join the outputs of ``label --shard K/N`` into one file."""
from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from . import add_config_args, config_from_args
from .launch import nproc_arg

EPILOG = """\
examples:
  koelectra-kit label --model runs/sentiment --input reviews.csv --text-column review --output labelled.csv
  koelectra-kit label --model runs/sentiment --input big.tsv --text-column document --output out.csv --resume
  koelectra-kit label --model runs/sentiment --input export.csv --encoding cp949 --quantize --plot dist.png ...
  koelectra-kit label --config my-label.yaml batch_size=128        # the same options as a YAML + key=value
  koelectra-kit label --model runs/sentiment --input 'exports/*.csv' --output labelled/   # one output per file
  koelectra-kit label --model runs/sentiment --input a.csv b.tsv --output-suffix .labelled.csv
  koelectra-kit label --model runs/sentiment --input reviews.csv --output out.csv --human-labels LABELS.csv
  koelectra-kit label --model runs/sentiment --input big.csv --output out.csv --shard 3/8   # -> out.shard-3-of-8.csv
  koelectra-kit label-merge out.csv                                 # shards 1..8 -> out.csv, as one run writes it
  koelectra-kit label --nproc 8 --model runs/sentiment --input big.csv --output out.csv
                                          # a shard per GPU, joined into out.csv by rank 0 (as under torchrun)

Output: the input's columns unchanged and in order, then label, confidence, prob_<label> per class and status
(ok | empty | truncated | error: malformed line N ...): exactly the input's rows in the input's order. When the
input already has a column of one of those names, the added columns are called pred_label, pred_status, ...
(pred2_label, ... when those are taken too: a labelled file labelled again keeps the first model's columns).
Written to OUTPUT.partial and renamed when complete; after a crash or Ctrl-C, --resume continues from the last
finished chunk (refused when the input, column, model, labels file or output encoding differ). An existing OUTPUT needs --overwrite.
A text seen before (same text after normalization) reuses its prediction: same output, less work (--no-dedupe
analyses every row). --shard K/N labels rows [(K-1)R/N, KR/N) of the R rows, so N commands cover the file once."""

# flag -> (config key, argparse options); each flag is also a config key (LabelConfig), so a YAML or key=value
# says the same thing
FLAGS = {
    "--model": ("model", {"help": "fine-tuned model dir (output of finetune) or hub id"}),
    "--input": ("input", {"nargs": "+", "metavar": "FILE",
                          "help": "file(s) to label: .csv .tsv .jsonl .parquet .xlsx .txt (a review a line), a "
                                  "dataset; several, or a quoted glob 'd/*.csv'"}),
    "--output": ("output", {"help": "labelled file to write: .csv .tsv .jsonl .xlsx (Excel: made at the end from a "
                            "resumable CSV); with several inputs a folder"}),
    "--output-suffix": ("output_suffix", {"metavar": "SUFFIX", "help": "write INPUT_STEM+SUFFIX beside each input "
                                                                       "(e.g. .labelled.csv) instead of --output"}),
    "--shard": ("shard", {"metavar": "K/N", "help": "label only the K-th of N equal row ranges, into "
                                                    "OUTPUT.shard-K-of-N.EXT (join them with label-merge; N at "
                                                    "most 10000)"}),
    "--backend": ("backend", {"choices": ["auto", "torch", "onnx"],
                              "help": "inference engine (default auto: what the classifier picks)"}),
    "--cache-rows": ("cache_rows", {"type": int, "help": "predictions remembered for repeated texts across chunks "
                                                         "(default 100000; 0: within a chunk only)"}),
    "--text-column": ("text_column", {"help": "column holding the text (default: review, else the first of text, "
                                                "document, comment, ... that exists, with a note)"}),
    "--format": ("format", {"choices": ["csv", "tsv", "jsonl", "parquet", "txt"],
                            "help": "input format (default: extension; txt: one review per line, no header)"}),
    "--sep": ("sep", {"help": "field separator for csv-like input (default: by extension)"}),
    "--encoding": ("encoding", {"help": "input encoding (default: detect utf-8 / utf-8 with BOM / cp949)"}),
    "--encoding-errors": ("encoding_errors", {"choices": ["strict", "replace"],
                                              "help": "replace: label the rest; a line with undecodable bytes is kept, "
                                                      "unlabelled, its status saying so (default strict: an error "
                                                      "naming the line)"}),
    "--output-encoding": ("output_encoding", {"help": "output encoding (default: utf-8-sig for .csv so Excel reads it)"}),
    "--batch-size": ("batch_size", {"type": int, "help": "texts per model call, at most 4096 (default 128; 256 on "
                                                      "a GPU)"}),
    "--chunk-rows": ("chunk_rows", {"type": int, "help": "rows read, labelled and written at a time (default 20000)"}),
    "--device": ("device", {"help": "auto | cpu | cuda"}),
    "--precision": ("precision", {"choices": ["auto", "fp32", "bf16", "fp16"]}),
    "--threads": ("threads", {"type": int, "help": "torch CPU threads (default: all cores)"}),
    "--human-labels": ("human_labels", {"metavar": "LABELS", "help": "your own labels win: the app's LABELS.csv or a "
                                                                     "text+label table; adds label_source, model_label"}),
    "--plot": ("plot", {"metavar": "PNG", "help": "also draw the label distribution as a bar chart"}),
}
SWITCHES = {
    "--quantize": ("quantize", "int8 dynamic quantization (CPU): faster, ~same labels"),
    "--resume": ("resume", "continue an interrupted run from its last chunk"),
    "--overwrite": ("overwrite", "replace an existing output file"),
    "--allow-generic-labels": ("allow_generic_labels", "accept a model whose labels are LABEL_0, LABEL_1, ... "
                                                       "(no trained classification head)"),
    "--allow-mostly-empty": ("allow_mostly_empty", "label a text column even when 90%% of its first rows are "
                                                   "empty (they get status empty)"),
}


def register(subparsers) -> None:
    p = subparsers.add_parser("label", help="label a CSV/TSV/JSONL/Parquet file of reviews (streaming, resumable)",
                              description="Batch-label review files with a fine-tuned classifier.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    for flag, (key, opts) in FLAGS.items():
        p.add_argument(flag, dest=key, default=None, **opts)
    for flag, (key, help_text) in SWITCHES.items():
        p.add_argument(flag, dest=key, action="store_true", default=None, help=help_text)
    p.add_argument("--no-progress", dest="progress", action="store_false", default=None)
    p.add_argument("--no-dedupe", dest="dedupe", action="store_false", default=None,
                   help="analyse every row, also exact repeats (the output is the same, only slower)")
    p.add_argument("--nproc", metavar="N", type=nproc_arg, default=None,
                   help="N processes on this machine (auto: one per GPU), a shard each, joined into the one output "
                        "(as torchrun --nproc_per_node=N -m koelectra_kit label does)")
    add_config_args(p, None)
    p.set_defaults(func=run)
    m = subparsers.add_parser("label-merge", help="join the outputs of `label --shard K/N` into one file",
                              description="Concatenate OUTPUT.shard-1-of-N.EXT ... OUTPUT.shard-N-of-N.EXT (all "
                                          "complete) into OUTPUT, the header once: an unsharded run's rows; its "
                                          "probabilities within 0.01 in bf16, 0.0001 in fp32 (batches differ).")
    m.add_argument("output", help="the --output the shards were labelled with (e.g. out.csv)")
    m.add_argument("--overwrite", action="store_true", help="replace an existing OUTPUT")
    m.set_defaults(func=run_merge)


def _split_inputs(args) -> None:
    """``--input a.csv b.csv`` takes every value up to the next flag, so ``--input a.csv batch_size=8`` would
    swallow the override: a value shaped key=value that is no existing file goes back to the overrides (where a
    mistyped key still gets its "did you mean")."""
    import re

    if not args.input:
        return
    kept = []
    for value in args.input:
        if re.match(r"[A-Za-z_][\w.]*=", value) and not Path(value).exists():
            args.overrides = [*args.overrides, value]
        else:
            kept.append(value)
    args.input = kept


def label_config(args):
    """The ``LabelConfig`` a parsed ``label`` command line means (validated; reads no file)."""
    from ..label import LabelConfig

    _split_inputs(args)
    keys = [key for key, _ in FLAGS.values()] + [key for key, _ in SWITCHES.values()] + ["progress", "dedupe"]
    flags = {k: getattr(args, k) for k in keys if k != "input"}
    if args.input:  # a list: handed over as a YAML flow list (a JSON list is one), after the user's overrides
        args.overrides = [*args.overrides, f"input={json.dumps(args.input, ensure_ascii=False)}"]
    return config_from_args(LabelConfig, args, flags)


def run(args) -> int:
    from ..label import FilesLabeller, format_summary
    from ..label.torchrun import Launch

    cfg = label_config(args)
    if args.nproc is not None:
        from .launch import launch as launch_ranks, resolve_nproc

        nproc = resolve_nproc(args.nproc, cfg.device, gpu_each=False)  # label's ranks may share a GPU
        if nproc > 1:
            from ..label.torchrun import check_job

            check_job(cfg, nproc)  # what the ranks would refuse, said before any of them loads the model
            return launch_ranks(["label", *(["--verbose"] if args.verbose else [])], nproc, config=cfg,
                                resume="rerun the same command with --resume to continue from the finished chunks")
    launch = Launch.from_env()  # under torchrun: this rank's shard, joined by rank 0 at the end
    if launch is not None:
        plot, cfg = cfg.plot, launch.rank_config(cfg)
    labeller = FilesLabeller(cfg, keep_complete=launch is not None, skip=launch.finished if launch else ())
    labelled = False
    try:
        if launch is not None:
            launch.meet()
        summaries = labeller.run()
        labelled = True
        if launch is not None:
            summaries = launch.join(summaries)
            if not launch.is_main:
                return 0
            cfg = replace(cfg, plot=plot)
    except KeyboardInterrupt:
        from .launch import note_interrupted

        current = labeller.current
        partial = getattr(current, "partial", None)  # beside the output's target when --output is a symlink
        if launch is not None and launch.joining:
            print("\ninterrupted while joining the shards: each output is either joined whole or still in its "
                  "complete shards; rerun with --resume for the inputs not joined yet")
        elif labelled:
            print("\ninterrupted while this process waited for the others: its shard is complete; rerun with "
                  "--resume to continue")
        elif current is not None and current.state_path_exists():
            print(f"\ninterrupted: finished chunks are kept in {partial}; rerun with --resume to continue")
        else:
            print("\ninterrupted before the first chunk was written: nothing to keep; rerun to start again")
        note_interrupted()  # (a rank of --nproc: it said how to go on)
        return 130
    finally:
        if launch is not None:
            launch.leave()
    for summary in summaries:
        print(format_summary(summary))
    if len(summaries) > 1:
        print(f"{len(summaries)} files, {sum(s.rows for s in summaries):,} rows in all")
    if launch is not None and summaries:
        print(f"  by {launch.world} processes side by side (torchrun), each labelling a shard; the shards joined")
    if cfg.plot:
        print(f"  label distribution: {cfg.plot}")
    return 0


def run_merge(args) -> int:
    from ..label import merge_shards

    out, n = merge_shards(args.output, overwrite=args.overwrite)
    print(f"merged {n} shards -> {out} (the shard files are kept; delete them once you have checked it)")
    return 0
