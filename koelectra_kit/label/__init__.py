"""Batch-label review files with a fine-tuned classifier: streaming, resumable, nothing lost.

    koelectra-kit label --model runs/sentiment --input reviews.csv --text-column review --output labelled.csv

Output = every input column unchanged and in order, then ``label``, ``confidence``, ``prob_<label>`` per class
and ``status`` (ok | empty | truncated | error: ...); the added columns are named ``pred_*`` when the input
already has one of those names (``pred2_*``, ... when it has those too). Exactly the input's rows, in the input's order:
- empty/NaN text -> status ``empty`` (no label), never dropped;
- a malformed line (an unbalanced quote, a wrong number of fields, a line that is not JSON) -> its own row,
  the line's text kept whole in the text column (its fields can't be trusted), status
  ``error: malformed line N: ...``, and a report at the end;
- texts longer than the model's max_length are labelled from their start and flagged ``truncated``.

The file is read and labelled in chunks (memory stays flat for millions of rows) and written to
``OUTPUT.partial``; ``OUTPUT.partial.json`` records the job (input, model, column) and the rows and bytes
done after each chunk, so ``--resume`` after a crash or kill truncates the partial file to the last whole
chunk and continues from there. The final path appears only when every row is written (one rename).

Repeated texts are analysed once: one prediction per distinct normalized text, within a chunk and through a
bounded cache across chunks and files (the output is the same; the summary counts the rows it saved).
Several inputs (paths or globs) give one output each; ``--shard K/N`` labels the K-th of N row ranges, and
``label-merge`` joins the shards into the unsharded output. ``ray_adapter`` runs the same labelling on Ray Data.

Modules: ``config`` (the options), ``chunk`` (rows in, predictions out), ``dedupe`` (one prediction per distinct
text), ``resume`` (the resume record), ``record`` (what names a job: the records of a shard and of a finished
output, compared before one is skipped), ``run`` (the file loop), ``files`` (many files, one run), ``shard`` (row
ranges and merging), ``summary`` (the report), ``human`` (``human_labels=``: the analyst's labels over the model's),
``paths`` (the files a run reads and writes, and an input changing under it), ``ray_adapter`` (the same labeller on a
Ray cluster).
"""
from ..io.tables import read_records
from .chunk import check_trained_head, label_chunk, label_dataframe, output_columns
from .config import LabelConfig
from .dedupe import PredictionCache
from .files import FilesLabeller, label_file, label_files
from .run import FileLabeller
from .writer import write_chunk
from .resume import STATE_VERSION
from .shard import merge_shards
from .summary import LabelSummary, format_summary, plot_distribution

__all__ = ["label_file", "label_files", "label_dataframe", "label_chunk", "read_records", "format_summary",
           "LabelSummary", "LabelConfig", "FilesLabeller", "merge_shards", "PredictionCache", "FileLabeller", "output_columns", "check_trained_head", "plot_distribution",
           "write_chunk", "STATE_VERSION"]
