"""``koelectra-kit label``: label every row of a review file with a fine-tuned classifier."""
from __future__ import annotations

import argparse
from pathlib import Path

from . import add_config_args, config_from_args

EPILOG = """\
examples:
  koelectra-kit label --model runs/sentiment --input reviews.csv --text-column review --output labelled.csv
  koelectra-kit label --model runs/sentiment --input big.tsv --text-column document --output out.csv --resume
  koelectra-kit label --model runs/sentiment --input export.csv --encoding cp949 --quantize --plot dist.png ...
  koelectra-kit label --config my-label.yaml batch_size=128        # the same options as a YAML + key=value

Output: the input's columns unchanged and in order, then label, confidence, prob_<label> per class and status
(ok | empty | truncated | error: malformed line N ...): exactly the input's rows in the input's order. When the
input already has a column of one of those names, the added columns are called pred_label, pred_status, ...
Written to OUTPUT.partial and renamed when complete; after a crash or Ctrl-C, --resume continues from the last
finished chunk (refused when the input, column or model differ). An existing OUTPUT needs --overwrite."""

# flag -> (config key, argparse options); each flag is also a config key (LabelConfig), so a YAML or key=value
# says the same thing
FLAGS = {
    "--model": ("model", {"help": "fine-tuned model dir (output of finetune) or hub id"}),
    "--input": ("input", {"help": "file to label: .csv .tsv .jsonl .parquet"}),
    "--output": ("output", {"help": "labelled file to write: .csv .tsv .jsonl"}),
    "--text-column": ("text_column", {"help": "column holding the text (default: review)"}),
    "--format": ("format", {"choices": ["csv", "tsv", "jsonl", "parquet"], "help": "input format (default: extension)"}),
    "--sep": ("sep", {"help": "field separator for csv-like input (default: by extension)"}),
    "--encoding": ("encoding", {"help": "input encoding (default: detect utf-8 / utf-8 with BOM / cp949)"}),
    "--encoding-errors": ("encoding_errors", {"choices": ["strict", "replace"],
                                              "help": "replace: label lines with undecodable bytes anyway, flagged "
                                                      "(default strict: an error naming the line)"}),
    "--output-encoding": ("output_encoding", {"help": "output encoding (default: utf-8-sig for .csv so Excel reads it)"}),
    "--batch-size": ("batch_size", {"type": int, "help": "texts per model call (default 64)"}),
    "--chunk-rows": ("chunk_rows", {"type": int, "help": "rows read, labelled and written at a time (default 20000)"}),
    "--device": ("device", {"help": "auto | cpu | cuda"}),
    "--precision": ("precision", {"choices": ["auto", "fp32", "bf16", "fp16"]}),
    "--threads": ("threads", {"type": int, "help": "torch CPU threads (default: all cores)"}),
    "--plot": ("plot", {"metavar": "PNG", "help": "also draw the label distribution as a bar chart"}),
}
SWITCHES = {
    "--quantize": ("quantize", "int8 dynamic quantization (CPU): faster, ~same labels"),
    "--resume": ("resume", "continue an interrupted run from its last chunk"),
    "--overwrite": ("overwrite", "replace an existing output file"),
    "--allow-generic-labels": ("allow_generic_labels", "accept a model whose labels are LABEL_0, LABEL_1, ... "
                                                       "(no trained classification head)"),
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
    add_config_args(p, None)
    p.set_defaults(func=run)


def run(args) -> int:
    from ..label import LabelConfig, format_summary
    from ..label.run import FileLabeller

    keys = [key for key, _ in FLAGS.values()] + [key for key, _ in SWITCHES.values()] + ["progress"]
    cfg = config_from_args(LabelConfig, args, {k: getattr(args, k) for k in keys})
    labeller = FileLabeller(cfg)
    try:
        summary = labeller.run()
    except KeyboardInterrupt:
        partial = Path(cfg.output + ".partial")
        if labeller.state_path_exists():
            print(f"\ninterrupted: finished chunks are kept in {partial}; rerun with --resume to continue")
        else:
            print("\ninterrupted before the first chunk was written: nothing to keep; rerun to start again")
        return 130
    print(format_summary(summary))
    if cfg.plot:
        print(f"  label distribution: {cfg.plot}")
    return 0
