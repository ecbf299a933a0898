"""What a job's levels share with whoever drives them (the runner, a sweep): the job's
progress and a measured level's outcome. Its own module, so workers/runner/sweep.py and the runner
package need not import each other."""

from __future__ import annotations

import uuid
from dataclasses import dataclass

from infercost.figures.metrics import RunFigures

#: How often progress is written and a user's cancel is noticed (the issue asks for <= 1 s).
PROGRESS_INTERVAL_S = 0.5


@dataclass(slots=True)
class Progress:
    """A job's requests done and planned, as its heartbeat writes them."""

    done_before: int = 0
    in_level: int = 0
    cancelled: bool = False
    # The current level's planned count (0 while unknown: a concurrency level of fixed
    # duration), and the planned count of the levels after it.
    level_planned: int = 0
    planned_after: int = 0

    @property
    def done(self) -> int:
        return self.done_before + self.in_level

    @property
    def total(self) -> int:
        """Requests done in finished levels, this level's plan (never below what it has done)
        and later levels' plans: equal to `done` once every level has finished."""
        return self.done_before + max(self.level_planned, self.in_level) + self.planned_after


@dataclass(frozen=True, slots=True)
class MeasuredLevel:
    """A stored level: its run, figures, and why it failed (every request failed) or None."""

    run_id: uuid.UUID
    figures: RunFigures
    failed: str | None
