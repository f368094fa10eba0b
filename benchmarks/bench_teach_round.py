"""How long teach mode takes to judge a TF-IDF round when the analyst started from a big TF-IDF model
(``koelectra_kit.app.serving.compare``): its cross-validation refitting on a sample of ``--cap`` start rows
(``serving.CV_START_ROWS``, what the app does) against refitting on all of them (what it did before), in the same
run, in turns; and whether the two verdicts agree, beside what nsmc3 dev says of the same models.

    python benchmarks/bench_teach_round.py                      # 145,000 start rows, 400 analyst labels
    python benchmarks/bench_teach_round.py --start-rows 50000 --labels 800

Two rounds are judged, as an analyst's first two: round 1 (start rows + the first half of the labels) against the
starting model, and round 2 (start rows + all the labels) against round 1 serving. The analyst's labels are rows of
--train outside the start's, drawn at random (teach mode asks for the least sure ones: the timing is the same).
"""
from __future__ import annotations

import time
from pathlib import Path

import numpy as np

from common import NSMC_DEV, NSMC_TRAIN, Parser, input_errors, non_negative_int, require

from koelectra_kit.app import serving  # noqa: E402  (after common puts the repository on the path)
from koelectra_kit.app.serving import StartData, compare, fit_tfidf, macro_f1  # noqa: E402

NAMES = ["negative", "neutral", "positive"]


def options() -> Parser:
    ap = Parser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--train", default=str(NSMC_TRAIN), help="labelled table the start and the labels come from")
    ap.add_argument("--dev", default=str(NSMC_DEV), help="labelled table the models are scored on")
    ap.add_argument("--start-rows", type=int, default=145_000, help="rows the starting TF-IDF model is fitted on")
    ap.add_argument("--labels", type=int, default=400, help="the analyst's labels at round 2 (half at round 1)")
    ap.add_argument("--cap", type=int, default=serving.CV_START_ROWS, help="start rows the sampled judging refits on")
    ap.add_argument("--seed", type=non_negative_int, default=1)
    return ap


def judged(cap: int, clf, seen: dict, incumbent, inc_name: str, inc_trained: dict, start_clf, start: StartData,
           seed: int) -> dict:
    """One round judged as teach mode judges it, with the start's rows sampled to ``cap`` (timed)."""
    kept, serving.CV_START_ROWS = serving.CV_START_ROWS, cap
    try:
        t = time.perf_counter()
        verdict = compare("n", clf, "tfidf", seen, {}, NAMES, incumbent=incumbent, incumbent_name=inc_name,
                          incumbent_trained=inc_trained, incumbent_tfidf=True, start=start_clf, start_data=start,
                          seed=seed)
        return {"seconds": time.perf_counter() - t, "served": verdict.served, "score": verdict.score,
                "incumbent_score": verdict.incumbent_score}
    finally:
        serving.CV_START_ROWS = kept


def main(argv: list[str] | None = None) -> dict:
    from koelectra_kit.io.labelled import read_labelled

    ap = options()
    args = ap.parse_args(argv)
    if args.start_rows < 1 or args.labels < 4 or args.cap < 1:
        ap.error("--start-rows and --cap must be at least 1, --labels at least 4")
    with input_errors(ap):  # a table missing, or without the sentiment labels: one line
        train = read_labelled(require(Path(args.train)), NAMES)
        dev = read_labelled(require(Path(args.dev)), NAMES)
    order = np.random.default_rng(args.seed).permutation(len(train.texts))
    if args.start_rows + args.labels > len(order):
        ap.error(f"--start-rows + --labels is more than the {len(order):,} rows of {args.train}")
    rows = [(train.texts[i], NAMES[train.y[i]]) for i in order[:args.start_rows + args.labels]]
    start = StartData([t for t, _ in rows[:args.start_rows]], [lab for _, lab in rows[:args.start_rows]])
    labels = dict(rows[args.start_rows:])
    first = dict(list(labels.items())[:len(labels) // 2])
    dev_labels = {t: NAMES[y] for t, y in zip(dev.texts, dev.y)}

    t0 = time.perf_counter()
    start_clf = fit_tfidf(start, {}, NAMES)
    round1, round2 = fit_tfidf(start, first, NAMES), fit_tfidf(start, labels, NAMES)
    print(f"{args.start_rows:,} start rows, {len(labels):,} analyst labels ({len(first):,} at round 1); three "
          f"TF-IDF fits on all the start rows: {time.perf_counter() - t0:.0f} s")
    cases = [("round 1 vs the start", round1, first, start_clf, "start", {}),
             ("round 2 vs round 1", round2, labels, round1, "n1", first)]
    report = {"start_rows": args.start_rows, "labels": len(labels), "cap": args.cap, "cases": []}
    for what, clf, seen, incumbent, inc_name, inc_trained in cases:
        got = {}
        for how, cap in (("all start rows", 10 ** 12), (f"{min(args.cap, args.start_rows):,} sampled", args.cap)):
            got[how] = judged(cap, clf, seen, incumbent, inc_name, inc_trained, start_clf, start, args.seed)
        on_dev = {"round": macro_f1(clf, dev_labels, NAMES), "serving": macro_f1(incumbent, dev_labels, NAMES)}
        (full, a), (sampled, b) = got.items()
        print(f"{what}: judged in {b['seconds']:.1f} s with {sampled} start rows vs {a['seconds']:.1f} s with "
              f"{full}: {a['seconds'] / max(b['seconds'], 1e-9):.1f}x; served {b['served']} vs {a['served']} "
              f"(cross-validated macro-F1 {b['score']} vs serving {b['incumbent_score']}; with all rows "
              f"{a['score']} vs {a['incumbent_score']}); on dev the round scores {on_dev['round']} and the serving "
              f"model {on_dev['serving']}")
        report["cases"].append({"case": what, **got, "dev": on_dev})
    return report


if __name__ == "__main__":
    main()
