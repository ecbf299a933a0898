"""The read of a request log (docs/figures.md, "Traffic"): count, span, rates, peaks,
length distributions, prefix reuse and models, from the arrays gathered while reading it.

Times are offsets from the log's first request in time (t_0); minutes are the bins
floor(offset / 60 s), aligned to t_0; percentiles are NumPy's default (linear).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import numpy as np
import numpy.typing as npt

MINUTE_US = 60_000_000
#: The peaks the read reports: a minute's and five minutes' requests over their length.
PEAK_WINDOWS_MIN = (1, 5)


@dataclass(frozen=True, slots=True)
class TrafficSummary:
    """A log's read.

    `shift_us`: what to add to each row's at_us as read (offsets from the file's first row)
    to make them offsets from t_0, the earliest request (0 unless the file is out of order).
    `start_at`: t_0 as a wall-clock time, None for logs of offsets only. `duration_s`: last
    minus first request. `mean_requests_per_s`: requests / duration_s (None for a zero
    duration). `minute_counts[m]`: requests in minute m. Lengths: {"mean", "p50", "p90",
    "p99", "max"} in tokens. `prefix_reuse_share`: prompt tokens in blocks an earlier request
    of the file had / all prompt tokens (None without blocks). `models`: [{"model",
    "requests"}], most first.
    """

    requests: int
    shift_us: int
    start_at: datetime | None
    duration_s: float
    mean_requests_per_s: float | None
    peak_1m_requests_per_s: float
    peak_5m_requests_per_s: float
    minute_counts: list[int]
    input_tokens: dict[str, float]
    output_tokens: dict[str, float]
    input_tokens_total: int
    output_tokens_total: int
    block_tokens: int | None
    prefix_reuse_share: float | None
    sessions: int | None
    models: list[dict[str, Any]]
    in_order: bool

    @property
    def peak_to_mean(self) -> float | None:
        """The peak minute's rate over the mean rate."""
        mean = self.mean_requests_per_s
        return None if not mean else self.peak_1m_requests_per_s / mean


def distribution(values: npt.NDArray[np.int64]) -> dict[str, float]:
    """Mean, p50, p90, p99 and max of token counts."""
    p50, p90, p99 = np.percentile(values, [50, 90, 99])
    return {
        "mean": float(values.mean()),
        "p50": float(p50),
        "p90": float(p90),
        "p99": float(p99),
        "max": float(values.max()),
    }


def peak_rate(minute_counts: Sequence[int], minutes: int) -> float:
    """The most requests in a bin of `minutes` minutes aligned to t_0, per second."""
    counts = np.asarray(minute_counts, dtype=np.int64)
    pad = (-len(counts)) % minutes
    binned = np.pad(counts, (0, pad)).reshape(-1, minutes).sum(axis=1)
    return float(binned.max()) / (60.0 * minutes)


def summarise(
    times_us: Sequence[int],
    inputs: Sequence[int],
    outputs: Sequence[int],
    *,
    base_us: int,
    absolute: bool,
    models: Mapping[str | None, int],
    sessions: int | None,
    block_tokens: int | None,
    reused_tokens: int | None,
    in_order: bool,
) -> TrafficSummary:
    """The read of a log whose rows had these times (microseconds from the file's first
    row, which was at `base_us`: since the epoch when `absolute`) and lengths."""
    times = np.asarray(times_us, dtype=np.int64)
    n_in = np.asarray(inputs, dtype=np.int64)
    n_out = np.asarray(outputs, dtype=np.int64)
    first, last = int(times.min()), int(times.max())
    offsets = times - first
    minute_counts = np.bincount(offsets // MINUTE_US).astype(np.int64)
    duration_s = (last - first) / 1e6
    requests = len(times)
    total_in = int(n_in.sum())
    start_at = None
    if absolute:
        start_at = datetime(1970, 1, 1, tzinfo=UTC) + timedelta(microseconds=base_us + first)
    share = None
    if reused_tokens is not None:
        share = reused_tokens / total_in if total_in else 0.0
    ranked = sorted(models.items(), key=lambda kv: (-kv[1], kv[0] is None, kv[0] or ""))
    return TrafficSummary(
        requests=requests,
        shift_us=-first,
        start_at=start_at,
        duration_s=duration_s,
        mean_requests_per_s=requests / duration_s if duration_s > 0 else None,
        peak_1m_requests_per_s=peak_rate(minute_counts.tolist(), 1),
        peak_5m_requests_per_s=peak_rate(minute_counts.tolist(), 5),
        minute_counts=minute_counts.tolist(),
        input_tokens=distribution(n_in),
        output_tokens=distribution(n_out),
        input_tokens_total=total_in,
        output_tokens_total=int(n_out.sum()),
        block_tokens=block_tokens,
        prefix_reuse_share=share,
        sessions=sessions,
        models=[]
        if list(models) == [None]
        else [{"model": model, "requests": count} for model, count in ranked],
        in_order=in_order,
    )
