"""Hugging Face ``datasets`` as inputs: wherever a corpus, a labelled table, a transfer set or a file to label is
read, a dataset can stand in for the file. Three forms, told apart by ``parse_source``:

- ``hf:OWNER/NAME``, ``hf:OWNER/NAME:SPLIT`` or ``hf:OWNER/NAME:CONFIG:SPLIT``: a dataset on the hub, loaded with
  ``datasets.load_dataset`` (streamed for corpora, so a big one is never held whole; a normal, cached load for
  tables). One part after the name is a split, two are a config and a split; a split may carry a slice
  (``train[:10%]``, whose colon is not a separator).
- ``FOLDER`` or ``FOLDER:SPLIT``: a folder written by ``Dataset.save_to_disk`` or ``DatasetDict.save_to_disk``
  (memory-mapped, never read whole).
- ``FOLDER`` of ``*.parquet`` shards, read in name order.

A dataset with several splits needs one named (the error lists them); with one split it needs none. Then the same
column rules as files apply (the callers pick text/label columns with ``tables.pick_column`` and friends). Readers:
``read_dataframe`` (a whole table as strings, like ``tables.read_table``), ``open_rows`` (columns and a stream of
``tables.Record``, like ``tables.read_records``), ``iter_texts`` (one column, streamed) and ``corpus_paths`` (for
the tokenizer's and pretraining's file caches: a dataset's texts written once into a text file, a text a line).
"""
from __future__ import annotations

import hashlib
import itertools
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

from ..errors import InputError
from .fileio import atomic_path, cache_dir, check_input_file
from ..runtime import log
from .records import class_label_decoders
from .tables import TEXT_COLUMNS, Record, pick_column, read_records, values_frame
from .textcheck import checked_texts

PREFIX = "hf:"
SPEC_FORMS = "hf:OWNER/NAME, hf:OWNER/NAME:SPLIT or hf:OWNER/NAME:CONFIG:SPLIT"
# the folder ``Dataset.save_to_disk`` writes holds state.json + dataset_info.json; ``DatasetDict``'s a
# dataset_dict.json that lists its splits, one such folder each
DATASET_MARKERS = ("state.json", "dataset_info.json")
DICT_MARKER = "dataset_dict.json"
PARQUET_SUFFIXES = (".parquet", ".pq")
_REPO_ID = re.compile(r"[A-Za-z0-9][\w.-]*(/[A-Za-z0-9][\w.-]*)?")
BATCH_ROWS = 1000  # rows per Arrow read: flat memory, few Python calls
NO_ROWS = "the dataset has no rows"  # as ``labelled.read_labelled`` says it (of a file: "the file has no rows")
CORPUS_FORMAT = 1  # of the texts file ``corpus_file`` writes: raise it when that changes, so old copies go unused


@dataclass(frozen=True)
class DatasetSource:
    """One dataset input, as parsed: where it is and which split. ``text`` is what the user wrote (messages)."""

    kind: str  # "hub" | "disk" (save_to_disk) | "parquet" (a folder of shards)
    name: str  # the repo id, or the folder
    text: str
    config: str | None = None
    split: str | None = None
    splits: tuple[str, ...] = field(default=(), compare=False)  # a DatasetDict folder's, from dataset_dict.json

    def __str__(self) -> str:
        return self.text

    @property
    def identity(self) -> str:
        """What names this dataset in records (label's resume state): the hub spec, or the resolved folder."""
        if self.kind == "hub":
            return PREFIX + ":".join(p for p in (self.name, self.config, self.split) if p)
        return str(Path(self.name).resolve()) + (f":{self.split}" if self.split else "")


def _split_parts(text: str) -> list[str]:
    """``text`` cut at the colons outside brackets: ``a/b:train[:10%]`` -> ``["a/b", "train[:10%]"]``."""
    parts, depth, cur = [], 0, []
    for ch in text:
        depth += (ch == "[") - (ch == "]")
        if ch == ":" and depth <= 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    return parts + ["".join(cur)]


def _local_split(value: str) -> tuple[Path, str | None] | None:
    """(folder, split) when ``value`` names a folder, or FOLDER:SPLIT; None when it names no folder. A path that
    exists as written is taken whole (a folder whose name holds a colon, a drive letter)."""
    path = Path(value)
    if path.exists():
        return (path, None) if path.is_dir() else None
    *head, split = _split_parts(value)
    if head and Path(":".join(head)).is_dir():
        return Path(":".join(head)), split
    return None


def is_dataset_source(value) -> bool:
    """Whether ``value`` names a dataset (``hf:...``, a folder, FOLDER:SPLIT) rather than a file."""
    if isinstance(value, DatasetSource):
        return True
    if value is None or not isinstance(value, (str, Path)) or not str(value).strip():
        return False  # "" is no dataset, though Path("") is the working folder (check_input_file says so)
    return str(value).startswith(PREFIX) or _local_split(str(value)) is not None


def parse_source(value) -> DatasetSource:
    """The dataset ``value`` names, checked as far as it can be without loading it (a hub id's shape; a folder's
    kind and, for a DatasetDict, its split), or a one-line ``InputError``."""
    if isinstance(value, DatasetSource):
        return value
    text = str(value)
    if text.startswith(PREFIX):
        return _parse_hub(text)
    local = _local_split(text)
    if local is None:
        raise InputError(f"{text}: not a dataset folder, nor {SPEC_FORMS}")
    folder, split = local
    if split == "":
        raise InputError(f"{text}: empty split after ':'; write FOLDER:SPLIT")
    if (folder / DICT_MARKER).is_file():
        splits = tuple(_read_splits(folder))
        if split is None and len(splits) == 1:
            split = splits[0]
        if split not in splits:
            said = "needs a split" if split is None else f"has no split {split!r}"
            raise InputError(f"{text}: this DatasetDict {said}; splits: {', '.join(splits)} (write {folder}:SPLIT)")
        _check_has_rows(folder / split, text)
        return DatasetSource("disk", str(folder), text, split=split, splits=splits)
    if all((folder / m).is_file() for m in DATASET_MARKERS):
        if split is not None:
            raise InputError(f"{text}: {folder} holds one Dataset, not a DatasetDict: it has no splits; "
                             f"drop ':{split}'")
        _check_has_rows(folder, text)
        return DatasetSource("disk", str(folder), text)
    if parquet_shards(folder):
        if split is not None:
            raise InputError(f"{text}: a folder of Parquet files has no splits; drop ':{split}' (or give the folder "
                             "that holds that split's files)")
        return DatasetSource("parquet", str(folder), text)
    raise InputError(f"{folder}: is a directory, but not a dataset: no {DICT_MARKER} or {' + '.join(DATASET_MARKERS)} "
                     "(a `save_to_disk` folder) and no .parquet files in it; give a file, a dataset folder or "
                     "hf:OWNER/NAME")


def _parse_hub(text: str) -> DatasetSource:
    parts = _split_parts(text[len(PREFIX):])
    if len(parts) > 3 or any(not p.strip() for p in parts):
        raise InputError(f"{text}: can't tell the dataset, config and split apart; write {SPEC_FORMS}")
    repo = parts[0]
    if not _REPO_ID.fullmatch(repo):
        raise InputError(f"{text}: {repo!r} is not a hub dataset id; write {SPEC_FORMS}")
    config, split = (None, parts[1]) if len(parts) == 2 else (parts[1], parts[2]) if len(parts) == 3 else (None, None)
    return DatasetSource("hub", repo, text, config=config, split=split)


def _read_splits(folder: Path) -> list[str]:
    try:
        return list(json.loads((folder / DICT_MARKER).read_text(encoding="utf-8"))["splits"])
    except (OSError, ValueError, KeyError, TypeError):
        raise InputError(f"{folder}/{DICT_MARKER} is unreadable: save the dataset again with save_to_disk") from None


def _check_has_rows(folder: Path, text: str) -> None:
    """A one-line error for a ``save_to_disk`` folder of no rows. ``save_to_disk`` writes no Arrow file for one (its
    state.json lists none), which ``load_from_disk`` then fails to read with "list index out of range"; said here, a
    reader reports it before it logs or loads anything. A folder this can't read is left to ``load_from_disk``."""
    try:
        files = json.loads((folder / "state.json").read_text(encoding="utf-8"))["_data_files"]
    except (OSError, ValueError, KeyError, TypeError):
        return
    if files == []:
        raise InputError(f"{text}: {NO_ROWS}")


def parquet_shards(folder: Path) -> list[Path]:
    """The folder's Parquet files, in name order (train-00000-of-00003.parquet, ...)."""
    return sorted(p for p in Path(folder).iterdir() if p.is_file() and p.suffix.lower() in PARQUET_SUFFIXES)


def check_input(value) -> Path | DatasetSource:
    """An input file (exists, not empty), or the dataset ``value`` names: what every reader checks first."""
    return parse_source(value) if is_dataset_source(value) else check_input_file(value)


def card_name(value) -> str:
    """How a model card's ``datasets`` names an input: a hub dataset by its id, a folder by its name (no split), a
    file by its stem."""
    text = str(value)
    if text.startswith(PREFIX):
        return _split_parts(text[len(PREFIX):])[0]
    local = _local_split(text)
    return Path(text).stem if local is None else local[0].resolve().name


def _one_line(e: BaseException, limit: int = 300) -> str:
    text = " ".join(str(e).split()) or type(e).__name__
    return text if len(text) <= limit else text[:limit - 3] + "..."


# ---------------------------------------------------------------------------------------------
# Loading: one split of a hub dataset or a save_to_disk folder
# ---------------------------------------------------------------------------------------------


def _load(src: DatasetSource, streaming: bool):
    """The split's ``Dataset`` (or ``IterableDataset`` when streaming from the hub)."""
    import datasets

    if src.kind == "disk":
        # a DatasetDict's split alone (its own save_to_disk folder): loading the dict failed on another split that
        # datasets can't read, one of no rows among them
        folder = Path(src.name) / src.split if src.split is not None else Path(src.name)
        try:
            return datasets.load_from_disk(str(folder))
        except Exception as e:  # noqa: BLE001 - datasets raises several types for a damaged folder
            raise InputError(f"{src}: not a readable `save_to_disk` folder ({_one_line(e)})") from None
    from .hubreach import in_cache, unreachable

    reason = unreachable()
    if reason is not None and not in_cache(src.name, "dataset"):
        raise InputError(f"{src}: the Hugging Face hub can't be reached from here ({reason}) and the dataset is not "
                         "in the local cache; `save_to_disk` it where there is a network and pass that folder")
    try:
        ds = datasets.load_dataset(src.name, src.config, split=src.split, streaming=streaming)
    except Exception as e:  # noqa: BLE001 - offline, unknown id, config or split: all one line for the user
        offline = isinstance(e, ConnectionError) or "offline" in str(e).lower()
        hint = ("; with no network, `save_to_disk` it where there is one and pass that folder" if offline else "")
        raise InputError(f"{src}: can't load it from the Hugging Face hub ({_one_line(e)}){hint}") from None
    if isinstance(ds, dict):  # no split named, a DatasetDict (or IterableDatasetDict): its only split, or a choice
        names = list(ds)
        if len(names) != 1:
            raise InputError(f"{src}: the dataset has splits {', '.join(names)}: name one "
                             f"({PREFIX}{src.name}:{names[0]})")
        ds = ds[names[0]]
    return ds


@dataclass
class Rows:
    """A dataset opened for streaming: its columns, its rows (``tables.Record``, one value per column), the row
    count when it is known without a pass (not for a streamed hub dataset), and the files that hold the data
    (what a fingerprint of the input reads; none for a streamed one)."""

    columns: list[str]
    records: Iterator[Record]
    num_rows: int | None
    files: list[Path]


def open_rows(value, streaming: bool = False) -> Rows:
    """``value``'s rows, streamed. ``streaming``: a hub dataset is streamed instead of downloaded and cached
    (corpora); local folders are read the same way either way."""
    src = parse_source(value)
    if src.kind == "parquet":
        return _parquet_rows(src)
    return _dataset_rows(_load(src, streaming))


def _dataset_rows(ds) -> Rows:
    """A loaded ``Dataset``'s (or a streamed ``IterableDataset``'s) rows, in batches of ``BATCH_ROWS``."""
    columns = list(getattr(ds, "column_names", None) or [])
    batches = ds.iter(batch_size=BATCH_ROWS)  # column -> values (memory-mapped, or streamed from the hub)
    if not columns:  # a streamed dataset whose features the hub does not declare: the first batch's keys
        first = next(batches, None)
        columns = list(first) if first else []
        batches = itertools.chain([first] if first else [], batches)
    try:
        num_rows = len(ds)
    except TypeError:  # an IterableDataset
        num_rows = None
    files = [Path(f["filename"]) for f in (getattr(ds, "cache_files", None) or [])]
    features = getattr(ds, "features", None)
    names = {c: f for c, f in class_label_decoders(features.to_dict() if features else None).items() if c in columns}

    def records() -> Iterator[Record]:
        n = 0
        for batch in batches:
            for c, to_names in names.items():
                batch[c] = [to_names(v) for v in batch[c]]
            for row in zip(*(batch[c] for c in columns)):
                n += 1
                yield Record(list(row), n + 1)  # line numbers as a table's: the first row is line 2
    return Rows(columns, records(), num_rows, files)


def _parquet_rows(src: DatasetSource) -> Rows:
    """The shards' records, one after another, by the one Parquet record reader (``tables.read_records``)."""
    import pyarrow.parquet as pq

    shards = parquet_shards(Path(src.name))
    opened = [read_records(path, "parquet", "utf-8", None) for path in shards]
    columns = _same_columns(shards, [cols for cols, _ in opened])

    def records() -> Iterator[Record]:
        n = 0
        for _, shard in opened:
            for rec in shard:
                n += 1
                rec.line = n + 1  # numbered through the folder, as one table's rows
                yield rec
    return Rows(columns, records(), sum(pq.read_metadata(path).num_rows for path in shards), shards)


def _same_columns(shards: list[Path], columns: list[list]) -> list:
    """The folder's columns: every shard's, or an error naming the first shard that differs."""
    for path, cols in zip(shards, columns):
        if list(cols) != list(columns[0]):
            raise InputError(f"{path}: columns {list(cols)} differ from {shards[0].name}'s {list(columns[0])}; the "
                             "shards of one folder must hold one table")
    return list(columns[0])


# ---------------------------------------------------------------------------------------------
# Readers: a whole table, one column's texts, a corpus file
# ---------------------------------------------------------------------------------------------


def read_dataframe(value):
    """The whole table as ``tables.read_table`` gives a file's: strings where the data holds text, '' for a
    missing value. A ``ClassLabel`` column reads as its names (``_dataset_rows``, as every reader of a dataset sees
    it); -1 ("no label") reads as ''.

    Each value as written (``tables.values_frame``, as ``tables.read_table`` reads one Parquet file): pandas'
    ``read_parquet`` / ``to_pandas`` made an integer column with a missing value float (a label 1 read as '1.0'),
    and a nullable Int64 one failed in ``fillna("")`` with a TypeError, a traceback."""
    src = parse_source(value)
    if src.kind == "parquet":
        rows = _parquet_rows(src)
        return values_frame(rows.columns, rows.records, src, "parquet")
    rows = _dataset_rows(_load(src, streaming=False))
    return values_frame(rows.columns, rows.records, src, "dataset")


def iter_texts(value, text_column: str | int | None = None) -> Iterator[str]:
    """Every text of one column (given, or the first of ``tables.TEXT_COLUMNS``), streamed; a hub dataset is
    streamed from the hub, so a big corpus is never downloaded whole before the first text."""
    src = parse_source(value)
    rows = open_rows(src, streaming=True)
    if isinstance(text_column, int):
        idx = text_column
    else:
        names = [str(c).strip() for c in rows.columns]
        name = pick_column(names, text_column, TEXT_COLUMNS, src)
        if name is None:
            raise InputError(f"{src}: no text column among {names}; pass text_column=NAME")
        idx = names.index(name)
    texts = ("" if v is None else str(v) for v in (r.fields[idx] if idx < len(r.fields) else "" for r in rows.records))
    yield from texts if isinstance(text_column, int) else checked_texts(texts, name, names, src)


def corpus_file(value, text_column: str | None = None, cache: str | Path | None = None) -> Path:
    """The dataset's texts as a text file, a text a line (line breaks inside a text become spaces, which the
    normalizer makes of them anyway), written once into the cache: the tokenizer's pre-split cache and
    pretraining's packed cache key on a file's content, so a dataset enters them as one. A local folder is
    written again when its files change; a hub dataset is streamed once and the copy reused (delete it, named in
    the log, to stream a newer version)."""
    src = parse_source(value)
    target = _corpus_target(src, text_column, cache)
    if target.exists():
        if src.kind == "hub":
            log(f"{src}: using the copy streamed before, {target} (delete it to stream the dataset again)")
        return target
    # the first text read before the log's line: a dataset of no rows (an empty text is "", a row still) is an error
    # that follows no line naming a file never written
    texts = iter_texts(src, text_column)
    first = next(texts, None)
    if first is None:
        raise InputError(f"{src}: {NO_ROWS}")
    log(f"{src}: writing its texts to {target}")
    with atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as f:
        for text in itertools.chain([first], texts):
            f.write(text.replace("\r", " ").replace("\n", " "))
            f.write("\n")
    return target


def _corpus_target(src: DatasetSource, text_column, cache) -> Path:
    key: dict = {"source": src.identity, "column": text_column, "format": CORPUS_FORMAT}
    if src.kind != "hub":  # a local folder's files, by name, size and time: an edited dataset is written again
        folder = Path(src.name)
        key["files"] = [(str(p.relative_to(folder)), p.stat().st_size, p.stat().st_mtime_ns)
                        for p in sorted(folder.rglob("*")) if p.is_file()]
    digest = hashlib.sha256(json.dumps(key, sort_keys=True).encode()).hexdigest()[:20]
    stem = re.sub(r"[^\w.-]+", "_", "-".join(p for p in (src.name if src.kind == "hub" else
                                                       Path(src.name).resolve().name, src.split) if p))
    return cache_dir(cache) / "datasets" / f"{stem[:40]}-{digest}.txt"


def corpus_paths(values, text_column: str | None = None, cache: str | Path | None = None) -> list[Path]:
    """Corpus inputs as files: a file is checked (exists, not empty), a dataset becomes its ``corpus_file``."""
    return [corpus_file(v, text_column, cache) if is_dataset_source(v) else check_input_file(v) for v in values]
