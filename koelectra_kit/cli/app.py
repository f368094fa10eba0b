"""``koelectra-kit app``: a local labelling web page (try one review, label a file, review, download)."""
from __future__ import annotations

import argparse
import math

EPILOG = """\
examples:
  koelectra-kit app --model runs/quickstart/sentiment                 # then open http://127.0.0.1:7860
  koelectra-kit app --model runs/sentiment --port 8080 --max-upload-mb 500

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
    p.add_argument("--model", required=True, help="fine-tuned classifier folder (output of finetune)")
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1: this computer only)")
    p.add_argument("--port", type=int, default=7860, help="port (default 7860)")
    p.add_argument("--max-upload-mb", type=float, default=200, help="largest file accepted, in MB (default 200)")
    p.add_argument("--chunk-rows", type=int, default=None, help="rows per labelling chunk (default: automatic)")
    p.add_argument("--batch-size", type=int, default=64, help="texts per model call (default 64)")
    p.add_argument("--device", default="auto", help="auto | cpu | cuda")
    p.add_argument("--precision", default="auto", choices=["auto", "fp32", "bf16", "fp16"])
    p.add_argument("--workdir", default=None, help="folder for uploads and results (default: system temp)")
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
                           workdir=args.workdir)
    settings.validate()
    from ..app.guard import is_loopback

    if not is_loopback(settings.host):
        print(f"warning: serving on {settings.host}: whoever has the address below, token included, can upload files "
              "and download results; share it only with the people who may")
    print(f"loading {settings.model} ...")
    try:
        serve(settings)
    except KeyboardInterrupt:  # uvicorn re-raises the Ctrl-C it shut down on, after the app's own cleanup
        print("stopped: the uploads and results of this session are deleted")
    return 0
