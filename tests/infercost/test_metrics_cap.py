"""A rate level under load.max_concurrency: waits for a slot are queue delay the plan asked
for, so they never make the client look late; the concurrency_cap block counts them."""

from __future__ import annotations

import pytest

from infercost.figures.metrics import RequestTiming, concurrency_cap_block, inflight_max, summarize


def capped_level(cap: int, *, rate: float, service_s: float, n: int) -> list[RequestTiming]:
    """What a punctual client sends at `rate` (constant) with at most `cap` requests in
    flight against a server that takes exactly `service_s` per request: request i goes out at
    max(its due time, the end of request i - cap), as worked out by hand."""
    timings: list[RequestTiming] = []
    for i in range(n):
        due = i / rate
        slot = due if i < cap else max(due, timings[i - cap].t_end or 0.0)
        timings.append(
            RequestTiming(
                seq=i,
                warmup=False,
                t_sched=due,
                t_send=slot,
                t_end=slot + service_s,
                chunk_times=[slot + 0.05, slot + service_s],
                n_in=10,
                n_out=2,
                count_source="usage",
                cap_wait=slot - due,
            )
        )
    return timings


def test_waits_for_the_cap_are_not_client_lateness() -> None:
    # 20 requests/s offered, 4 in flight at most, 0.5 s each: the server takes 8/s, so from
    # the fifth request on every one waits, request i until 0.5 * (i // 4) + 0.05 * (i % 4).
    timings = capped_level(4, rate=20.0, service_s=0.5, n=40)
    assert timings[39].t_send == pytest.approx(0.5 * 9 + 0.05 * 3)
    fig = summarize(timings, target_rate=20.0, max_concurrency=4)

    # The whole wait is queue delay: p99 of t_send - t_sched, as defined ...
    waits_ms = sorted((t.t_send - t.t_sched) * 1000 for t in timings)
    assert fig.stats["queue_delay_ms"]["max"] == pytest.approx(waits_ms[-1])
    assert fig.stats["queue_delay_ms"]["max"] == pytest.approx((4.65 - 1.95) * 1000)
    # ... but the client sent each request the moment its slot freed: not late at all.
    assert fig.client["send_late_p99_ms"] == pytest.approx(0.0, abs=1e-6)
    assert fig.client_bound is False
    # It kept the pace the cap allowed (sends per second = slot openings per second).
    assert fig.client["rate_held"] is True
    codes = {r["code"] for r in fig.adequacy["reasons"]} if fig.adequacy else set()
    assert not codes & {"client_bound", "rate_not_held"}, fig.adequacy

    cap = fig.concurrency_cap
    assert cap is not None
    assert cap["max_concurrency"] == 4
    assert cap["reached"] is True
    assert cap["inflight_max"] == 4
    # Requests 0-3 went at once; 4 (due 0.2, slot 0.5) and every later one waited.
    assert cap["waited"] == 36
    assert cap["waited_share"] == pytest.approx(36 / 40)
    assert cap["wait_ms"]["count"] == 36
    assert cap["wait_ms"]["min"] == pytest.approx(300.0)  # requests 4-7: 0.5 - 0.2
    assert cap["wait_ms"]["max"] == pytest.approx(2700.0)  # request 39: 4.65 - 1.95


def test_lateness_beyond_the_wait_still_counts() -> None:
    # The same plan, but the client sent every request 30 ms after its slot freed: that part
    # is its own lateness, and the run is client-bound.
    timings = capped_level(4, rate=20.0, service_s=0.5, n=40)
    for t in timings:
        t.t_send += 0.03
        t.chunk_times = [c + 0.03 for c in t.chunk_times]
        t.t_end = (t.t_end or 0.0) + 0.03
    fig = summarize(timings, target_rate=20.0, max_concurrency=4)
    assert fig.client["send_late_p99_ms"] == pytest.approx(30.0)
    assert fig.client_bound is True
    assert any(r["code"] == "client_bound" for r in fig.adequacy["reasons"])


def test_without_a_cap_nothing_changes() -> None:
    # The same sends with no cap recorded: the waits are the client's lateness (and in a real
    # uncapped run they would be), so the run is client-bound and the rate not held.
    timings = capped_level(4, rate=20.0, service_s=0.5, n=40)
    for t in timings:
        t.cap_wait = None
    fig = summarize(timings, target_rate=20.0)
    assert fig.concurrency_cap is None
    assert fig.client["send_late_p99_ms"] == fig.client["queue_delay_p99_ms"]
    assert fig.client_bound is True
    assert fig.client["rate_held"] is False


def test_cap_not_reached() -> None:
    # 2 requests/s of 0.1 s each: never more than one in flight under a cap of 4.
    timings = capped_level(4, rate=2.0, service_s=0.1, n=10)
    block = concurrency_cap_block(timings, 4)
    assert block is not None
    assert block["reached"] is False
    assert block["inflight_max"] == 1
    assert block["waited"] == 0
    assert block["waited_share"] == 0.0
    assert block["wait_ms"]["count"] == 0


def test_inflight_max_counts_a_freed_slot_once() -> None:
    # One request ends exactly when the next starts: never two at once.
    a = RequestTiming(seq=0, warmup=False, t_sched=0.0, t_send=0.0, t_end=1.0)
    b = RequestTiming(seq=1, warmup=False, t_sched=0.0, t_send=1.0, t_end=2.0)
    c = RequestTiming(seq=2, warmup=True, t_sched=0.0, t_send=0.5, t_end=1.5)
    assert inflight_max([a, b]) == 1
    assert inflight_max([a, b, c]) == 2
