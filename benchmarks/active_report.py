"""bench_active's figures from its JSON lines: per round, each strategy's dev macro-F1 (best folder, mean over
seeds) and margin minus random measured in the same run; the acceptance bar at 1,000 labels; a plot; a markdown
section per recipe in docs/results/active-learning.md (the TF-IDF and the full recipe's runs share the page).

    tables = Figures.read(Path("runs/active-tfidf"))
"""
from __future__ import annotations

import json
import re
import statistics
from dataclasses import dataclass
from pathlib import Path

BAR, AT = 2.0, 1000  # issue 33: at 1,000 labels, margin beats random by >= 2 points of dev macro-F1 (mean of seeds)
RECIPE_TITLES = {"tfidf": "TF-IDF recipe (TF-IDF + logistic regression only, `baseline`'s classifier)",
                 "tfidf-start": "From a TF-IDF model the analyst already has (issue 41): which round serves",
                 "full": "Full recipe (`finetune` sentiment defaults, ensemble=tfidf: the app's retrain)"}


@dataclass
class Figures:
    """Every finished round of a runs folder: ``rounds[(strategy, seed)]`` in round order."""

    rounds: dict
    settings: dict

    @classmethod
    def read(cls, runs: Path) -> "Figures":
        from active_loop import read_rounds

        settings = json.loads((runs / "settings.json").read_text(encoding="utf-8"))
        rounds = {}
        for path in sorted(runs.glob("*-s*.jsonl")):
            rows = read_rounds(path)
            if rows:
                rounds[(rows[0]["strategy"], rows[0]["seed"])] = rows
        return cls(rounds, settings)

    @property
    def strategies(self) -> list[str]:
        return sorted({s for s, _ in self.rounds}, key=lambda s: (s == "random", s))  # the baseline last

    @property
    def seeds(self) -> list[int]:
        return sorted({seed for _, seed in self.rounds})

    def value(self, strategy: str, seed: int, size: int, folder: str = "best", metric: str = "macro_f1"):
        for row in self.rounds.get((strategy, seed), []):
            if row["labels"] == size:
                return row["dev"].get(folder, {}).get(metric)
        return None

    def mean(self, strategy: str, size: int, folder: str = "best", metric: str = "macro_f1"):
        """Mean over the seeds that have this round (None when none has)."""
        vals = [v for seed in self.seeds if (v := self.value(strategy, seed, size, folder, metric)) is not None]
        return statistics.fmean(vals) if vals else None

    def gap(self, size: int, strategy: str = "margin", folder: str = "best"):
        """``strategy`` minus random in points of macro-F1, mean over the seeds where both have the round."""
        diffs = [100 * (a - b) for seed in self.seeds
                 if (a := self.value(strategy, seed, size, folder)) is not None
                 and (b := self.value("random", seed, size, folder)) is not None]
        return (statistics.fmean(diffs), diffs) if diffs else (None, [])

    @property
    def sizes(self) -> list[int]:
        return sorted({row["labels"] for rows in self.rounds.values() for row in rows})

    def folders(self) -> list[str]:
        return ["encoder", "tfidf", "ensemble"] if self.settings["recipe"] == "full" else ["tfidf"]


def fmt(x, points: bool = False) -> str:
    if x is None:
        return "-"
    return f"{x:+.2f}" if points else f"{x:.4f}"


def start_verdict(fig: Figures) -> str:
    """From a start (--start-rows): the rounds whose serving model scores below the start on dev, per chain."""
    lines, below_all, total = [], 0, 0
    for (strategy, seed), rows in sorted(fig.rounds.items()):
        gaps = [100 * (r["dev"]["best"]["macro_f1"] - r["dev"]["start"]["macro_f1"]) for r in rows]
        below = sum(g < 0 for g in gaps)
        below_all, total = below_all + below, total + len(rows)
        served = sum(r["served"] for r in rows)
        lines.append(f"  {strategy}-s{seed}: {len(rows)} rounds, {served} served; serving minus start on dev: min "
                     f"{min(gaps):+.2f}, last {gaps[-1]:+.2f} points; rounds below the start: {below}")
    head = (f"from a start fitted on {fig.settings['start_rows']:,} rows (dev macro-F1 "
            f"{next(iter(fig.rounds.values()))[0]['dev']['start']['macro_f1']:.4f}): {below_all} of {total} rounds "
            f"served a model below it on dev ({'met' if below_all == 0 else 'NOT met'}: none may)")
    return "\n".join([head, *lines])


def verdict(fig: Figures) -> str:
    """The acceptance line at 1,000 labels, for each non-random strategy, against random in the same run."""
    lines = []
    for s in fig.strategies:
        if s == "random":
            continue
        mean, diffs = fig.gap(AT, s)
        if mean is None:
            lines.append(f"At {AT:,} labels: not measured yet ({s} and random both need that round).")
            continue
        ok = "meets" if mean >= BAR else "does NOT meet"
        lines.append(f"At {AT:,} labels: {s} - random = {mean:+.2f} points of dev macro-F1 (best folder; mean of "
                     f"{len(diffs)} seed{'s' * (len(diffs) > 1)}: {', '.join(f'{d:+.2f}' for d in diffs)}); "
                     f"the bar is >= +{BAR:g}: it {ok} it.")
    return "\n".join(lines)


def table(fig: Figures) -> list[str]:
    """Per round: each strategy's best-folder dev macro-F1 (mean of seeds) and the gap to random."""
    others = [s for s in fig.strategies if s != "random"]
    head = ["labels", *(f"{s} macro-F1" for s in fig.strategies), *(f"{s} - random (points)" for s in others),
            *(f"{s} accuracy" for s in fig.strategies)]
    lines = ["| " + " | ".join(head) + " |", "|" + "---:|" * len(head)]
    for size in fig.sizes:
        cells = [f"{size:,}", *(fmt(fig.mean(s, size)) for s in fig.strategies),
                 *(fmt(fig.gap(size, s)[0], points=True) for s in others),
                 *(fmt(fig.mean(s, size, metric="accuracy")) for s in fig.strategies)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def folder_table(fig: Figures) -> list[str]:
    """Per round and strategy: every folder's dev macro-F1 (mean of seeds) and how often each was best."""
    names = fig.folders()
    head = ["labels", "strategy", *(f"{n} macro-F1" for n in names), *(f"{n} acc" for n in names), "best on held-out"]
    lines = ["| " + " | ".join(head) + " |", "|---:|---|" + "---:|" * (2 * len(names)) + "---|"]
    for size in fig.sizes:
        for s in fig.strategies:
            best = [row["best"] for seed in fig.seeds for row in fig.rounds.get((s, seed), []) if row["labels"] == size]
            cells = [f"{size:,}", s, *(fmt(fig.mean(s, size, n)) for n in names),
                     *(fmt(fig.mean(s, size, n, "accuracy")) for n in names), ", ".join(best) or "-"]
            lines.append("| " + " | ".join(cells) + " |")
    return lines


def plot(fig: Figures, path: Path) -> Path:
    """Best-folder dev macro-F1 by labels (mean of seeds, each seed thin) and the gap to random with the bar."""
    import matplotlib

    matplotlib.use("Agg")  # no display needed (as koelectra_kit.io.plots)
    import matplotlib.pyplot as plt

    from koelectra_kit.io.plots import save_png

    figure, (ax, gap) = plt.subplots(1, 2, figsize=(11, 4))
    for i, s in enumerate(fig.strategies):
        color = f"C{i}"
        for seed in fig.seeds:
            rows = fig.rounds.get((s, seed), [])
            ax.plot([r["labels"] for r in rows], [r["dev"]["best"]["macro_f1"] for r in rows], color=color,
                    alpha=0.3, lw=0.8)
        sizes = [n for n in fig.sizes if fig.mean(s, n) is not None]
        ax.plot(sizes, [fig.mean(s, n) for n in sizes], color=color, marker="o", ms=3, label=s)
        if s != "random":
            pts = [(n, fig.gap(n, s)[0]) for n in fig.sizes if fig.gap(n, s)[0] is not None]
            gap.plot([n for n, _ in pts], [g for _, g in pts], color=color, marker="o", ms=3, label=f"{s} - random")
    ax.set(xlabel="labels", ylabel="dev macro-F1 (best folder)", title=f"{fig.settings['recipe']} recipe")
    ax.legend()
    ax.grid(alpha=0.3)
    gap.axhline(0, color="gray", lw=0.8)
    gap.axhline(BAR, color="red", ls="--", lw=0.8, label=f"bar +{BAR:g} at {AT:,}")
    gap.axvline(AT, color="red", ls=":", lw=0.8)
    gap.set(xlabel="labels", ylabel="points of macro-F1", title="uncertainty minus random (mean of seeds)")
    gap.legend()
    gap.grid(alpha=0.3)
    return save_png(figure, path)


def class_shares(fig: Figures, size: int = AT) -> str:
    """What each strategy had labelled at ``size`` labels, by class (summed over seeds): uncertainty sampling
    also rebalances the classes, which macro-F1 rewards more than accuracy."""
    parts = []
    for s in fig.strategies:
        counts = [row["class_counts"] for seed in fig.seeds for row in fig.rounds.get((s, seed), [])
                  if row["labels"] == size]
        if counts:
            total = [sum(c) for c in zip(*counts)]
            parts.append(f"{s} " + " / ".join(f"{100 * c / sum(total):.0f}%" for c in total))
    return (f"Labelled classes at {size:,} labels (negative / neutral / positive, seeds pooled): " + "; ".join(parts)
            + ".") if parts else ""


def section(fig: Figures, png: str, commands: list[str], report_command: str, relative=str) -> str:
    """The recipe's section of the page, between markers so each recipe's report replaces only its own.
    ``relative``: this machine's paths as the repository root sees them."""
    st = {k: relative(v) if isinstance(v, str) else v for k, v in fig.settings.items()}
    recipe = section_key(fig.settings)
    if st.get("start_rows"):
        return start_section(fig, st, png, commands, report_command)
    intro = (f"Pool: a seeded {st['pool_size']:,}-row sample (seed {st['pool_seed']}) of `{st['train']}`; "
             f"{st['start']:,} random labels to start (the same for every strategy of a seed), then {st['step']:,} a "
             f"round up to {st['until']:,}; seeds {', '.join(map(str, fig.seeds))}. Each round retrains with "
             f"`dev=null` (a stratified 10% of the labels held out, as the app's teach mode) and the next rows come "
             f"from the folder best on that held-out 10%, picked by `suggest_rows` as `koelectra-kit suggest` picks "
             f"them (near-duplicates at 3-gram Jaccard >= {st['dedupe_threshold']:g} passed over). Scores: "
             f"`{st['dev']}`, every row.")
    if recipe == "full":
        intro += f" Encoder: `{st['encoder']}`."
    lines = [f"<!-- bench_active:{recipe} -->", f"## {RECIPE_TITLES[recipe]}", "", intro, "", verdict(fig), "",
             class_shares(fig), "", f"![dev macro-F1 by labels, {recipe} recipe]({png})", "",
             "### Best folder's dev macro-F1 per round (mean of seeds)", "", *table(fig), ""]
    if recipe == "full":
        lines += ["### Each folder per round (mean of seeds)", "", *folder_table(fig), ""]
    lines += ["### Commands", "", "```bash", *commands, report_command, "```", f"<!-- /bench_active:{recipe} -->"]
    return "\n".join(lines)


def section_key(settings: dict) -> str:
    """The page section a run's report goes to: its recipe, or ``tfidf-start`` for a run from a start model."""
    return settings["recipe"] + ("-start" if settings.get("start_rows") else "")


def start_section(fig: Figures, st: dict, png: str, commands: list[str], report_command: str) -> str:
    """The section of a --start-rows run: per round, the dev macro-F1 of the model serving, of the round, of the start."""
    intro = (f"Pool: a seeded {st['pool_size']:,}-row sample (seed {st['pool_seed']}) of `{st['train']}`. The analyst "
             f"starts from TF-IDF fitted on {st['start_rows']:,} other rows of it; the start asks for the first "
             f"{st['start']:,} labels (margin, or random for the random chains), then the serving model "
             f"{st['step']:,} a round up to {st['until']:,}; seeds {', '.join(map(str, fig.seeds))}. Each round fits "
             "TF-IDF on the start's rows plus the labels not held out (teach mode's TF-IDF round from a TF-IDF start), "
             "and `koelectra_kit.app.serving.compare` decides whether it replaces the model serving (paired "
             f"cross-validation of both recipes over the labels). Scores: `{st['dev']}`, every row.")
    head = "| labels | " + " | ".join(f"{s} serving | {s} round" for s in fig.strategies) + " | start |"
    rows = [head, "|---:|" + "---:|" * (2 * len(fig.strategies) + 1)]
    start = next(iter(fig.rounds.values()))[0]["dev"]["start"]["macro_f1"]
    for size in fig.sizes:
        cells = []
        for s in fig.strategies:
            cells += [fmt(fig.mean(s, size, "best")), fmt(fig.mean(s, size, "round"))]
        rows.append(f"| {size:,} | " + " | ".join(cells) + f" | {start:.4f} |")
    return "\n".join(["<!-- bench_active:tfidf-start -->", f"## {RECIPE_TITLES['tfidf-start']}", "", intro, "",
                      "```", start_verdict(fig), "```", "", verdict(fig), "", f"![dev macro-F1 by labels]({png})", "",
                      "### Dev macro-F1 per round: the model serving after it, the round itself (mean of seeds)", "",
                      *rows, "", "### Commands", "", "```bash", *commands, report_command, "```",
                      "<!-- /bench_active:tfidf-start -->"])


PAGE_HEAD = """# Active learning: does uncertainty sampling beat random sampling? (issue 33)

The analyst's loop of `koelectra-kit app --teach`, simulated on nsmc3 with its labels answering for the analyst
(`benchmarks/bench_active.py`): margin sampling (the smallest top-1 minus top-2 probability first) against random
sampling, from the same first labels, scored on nsmc3 dev (10,000 reviews of movies not in train). Acceptance: at
1,000 labels margin beats random by >= 2 points of dev macro-F1 (mean of 2 seeds).
"""


def write_page(path: Path, text: str, recipe: str) -> None:
    """Put the recipe's section into the page, replacing its earlier section and keeping the other recipe's."""
    from koelectra_kit.io.fileio import write_text_atomic

    old = path.read_text(encoding="utf-8") if path.exists() else PAGE_HEAD
    marked = re.compile(rf"<!-- bench_active:{recipe} -->.*?<!-- /bench_active:{recipe} -->", re.S)
    new = marked.sub(lambda _: text, old) if marked.search(old) else old.rstrip("\n") + "\n\n" + text
    write_text_atomic(path, new.rstrip("\n") + "\n")
