"""What one labelling run is: the typed config behind ``koelectra-kit label`` (flags, ``--config FILE`` and
``key=value`` overrides all land here) and ``label_file``. Every option is checked before any work."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from ..config import MAX_BATCH, check_batch_cap, check_cores, check_not_blank  # noqa: F401 - MAX_BATCH re-exported
from ..errors import ConfigError
from .dedupe import CACHE_ROWS

FORMATS = ("csv", "tsv", "jsonl", "parquet", "txt")  # txt: one review per line, no header
BACKENDS = ("auto", "torch", "onnx")
WRITABLE = (".csv", ".tsv", ".jsonl")  # streamed as labelled (suggest writes these too)
WORKBOOK = ".xlsx"  # labelled as a .csv beside it (OUTPUT.xlsx.partial), made a workbook when complete
OUTPUTS = (*WRITABLE, WORKBOOK)  # what label writes
MAX_SHARDS = 10_000  # --shard K/N: N at most this


@dataclass
class LabelConfig:
    STAGE: ClassVar[str] = "label"

    model: str = ""  # fine-tuned classifier folder (output of finetune) or hub id
    # file(s) to label: .csv .tsv .jsonl .parquet; several paths or a glob ('data/*.csv') give one output each
    input: str | list[str] = ""
    # labelled file to write: .csv .tsv .jsonl (written beside, renamed when complete) or .xlsx (labelled into
    # OUTPUT.xlsx.partial, a CSV, then converted; every review a text cell); with several inputs, a folder that gets
    # one file per input (named like the input; .parquet and .xlsx inputs give .csv)
    output: str = ""
    # instead of output: write INPUT_STEM + this beside each input (.labelled.csv, or .labelled.xlsx)
    output_suffix: str | None = None
    # "K/N": label only the K-th of N equal row ranges (1-based) into OUTPUT.shard-K-of-N.EXT, so a scheduler can
    # fan one file out; `koelectra-kit label-merge OUTPUT` joins the N shards into the unsharded output (N at most
    # 10,000)
    shard: str | None = None
    # the column holding the texts; None: review, else the first of the usual names present (text, document,
    # comment, ...: tables.TEXT_COLUMNS, as finetune and evaluate pick it), with a note naming it
    text_column: str | None = None
    format: str | None = None  # input format; None = from the extension
    sep: str | None = None  # field separator of csv-like input; None = by format
    encoding: str | None = None  # None = detect utf-8 / utf-8 with BOM / cp949
    # strict: a byte the encoding cannot decode is an error naming its line; replace: the file is labelled, and a
    # line with such bytes is kept (U+FFFD in their place) but not labelled: its status says error and why
    encoding_errors: Literal["strict", "replace"] = "strict"
    output_encoding: str | None = None  # None = utf-8-sig for .csv (Excel reads Korean), utf-8 otherwise
    # texts per model call: fewer, fuller calls amortize the per-call overhead of small models. None: the
    # classifier's default (128 on a CPU, 256 on a GPU); at most 4096
    batch_size: int | None = None
    chunk_rows: int = 20000  # rows read, labelled and written at a time (memory stays flat)
    device: str = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    quantize: bool = False  # int8 dynamic quantization (CPU)
    # inference engine: torch, onnx (onnxruntime on the exported graph), auto (onnx when quantizing and
    # onnxruntime is installed, else torch: Classifier.load decides)
    backend: Literal["auto", "torch", "onnx"] = "auto"
    # one prediction per distinct normalized text (exact repeats are common in review files; same output)
    dedupe: bool = True
    cache_rows: int = CACHE_ROWS  # predictions kept across chunks for repeats (0: within a chunk only)
    threads: int | None = None  # torch CPU threads (None: all cores)
    resume: bool = False  # continue OUTPUT.partial from its last finished chunk
    overwrite: bool = False  # replace an existing OUTPUT (otherwise refused)
    plot: str | None = None  # also draw the label distribution into this PNG
    progress: bool = True
    # A model whose labels are LABEL_0, LABEL_1, ... has no trained classification head (a pretraining
    # discriminator, a bare encoder): its labels mean nothing, so it is refused unless asked for.
    allow_generic_labels: bool = False
    # A text column empty in 90% of its first rows (from 20 rows on) is refused as a column picked by mistake;
    # true: label it anyway (an export where few rows carry a comment), its empty rows written with status empty.
    allow_mostly_empty: bool = False
    # the analyst's own labels over the model's: the app's LABELS.csv, or any labelled table finetune reads (a
    # text and a label column). A row whose text it labels gets that label, label_source "human" and the model's
    # own in model_label (label/human.py)
    human_labels: str | None = None

    @property
    def writes_workbook(self) -> bool:
        """Whether the output (or each output beside its input) is an .xlsx."""
        return str(self.output or self.output_suffix).lower().endswith(WORKBOOK)

    def validate(self) -> None:
        for key in ("model", "input"):
            if not getattr(self, key):
                raise ConfigError(f"{key} is required: --{key} ... (or {key}=... )")
        if any(not str(path).strip() for path in self.inputs()):
            # --input '' was Path(""), the working folder: one holding .parquet files was labelled as a dataset
            raise ConfigError("input: an input path is empty (--input \"$FILE\" with the variable unset?); give a file")
        check_not_blank(self, ("plot",))  # --plot '' drew nothing, silently
        if not self.output and not self.output_suffix:
            raise ConfigError("output is required: --output FILE (a folder for several inputs) or --output-suffix")
        if self.output and self.output_suffix:
            raise ConfigError("output and output_suffix contradict each other: give one (a file/folder, or a "
                              "suffix for a file beside each input)")
        if self.output_suffix is not None and not self.output_suffix.lower().endswith(OUTPUTS):
            raise ConfigError(f"output_suffix={self.output_suffix!r} must end with {', '.join(OUTPUTS)} (e.g. "
                              "'.labelled.csv')")
        if self.output_suffix is not None and ("/" in self.output_suffix or "\\" in self.output_suffix):
            raise ConfigError(f"output_suffix={self.output_suffix!r} must not hold a folder (use --output DIR/)")
        if self.shard is not None:
            self.shard_parts()
            from ..io.tables import is_wide

            if is_wide(self.output_encoding):
                # a UTF-16/32 newline is not the byte label-merge splits shards' headers at; without a BOM
                # (utf-16-le) a merge took the shards for cut short
                raise ConfigError(f"shard={self.shard!r} with output_encoding={self.output_encoding!r}: label-merge "
                                  "joins utf-8 or cp949 shards; label the shards with the default encoding and "
                                  "convert the merged file")
            if self.writes_workbook:
                # label-merge joins shards by their bytes (a header once, then each shard's rows): a zip can't be joined
                raise ConfigError(f"shard={self.shard!r} with an .xlsx output: label-merge joins .csv, .tsv or "
                                  ".jsonl shards; label the shards into .csv (open it in Excel with Data > From "
                                  "Text/CSV), or label the file unsharded into .xlsx")
        if self.backend not in BACKENDS:
            raise ConfigError(f"backend={self.backend!r}: use one of {', '.join(BACKENDS)}")
        from ..classify.classifier import check_precision

        check_precision(self.precision, self.quantize, self.backend)  # (Classifier.load's own check, said before work)
        if self.cache_rows < 0:
            raise ConfigError(f"cache_rows={self.cache_rows} must be 0 or more (0: deduplicate within a chunk only)")
        if self.text_column is not None and not str(self.text_column).strip():
            raise ConfigError("text_column is empty: name the column that holds the text")
        if self.format is not None and self.format not in FORMATS:
            raise ConfigError(f"format={self.format!r}: use one of {', '.join(FORMATS)}")
        if self.sep == "\\t":  # --sep '\t' as typed in a shell (and as pandas spells a tab): a tab
            self.sep = "\t"
        if self.sep is not None and len(self.sep) != 1:
            raise ConfigError(f"sep={self.sep!r} must be one character (a tab is '\\t')")
        if self.sep in ('"', "\r", "\n"):  # CSV's quote and record ends: Python 3.13's csv refuses them outright
            raise ConfigError(f"sep={self.sep!r}: a quote or a line break cannot separate columns (a tab is '\\t')")
        positive = {"batch_size": self.batch_size, "chunk_rows": self.chunk_rows}
        for key, value in positive.items():
            if value is not None and value < 1:
                raise ConfigError(f"{key}={value} must be at least 1")
        check_batch_cap(self.batch_size, "batch_size")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads={self.threads} must be at least 1 (leave it out for all cores)")
        check_cores(self.threads, "threads")
        for key in ("encoding", "output_encoding"):
            value = getattr(self, key)
            if value is not None:
                from ..io.tables import encoding_problem

                if problem := encoding_problem(value):
                    raise ConfigError(f"{key}={value!r} {problem} (try utf-8, utf-8-sig, cp949)")
        if self.human_labels is not None and not str(self.human_labels).strip():
            raise ConfigError("human_labels is empty: name the labels file (LABELS.csv), or leave it out")
        if self.output_encoding is not None and self.writes_workbook:
            raise ConfigError(f"output_encoding={self.output_encoding!r} with an .xlsx output: a workbook stores "
                              "every character as it is; leave --output-encoding out (it is for .csv, .tsv, .jsonl)")
        if self.resume and self.overwrite:
            raise ConfigError("resume and overwrite contradict each other: pick one")

    def shard_parts(self) -> tuple[int, int]:
        """(K, N) of ``shard="K/N"``; (1, 1) when unsharded."""
        if self.shard is None:
            return 1, 1
        import re

        # ASCII digits only: str.isdigit() took "²" (superscript two), which int() then refused with a traceback
        parts = re.fullmatch(r"\s*([0-9]+)\s*/\s*([0-9]+)\s*", str(self.shard))
        k, n = parts.groups() if parts else ("0", "0")
        if not 1 <= int(k) <= int(n):
            raise ConfigError(f"shard={self.shard!r}: use K/N with 1 <= K <= N (e.g. --shard 3/8, the third of "
                              "eight row ranges)")
        if int(n) > MAX_SHARDS:  # label-merge looks for every one of the N shard files (1/10**12: a MemoryError)
            raise ConfigError(f"shard={self.shard!r}: at most {MAX_SHARDS} shards of one file (each is a file and a "
                              "process of its own; a shard of a few thousand rows is already mostly start-up)")
        return int(k), int(n)

    def inputs(self) -> list[str]:
        return [self.input] if isinstance(self.input, str) else list(self.input)
