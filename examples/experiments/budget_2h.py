"""A 2-hour recipe on a 2-core CPU, end to end, with every stage's compute counted -> a results table.

    python examples/experiments/budget_2h.py --seed 1              # the real thing (about 2 hours; see --help)
    python examples/experiments/budget_2h.py --seed 2              # a second seed: reuses the pretraining stages
    python examples/experiments/budget_2h.py --smoke --runs /tmp/b  # tiny settings on the bundled sample: seconds
    python examples/experiments/budget_2h.py --corpus comments.txt reviews.txt --domain reviews.txt \
        --train labelled.csv --dev dev.csv --runs runs/mine        # the same recipe on your own data

Stages (each reused when its output exists, so a killed run continues at the stage it was in; --fresh redoes all):
0. the pretraining corpora minus every dev text (normalized exact match): dev inputs are never trained on;
1. pretrain --pretrain-preset (cpu-30min-subword) on all corpora for --pretrain-minutes;
2. (--continue-minutes, default 0: skipped) continue it (init=) on the in-domain corpus only
   (configs/pretrain/cpu-continue.yaml). Measured: +0.05 points for this encoder, so its minutes go to stage 5;
3. fine-tune the stage-1 (or -2) encoder on the labelled train rows: the teacher;
4. pretrain the student's encoder: --student-preset (cpu-30min: a character vocabulary, so labelling skips Kiwi)
   for --student-minutes (0: no student encoder; the teacher's encoder is distilled into itself);
5. continue the student's encoder on the in-domain corpus for --student-continue-minutes (init=; +0.64 points
   for the character encoder, docs/RESULTS.md section 4; 0 skips it);
6. the teacher (+ TF-IDF, ensemble weights chosen on dev) labels --transfer-rows of the in-domain corpus minus
   dev, and the student learns them for --distill-minutes.
Stages 1, 2, 4 and 5 are shared by every --seed; 3 and 6 are per seed (teacher-sN, student-sN).
Wall-clock and CPU time of every stage go into the table (RUNS/results-sN.md); the dev figures are 3-class
accuracy / macro-F1 and the binary accuracy of the published NSMC protocol.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))  # the script imports koelectra_kit even without `pip install -e .`
DATA = Path(os.environ.get("KOELECTRA_SHARED_DATA", ROOT.parent / "shared" / "data"))
SAMPLE = ROOT / "corpora" / "sample"


def options() -> argparse.Namespace:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--runs", default=str(ROOT / "runs" / "experiments" / "budget-2h"), help="run folders")
    ap.add_argument("--corpus", nargs="+", default=None, help="unlabelled text for stage 1 (default: the shared "
                    "comments + reviews); your own comment/review files")
    ap.add_argument("--domain", nargs="+", default=None, help="unlabelled in-domain text for stages 2 and 5 "
                    "(default: the shared reviews); the texts your classifier will label")
    ap.add_argument("--train", default=None, help="labelled table (default: the shared nsmc3/train.tsv)")
    ap.add_argument("--dev", default=None, help="labelled dev table (default: the shared nsmc3/dev.tsv); its texts "
                    "are dropped from every unlabelled corpus")
    ap.add_argument("--seed", type=int, default=1, help="fine-tuning and distillation seed (stages 3 and 6)")
    ap.add_argument("--pretrain-preset", default="cpu-30min-subword", help="stage 1's preset")
    ap.add_argument("--pretrain-minutes", type=float, default=30, help="stage 1, wall-clock training minutes")
    ap.add_argument("--continue-minutes", type=float, default=0, help="stage 2, the teacher encoder's in-domain "
                    "continued pretraining (0: skipped)")
    ap.add_argument("--ft-epochs", type=float, default=None, help="stage 3, fine-tuning epochs (default: the "
                    "sentiment preset's 3)")
    ap.add_argument("--ft-rows", type=int, default=None, help="stage 3, a stratified subsample of train (CPU budget)")
    ap.add_argument("--student-preset", default="cpu-30min", help="stage 4's preset (the student's encoder)")
    ap.add_argument("--student-minutes", type=float, default=25, help="stage 4 (0: distil into the teacher's "
                    "encoder itself)")
    ap.add_argument("--student-continue-minutes", type=float, default=25, help="stage 5, the student encoder's "
                    "in-domain continued pretraining (0: skipped)")
    ap.add_argument("--distill-minutes", type=float, default=10, help="stage 6, student training minutes")
    ap.add_argument("--transfer-rows", type=int, default=200_000, help="stage 6, a random subset of the transfer "
                    "texts (0: all)")
    ap.add_argument("--no-tfidf-teacher", action="store_true", help="the fine-tuned teacher alone")
    ap.add_argument("--fresh", action="store_true", help="redo every stage")
    ap.add_argument("--smoke", action="store_true", help="tiny models and steps on the bundled sample (a test)")
    args = ap.parse_args()
    # 0 would mean "no time limit" to the commands: a stage must have a budget (the student's may be skipped)
    for key in ("pretrain_minutes", "distill_minutes"):
        if getattr(args, key) <= 0:
            ap.error(f"--{key.replace('_', '-')} must be more than 0")
    for key in ("continue_minutes", "student_minutes", "student_continue_minutes"):
        if getattr(args, key) < 0:
            ap.error(f"--{key.replace('_', '-')} must be 0 (the stage is skipped) or more")
    return args


class Stages:
    """Runs ``koelectra-kit`` commands in this process and records each stage's wall and CPU seconds (this
    process's threads and its children: Kiwi workers) in RUNS/stages.json, so a reused stage keeps its cost."""

    def __init__(self, runs: Path, fresh: bool):
        self.path = runs / "stages.json"
        self.done = {} if fresh or not self.path.exists() else json.loads(self.path.read_text())

    def run(self, name: str, argv: list[str], output: Path) -> dict:
        from koelectra_kit.cli import main

        if name in self.done and output.exists():
            print(f"[{name}] reused {output}", flush=True)
            return self.done[name]
        print(f"[{name}] koelectra-kit {' '.join(argv)}", flush=True)
        t0, c0 = time.perf_counter(), _cpu_seconds()
        rc = main(argv)
        if rc:
            sys.exit(f"stage {name} failed (exit {rc})")
        self.done[name] = {"wall_s": round(time.perf_counter() - t0, 1), "cpu_s": round(_cpu_seconds() - c0, 1),
                           "command": "koelectra-kit " + " ".join(argv)}
        self.path.write_text(json.dumps(self.done, indent=2))
        return self.done[name]


def _cpu_seconds() -> float:
    own, kids = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


def inputs(args, runs: Path) -> dict:
    """Files of the run: the real data, or (--smoke) the bundled sample split into train/dev files."""
    if not args.smoke:
        files = {"general": [Path(p) for p in args.corpus] if args.corpus else
                 [DATA / "pretrain" / "comments_mix.txt", DATA / "pretrain" / "nsmc_reviews.txt"],
                 "domain": [Path(p) for p in args.domain] if args.domain else [DATA / "pretrain" / "nsmc_reviews.txt"],
                 "train": Path(args.train) if args.train else DATA / "nsmc3" / "train.tsv",
                 "dev": Path(args.dev) if args.dev else DATA / "nsmc3" / "dev.tsv"}
        missing = [p for p in [*files["general"], *files["domain"], files["train"], files["dev"]] if not p.exists()]
        if missing:
            sys.exit(f"data missing: {missing[0]} (pass --corpus/--domain/--train/--dev, or set "
                     "KOELECTRA_SHARED_DATA to the shared data folder)")
        return files
    import pandas as pd

    runs.mkdir(parents=True, exist_ok=True)
    df = pd.read_csv(SAMPLE / "reviews_labelled.csv")
    dev = pd.concat([g.iloc[:8] for _, g in df.groupby("label")])
    df.drop(dev.index).to_csv(runs / "train.csv", index=False)
    dev.to_csv(runs / "dev.csv", index=False)
    domain = runs / "domain-sample.txt"  # unlabelled reviews + the labelled ones: in-domain text
    texts = pd.read_csv(SAMPLE / "reviews_unlabelled.csv").iloc[:, 0].astype(str).tolist() + df["review"].tolist()
    domain.write_text("\n".join(t.replace("\n", " ") for t in texts) + "\n", encoding="utf-8")
    return {"general": [SAMPLE / "comments.txt", domain], "domain": [domain], "train": runs / "train.csv",
            "dev": runs / "dev.csv"}


def without_dev(files: list[Path], dev: Path, out: Path) -> Path:
    """One corpus file: the lines of ``files`` whose normalized text is not a dev text (distill's own rule)."""
    from koelectra_kit.distill.data import exclusion_keys, write_without

    if out.exists():
        return out
    dropped = write_without(files, exclusion_keys([str(dev)], []), out.with_suffix(".tmp"))
    out.with_suffix(".tmp").rename(out)
    print(f"[corpus] {out.name}: {dropped:,} dev texts dropped", flush=True)
    return out


def plan(args, runs: Path, files: dict) -> list[tuple[str, list[str], Path]]:
    """(stage, argv, output) in order; the --smoke variants only shrink models, steps and data."""
    general = without_dev(files["general"], files["dev"], runs / "corpus-general.txt")
    domain = without_dev(files["domain"], files["dev"], runs / "corpus-domain.txt")
    data = [f"train={files['train']}", f"dev={files['dev']}"]
    smoke, seed = args.smoke, f"seed={args.seed}"
    tiny = ["--config", "tiny", "max_steps=3", "log_every=1"]
    pre = ([*tiny, "tokenizer_model=wordpiece", "vocab_size=300"] if smoke else
           ["--config", args.pretrain_preset, f"max_minutes={args.pretrain_minutes:g}"])
    cont = ["--config", "cpu-continue"] + (["max_steps=2", "max_minutes=0", "seq_len=64", "log_every=1"] if smoke else
                                           [f"max_minutes={args.continue_minutes:g}"])
    student_pre = ([*tiny, "tokenizer_model=characters"] if smoke else
                   ["--config", args.student_preset, f"max_minutes={args.student_minutes:g}"])
    student_cont = ["--config", "cpu-continue"] + (["max_steps=2", "max_minutes=0", "log_every=1"] if smoke else
                                                   [f"max_minutes={args.student_continue_minutes:g}"])
    ft = (["--config", "tiny", "epochs=1", "plots=false"] if smoke else ["--config", "sentiment"]) + \
        ([f"epochs={args.ft_epochs:g}"] if args.ft_epochs else []) + \
        ([f"max_train_rows={args.ft_rows}"] if args.ft_rows else [])
    teacher, student = runs / f"teacher-s{args.seed}", runs / f"student-s{args.seed}"
    teachers = [str(teacher)] + ([] if args.no_tfidf_teacher else ["tfidf"])
    dist = (["epochs=0.2", "batch_size=16", "max_length=64", "eval_every=2", "plots=false"] if smoke else
            ["epochs=3", f"max_minutes={args.distill_minutes:g}", "save_every_minutes=5"]) + \
        ([f"max_transfer={args.transfer_rows}"] if args.transfer_rows else [])
    quiet = ["progress=false"]
    stages = [("pretrain", ["pretrain", *pre, f"corpus=[{general}]", f"out={runs / 'pretrain'}", "plots=false",
                            *quiet], runs / "pretrain" / "summary.json")]
    encoder = runs / "pretrain"  # the teacher's encoder run: stage 1's, or stage 2's when it runs
    if args.continue_minutes:
        encoder = runs / "continued"
        stages.append(("continue", ["pretrain", *cont, f"init={runs / 'pretrain'}", f"corpus=[{domain}]",
                                    f"out={encoder}", "plots=false", *quiet], encoder / "summary.json"))
    stages.append((f"finetune-s{args.seed}", ["finetune", *ft, f"model={encoder / 'discriminator'}", *data, seed,
                                              f"out={teacher}", *quiet], teacher / "eval.json"))
    student_run = encoder  # no student encoder: the teacher's encoder is distilled into itself
    if args.student_minutes:
        student_run = runs / "student-pretrain"
        stages.append(("student-pretrain", ["pretrain", *student_pre, f"corpus=[{general}]", f"out={student_run}",
                                            "plots=false", *quiet], student_run / "summary.json"))
        if args.student_continue_minutes:
            stages.append(("student-continue", ["pretrain", *student_cont, f"init={student_run}",
                                                f"corpus=[{domain}]", f"out={runs / 'student-continued'}",
                                                "plots=false", *quiet], runs / "student-continued" / "summary.json"))
            student_run = runs / "student-continued"
    stages.append((f"distill-s{args.seed}", ["distill", f"teachers=[{','.join(teachers)}]", f"transfer=[{domain}]",
                                             f"exclude=[{files['dev']}]", f"student={student_run / 'discriminator'}",
                                             *data, seed, f"out={student}", *dist, *quiet], student / "eval.json"))
    return stages


def table(stages: dict, names: list[str], runs: Path, seed: int) -> str:
    """Compute per stage of this seed's plan (``names``), then the dev figures of the teacher, the student and the
    references."""
    mine = {k: stages[k] for k in names}
    lines = ["| stage | wall min | CPU min |", "|---|---:|---:|"]
    for name, s in mine.items():
        cpu = "-" if s.get("cpu_s") is None else f"{s['cpu_s'] / 60:.1f}"  # (not recorded for a stage run by hand)
        lines.append(f"| {name} | {s['wall_s'] / 60:.1f} | {cpu} |")
    wall = sum(s["wall_s"] for s in mine.values())
    cpus = [s.get("cpu_s") for s in mine.values()]
    cpu = "-" if None in cpus else f"{sum(cpus) / 60:.1f}"
    lines.append(f"| total | {wall / 60:.1f} | {cpu} |")
    lines += ["", "| dev | accuracy | macro-F1 | binary accuracy (pos/neg rows) |", "|---|---:|---:|---:|"]
    teacher, student = (json.loads((runs / f"{n}-s{seed}" / "eval.json").read_text()) for n in ("teacher", "student"))
    for name, rep in (("teacher (fine-tuned)", teacher["dev"]), ("student (distilled)", student["dev"])):
        binary = f"{rep['binary']['accuracy']:.4f}" if rep.get("binary") else "-"
        lines.append(f"| {name} | {rep['accuracy']:.4f} | {rep['macro_f1']:.4f} | {binary} |")
    for key, ref in student.get("references", {}).items():
        lines.append(f"| {ref['name']} | {ref['accuracy']:.4f} | {ref['macro_f1']:.4f} | - |")
    ens = student["distill"]["teacher_dev"]["ensemble"]
    lines.append(f"| teacher ensemble {student['distill']['weights']} | {ens['accuracy']:.4f} | "
                 f"{ens['macro_f1']:.4f} | {ens.get('binary_accuracy', float('nan')):.4f} |")
    return "\n".join(lines)


def main() -> None:
    args = options()
    runs = Path(args.runs).resolve()
    if args.fresh and runs.exists():
        import shutil

        shutil.rmtree(runs)
    runs.mkdir(parents=True, exist_ok=True)
    stages = Stages(runs, args.fresh)
    t0 = time.perf_counter()
    steps = plan(args, runs, inputs(args, runs))
    for name, argv, output in steps:
        stages.run(name, argv, output)
    result = table(stages.done, [name for name, _, _ in steps], runs, args.seed)
    (runs / f"results-s{args.seed}.md").write_text(result + "\n", encoding="utf-8")
    print(result)
    print(f"\nthis invocation: {(time.perf_counter() - t0) / 60:.1f} min wall; commands in {stages.path}")


if __name__ == "__main__":
    main()
