"""``koelectra-kit quickstart``: the main job end to end on the bundled sample (or your own files).

tokenizer -> ELECTRA pretraining -> sentiment fine-tuning -> batch labelling, each step the same CLI command a
user would type (printed before it runs), so the quickstart doubles as the tutorial. With the ``tiny`` presets
it takes a minute or two on 2 CPU cores; swap in your own corpus and CSVs by changing paths only:

    koelectra-kit quickstart --corpus my_comments.txt --labelled my_reviews.csv \\
        --unlabelled to_label.csv --text-column review --out runs/mine
    koelectra-kit quickstart --preset cpu-30min --corpus my_comments.txt ...    # a shipped preset by name
    koelectra-kit quickstart tokenizer.vocab_size=4000 pretrain.max_steps=300 finetune.epochs=5 label.batch_size=32

STAGE.key=value overrides go to that stage's config (the same keys as its own command), except the keys that
chain the stages (each stage's out/output; label's input, text_column and model): use the flags above for those.
``--preset NAME`` picks each stage's shipped preset of that name; a stage without one uses its default (tokenizer:
default, finetune: sentiment), and when the tokenizer has no such preset, pretraining trains its own tokenizer from
the pretraining preset's vocab_size / tokenizer_model (e.g. cpu-30min's character vocabulary).
"""
from __future__ import annotations

import argparse
import shlex
import time
from importlib import resources
from pathlib import Path

STAGES = ("tokenizer", "pretrain", "finetune", "label")
DEFAULT_PRESET = {"tokenizer": "default", "finetune": "sentiment"}


def _sample(name: str) -> str:
    return str(resources.files("koelectra_kit.sample") / name)


DESCRIPTION = ("The main job end to end: train a tokenizer on a comment corpus, pretrain an ELECTRA discriminator, "
               "fine-tune a positive/negative/neutral classifier on labelled reviews, and label a CSV of unlabelled "
               "reviews. Defaults: the bundled sample and tiny presets.")


def register(subparsers) -> None:
    p = subparsers.add_parser("quickstart", description=DESCRIPTION, epilog=__doc__.split("\n\n", 1)[1],
                              help="run the whole pipeline (tokenizer, pretrain, finetune, label) on the sample",
                              formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--corpus", default=None, help="pretraining text (one text a line; default: the bundled sample)")
    p.add_argument("--labelled", default=None, help="labelled reviews for fine-tuning (text + label columns)")
    p.add_argument("--unlabelled", default=None, help="CSV to label")
    p.add_argument("--text-column", default="review", help="text column of the CSV to label")
    p.add_argument("--out", default="runs/quickstart", help="directory for every output")
    p.add_argument("--preset", default="tiny", help="a shipped preset name (tiny, cpu-30min, ...) or config file")
    p.add_argument("--show", type=int, default=5, help="labelled rows to print at the end")
    p.add_argument("overrides", nargs="*", metavar="stage.key=value",
                   help="override one stage's config: tokenizer.vocab_size=4000 pretrain.max_steps=300 ...")
    p.set_defaults(func=run)


# Keys the quickstart itself sets to chain one stage's output into the next, -> what to use instead. An override
# of one was taken silently and broke the chain: label's own flags win over its key=value (label.input=mine.csv
# labelled the sample), and finetune.out= / pretrain.out= / tokenizer.out= moved a stage's output while the next
# stage read the old place (on a rerun into the same --out: the previous run's model, with exit 0).
WIRED = {("tokenizer", "out"): "--out", ("pretrain", "out"): "--out", ("finetune", "out"): "--out",
         ("label", "output"): "--out", ("label", "input"): "--unlabelled", ("label", "text_column"): "--text-column",
         ("label", "model"): "`koelectra-kit label --model ...` after the quickstart (it labels with the classifier "
                             "it fine-tunes)"}


def stage_overrides(items: list[str]) -> dict[str, list[str]]:
    """``["pretrain.model.hidden_size=64", ...]`` -> {"pretrain": ["model.hidden_size=64"], ...}."""
    from ..errors import ConfigError

    out: dict[str, list[str]] = {s: [] for s in STAGES}
    for item in items:
        stage, _, rest = item.partition(".")
        if stage not in STAGES or "=" not in rest:
            raise ConfigError(f"quickstart override {item!r}: write STAGE.key=value with STAGE one of "
                              f"{', '.join(STAGES)} (e.g. tokenizer.vocab_size=4000)")
        instead = WIRED.get((stage, rest.partition("=")[0].strip()))
        if instead:
            raise ConfigError(f"quickstart override {item!r}: the quickstart sets that key to chain its stages; use "
                              f"{instead}")
        out[stage].append(rest)
    return out


def stage_preset(stage: str, preset: str) -> str | None:
    """The config for ``stage``: ``preset`` when it is a file or that stage ships it, else the stage's default
    (None: the stage has no default, so the step is left to the next stage)."""
    from ..config import preset_path
    from ..errors import ConfigError

    for name in (preset, DEFAULT_PRESET.get(stage)):
        if name is None:
            continue
        try:
            return str(preset_path(name, stage))
        except ConfigError:
            continue
    return None


def plan(args) -> list[tuple[str, list[str]]]:
    """The commands the quickstart runs, in order (what it prints is what a user would type)."""
    from ..errors import ConfigError

    corpus = args.corpus or _sample("comments.txt")
    labelled = args.labelled or _sample("reviews_labelled.csv")
    unlabelled = args.unlabelled or _sample("reviews_unlabelled.csv")
    extra = stage_overrides(args.overrides)
    out = Path(args.out)
    tok_dir, pre_dir, clf_dir = out / "tokenizer", out / "pretrain", out / "sentiment"
    pretrain_cfg = stage_preset("pretrain", args.preset)
    if pretrain_cfg is None:
        raise ConfigError(f"no pretrain preset {args.preset!r}")
    tok_cfg = _own_preset("tokenizer", args.preset)
    steps = []
    if tok_cfg:
        steps.append(("tokenizer: normalize + Kiwi morpheme pre-split + WordPiece",
                      ["tokenizer", "train", "--config", tok_cfg, f"input={corpus}", f"out={tok_dir}",
                       *extra["tokenizer"]]))
    elif extra["tokenizer"]:
        raise ConfigError(f"preset {args.preset!r} trains its tokenizer inside pretraining: write the tokenizer "
                          "keys as pretrain.vocab_size=... / pretrain.tokenizer_model=...")
    steps += [
        ("pretrain: ELECTRA generator + discriminator (replaced token detection)",
         ["pretrain", "--config", pretrain_cfg, f"corpus={corpus}",
          *([f"tokenizer={tok_dir}"] if tok_cfg else []), f"out={pre_dir}", *_overwrite_unless_said(extra["pretrain"]), *extra["pretrain"]]),
        ("finetune: positive / negative / neutral classifier from the discriminator",
         ["finetune", "--config", stage_preset("finetune", args.preset), f"model={pre_dir / 'discriminator'}",
          f"train={labelled}", f"out={clf_dir}", *extra["finetune"]]),
        ("label: every row of the CSV, with label, confidence and per-class probabilities",
         ["label", "--model", str(clf_dir), "--input", unlabelled, "--text-column", args.text_column,
          "--output", str(out / "labelled.csv"), "--overwrite", *extra["label"]]),
    ]
    return [(f"{i}/{len(steps)} {title}", argv) for i, (title, argv) in enumerate(steps, 1)]


def _best_model(argv: list[str]) -> list[str]:
    """The label step labels with the folder fine-tuning found best on dev: the encoder, its TF-IDF companion or
    their ensemble (``finetune ensemble=tfidf``, the default; eval.json's ``candidates``)."""
    import json

    i = argv.index("--model") + 1
    clf = Path(argv[i])
    try:
        candidates = json.loads((clf / "eval.json").read_text(encoding="utf-8")).get("candidates") or {}
    except (OSError, ValueError):
        return argv
    folder = candidates.get("folder")
    if folder and folder != "." and (clf / folder).is_dir():
        print(f"(best on dev: {candidates['best']}, macro-F1 {candidates['scores'][candidates['best']]['macro_f1']:.4f}"
              f" vs the encoder's {candidates['scores']['encoder']['macro_f1']:.4f}: labelling with {clf / folder})")
        return [*argv[:i], str(clf / folder), *argv[i + 1:]]
    return argv


def _own_preset(stage: str, preset: str) -> str | None:
    """Only a preset of exactly this name (no fallback to the stage default)."""
    from ..config import preset_path
    from ..errors import ConfigError

    try:
        return str(preset_path(preset, stage))
    except ConfigError:
        return None


def run(args) -> int:
    from . import main

    steps = plan(args)
    check_plan(args, steps)
    t_all = time.perf_counter()
    for title, argv in steps:
        if argv[0] == "label":
            argv = _best_model(argv)
        print(f"\n=== {title}\n$ koelectra-kit {shlex.join(argv)}", flush=True)
        t0 = time.perf_counter()
        rc = main(argv)
        if rc:
            print(f"quickstart stopped: step '{title.split(':')[0]}' failed (exit {rc})")
            return rc
        print(f"--- done in {time.perf_counter() - t0:.1f}s", flush=True)
    _show(args, time.perf_counter() - t_all)
    return 0


def check_plan(args, steps: list[tuple[str, list[str]]]) -> None:
    """Every input, option and stage override checked before the first step runs: a typo in label.* or a missing
    --labelled file is one error line now, not after minutes of pretraining."""
    from . import build_parser
    from ..config import load_config
    from ..errors import ConfigError, InputError
    from ..io.fileio import check_input_file

    if args.show < 0:
        raise ConfigError(f"--show {args.show}: give a number of rows, 0 or more")
    for path in (args.corpus, args.labelled, args.unlabelled):
        if path:
            check_input_file(path)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise InputError(f"--out {out} is a file; give a folder for the outputs")
    # What the stages write under --out, each replaced whole: an input there was refused by the stage that writes
    # it only after the stages before it had run (--unlabelled OUT/labelled.csv: tokenizer, pretraining and
    # fine-tuning, then "--output must differ from --input" at step 4/4)
    written = [out / "tokenizer", out / "sentiment", out / "labelled.csv"]
    for flag, path in (("--corpus", args.corpus), ("--labelled", args.labelled), ("--unlabelled", args.unlabelled)):
        where = Path(path).resolve() if path else None
        for made in written:
            if where is not None and (where == made.resolve() or made.resolve() in where.parents):
                raise InputError(f"{flag} {path} is {'' if where == made.resolve() else 'in '}{made}, which the "
                                 f"quickstart writes; move it out of --out {out}, or choose another --out")
    parser = build_parser()
    label_cfg = pretrain_cfg = None
    for _, argv in steps:
        try:
            parsed = parser.parse_args(argv)
        except SystemExit as e:  # the step's own parser printed its error line
            raise SystemExit(e.code if isinstance(e.code, int) else 2) from None
        if argv[0] == "label":
            from .label import label_config

            label_cfg = label_config(parsed)
        else:
            cfg = load_config(_config_class(argv[0]), parsed.config, parsed.overrides)
            if argv[0] == "pretrain":
                pretrain_cfg = cfg
            if argv[0] == "finetune":  # --labelled's columns and labels now, not after tokenizer and pretraining
                from ..finetune.data import load_splits

                load_splits(cfg)
                # the encoder pretraining makes reads at most its positions: said after pretraining before
                positions = pretrain_cfg.model.max_position_embeddings if pretrain_cfg else None
                if positions and cfg.max_length > positions:
                    raise ConfigError(f"finetune.max_length={cfg.max_length} exceeds the pretrained encoder's "
                                      f"max_position_embeddings={positions}; lower it, or raise "
                                      "pretrain.model.max_position_embeddings")
    unlabelled = args.unlabelled or _sample("reviews_unlabelled.csv")
    if label_cfg is not None and (label_cfg.encoding_errors != "strict" or label_cfg.format or label_cfg.sep):
        return  # label.* reading options this header peek does not speak: label checks the file itself
    columns = _columns(unlabelled, label_cfg.encoding if label_cfg else None)
    if columns is not None and args.text_column not in columns:
        raise InputError(f"{unlabelled}: no column {args.text_column!r} for --text-column; columns present: "
                         f"{', '.join(columns)}")


def _config_class(command: str):
    if command == "tokenizer":
        from ..tokenizer import TokenizerConfig

        return TokenizerConfig
    if command == "pretrain":
        from ..pretrain import PretrainConfig

        return PretrainConfig
    from ..finetune import FinetuneConfig

    return FinetuneConfig


def _columns(path: str, encoding: str | None) -> list[str] | None:
    """The header of a csv/tsv file to label (None for other formats); an undecodable file is refused now, not
    after minutes of pretraining."""
    from ..io.tables import detect_encoding, read_records, table_format
    from ..io.workbook import WORKBOOK_SUFFIXES

    if Path(path).suffix.lower() in WORKBOOK_SUFFIXES:  # label reads these; table_format (for tables) does not
        return None
    fmt = table_format(path)
    if fmt not in ("csv", "tsv"):
        return None
    encoding = detect_encoding(path, encoding, hints=("its encoding (e.g. label.encoding=cp949)",
                                                      "label.encoding_errors=replace"))
    columns, records = read_records(Path(path), fmt, encoding, None)
    getattr(records, "close", lambda: None)()
    return [str(c).strip() for c in columns]


def _show(args, seconds: float) -> None:
    import pandas as pd

    from ..io.labelcols import label_prefixes
    from ..io.tables import read_table

    out = Path(args.out)
    labelled_csv = out / "labelled.csv"
    table = read_table(labelled_csv)
    # the columns label added: pred_label ... where the input had a label column of its own (its gold labels were
    # shown as the model's)
    prefix = ""
    for candidate in label_prefixes():
        if f"{candidate}label" not in table.columns:
            break
        if f"{candidate}confidence" in table.columns:
            prefix = candidate
    show = [c for c in (args.text_column, f"{prefix}label", f"{prefix}confidence", f"{prefix}status")
            if c in table.columns]
    with pd.option_context("display.max_colwidth", 40, "display.width", 120):
        print(f"\nfirst {args.show} labelled rows of {labelled_csv}:")
        print(table[show].head(args.show).to_string(index=False))
    print(f"\nfinished in {seconds:.0f}s. Outputs:\n"
          f"  pretraining run      {out / 'pretrain'}/ (metrics.jsonl, curves.png)\n"
          f"  discriminator (HF)   {out / 'pretrain' / 'discriminator'}/\n"
          f"  sentiment classifier {out / 'sentiment'}/ (eval.json, confusion.png; tfidf/ and ensemble/ beside it)\n"
          f"  labelled CSV         {labelled_csv}")


def _overwrite_unless_said(pretrain_keys: list[str]) -> list[str]:
    """quickstart reruns pretraining from scratch (overwrite=true) unless the user said resume= or overwrite=
    themselves: pretrain.resume=true beside the default overwrite=true was refused as a contradiction."""
    return [] if any(k.split("=", 1)[0] in ("resume", "overwrite") for k in pretrain_keys) else ["overwrite=true"]
