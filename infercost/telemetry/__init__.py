"""Telemetry during a run: scrape Prometheus URLs, map engine and GPU metric names to
canonical figures, and summarise them over the measured window (docs/figures.md, Telemetry)."""

from infercost.engines.metrics import (
    CANONICAL_UNITS,
    METRIC_TABLE,
    MetricSpec,
    lookup,
)
from infercost.telemetry.scrape import (
    Sample,
    Scraper,
    ScrapeResult,
    TelemetryError,
    parse_text,
)
from infercost.telemetry.summary import CONTRACT_KEYS, Telemetry, summarize

__all__ = [
    "CANONICAL_UNITS",
    "CONTRACT_KEYS",
    "METRIC_TABLE",
    "MetricSpec",
    "Sample",
    "ScrapeResult",
    "Scraper",
    "Telemetry",
    "TelemetryError",
    "lookup",
    "parse_text",
    "summarize",
]
