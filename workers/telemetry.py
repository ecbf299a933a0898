"""Telemetry around one load level: scrape the endpoint's metrics URLs from just before the
first request to just after the last, then store every value and a summary over the
measured window (docs/figures.md, Telemetry).

Scraping runs in a thread of its own with its own short timeout, so a slow or dead metrics
URL neither delays the load generator's event loop nor fails the run: it becomes an error
listed in the run's telemetry block. Only the series infercost maps are kept and stored
(infercost.telemetry.scrape says why), so a level's rows grow with its known series.
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

from infercost.figures.metrics import RequestTiming, measured_window
from infercost.net.outbound import Policy
from infercost.telemetry import Scraper, ScrapeResult, summarize


class LevelTelemetry:
    """The scrapes of one level; a no-op when the endpoint has no metrics URLs."""

    def __init__(
        self,
        urls: Sequence[str],
        interval_s: float,
        timeout_s: float = 2.0,
        policy: Policy | None = None,
    ) -> None:
        # The worker passes its outbound policy: every scrape connects only where it allows.
        self._scraper = (
            Scraper(list(urls), interval_s=interval_s, timeout_s=timeout_s, policy=policy)
            if urls
            else None
        )
        self.result: ScrapeResult | None = None

    def start(self) -> None:
        """Scrape once now, then every interval, until `stop`."""
        if self._scraper is not None:
            self._scraper.start()

    async def stop(self) -> None:
        """One last scrape, then join the thread (off the event loop)."""
        if self._scraper is not None:
            self.result = await asyncio.to_thread(self._scraper.stop)

    def rows(self, origin_s: float) -> list[tuple[float, str, str, dict[str, str], float]]:
        """Every scraped value as (t from the level's origin, url, metric, labels, value)."""
        if self.result is None:
            return []
        return [
            (s.t - origin_s, s.url, s.metric, dict(s.labels), s.value) for s in self.result.samples
        ]

    def summary(
        self, timings: Sequence[RequestTiming], origin_s: float, gpu_count: int | None = None
    ) -> dict[str, Any] | None:
        """The run's telemetry block over its measured window, scrape errors included; None
        when nothing was scraped (the endpoint has no metrics URLs)."""
        if self.result is None:
            return None
        window = measured_window(timings)
        if window is None:
            window = (0.0, 0.0)  # summarize says the window is empty
        output_tokens = sum(t.n_out for t in timings if not t.warmup and t.succeeded)
        figures = summarize(
            self.result.samples,
            window_start=origin_s + window[0],
            window_end=origin_s + window[1],
            output_tokens=output_tokens,
            gpu_count_hint=gpu_count,
            errors=self.result.errors,
            unmapped=self.result.unmapped,
        )
        block: dict[str, Any] = figures.as_dict()
        return block
