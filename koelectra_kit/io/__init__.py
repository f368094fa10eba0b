"""Files and datasets in (and the files the toolkit writes), one module per concern:

- ``fileio``: writing beside the final path, then renaming (files and folders); the input-file check; the cache
  folder;
- ``tables``: the one table reader (CSV, TSV, JSONL, Parquet; encodings detected), whole or streamed;
- ``workbook``: an Excel workbook's first sheet as a CSV;
- ``hfdata``: Hugging Face datasets (hub ids, ``load_from_disk`` folders) as rows and as cached files;
- ``hubreach``: whether the Hugging Face hub answers, asked once before a hub id is looked up (offline: the cache);
- ``corpus``: plain-text and table corpora as texts, one a line or one a row;
- ``labelled``: a labelled table as texts and label indices (columns, label or rating mapping, dropped rows);
- ``output``: which output folders a command may replace;
- ``plots``: the figures (confusion matrix, curves, label distribution), Korean fonts included;
- ``printed``: label names in printed tables and lists (padded by display width, quoted where a comma would split
  one);
- ``trackers``: a run's metrics rows as TensorBoard / wandb scalars (``report_to``).

Nothing here imports a stage: every stage reads through these.
"""
