"""A local labelling web page for the people who hold the CSV files: try one review, upload a file, watch it
being labelled, review the least confident rows, download the result.

    koelectra-kit app --model runs/sentiment            # then open http://127.0.0.1:7860

Needs the ``app`` extra (``pip install 'koelectra-kit[app]'``: FastAPI, uvicorn, openpyxl); the core install
does not. Files are labelled by the same ``FileLabeller`` as ``koelectra-kit label``.

Modules: ``settings`` (the options), ``uploads`` (bytes in -> a file the labeller reads), ``jobs`` (one background
labelling job per upload), ``results`` (rows to review, downloads in the input's format), ``server`` (the
routes), ``guard`` (only the analyst drives it: Host, Origin, token), ``static/`` (the page: plain HTML, CSS and JS,
no build step, works offline). Teach mode (``--teach POOL --labels LABELS.csv``): ``teach`` (the loop: what is asked,
answers, rounds), ``pool`` (the pool and its queue of suggestions), ``labelstore`` (LABELS.csv, an append-only log),
``retrain`` (the finetune recipe, ``finetune_args``, run in a subprocess), ``teach_routes`` (its routes and the label
fixes').
"""
from .settings import AppSettings


def create_app(settings: AppSettings, classifier=None):
    from .server import create_app as build

    return build(settings, classifier)


def serve(settings: AppSettings, classifier=None) -> None:
    from .server import serve as run

    run(settings, classifier)


__all__ = ["AppSettings", "create_app", "serve"]
