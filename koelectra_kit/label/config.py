"""What one labelling run is: the typed config behind ``koelectra-kit label`` (flags, ``--config FILE`` and
``key=value`` overrides all land here) and ``label_file``. Every option is checked before any work."""
from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar, Literal

from ..errors import ConfigError

FORMATS = ("csv", "tsv", "jsonl", "parquet")


@dataclass
class LabelConfig:
    STAGE: ClassVar[str] = "label"

    model: str = ""  # fine-tuned classifier folder (output of finetune) or hub id
    input: str = ""  # file to label: .csv .tsv .jsonl .parquet
    output: str = ""  # labelled file to write: .csv .tsv .jsonl (written beside, renamed when complete)
    text_column: str = "review"
    format: str | None = None  # input format; None = from the extension
    sep: str | None = None  # field separator of csv-like input; None = by format
    encoding: str | None = None  # None = detect utf-8 / utf-8 with BOM / cp949
    # strict: a byte the encoding cannot decode is an error naming its line; replace: such lines are labelled
    # with U+FFFD in place of the bad bytes and flagged in the status column
    encoding_errors: Literal["strict", "replace"] = "strict"
    output_encoding: str | None = None  # None = utf-8-sig for .csv (Excel reads Korean), utf-8 otherwise
    batch_size: int = 64
    chunk_rows: int = 20000  # rows read, labelled and written at a time (memory stays flat)
    device: str = "auto"
    precision: Literal["auto", "fp32", "bf16", "fp16"] = "auto"
    quantize: bool = False  # int8 dynamic quantization (CPU)
    threads: int | None = None  # torch CPU threads (None: all cores)
    resume: bool = False  # continue OUTPUT.partial from its last finished chunk
    overwrite: bool = False  # replace an existing OUTPUT (otherwise refused)
    plot: str | None = None  # also draw the label distribution into this PNG
    progress: bool = True
    # A model whose labels are LABEL_0, LABEL_1, ... has no trained classification head (a pretraining
    # discriminator, a bare encoder): its labels mean nothing, so it is refused unless asked for.
    allow_generic_labels: bool = False

    def validate(self) -> None:
        for key in ("model", "input", "output"):
            if not getattr(self, key):
                raise ConfigError(f"{key} is required: --{key} ... (or {key}=... )")
        if not self.text_column:
            raise ConfigError("text_column is empty: name the column that holds the text")
        if self.format is not None and self.format not in FORMATS:
            raise ConfigError(f"format={self.format!r}: use one of {', '.join(FORMATS)}")
        if self.sep is not None and len(self.sep) != 1:
            raise ConfigError(f"sep={self.sep!r} must be one character (a tab is '\\t')")
        positive = {"batch_size": self.batch_size, "chunk_rows": self.chunk_rows}
        for key, value in positive.items():
            if value < 1:
                raise ConfigError(f"{key}={value} must be at least 1")
        if self.threads is not None and self.threads < 1:
            raise ConfigError(f"threads={self.threads} must be at least 1 (leave it out for all cores)")
        for key in ("encoding", "output_encoding"):
            value = getattr(self, key)
            if value is not None:
                import codecs

                try:
                    codecs.lookup(value)
                except LookupError:
                    raise ConfigError(f"{key}={value!r} is not an encoding (try utf-8, utf-8-sig, cp949)") from None
        if self.resume and self.overwrite:
            raise ConfigError("resume and overwrite contradict each other: pick one")
