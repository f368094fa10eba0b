"""The Hugging Face hub and transformers glue:

- ``repo``: pushing an exported folder to the hub, and reading back a repo this toolkit pushed;
- ``modelio``: a model source checked before transformers loads it, and its load errors as one line;
- ``hf_hook``: the import hook that registers the tokenizer class with ``AutoTokenizer`` (``import koelectra_kit``
  installs it with the tokenizer's register function, so this package needs no tokenizer import of its own).

Below the tokenizer: it reads a repo's tokenizer files for it, so it must not import it back.
"""
from .repo import check_repo_id, koelectra_snapshot, push_folder

__all__ = ["check_repo_id", "koelectra_snapshot", "push_folder"]
