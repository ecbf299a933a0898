"""Failed requests in a run's history verdict: whether its error rate changed beyond noise
against its baseline's, and how long the endpoint was unavailable during the level.

A share of failed requests alone hides an outage: a closed loop against a dead server fails
a hundred requests in a tenth of a second, and the same hundred failures spread over an hour
mean something else. So the failed requests are also read as time: an outage is a stretch of
consecutive failed requests (in send order), from the first one's send to the next
successful request's send, or to the end of the level when none follows.

Pure functions: no database, deterministic.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

ErrorVerdict = Literal["regression", "improvement", "no_change", "insufficient_data"]
#: The smallest change of the error rate that is flagged (absolute: 0.01 = one point).
MIN_ERROR_CHANGE = 0.01
#: The p-value below which the two runs' error rates differ (Fisher's exact test).
ERROR_ALPHA = 0.01
#: Outages listed one by one (the longest first); unavailable_s sums them all.
LISTED_OUTAGES = 5


@dataclass(frozen=True, slots=True)
class ErrorChange:
    """A run's error rate against its baseline's: both rates, the p-value of Fisher's exact
    test on the failed and succeeded counts, and the verdict: regression (or improvement)
    when the rate moved by at least MIN_ERROR_CHANGE and p < ERROR_ALPHA."""

    verdict: ErrorVerdict
    baseline_error_rate: float | None
    current_error_rate: float | None
    baseline_failed: int
    current_failed: int
    p_value: float | None = None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored in runs.change."""
        return {
            "verdict": self.verdict,
            "baseline": self.baseline_error_rate,
            "current": self.current_error_rate,
            "baseline_failed": self.baseline_failed,
            "current_failed": self.current_failed,
            "p_value": self.p_value,
            "min_change": MIN_ERROR_CHANGE,
            "alpha": ERROR_ALPHA,
            "test": "fisher_exact",
        }


def error_change(
    baseline_failed: int, baseline_total: int, current_failed: int, current_total: int
) -> ErrorChange:
    """Whether the share of failed requests changed beyond noise (see ErrorChange)."""
    if baseline_total <= 0 or current_total <= 0:
        return ErrorChange("insufficient_data", None, None, baseline_failed, current_failed)
    base = baseline_failed / baseline_total
    cur = current_failed / current_total
    if abs(cur - base) < MIN_ERROR_CHANGE:
        return ErrorChange("no_change", base, cur, baseline_failed, current_failed)
    import scipy.stats  # type: ignore[import-untyped]  # about 0.9 s: imported when needed

    table = [
        [current_failed, current_total - current_failed],
        [baseline_failed, baseline_total - baseline_failed],
    ]
    p_value = float(scipy.stats.fisher_exact(table).pvalue)
    verdict: ErrorVerdict = "no_change"
    if p_value < ERROR_ALPHA:
        verdict = "regression" if cur > base else "improvement"
    return ErrorChange(verdict, base, cur, baseline_failed, current_failed, p_value)


@dataclass(frozen=True, slots=True)
class Outage:
    """A stretch of failed requests: from `start_s` to `end_s` on the run's clock, the
    requests that failed in it and their error classes (most common first)."""

    start_s: float
    end_s: float
    failed: int
    errors: dict[str, int]

    @property
    def duration_s(self) -> float:
        """How long the endpoint served nothing."""
        return self.end_s - self.start_s


@dataclass(frozen=True, slots=True)
class Availability:
    """Time the endpoint was unavailable during a level: the outages' total, its share of
    the level's window (first send to last end), and the longest outages."""

    window_s: float
    unavailable_s: float
    outages: list[Outage] = field(default_factory=list)
    count: int = 0

    @property
    def share(self) -> float | None:
        """unavailable_s over the window (None for an empty window)."""
        return self.unavailable_s / self.window_s if self.window_s > 0 else None

    def as_dict(self) -> dict[str, Any]:
        """The JSON form stored in runs.change."""
        return {
            "window_s": self.window_s,
            "unavailable_s": self.unavailable_s,
            "unavailable_share": self.share,
            "outages": self.count,
            "longest": [
                {
                    "start_s": o.start_s,
                    "end_s": o.end_s,
                    "duration_s": o.duration_s,
                    "failed": o.failed,
                    "errors": o.errors,
                }
                for o in self.outages
            ],
        }


def availability(
    t_send: Sequence[float], e2e_ms: Sequence[float | None], error_class: Sequence[str | None]
) -> Availability:
    """The outages of a level's measured requests (send times in seconds on the run's clock,
    end-to-end times, error class or None for a success)."""
    order = sorted(range(len(t_send)), key=lambda i: (t_send[i], i))
    if not order:
        return Availability(0.0, 0.0)
    ends = [t_send[i] + (e2e_ms[i] or 0.0) / 1000.0 for i in order]
    window_end = max(ends)
    window = window_end - t_send[order[0]]
    outages: list[Outage] = []
    start: float | None = None
    errors: dict[str, int] = {}
    for i in order:
        failed = error_class[i]
        if failed is not None:
            if start is None:
                start, errors = t_send[i], {}
            errors[failed] = errors.get(failed, 0) + 1
        elif start is not None:
            outages.append(Outage(start, t_send[i], sum(errors.values()), _ranked(errors)))
            start = None
    if start is not None:
        outages.append(Outage(start, window_end, sum(errors.values()), _ranked(errors)))
    longest = sorted(outages, key=lambda o: (-o.duration_s, o.start_s))[:LISTED_OUTAGES]
    total = sum(o.duration_s for o in outages)
    return Availability(window, total, longest, len(outages))


def _ranked(errors: dict[str, int]) -> dict[str, int]:
    return dict(sorted(errors.items(), key=lambda kv: (-kv[1], kv[0])))
