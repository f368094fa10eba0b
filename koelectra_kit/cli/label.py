"""``koelectra-kit label``: label every row of a review file with a fine-tuned classifier."""
from __future__ import annotations

import argparse

EPILOG = """\
examples:
  koelectra-kit label --model runs/sentiment --input reviews.csv --text-column review --output labelled.csv
  koelectra-kit label --model runs/sentiment --input big.tsv --text-column document --output out.csv --resume
  koelectra-kit label --model runs/sentiment --input export.csv --encoding cp949 --quantize --plot dist.png ...

Output: the input's columns unchanged and in order, then label, confidence, prob_<label> per class and status
(ok | empty | truncated | error: malformed line N ...): exactly the input's rows in the input's order.
Written to OUTPUT.partial and renamed when complete; after a crash or Ctrl-C, --resume continues from the last
finished chunk."""


def register(subparsers) -> None:
    p = subparsers.add_parser("label", help="label a CSV/TSV/JSONL/Parquet file of reviews (streaming, resumable)",
                              description="Batch-label review files with a fine-tuned classifier.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="fine-tuned model dir (output of finetune) or hub id")
    p.add_argument("--input", required=True, help="file to label: .csv .tsv .jsonl .parquet")
    p.add_argument("--output", required=True, help="labelled file to write: .csv .tsv .jsonl")
    p.add_argument("--text-column", default="review", help="column holding the text (default: review)")
    p.add_argument("--format", choices=["csv", "tsv", "jsonl", "parquet"], help="input format (default: extension)")
    p.add_argument("--sep", help="field separator for csv-like input (default: by extension)")
    p.add_argument("--encoding", help="input encoding (default: detect utf-8 / utf-8 with BOM / cp949)")
    p.add_argument("--output-encoding", help="output encoding (default: utf-8-sig for .csv so Excel reads it)")
    p.add_argument("--batch-size", type=int, default=64)
    p.add_argument("--chunk-rows", type=int, default=20000, help="rows read, labelled and written at a time")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    p.add_argument("--quantize", action="store_true", help="int8 dynamic quantization (CPU): faster, ~same labels")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: all cores)")
    p.add_argument("--resume", action="store_true", help="continue an interrupted run from its last chunk")
    p.add_argument("--plot", metavar="PNG", help="also draw the label distribution as a bar chart")
    p.add_argument("--no-progress", action="store_true")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..label import format_summary, label_file

    try:
        summary = label_file(args.model, args.input, args.output, args.text_column, fmt=args.format, sep=args.sep,
                             encoding=args.encoding, output_encoding=args.output_encoding,
                             batch_size=args.batch_size, chunk_rows=args.chunk_rows, device=args.device,
                             precision=args.precision, quantize=args.quantize, threads=args.threads,
                             resume=args.resume, plot=args.plot, progress=not args.no_progress)
    except KeyboardInterrupt:
        print(f"\ninterrupted: finished chunks are kept in {args.output}.partial; rerun with --resume to continue")
        return 130
    print(format_summary(summary))
    if args.plot:
        print(f"  label distribution: {args.plot}")
    return 0
