"""Response shapes of a run's telemetry time series."""

from __future__ import annotations

import uuid

import msgspec


class Series(msgspec.Struct):
    """One scraped series: a metric with one set of labels from one URL.

    `points` are [t, value] pairs; t is seconds from the run's start on the same clock as
    the raw samples' t_send.
    """

    metric: str
    url: str
    labels: dict[str, str]
    points: list[tuple[float, float]]


class TelemetrySeries(msgspec.Struct):
    """GET /v1/runs/{id}/telemetry: every series scraped during the run (or the metrics
    asked for), the metric names available, and the scrape errors the run recorded."""

    run_id: uuid.UUID
    metrics: list[str]
    series: list[Series]
    errors: list[str]


#: Columns of the CSV export, in order.
CSV_COLUMNS = ("t", "url", "metric", "labels", "value")
