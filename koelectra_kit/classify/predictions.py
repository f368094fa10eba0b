"""What every classifier returns (a fine-tuned encoder, TF-IDF, an ensemble): labels and probabilities in input order."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np


@dataclass
class Predictions:
    labels: list[str]
    probs: np.ndarray  # [n, k] probabilities, columns in the classifier's ``labels`` order
    truncated: list[bool] = field(default_factory=list)

    @property
    def confidence(self) -> np.ndarray:
        return self.probs.max(axis=1) if len(self.probs) else np.zeros(0, dtype=np.float32)
