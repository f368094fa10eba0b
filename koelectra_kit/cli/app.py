"""``koelectra-kit app``: a local labelling web page (try one review, label a file, review, download)."""
from __future__ import annotations

import argparse
import math

EPILOG = """\
examples:
  koelectra-kit app --model runs/quickstart/sentiment                 # then open http://127.0.0.1:7860
  koelectra-kit app --model runs/sentiment --port 8080 --max-upload-mb 500
  koelectra-kit app --model runs/pretrain/discriminator --teach reviews.csv --labels labels.csv   # teach mode
  koelectra-kit app --model runs/sentiment --labels fixes.csv      # fixes to reviewed rows go to fixes.csv

Teach mode (--teach POOL --labels LABELS.csv): the page shows one review of POOL at a time, the one the model is
least sure about, with its guess; keys 1/2/3 answer, s skips, u undoes. Every answer is appended to LABELS.csv at
once (an append-only log: reopening continues). After every --retrain-every new labels (and on the button) the
finetune recipe runs again in the background on the labels so far, from the encoder (--model's own, or
--encoder), with TF-IDF and the ensemble; the best of the three on dev (--dev, else a held-out 10%) then serves.
Rounds go to LABELS.teach/ beside LABELS.csv.

Needs the app extra: pip install 'koelectra-kit[app]'. Binds to 127.0.0.1 (this computer only) unless --host
says otherwise. Only the analyst drives it: a request must name the app by its bound address (127.0.0.1,
localhost, [::1] on loopback; the --host given otherwise), a cross-site page may not POST or DELETE, and with a
--host that is not loopback every request needs the per-run token printed in the URL (?token=...; the page keeps
it in a cookie). Uploads and results live in a temporary folder: an upload is deleted once its result is
downloaded, everything when the app stops (Ctrl-C)."""


def register(subparsers) -> None:
    p = subparsers.add_parser("app", help="local web page: try a review, label a file, review and download",
                              description="Serve the labelling web page for a fine-tuned classifier.",
                              epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True, help="classifier folder (finetune's output, a TF-IDF or ensemble "
                   "folder); with --teach also a pretrained encoder folder (no classifier until the first retrain)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this computer only)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    p.add_argument("--max-upload-mb", type=float, default=200, help="largest file accepted, in MB (default 200)")
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per labelling chunk (default: automatic)")
    p.add_argument("--batch-size", type=int, default=128,
                   help="texts per model call, at most 4096 (default 128, as label)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    p.add_argument("--workdir", default=None, help="folder for uploads and results (default: system temp)")
    t = p.add_argument_group("teach mode and corrections")
    t.add_argument("--teach", metavar="POOL", help="unlabelled reviews to ask about, one at a time (.csv .tsv .jsonl "
                   ".parquet)")
    t.add_argument("--labels", metavar="LABELS.csv", help="append-only file of answers (teach mode) and of label "
                   "fixes made in a file's results; created when missing")
    t.add_argument("--text-column", help="the pool's text column (default: review, text, 리뷰, ... by name)")
    t.add_argument("--dev", help="labelled file each retrain is scored on, with a text and a label column named as "
                   "finetune looks for them (review, text, ...; label, sentiment, ...); default: a held-out 10%% "
                   "of the labels")
    t.add_argument("--retrain-every", type=int, default=50, help="retrain after this many new labels (default 50)")
    t.add_argument("--encoder", help="what retrains start from (default: --model's encoder; needed for a TF-IDF "
                   "--model)")
    t.add_argument("--classes", help="label names, comma-separated, when --model is an encoder (default "
                   "negative,neutral,positive)")
    t.add_argument("--strategy", default="margin", choices=["margin", "entropy", "random"],
                   help="which reviews to ask first (default margin: the smallest top-1 minus top-2 probability)")
    t.add_argument("--seed", type=int, default=42, help="the first random sample's order and each retrain's seed")
    t.add_argument("--retrain-recipe", default="auto", choices=["auto", "full", "tfidf"],
                   help="what a retrain trains: full (the encoder fine-tuned, TF-IDF and their ensemble, the best on "
                   "dev serves), tfidf (TF-IDF alone, seconds a round), or auto (the default: tfidf while a bare "
                   "encoder has fewer than 2,000 labels and no --dev, where it asked better questions and labelled "
                   "better; full from then on, or from a fine-tuned --model, or with --dev)")
    t.add_argument("--retrain-set", action="append", default=[], metavar="KEY=VALUE",
                   help="a finetune override added to the retrain recipe, e.g. --retrain-set max_length=64 "
                   "(repeatable)")
    p.set_defaults(func=run)


def run(args) -> int:
    from ..errors import KitError

    try:
        import fastapi  # noqa: F401
        import uvicorn  # noqa: F401
    except ImportError as e:
        raise KitError(f"the web app needs its extra ({e.name} is missing): pip install 'koelectra-kit[app]'") \
            from None
    from ..app import AppSettings, serve
    from ..errors import ConfigError

    if not math.isfinite(args.max_upload_mb) or args.max_upload_mb * (1 << 20) < 1:
        raise ConfigError(f"--max-upload-mb {args.max_upload_mb}: give a size in MB, e.g. 200")
    settings = AppSettings(model=args.model, host=args.host, port=args.port,
                           max_upload_bytes=int(args.max_upload_mb * (1 << 20)), chunk_rows=args.chunk_rows,
                           batch_size=args.batch_size, device=args.device, precision=args.precision,
                           workdir=args.workdir, teach=args.teach, labels=args.labels, text_column=args.text_column,
                           dev=args.dev, retrain_every=args.retrain_every, encoder=args.encoder,
                           # `is not None`: --classes "" (an unset variable) quietly meant the default classes
                           classes=[c.strip() for c in args.classes.split(",")] if args.classes is not None else None,
                           strategy=args.strategy, seed=args.seed, retrain_overrides=list(args.retrain_set),
                           retrain_recipe=args.retrain_recipe)
    settings.validate()
    if settings.teach:
        _check_recipe(settings)
    from ..app.guard import is_loopback

    if not is_loopback(settings.host):
        print(f"warning: serving on {settings.host}: whoever has the address below, token included, can upload files "
              "and download results; share it only with the people who may")
    print(f"loading {settings.model} ..." + (f" (teach mode: {settings.teach} -> {settings.labels})"
                                             if settings.teach else ""))
    try:
        serve(settings)
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on, after the app's own cleanup
        print("stopped: the uploads and results of this session are deleted")
    return 0


def _check_recipe(settings) -> None:
    """A mistyped --retrain-set is an error now, not a failed retrain after 50 answers."""
    from ..app.retrain import finetune_args
    from ..config import load_config
    from ..errors import ConfigError
    from ..finetune import FinetuneConfig

    try:
        load_config(FinetuneConfig, "sentiment", finetune_args("encoder", "train.csv", "out",
                                                               overrides=settings.retrain_overrides))
    except ConfigError as e:
        raise ConfigError(f"--retrain-set: {e}") from None
