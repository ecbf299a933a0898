"""The simulator's own lateness: how long after its schedule each write actually went out.

A benchmark client's TTFT or ITL error is only the client's when the server kept its
schedule, so the fixed-mode stream records, for every write, the loop time it was written
minus the time it was due, and `GET /stats` reports the distribution (`POST /stats/reset`
starts a new window). Recording is a few arithmetic steps per write (a bucket index and
increment, the count, a running total and maximum): a histogram of 10 µs buckets up to 1 s
(plus one overflow bucket) in fixed memory, so a long run costs no more than a short one
and percentiles are exact to the bucket width.
"""

from __future__ import annotations

from typing import Any, Final

#: Bucket width of the histogram in seconds (10 µs), and how many buckets (up to 1 s).
BUCKET_S: Final = 1e-5
_PER_S: Final = 1.0 / BUCKET_S
_BUCKETS: Final = 100_000


class Lateness:
    """A histogram of write lateness in seconds (early writes count as 0)."""

    __slots__ = ("count", "counts", "max_s", "total_s")
    counts: list[int]
    count: int
    total_s: float
    max_s: float

    def __init__(self) -> None:
        self.reset()

    def record(self, late_s: float) -> None:
        """Count one write that went out `late_s` seconds after it was due."""
        if late_s <= 0.0:
            self.counts[0] += 1
            self.count += 1
            return
        index = int(late_s * _PER_S)
        self.counts[index if index < _BUCKETS else _BUCKETS] += 1
        self.count += 1
        self.total_s += late_s
        self.max_s = max(self.max_s, late_s)

    def reset(self) -> None:
        """Forget everything recorded so far (a new measuring window)."""
        self.counts = [0] * (_BUCKETS + 1)
        self.count = 0
        self.total_s = 0.0
        self.max_s = 0.0

    def quantile(self, q: float) -> float | None:
        """The q-quantile in seconds, as the upper edge of its bucket (never understated);
        None when nothing was recorded. Beyond 1 s it reports the maximum."""
        if self.count == 0:
            return None
        rank = q * self.count
        seen = 0
        for index, n in enumerate(self.counts):
            seen += n
            if n and seen >= rank:
                if index == _BUCKETS:
                    return self.max_s
                return min((index + 1) * BUCKET_S, self.max_s)
        return self.max_s

    def summary(self) -> dict[str, Any]:
        """Count, mean, p50/p90/p99/p99.9 and max in milliseconds (None when empty)."""

        def ms(value: float | None) -> float | None:
            return None if value is None else round(value * 1000.0, 3)

        mean = self.total_s / self.count if self.count else None
        return {
            "count": self.count,
            "mean_ms": ms(mean),
            "p50_ms": ms(self.quantile(0.5)),
            "p90_ms": ms(self.quantile(0.9)),
            "p99_ms": ms(self.quantile(0.99)),
            "p999_ms": ms(self.quantile(0.999)),
            "max_ms": ms(self.max_s if self.count else None),
            "bucket_ms": BUCKET_S * 1000.0,
        }
