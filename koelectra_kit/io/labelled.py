"""A labelled table in: the text column, the label or rating column mapped onto a label set, and every dropped
row reported (never silent). What ``finetune``, ``baseline``, ``evaluate``, ``ensemble`` and the app's label store
read a labelled table with, so all of them see the same rows with the same labels.

    rows = read_labelled("dev.csv", ["negative", "neutral", "positive"], rating_map="stars5")
    rows.texts, rows.y, print(format_file_report(rows.report))

No torch here.
"""
from __future__ import annotations

import contextlib
import math
import re
import unicodedata
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from ..errors import ConfigError, InputError
from .hfdata import is_dataset_source, read_dataframe
from .labelcols import label_sets
from .labellog import is_label_log, log_records, table_labels, without_torn_tail
from .tables import CONFIG_HINTS, REPEATED_COLUMNS, TEXT_COLUMNS, detect_encoding, pick_column, read_table, table_format
from .textcheck import check_text_column, is_blank

# Rating bands, inclusive: "lo-hi:label" or "value:label", comma-separated.
RATING_PRESETS = {
    "stars5": "1-2:negative,3:neutral,4-5:positive",  # 1-5 stars (shops, app stores)
    "nsmc10": "1-4:negative,5-8:neutral,9-10:positive",  # Naver movie 1-10 (nsmc3's own bands)
}
# Column names tried, in order, when label_column / rating_column are not given (text columns:
# tables.TEXT_COLUMNS, the list every stage shares).
ID_COLUMNS = ("id", "review_id", "doc_id", "번호", "아이디")  # kept in evaluate's predictions.csv
LABEL_COLUMNS = ("label", "labels", "sentiment", "class", "라벨", "레이블", "감성", "감정")
RATING_COLUMNS = ("rating", "stars", "star", "score", "별점", "평점")
# File label values that mean the same sentiment; used only when the label set has exactly one
# member of a group, so "긍정" in a file maps to "positive" (and "positive" to "긍정") by itself. In the order a
# message offers them (``LabelResolver.alias_hint``: the first Korean and the first English one).
LABEL_ALIASES = (
    ("positive", "pos", "긍정", "긍정적"),
    ("negative", "neg", "부정", "부정적"),
    ("neutral", "neu", "중립", "중립적", "보통"),
)


def parse_rating_map(spec: str) -> list[tuple[float, float, str]]:
    """``"1-2:negative,3:neutral,4-5:positive"`` (or a preset name) -> [(lo, hi, label)], inclusive."""
    text = RATING_PRESETS.get(spec, spec)
    bands = []
    for part in str(text).split(","):
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(?:-\s*(\d+(?:\.\d+)?))?\s*[:=]\s*(.+?)\s*", part)
        if not m:
            raise ConfigError(f"rating_map: can't read band '{part.strip()}' in '{spec}'; write bands like "
                              f"'1-2:negative,3:neutral,4-5:positive' or use a preset ({', '.join(RATING_PRESETS)})")
        lo = float(m.group(1))
        hi = float(m.group(2)) if m.group(2) else lo
        if hi < lo:
            raise ConfigError(f"rating_map: band '{part.strip()}' ends below its start")
        bands.append((lo, hi, m.group(3)))
    bands.sort()
    for (lo1, hi1, _), (lo2, _, _) in zip(bands, bands[1:]):
        if lo2 <= hi1:
            raise ConfigError(f"rating_map: bands overlap at {lo2:g} in '{spec}'")
    return bands


@dataclass
class Labelled:
    """Rows of one table that made it: texts, class indices, 1-based data-row numbers, report."""

    texts: list[str]
    y: np.ndarray  # int64 class indices into the label set
    rows: np.ndarray  # 1-based row number in the file (header not counted), for reports
    report: dict
    ids: list | None = None  # the file's id column, as written, when it has one (predictions.csv keeps it)

    def take(self, idx) -> "Labelled":
        idx = np.asarray(idx, dtype=np.int64)
        ids = None if self.ids is None else [self.ids[i] for i in idx]
        return Labelled([self.texts[i] for i in idx], self.y[idx], self.rows[idx], self.report, ids)


def _column_as_str(df, col, whole_as_int: bool = False) -> "list[str]":
    """The column's cells as strings, a missing one as "". ``whole_as_int``: a whole float as the integer it holds
    (labels): a Parquet or dataset column of 0/1 with one missing cell is float, and its 1 read as '1.0', which no
    labels=[0,1] or label_map={1: positive} matched, so every row was an unknown label."""
    def text(v) -> str:
        if v is None or (isinstance(v, float) and math.isnan(v)):
            return ""
        return str(int(v)) if whole_as_int and isinstance(v, float) and v.is_integer() else str(v)

    return [text(v) for v in df[col].tolist()]


def nfc(value) -> str:
    """A label as one string whatever wrote it: a file saved on macOS spells Korean decomposed (NFD: 기쁨 as the
    jamo ㄱ ㅣ ㅃ ㅡ ㅁ), which prints as the composed 기쁨 (NFC) the same label typed elsewhere is, but is another
    string: the two were two classes (prob_기쁨 twice) or "'기쁨' is not in the label set ['기쁨', ...]". Texts are
    NFC already (``tokenizer.normalize``); labels are NFC wherever they are read, and a model's id2label is."""
    return unicodedata.normalize("NFC", str(value))


def _norm(value: str) -> str:
    return nfc(value).strip().casefold()


# A whole number as a table spells it: '4', or '4.0' where pandas or a spreadsheet wrote an integer column as floats
# (a CSV's label column with one empty cell). No leading zeros: '04' is a code, not the number 4.
_WHOLE = re.compile(r"-?(?:0|[1-9]\d*)(?:\.0+)?")


def _whole(value) -> int | None:
    """The whole number ``value`` spells ('4', '4.0'), else None."""
    text = str(value).strip()
    return int(text.split(".")[0]) if _WHOLE.fullmatch(text) else None


def same_label_groups(labels) -> list[list[str]]:
    """The names of ``labels`` that a file's cells could not tell apart (the same after NFC, spaces and case: the
    rule ``label_resolver`` reads a cell by), each group in the set's order; [] when every name stands alone."""
    groups: dict[str, list[str]] = {}
    for lab in labels:
        groups.setdefault(_norm(lab), []).append(str(lab))
    return [g for g in groups.values() if len(g) > 1]


def unicode_note(*names) -> str:
    """' (a Unicode NFC/NFD difference: ...)' where two of ``names`` print alike but differ only in Unicode form,
    else ''. A message that shows them side by side ('기쁨' and '기쁨') reads as nonsense without it."""
    shown = {str(n) for n in names}
    if len(shown) > 1 and len({nfc(n) for n in shown}) < len(shown):
        return " (a Unicode NFC/NFD difference: the same letters composed or decomposed, as macOS saves Korean)"
    return ""


def check_label_set(labels, key: str = "labels") -> list[str]:
    """``labels`` as NFC strings, or a ``ConfigError`` naming the names a file's cells could not tell apart: with
    [기쁨 (NFC), 기쁨 (NFD)] (a label set built from a file mixing both) a model trained two classes of one label;
    with [Pos, pos] a cell 'POS' went to whichever came last."""
    clash = same_label_groups(labels)
    if clash:
        said = "; ".join(" and ".join(repr(n) for n in g) for g in clash[:6]) + (" ..." if len(clash) > 6 else "")
        alike = ("; those that print alike differ only in Unicode form (NFC/NFD: the same letters composed or "
                 "decomposed, as files saved on macOS spell Korean)") if any(unicode_note(*g) for g in clash) else ""
        raise ConfigError(f"{key}: {said} are one label{' each' if len(clash) > 1 else ''} to a file's cells, read "
                          f"ignoring case, spaces and Unicode form{alike}; give each label once")
    return [nfc(lab) for lab in labels]


class LabelResolver:
    """File value -> label (or None), the one rule every reader of a label uses. Tries, in order: the explicit
    ``label_map``, an exact label name (both NFC: ``nfc``), the same ignoring case/spaces, then the built-in
    Korean/English sentiment aliases (긍정/pos/positive ...) where the label set has exactly one label of that
    meaning, then a whole number as the set spells it ('4.0' for the label 4, '4' for 4.0: a CSV of integers
    pandas wrote as floats). A name several labels share once case is ignored resolves to none of them (an error
    that names the cell, not a guess)."""

    def __init__(self, labels: list[str], label_map: dict | None = None):
        labels = [str(lab) for lab in labels]
        if len({nfc(lab) for lab in labels}) < len(labels):
            check_label_set(labels, "the label set")  # the same name twice in two Unicode forms: say which
        self.labels, self.aliased = labels, []
        table: dict[str, str] = {}
        for group in LABEL_ALIASES:
            targets = [lab for lab in labels if _norm(lab) in group]
            if len(targets) == 1:
                table.update({alias: targets[0] for alias in group})
                self.aliased.append(group)
        ambiguous = {_norm(g[0]) for g in same_label_groups(labels)}
        table.update({_norm(lab): lab for lab in labels if _norm(lab) not in ambiguous})
        for key in ambiguous:
            table.pop(key, None)
        pairs = [(str(k), v) for k, v in (label_map or {}).items()]
        table.update({_norm(k): v for k, v in pairs})
        self.table = table
        self.exact = {**{nfc(lab): lab for lab in labels}, **{nfc(k): v for k, v in pairs}}  # label_map's first
        self.numbers = {**_by_number((lab, lab) for lab in labels), **_by_number(pairs)}

    def __call__(self, value: str) -> str | None:
        key = nfc(value)
        if key in self.exact:
            return self.exact[key]
        found = self.table.get(_norm(value))
        return found if found is not None else self.numbers.get(_whole(value))

    def alias_hint(self) -> str:
        """' (or 긍정/부정, pos/neg)': the alias spellings this label set takes, for a message listing its labels;
        '' where none applies (a set of emotions or topics: 긍정 there is no label, and the hint said it was)."""
        if not self.aliased:
            return ""
        own = {_norm(lab) for lab in self.labels}
        korean, english = [], []
        for group in self.aliased:
            spare = [a for a in group if a not in own]
            korean += [a for a in spare if not a.isascii()][:1]
            english += [a for a in spare if a.isascii()][:1]
        return f" (or {', '.join('/'.join(side) for side in (korean, english) if side)})"


def _by_number(pairs) -> dict[int, str]:
    """Whole number -> label, for the (spelling, label) pairs that spell one, where only one label has it."""
    found: dict[int, set] = {}
    for spelling, label in pairs:
        if _whole(spelling) is not None:
            found.setdefault(_whole(spelling), set()).add(label)
    return {n: next(iter(got)) for n, got in found.items() if len(got) == 1}


def label_resolver(labels: list[str], label_map: dict | None = None) -> LabelResolver:
    """The resolver of file values onto ``labels`` (``LabelResolver``: call it with a value)."""
    return LabelResolver(labels, label_map)


# The words YAML (1.1, as the config reads it) takes for true and false; case is ignored where they are matched.
YAML_BOOLS = {True: ("true", "yes", "on"), False: ("false", "no", "off")}


def checked_label_map(label_map: dict | None, labels: list[str]) -> dict[str, str]:
    """``label_map`` as file value -> label, both strings, each label one of ``labels``. YAML reads
    ``label_map={pos: 1}`` with an int 1, which ``labels=[0,1]`` (strings) did not hold: the error said "'1' is not
    one of the labels ['0', '1']"; and ``{0:negative}`` (no space after the colon) is one key '0:negative' with no
    label, which the error showed as 'None'. A label may be spelled as a file's cells may (``NEGATIVE``, ``부정``:
    ``label_resolver``'s case and aliases)."""
    checked, spelled, given = {}, label_resolver(labels), {}
    for src, dst in (label_map or {}).items():
        if dst is None:
            fix = (f" (YAML reads '{src}' as one value: write a space after the colon, "
                   f"label_map={{{str(src).replace(':', ': ', 1)}}})") if ":" in str(src) else ""
            raise ConfigError(f"label_map: '{src}' maps to no label{fix}")
        if spelled(str(dst)) is None:
            raise ConfigError(f"label_map: '{src}' -> '{dst}', but '{dst}' is not one of the labels {labels}")
        dst = spelled(str(dst))  # a label as a file may spell it (NEGATIVE, 부정), as the file's own cells are read
        if isinstance(src, bool):
            # YAML reads label_map={yes: positive, no: negative} as the keys true and false, which a file's yes/no
            # never matched ("map them with label_map=", which the user had): each spelling YAML reads as it
            for spelling in (str(src), *YAML_BOOLS[src]):
                checked.setdefault(spelling, str(dst))  # a key written as a string ('yes': ...) comes first
            continue
        key = nfc(src)  # a value as the file's cells are read: 기쁨 decomposed (macOS) is 기쁨
        if checked.get(key, dst) != dst and key in given:
            # {1: a, '1': b}, or one name in both Unicode forms: the last one won without a word
            raise ConfigError(f"label_map: {given[key]!r} and {src!r} are one file value{unicode_note(given[key], src)}"
                              f", mapped to {checked[key]!r} and {dst!r}; map it once")
        given[key], checked[key] = src, str(dst)
    return checked


def _short(text: str, n: int = 40) -> str:
    return text if len(text) <= n else text[:n] + "…"


def _examples(rows, texts, values=None, n: int = 3) -> list[str]:
    out = []
    for i in range(min(n, len(rows))):
        out.append(f"row {rows[i]}: {_short(texts[i])!r}" + (f" ({_short(values[i])!r})" if values is not None else ""))
    return out


def _pick_columns(df, path, text_column, label_column, rating_column, rating_map) -> tuple[str, str, str]:
    """(text column, label-or-rating column, "label" | "rating"), or an error listing the columns present."""
    present = ", ".join(map(str, df.columns))
    text_col = pick_column(df.columns, text_column, TEXT_COLUMNS, path)
    if text_col is None:
        raise InputError(f"{path}: no text column found (tried {', '.join(TEXT_COLUMNS[:6])}, ...); "
                         f"set text_column=; columns present: {present}")
    if label_column and (rating_map or rating_column):
        # both named: the label column won and the rating settings did nothing, exit 0 (a preset's label_column with
        # rating_column= rating_map= given on the command line trained on the labels, not the ratings asked for)
        rating = " ".join(f"{k}={v}" for k, v in (("rating_column", rating_column), ("rating_map", rating_map)) if v)
        raise ConfigError(f"label_column={label_column} reads labels, and {rating} reads ratings: give one "
                          "(label_column=null to read the ratings)")
    if rating_map and not label_column:
        kind, candidates, given = "rating", RATING_COLUMNS, rating_column
    elif rating_column and not label_column:
        raise ConfigError(f"rating_column={rating_column} needs rating_map= "
                          f"({', '.join(RATING_PRESETS)} or bands like '1-2:negative,3:neutral,4-5:positive')")
    else:
        kind, candidates, given = "label", LABEL_COLUMNS, label_column
    source_col = pick_column(df.columns, given, candidates, path)
    if source_col is None:
        # a .txt is one text per line: Excel's "Unicode Text" (a tab-separated table) named no column but "text"
        lines = (" (a .txt file is read as one text per line, no columns: for a tab-separated table saved as .txt, "
                 "as Excel's 'Unicode Text' is, pass format=tsv)" if Path(str(path)).suffix.lower() == ".txt" else "")
        setting = f"set {kind}_column=" if kind == "rating" else "set label_column= (or rating_column= with rating_map=)"
        raise InputError(f"{path}: no {kind} column found (tried {', '.join(candidates)}); {setting}; columns "
                         f"present: {present}{lines}")
    if text_col == source_col:
        # text_column=label (meant: label_column=): each label was read as its own review, and a model that learns
        # to read its label back scored 1.0 on dev, exit 0
        raise InputError(f"{path}: column {text_col!r} is both the text and the {kind} column; name the other one "
                         f"(text_column=, {kind}_column=); columns present: {present}")
    return text_col, source_col, kind


def _check_not_repeated(df, path, *picked) -> None:
    """A picked column whose name the header repeats (two 'label' columns: an old and a corrected one) is an error:
    pandas calls the second 'label.1', and reading 'label' took the first without a word."""
    repeated = df.attrs.get(REPEATED_COLUMNS) or {}
    for col in picked:
        if str(col) in repeated:
            name = repeated[str(col)]
            raise InputError(f"{path}: the header names {list(repeated.values()).count(name)} columns {name!r}; which "
                             "one to read is a guess: give each column its own name")


def _map_labels(raw: list[str], kind: str, source_col: str, labels: list[str], label_map: dict | None,
                rating_map: str | None, report: dict) -> list[str | None]:
    """The label of each row (None: maps to no label), from the rating bands or the label column's names."""
    if kind == "rating":
        import pandas as pd

        ratings = pd.to_numeric(pd.Series(raw), errors="coerce").to_numpy(dtype=float)
        band_label: list[str | None] = [None] * len(raw)
        for lo, hi, lab in parse_rating_map(rating_map):
            for i in np.flatnonzero((ratings >= lo) & (ratings <= hi)):
                band_label[i] = lab
        report["label_source"] = f"rating column '{source_col}' via {rating_map}"
        resolve = label_resolver(labels)
        return [resolve(b) if b is not None else None for b in band_label]
    report["label_source"] = f"label column '{source_col}'"
    resolve = label_resolver(labels, label_map)
    cache = {v: resolve(v) for v in set(raw)}
    renamed = {v: m for v, m in cache.items() if m is not None and m != v and nfc(v) != nfc(m)}
    if renamed:
        report["label_mapping"] = dict(sorted(renamed.items()))
    # the label itself in the other Unicode form (a file saved on macOS): said apart, as "'기쁨' -> '기쁨'" among the
    # mapped names read as nonsense
    decomposed = {v for v, m in cache.items() if m is not None and m != v and nfc(v) == nfc(m)}
    if decomposed:
        counts: dict[str, int] = {}
        for v in raw:
            if v in decomposed:
                counts[cache[v]] = counts.get(cache[v], 0) + 1
        report["labels_decomposed"] = dict(sorted(counts.items()))
    return [cache[v] for v in raw]


def _unknown_rows(path, idx, rows, texts, raw, kind: str, labels, rating_map, drop: bool,
                  labels_of: str | None = None, none_known: bool = False) -> dict:
    """Rows whose label maps to none: an error with counts and examples, or (``drop``) their report entry.
    ``labels_of``: whose label set it is when the user cannot change it (evaluate: the model's). ``none_known``: no
    row's label is in the set (a file of its own labels, 1 to 5, read with the default set): the error names the
    labels= that reads the file as it is."""
    values: dict[str, int] = {}
    for i in idx:
        values[raw[i]] = values.get(raw[i], 0) + 1
    top = sorted(values.items(), key=lambda kv: -kv[1])
    if not drop:
        # values cut as the examples' texts are: a text column taken for the labels (label_column=review) printed
        # six whole reviews, 20,000 characters each, in the one error line
        shown = ", ".join(f"{_short(v)!r} ({c} rows)" for v, c in top[:6]) + (" ..." if len(top) > 6 else "")
        examples = "; ".join(_examples(rows[idx], [texts[i] for i in idx], [raw[i] for i in idx]))
        if kind == "rating" and not any(_is_number(v) for v in values):  # "5점": the bands were never the problem
            what = f"ratings are not numbers (rating_map {rating_map!r} reads numbers)"
            hint = "write them as numbers ('5점' as 5), or name the column of numeric ratings with rating_column="
        elif kind == "rating":
            what = _rating_misses(values, labels, rating_map)
            hint = "fix the bands in rating_map=" + ("" if labels_of else " (or the labels=)")
        else:
            what = f"labels are not in the label set {labels}"
            hint = "map them with label_map={value: label}" + (f" onto {labels_of}'s labels" if labels_of else
                                                               ", change labels=")
            if none_known and not labels_of and 2 <= len(values) <= 20 and all(v == _short(v) for v in values):
                hint = f"to train on the file's own labels give {_labels_setting(values)}; or {hint}"
        raise InputError(f"{path}: {len(idx)} rows' {what}: {shown}; e.g. {examples}; "
                         f"{hint}, or pass drop_unknown_labels=true to drop these rows")
    return {"count": int(len(idx)), "values": dict(top[:20]), "rows": rows[idx][:10].tolist()}


def _labels_setting(values) -> str:
    """``labels=[...]`` of a file's label values as a user types it: numbers sorted as numbers ('5.0' as 5, the
    whole number a float column holds), other names sorted, quoted where YAML would read them as something else
    (yes, null, 1.5e3)."""
    import yaml

    if all(_is_number(v) for v in values):
        items = [str(_whole(v)) if _whole(v) is not None else v for v in sorted(values, key=float)]
    else:
        items = sorted(values)

    def item(v: str) -> str:
        try:
            read = yaml.safe_load(f"[{v}]")
        except yaml.YAMLError:
            read = None
        plain = read == [v] or (_whole(v) is not None and read == [_whole(v)])
        return v if plain and v.strip() == v else "'" + v.replace("'", "''") + "'"

    return f"labels=[{','.join(dict.fromkeys(item(v) for v in items))}]"


def _is_number(value: str) -> bool:
    try:
        float(value)
        return True
    except ValueError:
        return False


def _rating_misses(values: dict[str, int], labels: list[str], rating_map: str) -> str:
    """What the ratings that map to no label are: ones that fit no band, or ones in a band whose label is not in the
    set (stars5 with labels=[negative,positive]: the 3s are in the band '3:neutral'; "fit no band" sent the analyst
    to bands that were right)."""
    bands, resolve = parse_rating_map(rating_map), label_resolver(labels)
    outside: dict[str, int] = {}
    for value, count in values.items():
        try:
            x = float(value)
        except ValueError:
            continue
        band = next((lab for lo, hi, lab in bands if lo <= x <= hi), None)
        if band is not None and resolve(band) is None:
            outside[band] = outside.get(band, 0) + count
    if not outside:
        return f"ratings fit no band of rating_map {rating_map!r}"
    some = "fit no band or " if sum(outside.values()) < sum(values.values()) else ""
    return (f"ratings {some}fall in a band of rating_map {rating_map!r} whose label is not in the label set {labels} ("
            + ", ".join(f"{lab!r}: {c} rows" for lab, c in outside.items()) + ")")


def _conflicting_labels(texts, mapped, rows, keep) -> dict | None:
    """The kept texts the table gives different labels in different rows (a review labelled twice, by two people or
    once by mistake): their count and the first as an example. They were trained on without a word; they still are
    (each row with its label), with a warning in the report."""
    seen: dict[str, dict[str, int]] = {}  # text -> {label: its first row}
    for i in np.flatnonzero(keep):
        seen.setdefault(texts[i].strip(), {}).setdefault(mapped[i], int(rows[i]))
    clashes = [(text, found) for text, found in seen.items() if len(found) > 1]
    if not clashes:
        return None
    text, found = clashes[0]
    return {"texts": len(clashes), "example": {"text": _short(text), "labels": found}}


def read_labelled(path: str | Path, labels: list[str], *, text_column: str | None = None,
                  label_column: str | None = None, rating_column: str | None = None,
                  rating_map: str | None = None, label_map: dict | None = None,
                  drop_unknown_labels: bool = False, fmt: str | None = None,
                  encoding: str | None = None, labels_of: str | None = None) -> Labelled:
    """Read one labelled table. Empty texts are dropped (counted, with examples); a label or rating
    that maps to no label is an error with counts and examples, or dropped and reported with
    ``drop_unknown_labels``. Nothing is dropped silently: see ``report["dropped"]``."""
    label_map = checked_label_map(label_map, labels)
    if is_dataset_source(path):  # hf:..., a save_to_disk or Parquet folder: no format or encoding to apply
        df, fmt, used_encoding, records = read_dataframe(path), "dataset", None, None
    else:
        # the app's LABELS.csv with its last line torn mid-write (the app killed during an append) reads without that
        # line, with one warning, as `label human_labels=` reads it; read row by row (a rating), it is any table
        as_log = not (rating_map or rating_column)
        untorn = (without_torn_tail(path, str(path), labels, label_map, fmt=fmt, logs_only=True) if as_log
                  else contextlib.nullcontext(path))
        with untorn as readable:
            df = read_table(readable, fmt=fmt, encoding=encoding)  # TSV unquoted: NSMC texts hold stray '"'
            fmt = table_format(path, fmt)
            used_encoding = None if fmt == "parquet" else detect_encoding(readable, encoding, hints=CONFIG_HINTS)
            # a CSV log's records with their lines, read while ``readable`` (maybe a copy without a torn line) is there
            records = log_records(readable, df, used_encoding, fmt) if as_log else None
    log = None
    if is_label_log(df.columns) and not (rating_map or rating_column):
        # the app's LABELS.csv: the latest answer per text that no undo retracts (row by row, an undone or
        # superseded answer would be trained on)
        import pandas as pd

        events = len(df)
        got = table_labels(df, str(path), labels, "fix the file, or map them with label_map=", label_map, records)
        if not got.labels:
            raise InputError(f"{path}: the app's label log holds no answer ({events} lines: skips, undone answers)")
        df = pd.DataFrame({"text": list(got.labels), "label": list(got.labels.values())}, dtype=object)
        log = {"events": events, "labels": len(got.labels), "skipped": len(got.skipped)}
    text_col, source_col, kind = _pick_columns(df, path, text_column, label_column, rating_column, rating_map)
    _check_not_repeated(df, path, text_col, source_col)
    written = dict(label_sets(df.columns)).get(str(source_col), False)  # the picked column is one `label` added
    if kind == "label" and written is not False:
        import warnings

        human = f"; its {written} column says which rows are the analyst's" if written else ""
        warnings.warn(f"{path} is a file `koelectra-kit label` wrote: its label column is a model's predictions"
                      f"{human} (training on them teaches that model's guesses back)", stacklevel=2)
    texts = _column_as_str(df, text_col)
    check_text_column(texts, text_col, df.columns, path)
    raw = [v.strip() for v in _column_as_str(df, source_col, whole_as_int=True)]
    rows = np.arange(1, len(df) + 1)
    report: dict = {"path": str(path), "format": fmt, "rows_read": len(df), "text_column": str(text_col)}
    if labels_of:
        report["labels_of"] = labels_of
    if log is not None:
        report["label_log"] = log
    if used_encoding is not None:
        report["encoding"] = used_encoding
    mapped = _map_labels(raw, kind, source_col, labels, label_map, rating_map, report)

    empty = np.array([is_blank(t) for t in texts], dtype=bool)  # a zero-width space alone is empty too
    unknown = np.array([m is None for m in mapped], dtype=bool) & ~empty
    dropped = {}
    if empty.any():
        idx = np.flatnonzero(empty)
        dropped["empty_text"] = {"count": int(len(idx)), "rows": rows[idx][:10].tolist()}
    if unknown.any():
        dropped["unknown_label"] = _unknown_rows(path, np.flatnonzero(unknown), rows, texts, raw, kind, labels,
                                                 rating_map, drop_unknown_labels, labels_of,
                                                 none_known=not (~unknown & ~empty).any())
    keep = ~(empty | unknown)
    if not len(df):  # a header and nothing under it: "no usable rows (0 empty texts, 0 unknown labels out of 0)"
        raise InputError(f"{path}: the {'dataset' if fmt == 'dataset' else 'file'} has no rows"
                         + (" under its header" if fmt in ("csv", "tsv") else ""))
    if not keep.any():
        raise InputError(f"{path}: no usable rows ({int(empty.sum())} empty texts, "
                         f"{int(unknown.sum())} unknown labels out of {len(df)})")
    index = {lab: i for i, lab in enumerate(labels)}
    y = np.array([index[mapped[i]] for i in np.flatnonzero(keep)], dtype=np.int64)
    report["dropped"] = dropped
    conflicts = _conflicting_labels(texts, mapped, rows, keep)
    if conflicts:
        report["conflicting_labels"] = conflicts
    report["rows_kept"] = int(keep.sum())
    report["class_counts"] = class_counts(y, labels)
    id_col = pick_column(df.columns, None, ID_COLUMNS)
    ids = None if id_col is None else [v for v, k in zip(_column_as_str(df, id_col), keep) if k]
    if id_col is not None:
        report["id_column"] = str(id_col)
    return Labelled([texts[i] for i in np.flatnonzero(keep)], y, rows[keep], report, ids)


def require_every_class(data: Labelled, labels: list[str], where: str,
                        fix: str = "add examples or remove the label from labels=") -> None:
    """A table that weighs or scores a model for choosing (fine-tuning's train and dev, an ensemble's dev) must hold
    every label: a class with no rows can not be learnt, and a dev set without it picks a checkpoint or weights
    blind to it."""
    counts = np.bincount(data.y, minlength=len(labels))
    empty = [lab for lab, c in zip(labels, counts) if c == 0]
    if empty:
        have = ", ".join(f"{lab} {c}" for lab, c in zip(labels, counts))
        raise InputError(f"{where}: no examples of {', '.join(repr(e) for e in empty)} (counts: {have}); {fix}")


def class_counts(y, labels) -> dict:
    return {lab: int(c) for lab, c in zip(labels, np.bincount(y, minlength=len(labels)))}


def format_file_report(f: dict) -> str:
    """One table's part of the report: format, encoding, columns, label mapping, dropped rows."""
    enc = f", {f['encoding']}" if f.get("encoding") else ""
    lines = [f"{f['path']} ({f['format']}{enc}): {f['rows_read']} rows, text column '{f['text_column']}', "
             f"labels from {f['label_source']}"]
    if f.get("label_log"):
        g = f["label_log"]
        lines.append(f"  the app's label log: {g['events']} lines give {g['labels']} labels (the latest answer per "
                     f"text that no undo retracts; {g['skipped']} texts skipped)")
    if f.get("labels_decomposed"):
        lines.append("  labels written decomposed (Unicode NFD, as macOS saves Korean) read as the same labels: "
                     + ", ".join(f"{k!r} {v} rows" for k, v in f["labels_decomposed"].items()))
    if f.get("label_mapping"):
        keep = "" if f.get("labels_of") else "; labels= with the file's own names keeps those"  # (evaluate: no key)
        lines.append("  label names mapped: " + ", ".join(f"{k!r} -> {v!r}" for k, v in f["label_mapping"].items())
                     + f" (the model's labels{keep})")
    for reason, d in f["dropped"].items():
        more = f" values {d['values']}" if "values" in d else ""
        lines.append(f"  dropped {d['count']} rows: {reason.replace('_', ' ')}{more} (rows {d['rows']}"
                     f"{' ...' if d['count'] > len(d['rows']) else ''})")
    if f.get("conflicting_labels"):
        c = f["conflicting_labels"]
        which = ", ".join(f"{lab} in row {row}" for lab, row in c["example"]["labels"].items())
        lines.append(f"  warning: {c['texts']} {'text has' if c['texts'] == 1 else 'texts have'} different labels "
                     f"in different rows (e.g. "
                     f"{c['example']['text']!r}: {which}); each row is kept with its own label")
    lines.append(f"  kept {f['rows_kept']} rows: " + ", ".join(f"{k} {v}" for k, v in f["class_counts"].items()))
    return "\n".join(lines)
