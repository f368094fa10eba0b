"""The column sets ``koelectra-kit label`` adds to a file (``label``, ``confidence``, ..., ``status``; ``pred_label``
and so on when a file is labelled again): their prefixes, and which sets a file's header holds. Read where a
labelled file comes back: as training data (``labelled``), as the analyst's labels (``label.human``)."""
from __future__ import annotations


def label_prefixes():
    """"", "pred_", "pred2_", "pred3_", ...: the prefixes of the column sets ``koelectra-kit label`` adds, in the
    order it takes them (the first whose names the input does not have: ``label.chunk.prefixed``)."""
    yield ""
    yield "pred_"
    k = 2
    while True:
        yield f"pred{k}_"
        k += 1


def label_sets(columns) -> list[tuple[str, str | None]]:
    """The (label column, its ``label_source`` column or None) of every set of columns ``koelectra-kit label`` added
    to a file, oldest first: ``label``, then ``pred_label``, ``pred2_label``, ... for a file labelled again. A set's
    human-label columns are prefixed on their own (``label.human``) and come right after its status column: a
    ``label_source`` elsewhere belongs to another run."""
    columns = [str(c) for c in columns]
    names, sets = set(columns), []
    for k, prefix in enumerate(label_prefixes()):
        if k > 1 and not any(c.startswith(prefix) for c in names):
            break
        if {f"{prefix}confidence", f"{prefix}status", f"{prefix}label"} <= names:
            after = columns.index(f"{prefix}status") + 1
            source = columns[after] if after < len(columns) and columns[after].endswith("label_source") else None
            sets.append((f"{prefix}label", source))
    return sets


def written_by_label(columns) -> tuple[str, str | None] | None:
    """(its label column, the column saying which rows are the analyst's, or None) when ``columns`` are those of a
    file ``koelectra-kit label`` wrote, else None: the newest set that carries the analyst's labels, else the newest
    (``label_sets``)."""
    sets = label_sets(columns)
    return next((s for s in reversed(sets) if s[1]), sets[-1]) if sets else None
