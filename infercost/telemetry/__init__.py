"""Telemetry during a run: scrape Prometheus URLs, map engine and GPU metric names to
canonical figures, and summarise them over the measured window (METRICS.md, Telemetry)."""

from infercost.telemetry.mapping import (
    CANONICAL_UNITS,
    METRIC_TABLE,
    MappedValue,
    MetricSpec,
    lookup,
    map_value,
)
from infercost.telemetry.scrape import (
    Sample,
    Scraper,
    ScrapeResult,
    TelemetryError,
    parse_text,
    scrape_once,
)
from infercost.telemetry.summary import CONTRACT_KEYS, TelemetrySummary, summarize

__all__ = [
    "CANONICAL_UNITS",
    "CONTRACT_KEYS",
    "METRIC_TABLE",
    "MappedValue",
    "MetricSpec",
    "Sample",
    "ScrapeResult",
    "Scraper",
    "TelemetryError",
    "TelemetrySummary",
    "lookup",
    "map_value",
    "parse_text",
    "scrape_once",
    "summarize",
]
