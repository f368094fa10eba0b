"""Choosing what to label next:

- ``rows``: the scores (margin, entropy) and the choice itself, near-duplicates skipped (``suggest_rows``);
- ``file``: ``koelectra-kit suggest`` as a command: a pool file in, the picked rows written out whole.

``from koelectra_kit.suggest import suggest_rows`` (the old module's names) keeps working.
"""
from .rows import (SHINGLE, STRATEGIES, NearDuplicates, Suggestions, check_options, entropies, jaccard, margins,
                   shingles, suggest_rows, text_key)

__all__ = ["SHINGLE", "STRATEGIES", "NearDuplicates", "Suggestions", "check_options", "entropies", "jaccard", "margins",
           "shingles", "suggest_rows", "text_key"]
