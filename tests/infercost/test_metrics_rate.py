"""Client health of open-loop (rate) levels: send rate, rate held, client-bound."""

from __future__ import annotations

import pytest

from infercost.figures.metrics import RequestTiming, send_rate, summarize
from tests.infercost.test_metrics import req


def on_schedule(t_sched: list[float], late: list[float] | None = None) -> list[RequestTiming]:
    """Requests due at t_sched, sent `late` seconds after that, each lasting 0.2 s."""
    late = late or [0.0] * len(t_sched)
    return [
        req(i, s + d, [s + d + 0.05, s + d + 0.15], s + d + 0.2, t_sched=s)
        for i, (s, d) in enumerate(zip(t_sched, late, strict=True))
    ]


def test_send_rate_is_gaps_over_span() -> None:
    # 11 sends 0.05 s apart: 10 gaps over 0.5 s -> 20 sends/s exactly.
    timings = on_schedule([i * 0.05 for i in range(11)])
    assert send_rate(timings) == pytest.approx(20.0)
    assert send_rate(timings[:1]) is None


def test_constant_rate_kept_is_held_and_not_client_bound() -> None:
    timings = on_schedule([i * 0.05 for i in range(60)], [0.0005] * 60)
    fig = summarize(timings, target_rate=20.0)
    client = fig.client
    assert client["send_rate"] == pytest.approx(20.0)
    assert client["rate_held"] is True
    assert client["concurrency_held"] is None
    # Each request lasts 0.2 s; window [first send, last send] = 2.95 s. The first 56 lie
    # wholly inside it, the last four by 0.15, 0.10, 0.05, 0 s: (56 x 0.2 + 0.3) / 2.95.
    assert client["inflight_mean"] == pytest.approx(11.5 / 2.95)
    assert client["queue_delay_p99_ms"] == pytest.approx(0.5)
    assert fig.client_bound is False


def test_a_client_that_falls_behind_does_not_hold_the_rate() -> None:
    # Due every 0.05 s, but each send drifts 0.01 s later than the previous one (a client
    # that can only send every 0.06 s): 59 gaps over 59 x 0.06 s -> 16.7/s < 0.95 x 20.
    n = 60
    timings = on_schedule([i * 0.05 for i in range(n)], [i * 0.01 for i in range(n)])
    fig = summarize(timings, target_rate=20.0)
    assert fig.client["send_rate"] == pytest.approx(1 / 0.06)
    assert fig.client["rate_held"] is False
    assert fig.client_bound is True


def test_rate_is_judged_against_the_schedule_not_its_sampling_noise() -> None:
    # A short random schedule that happened to ask for 8 requests/s at a 10/s target: a
    # client sending exactly on schedule held it (and queue delay 0 says so too).
    timings = on_schedule([i * 0.125 for i in range(30)])
    fig = summarize(timings, target_rate=10.0)
    assert fig.client["send_rate"] == pytest.approx(8.0)
    assert fig.client["rate_held"] is True
    assert fig.client_bound is False


def test_queue_delay_alone_makes_a_rate_level_client_bound() -> None:
    # On average on time, but every tenth request 30 ms late: p99 > 10 ms.
    late = [0.03 if i % 10 == 0 else 0.0 for i in range(50)]
    fig = summarize(on_schedule([i * 0.05 for i in range(50)], late), target_rate=20.0)
    assert fig.client["rate_held"] is True
    assert fig.client["queue_delay_p99_ms"] > 10
    assert fig.client_bound is True


def test_warmup_is_left_out_of_the_send_rate() -> None:
    # Warm-up sent in a burst at t=0; the measured ones every 0.1 s after.
    warm = [req(i, 0.0, [0.05], 0.1, warmup=True) for i in range(5)]
    measured = [req(5 + i, 1 + i * 0.1, [1.05 + i * 0.1], 1.1 + i * 0.1) for i in range(20)]
    fig = summarize(warm + measured, target_rate=10.0)
    assert fig.client["send_rate"] == pytest.approx(10.0)


def test_closed_loop_figures_leave_the_rate_fields_null() -> None:
    lanes = [req(4 * j + k, float(j), [j + 0.5], j + 1.0) for j in range(5) for k in range(4)]
    fig = summarize(lanes, target_concurrency=4)
    assert fig.client["send_rate"] is None
    assert fig.client["rate_held"] is None
    assert fig.client["concurrency_held"] is True


def test_a_level_has_one_target() -> None:
    with pytest.raises(ValueError, match="not both"):
        summarize(on_schedule([0.0, 0.1]), target_concurrency=2, target_rate=10.0)
