"""The simulator's record of its own lateness (GET /stats) and the --burst option."""

from __future__ import annotations

import httpx
import pytest

from sim.config import SimConfig
from sim.lateness import BUCKET_S, Lateness
from sim.server import SimServer


def test_quantiles_are_bucket_upper_edges_and_never_understate() -> None:
    late = Lateness()
    for i in range(100):
        late.record(i * 1e-4)  # 0.0, 0.1, ..., 9.9 ms
    summary = late.summary()
    assert summary["count"] == 100
    assert summary["max_ms"] == pytest.approx(9.9)
    assert summary["mean_ms"] == pytest.approx(4.95)
    # the 50th of 100 values is 4.9 ms; its bucket ends at most one bucket above it
    assert 4.9 <= summary["p50_ms"] <= 4.9 + BUCKET_S * 1000 + 1e-9
    assert 9.8 <= summary["p99_ms"] <= 9.8 + BUCKET_S * 1000 + 1e-9


def test_early_writes_count_as_on_time_and_overflow_reports_the_max() -> None:
    late = Lateness()
    late.record(-0.002)
    assert late.quantile(0.5) == 0.0
    late.record(3.0)  # beyond the histogram's 1 s
    assert late.quantile(1.0) == pytest.approx(3.0)
    late.reset()
    assert late.summary()["count"] == 0
    assert late.summary()["p99_ms"] is None


async def test_stats_count_every_write_and_reset() -> None:
    n, burst = 10, 4
    body = {"messages": [{"role": "user", "content": "hi"}], "max_tokens": n, "stream": True}
    async with (
        SimServer(SimConfig(port=0, ttft_ms=5, itl_ms=2, burst=burst)) as sim,
        httpx.AsyncClient(base_url=sim.base_url, timeout=10.0) as client,
    ):
        (await client.post("/stats/reset")).raise_for_status()
        response = await client.post("/v1/chat/completions", json=body)
        # The whole response, as the client timed it: no write can be later than that.
        response_ms = response.elapsed.total_seconds() * 1000.0
        events = [line for line in response.text.splitlines() if '"content":" ' in line]
        assert len(events) == n  # every token, in writes of up to `burst` events
        stats = (await client.get("/stats")).json()["lateness"]
        assert stats["count"] == 3  # writes of 4, 4 and 2 tokens
        # Milliseconds, not seconds or microseconds: bounded by the response's own length.
        assert stats["max_ms"] <= response_ms, (stats, response_ms)
        assert stats["mean_ms"] is not None and stats["mean_ms"] <= stats["max_ms"] + 1e-6
        assert stats["p50_ms"] <= stats["p99_ms"] <= stats["max_ms"] + 1e-6
        (await client.post("/stats/reset")).raise_for_status()
        assert (await client.get("/stats")).json()["lateness"]["count"] == 0


def test_burst_must_be_positive() -> None:
    with pytest.raises(ValueError, match="burst"):
        SimConfig(port=0, burst=0)
