"""Response shapes for request logs (imports are the file itself, not JSON)."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec


class TokenLengths(msgspec.Struct):
    """Tokens per request over the log: mean, percentiles (linear) and the largest."""

    mean: float
    p50: float
    p90: float
    p99: float
    max: float


class ModelShare(msgspec.Struct):
    """A model the log names, its requests and their share of all (model null: rows that
    name none)."""

    model: str | None
    requests: int
    share: float


class TrafficPoint(msgspec.Struct):
    """One interval of the log from `start_s` after t_0: its requests (and per second over
    the interval) and their prompt and output tokens."""

    start_s: float
    requests: int
    requests_per_s: float
    input_tokens: int
    output_tokens: int


class TrafficSeries(msgspec.Struct):
    """Requests and tokens per interval of `interval_s` seconds aligned to t_0, every
    interval from the first to the one holding the last request (empty ones as zeros)."""

    interval_s: int
    points: list[TrafficPoint]


class TrafficLog(msgspec.Struct):
    """A request log and its read (docs/figures.md, "Traffic").

    Times are offsets from the first request (t_0); `start_at` and `end_at` place it in
    time when the log gives wall-clock times (null for logs of offsets only, as Mooncake's
    and BurstGPT's). `duration_s` = last - first request; `mean_requests_per_s` =
    requests / duration_s; `peak_1m_requests_per_s` and `peak_5m_requests_per_s`: the
    busiest minute's and five minutes' requests over their length, with minutes aligned to
    t_0 (`peak_minute_start_s` says where the busiest minute starts); `peak_to_mean` =
    peak minute / mean. `prefix_reuse_share`: prompt tokens in prefix blocks an earlier
    request had, over all prompt tokens (what a perfect prefix cache could skip; null for
    logs without blocks). `in_order` false: the file listed requests out of time order
    (the read is the same). `series` is given by GET /v1/traffic/{id}, not in lists.
    """

    id: uuid.UUID
    name: str
    format: str
    content_sha256: str
    size_bytes: int
    requests: int
    start_at: datetime | None
    end_at: datetime | None
    duration_s: float
    mean_requests_per_s: float | None
    peak_1m_requests_per_s: float
    peak_5m_requests_per_s: float
    peak_minute_start_s: float
    peak_to_mean: float | None
    input_tokens: TokenLengths
    output_tokens: TokenLengths
    input_tokens_total: int
    output_tokens_total: int
    block_tokens: int | None
    prefix_reuse_share: float | None
    sessions: int | None
    models: list[ModelShare]
    in_order: bool
    created_at: datetime
    series: TrafficSeries | None = None
