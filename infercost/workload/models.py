"""Many models on one endpoint (workload.models): which model or adapter each request asks for.

Each request's model is drawn by weight from the workload's list with a generator of its own
(seeded by the job's seed and the level), so a rerun with the seed sends every request to the
same model, and drawing models never shifts the prompt lengths drawn beside them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: Models one workload may spread its requests over.
MAX_MODELS = 32


class ModelDraws:
    """Model names by request number: `first` drawn up front, more on demand (as
    infercost.workload.synthetic.LengthDraws does for lengths)."""

    def __init__(
        self,
        names: Sequence[str],
        weights: Sequence[float],
        first: int,
        rng: np.random.Generator,
    ) -> None:
        total = float(sum(weights))
        if not names or len(names) != len(weights) or total <= 0:
            raise ValueError("models need names and positive weights, one each")
        self.names = list(names)
        self._p = np.asarray(weights, dtype=np.float64) / total
        self._rng = rng
        self._drawn = self._draw(max(first, 1))

    def _draw(self, count: int) -> np.ndarray:
        return self._rng.choice(len(self.names), size=count, p=self._p)

    def __getitem__(self, seq: int) -> str:
        while seq >= len(self._drawn):
            self._drawn = np.concatenate([self._drawn, self._draw(max(len(self._drawn), 256))])
        return self.names[int(self._drawn[seq])]
