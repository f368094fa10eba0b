"""A distilled student against its teacher, as labellers: rows/s of `koelectra-kit label` on the same file, and
their nsmc3 dev scores from the labelled output (issue 18: the student labels >= 2x as fast, within 1 point of
macro-F1).

    python benchmarks/bench_distill.py --teacher runs/exp/b2h2/teacher-s1 --student runs/exp/b2h2/student-s1

Both label the same --rows reviews of nsmc3 dev in turns (teacher, student, teacher, ...; one warm-up each, which
also loads Kiwi and the model files into the page cache); the median of the turns is reported. The teacher here is
the fine-tuned classifier alone: an ensemble teacher that adds TF-IDF would label more slowly still.
"""
from __future__ import annotations

import argparse
import csv
import sys
import tempfile
from pathlib import Path

from common import NSMC_DEV, Parser, check_classifiers, input_errors, interleaved, median, positive_int, require


def scores(path: Path, gold: list[str]) -> tuple[float, float, float]:
    """(accuracy, macro-F1, binary accuracy) of a labelled file against ``gold``, by the toolkit's own report
    (``metrics.classification_report`` on the written probabilities: the binary figure is the published NSMC
    protocol, as in every report here)."""
    import numpy as np
    import pandas as pd

    from koelectra_kit.classify.metrics import classification_report

    df = pd.read_csv(path, keep_default_na=False, encoding="utf-8-sig")
    # the input has a "label" column, so the added columns are called pred_*
    labels = [c[len("pred_prob_"):] for c in df.columns if c.startswith("pred_prob_")]
    probs = df[[f"pred_prob_{lab}" for lab in labels]].to_numpy(dtype=np.float64)
    report = classification_report([labels.index(g) for g in gold], probs.argmax(1), labels, scores=probs)
    return report["accuracy"], report["macro_f1"], report["binary"]["accuracy"]


def race(models: dict[str, object], rows: int, rounds: int, base: str) -> None:
    """Label the same ``rows`` reviews of nsmc3 dev with each model folder in turns; print rows/s (the median of
    ``rounds`` turns), the ratio against ``base`` measured in the same run, and each one's dev scores."""
    import pandas as pd
    import torch

    from koelectra_kit.label import label_file

    dev = pd.read_csv(require(NSMC_DEV), sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False).iloc[:rows]
    tmp = Path(tempfile.mkdtemp())
    src = tmp / "reviews.csv"
    dev[["id", "document", "label"]].to_csv(src, index=False)
    outs = {name: tmp / f"{name}.csv" for name in models}

    def job(name):
        return lambda: label_file(str(models[name]), src, outs[name], "document", progress=False, overwrite=True)

    times = interleaved({name: job(name) for name in models}, rounds=rounds)
    n = len(dev)
    print(f"{n:,} reviews from nsmc3/dev; torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {rounds} turns each")
    print(f"{'labeller':<12}{'rows/s':>10}{'vs ' + base:>12}{'accuracy':>10}{'macro-F1':>10}{'binary acc':>12}")
    t_base = median(times[base])
    gold = dev["label"].tolist()
    for name, path in models.items():
        acc, f1, binary = scores(outs[name], gold)
        t = median(times[name])
        print(f"{name:<12}{n / t:>10,.0f}{t_base / t:>11.2f}x{acc:>10.4f}{f1:>10.4f}{binary:>12.4f}   {path}")


def main(argv: list[str] | None = None) -> None:
    ap = Parser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="the teacher's fine-tuned classifier folder")
    ap.add_argument("--student", required=True, help="the distilled student's folder (koelectra-kit distill out=)")
    ap.add_argument("--rows", type=positive_int, default=10000,
                    help="reviews of nsmc3 dev to label (at most its 10,000)")
    ap.add_argument("--rounds", type=positive_int, default=3, help="timed turns of each")
    args = ap.parse_args(argv)
    with input_errors(ap):
        require(NSMC_DEV)  # (the texts labelled: the real data)
    check_classifiers(ap, [("--teacher", args.teacher), ("--student", args.student)])
    race({"teacher": args.teacher, "student": args.student}, args.rows, args.rounds, "teacher")


if __name__ == "__main__":
    sys.exit(main())
