"""A replay's own figures by hand: requests placed in the interval of trace time their due
time falls in, rates over the interval's wall-clock length, the SLO per interval, send
lateness, and what time_scale compressed."""

from __future__ import annotations

import pytest

from infercost.figures.metrics import RequestTiming
from infercost.figures.replay import replay_block


def timing(seq: int, due: float, late: float, ttft: float, ok: bool = True) -> RequestTiming:
    send = due + late
    return RequestTiming(
        seq=seq,
        warmup=False,
        t_sched=due,
        t_send=send,
        t_end=send + ttft + 0.05,
        chunk_times=[send + ttft, send + ttft + 0.05],
        n_in=10,
        n_out=2 if ok else 0,
        error_class=None if ok else "http_5xx",
    )


def test_intervals_lateness_and_compression_by_hand() -> None:
    # A 30 s window from 100 s into the trace at x2 (15 s of sending), intervals of 10 trace
    # seconds (5 s of sending each). Due times in seconds of sending: 0, 1, 4.9 fall in the
    # first interval, 5.0 and 9 in the second, 12 in the third.
    timings = [
        timing(0, 0.0, 0.001, 0.1),
        timing(1, 1.0, 0.002, 0.1),
        timing(2, 4.9, 0.003, 0.9),  # misses the 500 ms TTFT limit
        timing(3, 5.0, 0.004, 0.1),
        timing(4, 9.0, 0.005, 0.1, ok=False),  # fails
        timing(5, 12.0, 0.010, 0.1),
    ]
    block = replay_block(
        timings,
        window_requests=6,
        start_s=100.0,
        duration_s=30.0,
        time_scale=2.0,
        interval_s=10.0,
        slo={"ttft_ms": {"p95": 500.0}},
    )
    assert block["compressed"] == "30 s of the trace sent in 15 s (2x faster than recorded)"
    assert block["wall_duration_s"] == 15.0
    late = block["send_lateness_ms"]
    # Lateness 1, 2, 3, 4, 5, 10 ms: the median 3.5, p99 by linear interpolation 9.75.
    assert late["p50"] == pytest.approx(3.5)
    assert late["p99"] == pytest.approx(5 + 0.95 * 5)
    assert late["max"] == pytest.approx(10.0)
    first, second, third = block["intervals"]
    assert [i["start_s"] for i in block["intervals"]] == [100.0, 110.0, 120.0]
    assert [i["requests"] for i in block["intervals"]] == [3, 2, 1]
    # Rates over 5 s of sending each.
    assert first["offered_requests_per_s"] == pytest.approx(3 / 5)
    assert first["requests_per_s"] == pytest.approx(3 / 5)
    assert first["slo_attainment"] == pytest.approx(2 / 3)
    assert first["goodput_rps"] == pytest.approx(2 / 5)
    assert first["slo_passed"] is False  # its TTFT p95 is over 500 ms
    assert second["requests_per_s"] == pytest.approx(1 / 5)
    assert second["error_rate"] == 0.5 and second["slo_attainment"] == 0.5
    assert second["slo_passed"] is False  # half its requests failed
    assert third["slo_attainment"] == 1.0 and third["slo_passed"] is True
    assert third["output_tokens_per_s"] == pytest.approx(2 / 5)
    # At its recorded speed it says so.
    same = replay_block(
        timings[:1], window_requests=1, start_s=0, duration_s=5, time_scale=1,
        interval_s=60, slo=None,
    )  # fmt: skip
    assert same["compressed"] == "5 s of the trace sent at its recorded speed"
    assert same["intervals"][0]["slo_attainment"] is None
