"""What a labelling run reports: counts per label and status, the first malformed lines, speed."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..io.printed import display_width, pad


@dataclass
class LabelSummary:
    rows: int = 0
    per_label: dict = field(default_factory=dict)
    status: dict = field(default_factory=dict)
    malformed: list = field(default_factory=list)  # first few "line N: why"
    seconds: float = 0.0
    output: str = ""
    new_rows: int = 0  # rows labelled by this run (a resumed run counts only its own)
    reused: int = 0  # rows given an identical (normalized) text's prediction instead of their own analysis
    shard: str | None = None  # "K/N" when this output is one shard of the input
    human: int = 0  # rows whose label is the analyst's (human_labels)
    human_labels: str | None = None  # the labels file put over the model's labels
    human_conflicts: int = 0  # texts that file labels differently on different rows (its last row's label won)
    flattened: int = 0  # TSV cells whose tabs or line breaks were written as spaces

    @property
    def rows_per_s(self) -> float:
        return self.new_rows / self.seconds if self.seconds else 0.0


def format_summary(s: LabelSummary) -> str:
    shard = f" (shard {s.shard})" if s.shard else ""
    lines = [f"labelled {s.rows:,} rows{shard} -> {s.output}"]
    total = max(1, sum(s.per_label.values()))
    width = max([12, *(display_width(lab) for lab in s.per_label)])  # '기쁨' is 4 columns wide; a long label widens
    for lab, c in sorted(s.per_label.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {pad(lab, width)}{c:>10,}  {c / total:6.1%}")
    flagged = {k: v for k, v in s.status.items() if k != "ok"}
    if flagged:
        lines.append("  flagged: " + ", ".join(f"{k} {v:,}" for k, v in sorted(flagged.items())))
    for m in s.malformed[:5]:
        lines.append(f"  {m}")
    if len(s.malformed) > 5:
        lines.append(f"  ... ({s.status.get('error', 0)} malformed rows in all; status column says which)")
    if s.human_labels is not None:
        rows = "1 row carries" if s.human == 1 else f"{s.human:,} rows carry"
        lines.append(f"  {rows} your label from {s.human_labels} (label_source = human; model_label keeps the "
                     "model's)")
        if s.human_conflicts:
            many = s.human_conflicts != 1
            lines.append(f"  {s.human_conflicts:,} text{'s have' if many else ' has'} two different labels in "
                         f"{s.human_labels}: its last row's label is used")
    if s.flattened:
        lines.append(f"  {s.flattened:,} cell{'s' if s.flattened != 1 else ''} held a tab or line break, written as a "
                     "space: a TSV has no quoting (write .csv or .jsonl to keep them)")
    if s.reused:
        lines.append(f"  {s.reused:,} rows ({s.reused / max(1, s.rows):.1%}) repeated an earlier text: its prediction "
                     "was reused")
    lines.append(f"  {s.new_rows:,} rows in {s.seconds:.1f}s ({s.rows_per_s:,.0f} rows/s)")
    return "\n".join(lines)


def plot_distribution(s: LabelSummary, path: str | Path) -> Path:
    from ..io.plots import plot_distribution as draw

    return draw(s.per_label, s.rows, path)
