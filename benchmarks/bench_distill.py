"""A distilled student against its teacher, as labellers: rows/s of `koelectra-kit label` on the same file, and
their nsmc3 dev scores from the labelled output (issue 18: the student labels >= 2x as fast, within 1 point of
macro-F1).

    python benchmarks/bench_distill.py --teacher runs/exp/b2h/teacher-s1 --student runs/exp/b2h/student-s1

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

from common import NSMC_DEV, interleaved, median, require


def scores(path: Path, gold: list[str]) -> tuple[float, float, float]:
    """(accuracy, macro-F1, binary accuracy) of a labelled file against ``gold``. Binary: the positive/negative
    rows only, the choice restricted to those two classes (the published NSMC protocol, as every report here)."""
    import numpy as np
    import pandas as pd
    from sklearn.metrics import f1_score

    df = pd.read_csv(path, dtype=str, keep_default_na=False, encoding="utf-8-sig")
    pred, gold = df["pred_label"].to_numpy(), np.asarray(gold)
    binary = gold != "neutral"
    # (the input has a "label" column, so the added columns are called pred_*)
    pos_wins = df["pred_prob_positive"].astype(float).to_numpy() >= df["pred_prob_negative"].astype(float).to_numpy()
    binary_pred = np.where(pos_wins, "positive", "negative")
    return ((pred == gold).mean(), f1_score(gold, pred, average="macro"),
            (binary_pred[binary] == gold[binary]).mean())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--teacher", required=True, help="the teacher's fine-tuned classifier folder")
    ap.add_argument("--student", required=True, help="the distilled student's folder (koelectra-kit distill out=)")
    ap.add_argument("--rows", type=int, default=10000, help="reviews of nsmc3 dev to label (at most its 10,000)")
    ap.add_argument("--rounds", type=int, default=3, help="timed turns of each")
    args = ap.parse_args()
    import pandas as pd
    import torch

    from koelectra_kit.label import label_file

    dev = pd.read_csv(require(NSMC_DEV), sep="\t", quoting=csv.QUOTE_NONE, keep_default_na=False).iloc[:args.rows]
    tmp = Path(tempfile.mkdtemp())
    src = tmp / "reviews.csv"
    dev[["id", "document", "label"]].to_csv(src, index=False)
    models = {"teacher": args.teacher, "student": args.student}
    outs = {name: tmp / f"{name}.csv" for name in models}

    def job(name):
        return lambda: label_file(models[name], src, outs[name], "document", progress=False, overwrite=True)

    times = interleaved({name: job(name) for name in models}, rounds=args.rounds)
    n = len(dev)
    print(f"{n:,} reviews from nsmc3/dev; torch {torch.__version__}, {torch.get_num_threads()} threads; "
          f"median of {args.rounds} turns each")
    print(f"{'labeller':<12}{'rows/s':>10}{'vs teacher':>12}{'accuracy':>10}{'macro-F1':>10}{'binary acc':>12}")
    base = median(times["teacher"])
    gold = dev["label"].tolist()
    for name, path in models.items():
        acc, f1, binary = scores(outs[name], gold)
        t = median(times[name])
        print(f"{name:<12}{n / t:>10,.0f}{base / t:>11.2f}x{acc:>10.4f}{f1:>10.4f}{binary:>12.4f}   {path}")


if __name__ == "__main__":
    sys.exit(main())
