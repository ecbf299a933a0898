"""The figures of docs/figures.md against values worked out by hand (the arithmetic is in comments)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from infercost.figures.metrics import (
    RequestTiming,
    RunFigures,
    ServerTimings,
    distribution,
    inflight_mean,
    meets_slo,
    summarize,
)


def req(
    seq: int,
    t_send: float,
    chunks: list[float],
    t_end: float | None,
    *,
    n_out: int | None = None,
    n_in: int | None = 10,
    t_sched: float | None = None,
    warmup: bool = False,
    error_class: str | None = None,
    count_source: str = "usage",
) -> RequestTiming:
    """A request as the worker records it; n_out defaults to one token per content event."""
    return RequestTiming(
        seq=seq,
        warmup=warmup,
        t_sched=t_send if t_sched is None else t_sched,
        t_send=t_send,
        t_first_byte=chunks[0] if chunks else None,
        t_end=t_end,
        chunk_times=list(chunks),
        n_in=n_in,
        n_out=len(chunks) if n_out is None else n_out,
        count_source=count_source,
        status=None if error_class in ("connect", "timeout") else 200,
        error_class=error_class,
        error=None if error_class is None else f"{error_class} failure",
    )


# --- per request ----------------------------------------------------------------------------


def test_per_request_times_from_known_chunk_times() -> None:
    t = RequestTiming(
        seq=0,
        warmup=False,
        t_sched=0.000,
        t_send=0.010,
        t_first_byte=0.050,
        t_end=0.215,
        chunk_times=[0.110, 0.130, 0.160, 0.210],
        n_out=7,
    )
    # queue delay = t_send - t_sched = 0.010 - 0.000 = 0.010 s
    assert t.queue_delay == pytest.approx(0.010)
    # TTFB = 0.050 - 0.010 = 0.040 s
    assert t.ttfb == pytest.approx(0.040)
    # TTFT = t_first - t_send = 0.110 - 0.010 = 0.100 s
    assert t.ttft == pytest.approx(0.100)
    # E2E = t_end - t_send = 0.215 - 0.010 = 0.205 s
    assert t.e2e == pytest.approx(0.205)
    # TPOT = (t_last - t_first) / (n_out - 1) = (0.210 - 0.110) / 6 = 0.016667 s; the divisor
    # is the token count from usage (7), not the number of events (4).
    assert t.tpot == pytest.approx(0.1 / 6)
    assert t.succeeded


def test_tpot_undefined_below_two_tokens_and_for_a_single_event() -> None:
    one_token = req(0, 0.0, [0.1], 0.2, n_out=1)
    single_event = req(1, 0.0, [0.1], 0.2, n_out=6)  # the whole text in one event
    nothing = req(2, 0.0, [], 0.2, n_out=0, error_class="empty")
    assert one_token.tpot is None
    assert single_event.tpot is None
    assert nothing.tpot is None
    assert nothing.ttft is None
    assert not nothing.succeeded


def test_tpot_statistics_leave_out_requests_without_a_tpot() -> None:
    timings = [
        # TPOT = (1.4 - 1.0) / (5 - 1) = 0.1 s = 100 ms
        req(0, 0.9, [1.0, 1.1, 1.2, 1.3, 1.4], 1.5),
        # one token: no TPOT
        req(1, 0.9, [1.0], 1.1, n_out=1),
        # six tokens in one event: no TPOT
        req(2, 0.9, [1.2], 1.3, n_out=6),
    ]
    fig = summarize(timings)
    # Only the first request counts; counted as zero they would give mean 33.3 ms over 3.
    assert fig.stats["tpot_ms"]["count"] == 1
    assert fig.stat("tpot_ms", "mean") == pytest.approx(100.0)
    assert fig.stat("tpot_ms", "min") == pytest.approx(100.0)
    # per-user speed = 1 / TPOT = 10 tokens/s, also over that one request only
    assert fig.stats["per_user_tokens_per_s"]["count"] == 1
    assert fig.stat("per_user_tokens_per_s", "mean") == pytest.approx(10.0)
    # all three have a TTFT
    assert fig.stats["ttft_ms"]["count"] == 3


def test_itl_is_pooled_over_all_gaps_of_all_requests() -> None:
    timings = [
        req(0, 0.9, [1.00, 1.02, 1.05], 1.1),  # gaps 20 ms, 30 ms
        req(1, 1.9, [2.00, 2.04], 2.1),  # gap 40 ms
        req(2, 2.9, [3.00], 3.1),  # no gap
    ]
    itl = summarize(timings).stats["itl_ms"]
    # pooled [20, 30, 40]: count 3, mean 30; a mean of per-request means would be
    # (25 + 40) / 2 = 32.5 over 2
    assert itl["count"] == 3
    assert itl["mean"] == pytest.approx(30.0)
    assert itl["min"] == pytest.approx(20.0)
    assert itl["p50"] == pytest.approx(30.0)
    assert itl["max"] == pytest.approx(40.0)


def test_itl_weights_a_gap_by_the_tokens_its_event_carried() -> None:
    # Continuous usage said the events carried 1, 3, 1 and 2 tokens.
    t = req(0, 0.9, [1.00, 1.03, 1.04, 1.10], 1.2, n_out=7)
    t.chunk_tokens = [1, 3, 1, 2]
    # gaps 30, 10 and 60 ms, their events carrying 3, 1 and 2 tokens: per-token ITL
    # 30 / 3 = 10 ms three times, 10 ms once, 60 / 2 = 30 ms twice
    values, weights = t.itl_gaps()
    assert values == pytest.approx([0.010, 0.010, 0.030])
    assert weights == [3, 1, 2]
    itl = summarize([t]).stats["itl_ms"]
    # pooled [10, 10, 10, 10, 30, 30]: count 6 tokens, mean (40 + 60) / 6 = 16.667 ms,
    # which is also (t_last - t_first) / (tokens after the first event) = 100 ms / 6
    assert itl["count"] == 6
    assert itl["mean"] == pytest.approx(100.0 / 6)
    assert itl["p50"] == pytest.approx(10.0)
    # linear interpolation over the repeated values: p90 at rank 0.9 x 5 = 4.5 -> 30
    assert itl["p90"] == pytest.approx(30.0)
    assert itl["max"] == pytest.approx(30.0)
    # population std of [10, 10, 10, 10, 30, 30]: mean 16.667, variance 88.889
    assert itl["std"] == pytest.approx(np.sqrt(800 / 9))
    # TPOT is unchanged by the weighting: (1.10 - 1.00) / (7 - 1)
    assert t.tpot == pytest.approx(0.1 / 6)


def test_itl_without_per_event_counts_is_one_token_per_event() -> None:
    t = req(0, 0.0, [0.1, 0.2, 0.4], 0.5, n_out=9)
    # counts that do not cover every event are ignored, as if the server said nothing
    t.chunk_tokens = [1, 4]
    values, weights = t.itl_gaps()
    assert values == pytest.approx([0.1, 0.2])
    assert weights == [1, 1]


def test_weighted_distribution_equals_the_repeated_values() -> None:
    values = [5.0, 1.0, 3.0]
    weighted = distribution(values, [2, 1, 3])
    assert weighted == distribution([5.0, 5.0, 1.0, 3.0, 3.0, 3.0])
    # all-one weights: exactly the unweighted figures
    assert distribution(values, [1, 1, 1]) == distribution(values)
    with pytest.raises(ValueError, match="weights"):
        distribution(values, [1, 2])


def test_ttfo_is_the_first_visible_content_and_is_summarized() -> None:
    thinking = req(0, 0.0, [0.10, 0.12, 0.14, 0.30], 0.4)
    thinking.t_first_content = 0.30  # three reasoning events, then the answer
    plain = req(1, 1.0, [1.05, 1.06], 1.1)
    plain.t_first_content = 1.05
    only_reasoning = req(2, 2.0, [2.05], 2.1)  # no visible content at all
    assert thinking.ttft == pytest.approx(0.10)
    assert thinking.ttfo == pytest.approx(0.30)
    assert plain.ttfo == plain.ttft
    assert only_reasoning.ttfo is None
    fig = summarize([thinking, plain, only_reasoning])
    # TTFO over the two requests that had content: [300, 50] ms
    assert fig.stats["ttfo_ms"]["count"] == 2
    assert fig.stats["ttfo_ms"]["mean"] == pytest.approx(175.0)
    assert fig.stats["ttft_ms"]["count"] == 3


@pytest.mark.parametrize(
    ("shapes", "expected"),
    [
        (["exact", "exact"], "exact"),
        (["approximate", "approximate"], "approximate"),
        (["exact", "approximate"], "mixed"),
        ([None, None], None),
    ],
)
def test_prompt_lengths_of_a_run(shapes: list[str | None], expected: str | None) -> None:
    timings = [req(i, float(i), [i + 0.1], i + 0.2) for i in range(len(shapes))]
    for t, shape in zip(timings, shapes, strict=True):
        t.prompt_length = shape
    # a warm-up request does not count
    warm = req(9, 9.0, [9.1], 9.2, warmup=True)
    warm.prompt_length = "approximate" if expected == "exact" else "exact"
    assert summarize([*timings, warm]).prompt_lengths == expected


# --- distributions --------------------------------------------------------------------------


def test_percentiles_interpolate_linearly_and_std_is_population() -> None:
    # Given out of order on purpose: sorting is the function's job.
    d = distribution([7, 3, 10, 1, 5, 9, 2, 8, 6, 4])
    assert d["count"] == 10
    assert d["min"] == 1.0
    assert d["max"] == 10.0
    # mean = 55 / 10 = 5.5
    assert d["mean"] == pytest.approx(5.5)
    # Percentile p sits at rank r = p/100 x (n - 1) in the sorted list, between x[floor r]
    # and the next one (0-based):
    # p50: r = 4.5   -> 5 + 0.5 x (6 - 5)   = 5.5
    # p90: r = 8.1   -> 9 + 0.1 x (10 - 9)  = 9.1   (nearest rank would give 9)
    # p95: r = 8.55  -> 9 + 0.55            = 9.55
    # p99: r = 8.91  -> 9 + 0.91            = 9.91
    # p999: r = 8.991 -> 9 + 0.991          = 9.991
    assert d["p50"] == pytest.approx(5.5)
    assert d["p90"] == pytest.approx(9.1)
    assert d["p95"] == pytest.approx(9.55)
    assert d["p99"] == pytest.approx(9.91)
    assert d["p999"] == pytest.approx(9.991)
    # population variance = sum (x - 5.5)^2 / 10 = 2 x (0.25 + 2.25 + 6.25 + 12.25 + 20.25) / 10
    # = 8.25; std = sqrt(8.25) = 2.8723 (the sample std would be sqrt(82.5 / 9) = 3.0277)
    assert d["std"] == pytest.approx(math.sqrt(8.25))


def test_percentile_of_a_short_list() -> None:
    d = distribution([40.0, 10.0, 30.0, 20.0])
    # p90: r = 0.9 x 3 = 2.7 -> 30 + 0.7 x (40 - 30) = 37
    assert d["p90"] == pytest.approx(37.0)
    # p50: r = 1.5 -> 20 + 0.5 x 10 = 25
    assert d["p50"] == pytest.approx(25.0)


def test_distribution_of_nothing_is_count_zero_and_none() -> None:
    d = distribution([])
    assert d["count"] == 0
    assert all(d[k] is None for k in d if k != "count")


# --- the measured window --------------------------------------------------------------------


def _measured_run() -> list[RequestTiming]:
    return [
        req(0, 1.0, [1.2, 1.3, 1.4], 3.0, n_out=100, n_in=50),
        req(1, 1.5, [1.6, 1.8], 4.0, n_out=200, n_in=70),
        # broke after 30 tokens: a failure, but the server did produce those tokens
        req(2, 2.0, [2.1, 2.2], 2.1, n_out=30, n_in=40, error_class="stream_broken"),
    ]


def test_throughput_duration_and_error_rate() -> None:
    fig = summarize(_measured_run())
    # duration = max(t_end) - min(t_send) = 4.0 - 1.0 = 3.0 s
    assert fig.duration_s == pytest.approx(3.0)
    # every token that arrived in the window, the broken request's too (docs/figures.md: what
    # the server produced): out = (100 + 200 + 30) / 3 = 110; in = (50 + 70 + 40) / 3
    assert fig.output_tokens_per_s == pytest.approx(110.0)
    assert fig.input_tokens_per_s == pytest.approx(160 / 3)
    assert fig.total_tokens_per_s == pytest.approx(110.0 + 160 / 3)
    # 2 successful requests / 3 s
    assert fig.requests_per_s == pytest.approx(2 / 3)
    assert fig.requests_total == 3
    assert fig.requests_succeeded == 2
    assert fig.requests_failed == 1
    assert fig.errors == {"stream_broken": 1}
    # error rate = failed / measured = 1 / 3
    assert fig.error_rate == pytest.approx(1 / 3)
    # Little's law: sum of E2E / duration = (2.0 + 2.5 + 0.1) / 3.0 = 1.5333
    assert fig.mean_concurrency == pytest.approx(4.6 / 3.0)


def test_warmup_requests_are_excluded_from_every_figure() -> None:
    warmup = [
        # earlier than every measured request and ending after them, with a long queue delay,
        # many tokens and an error: any of them would change some figure if counted
        req(10, 0.0, [0.5, 0.6], 5.0, n_out=5000, n_in=900, t_sched=-1.0, warmup=True),
        req(11, 0.2, [], 0.3, warmup=True, error_class="connect", count_source="events"),
        req(12, 0.3, [0.4], 0.5, n_out=1, warmup=True, count_source="events"),
    ]
    measured = _measured_run()
    slo = {"ttft_ms": {"p99": 250.0}}
    with_warmup = summarize(warmup + measured, slo=slo)
    without = summarize(measured, slo=slo)
    assert with_warmup == without
    # ... and the figures are the measured ones (duration 4.0 - 1.0, not 5.0 - 0.0)
    assert with_warmup.duration_s == pytest.approx(3.0)
    assert with_warmup.requests_total == 3
    assert with_warmup.errors == {"stream_broken": 1}
    assert with_warmup.stats["queue_delay_ms"]["max"] == pytest.approx(0.0)
    assert with_warmup.count_source == "usage"


def test_duration_uses_measured_requests_including_failed_ones() -> None:
    timings = [
        *_measured_run(),
        # a refused connection before the others: the window starts at its send
        req(3, 0.5, [], 0.6, error_class="connect", n_out=0),
    ]
    fig = summarize(timings)
    # 4.0 - 0.5 = 3.5 s
    assert fig.duration_s == pytest.approx(3.5)
    assert fig.output_tokens_per_s == pytest.approx(330 / 3.5)


def test_warmup_tokens_that_arrive_inside_the_window_count() -> None:
    """docs/figures.md: output tokens/s counts every token that arrived inside the measured window,
    from warm-up requests still running in it too (what the server's counters see)."""
    measured = _measured_run()  # window 1.0 .. 4.0 s; 330 output, 160 input tokens inside
    warmup = [
        # 4 events, 40 tokens (10 per event): 2 events arrive before 1.0 s, 2 inside -> 20.
        # Its prompt was prefilled before the window (first event 0.8 s): no input tokens.
        req(10, 0.0, [0.8, 0.9, 1.1, 1.2], 1.3, n_out=40, n_in=500, warmup=True),
        # Continuous usage says its events carried 1, 5 and 6 tokens; only the last event
        # (6 tokens) arrives inside the window.
        RequestTiming(
            seq=11,
            warmup=True,
            t_sched=0.0,
            t_send=0.0,
            t_end=1.05,
            chunk_times=[0.7, 0.95, 1.05],
            chunk_tokens=[1, 5, 6],
            n_in=300,
            n_out=12,
        ),
        # Entirely before the window: nothing.
        req(12, 0.1, [0.2, 0.3], 0.4, n_out=50, n_in=60, warmup=True),
    ]
    fig = summarize(warmup + measured)
    assert fig.duration_s == pytest.approx(3.0)
    # (330 + 20 + 6) / 3.0 s
    assert fig.output_tokens_per_s == pytest.approx(356 / 3.0)
    assert fig.input_tokens_per_s == pytest.approx(160 / 3.0)
    # counts and latencies are still the measured requests' alone
    assert fig.requests_total == 3
    assert fig.requests_per_s == pytest.approx(2 / 3)


def test_error_counts_per_class() -> None:
    timings = [
        req(0, 0.0, [0.1, 0.2], 0.3),
        req(1, 0.0, [], 0.01, error_class="connect", n_out=0),
        req(2, 0.1, [], 0.11, error_class="connect", n_out=0),
        req(3, 0.2, [], 1.0, error_class="timeout", n_out=0),
        req(4, 0.3, [], 0.31, error_class="http_4xx", n_out=0),
    ]
    fig = summarize(timings)
    assert fig.errors == {"connect": 2, "timeout": 1, "http_4xx": 1}
    assert fig.requests_failed == 4
    # 4 failed / 5 measured
    assert fig.error_rate == pytest.approx(0.8)


# --- SLO --------------------------------------------------------------------------------------


def _slo_run() -> list[RequestTiming]:
    # Requests sent 1 s apart; TTFT 100, 150, 300, 120 ms; E2E 800 ms; the last one timed out.
    ttfts = [0.100, 0.150, 0.300, 0.120]
    out = []
    for i, ttft in enumerate(ttfts):
        first = i + ttft
        out.append(req(i, float(i), [first, first + 0.1, first + 0.2], i + 0.8, n_out=10 * (i + 1)))
    out.append(req(4, 4.0, [], 4.5, error_class="timeout", n_out=0))
    return out


def test_goodput_and_attainment_count_only_requests_within_limits() -> None:
    timings = _slo_run()
    fig = summarize(timings, slo={"ttft_ms": {"p50": 200.0}})
    # duration = 4.5 - 0.0 = 4.5 s. The third request (TTFT 300 ms > 200 ms) misses; the timed
    # out one misses too. Meeting: requests 0, 1, 3 -> 3 of 5 measured.
    assert fig.duration_s == pytest.approx(4.5)
    assert fig.slo_attainment == pytest.approx(3 / 5)
    assert fig.goodput_rps == pytest.approx(3 / 4.5)
    # useful tokens: 10 + 20 + 40 = 70 over 4.5 s (all tokens: 100 / 4.5)
    assert fig.goodput_output_tokens_per_s == pytest.approx(70 / 4.5)
    assert fig.output_tokens_per_s == pytest.approx(100 / 4.5)
    # TTFT p50 over [100, 120, 150, 300]: r = 1.5 -> 120 + 0.5 x 30 = 135 ms <= 200
    assert fig.stat("ttft_ms", "p50") == pytest.approx(135.0)
    assert fig.slo_passed is True


def test_run_fails_the_slo_when_one_percentile_limit_fails() -> None:
    # TTFT p99: r = 0.99 x 3 = 2.97 -> 150 + 0.97 x 150 = 295.5 ms > 250; p50 135 <= 200 holds.
    fig = summarize(_slo_run(), slo={"ttft_ms": {"p50": 200.0, "p99": 250.0}})
    assert fig.stat("ttft_ms", "p99") == pytest.approx(295.5)
    assert fig.slo_passed is False
    without_slo = summarize(_slo_run())
    assert without_slo.slo_passed is None


def test_meets_slo_checks_ttft_tpot_e2e_and_success() -> None:
    # TTFT 100 ms, TPOT (0.5 - 0.1) / 4 = 100 ms, E2E 600 ms
    t = req(0, 0.0, [0.1, 0.2, 0.3, 0.4, 0.5], 0.6)
    assert meets_slo(t, {"ttft_ms": 100.0, "tpot_ms": 100.0, "e2e_ms": 600.0})
    assert not meets_slo(t, {"ttft_ms": 99.0})
    assert not meets_slo(t, {"tpot_ms": 99.0})
    assert not meets_slo(t, {"e2e_ms": 599.0})
    failed = req(1, 0.0, [], 0.6, error_class="http_5xx", n_out=0)
    assert not meets_slo(failed, {})


# --- count source and client health ---------------------------------------------------------


@pytest.mark.parametrize(
    ("sources", "expected"),
    [
        (["usage", "usage"], "usage"),
        (["events", "events"], "events"),
        (["usage", "events"], "mixed"),
    ],
)
def test_count_source(sources: list[str], expected: str) -> None:
    timings = [
        req(i, float(i), [i + 0.1, i + 0.2], i + 0.3, count_source=s) for i, s in enumerate(sources)
    ]
    assert summarize(timings).count_source == expected


def test_client_bound_when_queue_delay_p99_exceeds_10_ms() -> None:
    # Nine requests 1 ms late, one 50 ms late. p99: r = 0.99 x 9 = 8.91
    # -> 1 + 0.91 x (50 - 1) = 45.59 ms > 10 ms
    late = [0.001] * 9 + [0.050]
    timings = [
        req(i, i + d, [i + d + 0.1, i + d + 0.2], i + d + 0.3, t_sched=float(i))
        for i, d in enumerate(late)
    ]
    fig = summarize(timings)
    assert fig.client["queue_delay_p99_ms"] == pytest.approx(45.59)
    assert fig.client_bound is True
    # all 1 ms late: p99 = 1 ms, not client-bound
    on_time = [req(i, i + 0.001, [i + 0.1, i + 0.2], i + 0.3, t_sched=float(i)) for i in range(10)]
    fig = summarize(on_time)
    assert fig.client["queue_delay_p99_ms"] == pytest.approx(1.0)
    assert fig.client_bound is False


def test_client_bound_when_target_concurrency_is_not_held() -> None:
    # Asked for 4 in flight but sent one after another, 1 s each: window [0, 7] (first to
    # last send); requests 0..6 each fill 1 s of it -> in-flight mean 7 / 7 = 1.0 < 0.95 x 4
    serial = [req(i, float(i), [i + 0.5], i + 1.0) for i in range(8)]
    fig = summarize(serial, target_concurrency=4)
    assert fig.client["inflight_mean"] == pytest.approx(1.0)
    assert fig.client["concurrency_held"] is False
    assert fig.client_bound is True
    # Four lanes back to back: window [0, 4], 4 requests in flight throughout -> 4.0 >= 3.8
    lanes = [req(4 * j + k, float(j), [j + 0.5], j + 1.0) for j in range(5) for k in range(4)]
    fig = summarize(lanes, target_concurrency=4)
    assert fig.client["inflight_mean"] == pytest.approx(4.0)
    assert fig.client["concurrency_held"] is True
    assert fig.client_bound is False


def test_inflight_mean_is_time_weighted() -> None:
    timings = [req(0, 0.0, [0.1], 2.0), req(1, 1.0, [1.1], 4.0)]
    # over [0, 4]: first request 2 s, second 3 s -> 5 / 4 = 1.25
    assert inflight_mean(timings, 0.0, 4.0) == pytest.approx(1.25)
    # over [1, 3]: 1 s + 2 s -> 3 / 2 = 1.5
    assert inflight_mean(timings, 1.0, 3.0) == pytest.approx(1.5)


# --- degenerate runs ------------------------------------------------------------------------


def test_all_failed_run() -> None:
    timings = [
        req(0, 0.0, [], 0.01, error_class="connect", n_out=0, count_source="events"),
        req(1, 0.5, [], 0.51, error_class="connect", n_out=0, count_source="events"),
        req(2, 1.0, [], 1.01, error_class="connect", n_out=0, count_source="events"),
    ]
    fig = summarize(timings, slo={"ttft_ms": {"p95": 500.0}})
    assert fig.requests_succeeded == 0
    assert fig.requests_failed == 3
    assert fig.errors == {"connect": 3}
    assert fig.error_rate == 1.0
    assert fig.slo_attainment == 0.0
    # with no TTFT at all the SLO cannot be shown to hold
    assert fig.slo_passed is False
    # 1.01 s of sending produced nothing: rates are 0 over a known window
    assert fig.duration_s == pytest.approx(1.01)
    assert fig.output_tokens_per_s == 0.0
    assert fig.requests_per_s == 0.0
    assert fig.goodput_rps == 0.0
    # nothing to take statistics of: count 0, every statistic None (never 0)
    for name in ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms", "per_user_tokens_per_s"):
        assert fig.stats[name]["count"] == 0
        assert fig.stat(name, "mean") is None
        assert fig.stat(name, "p99") is None


def test_run_without_any_end_time_has_no_rates() -> None:
    # Requests that never recorded an end: no duration, so nothing can be divided by it.
    timings = [
        req(0, 0.0, [], None, error_class="timeout", n_out=0),
        req(1, 0.5, [], None, error_class="timeout", n_out=0),
    ]
    fig = summarize(timings)
    assert fig.duration_s is None
    assert fig.output_tokens_per_s is None
    assert fig.requests_per_s is None
    assert fig.mean_concurrency is None
    assert fig.goodput_rps is None
    assert fig.error_rate == 1.0


def test_empty_run() -> None:
    fig = summarize([])
    assert fig.requests_total == 0
    assert fig.duration_s is None
    assert fig.error_rate is None
    assert fig.slo_attainment is None
    assert fig.count_source is None
    assert fig.client_bound is False


# --- the server's own timings and the prefix cache -------------------------------------------


def _served(
    seq: int, ttft_ms: float, prefill_ms: float, per_token_ms: float, n_out: int, cached: int
) -> RequestTiming:
    """A request with 5 content events 20 ms apart after its TTFT, and the server's account."""
    chunks = [seq + ttft_ms / 1000 + 0.020 * i for i in range(5)]
    t = req(seq, float(seq), chunks, chunks[-1] + 0.001, n_out=5, n_in=100)
    t.cached_tokens = cached
    t.server = ServerTimings(
        source="llamacpp",
        prefill_ms=prefill_ms,
        per_token_ms=per_token_ms,
        n_out=n_out,
        n_prefilled=100 - cached,
    )
    return t


def test_server_timings_beside_the_clients() -> None:
    # Client TTFT 100 / 200 / 300 ms against server prefill 90 / 100 / 110 ms: gaps 10, 100,
    # 190 ms. Client TPOT = (4 x 20 ms) / (5 - 1) = 20 ms; server per-token 19.5 ms: gap 0.5.
    timings = [
        _served(0, 100.0, 90.0, 19.5, 5, 0),
        _served(1, 200.0, 100.0, 19.5, 5, 50),
        _served(2, 300.0, 110.0, 19.5, 4, 100),
    ]
    fig = summarize(timings)
    block = fig.server_timings
    assert block is not None
    assert block["source"] == "llamacpp"
    assert block["requests"] == 3
    assert block["prefill_ms"]["p50"] == pytest.approx(100.0)
    assert block["tpot_ms"]["p50"] == pytest.approx(19.5)
    assert block["ttft_gap_ms"]["p50"] == pytest.approx(100.0)
    assert block["ttft_gap_ms"]["max"] == pytest.approx(190.0)
    assert block["tpot_gap_ms"]["p50"] == pytest.approx(0.5)
    # the third request's output count (5) disagrees with the server's (4)
    assert block["output_tokens_agree"] == pytest.approx(2 / 3)
    # TTFT p50 200 ms; gap p50 100 ms > max(10 ms, 20% x 200 ms): flagged, and why
    assert block["flagged"] is True
    assert any("in front of the engine" in note for note in block["notes"])
    assert any("equal the server's for 67%" in note for note in block["notes"])
    # TPOT gap 0.5 ms < max(1 ms, 20% x 19.5 ms): not flagged
    assert not any("TPOT" in note for note in block["notes"])
    # cache: (0 + 50 + 100) of 300 prompt tokens, two requests with hits
    assert fig.cache == {
        "requests": 3,
        "requests_with_hits": 2,
        "prompt_tokens": 300,
        "cached_prompt_tokens": 150,
        "share": 0.5,
    }


def test_no_server_timings_no_block() -> None:
    fig = summarize(_measured_run())
    assert fig.server_timings is None
    assert fig.cache is None


def test_server_timings_that_agree_are_not_flagged() -> None:
    timings = [_served(i, 100.0, 95.0, 20.0, 5, 0) for i in range(4)]
    block = summarize(timings).server_timings
    assert block is not None
    # gap 5 ms < 10 ms floor; TPOT gap 0
    assert block["flagged"] is False
    assert block["notes"] == []
    assert block["output_tokens_agree"] == 1.0


# --- adequacy -----------------------------------------------------------------------------------


def _steady(n: int, gap_s: float, *, cached: int | None = None) -> list[RequestTiming]:
    """n requests sent gap_s apart, each 100 ms to its first token, 4 more tokens 20 ms apart."""
    out = []
    for i in range(n):
        t0 = i * gap_s
        chunks = [t0 + 0.1 + 0.02 * k for k in range(5)]
        t = req(i, t0, chunks, chunks[-1] + 0.001, n_in=100)
        t.cached_tokens = cached
        out.append(t)
    return out


def codes(fig: RunFigures) -> list[str]:
    adequacy = fig.adequacy
    assert adequacy is not None
    return [r["code"] for r in adequacy["reasons"]]


def test_a_long_enough_level_with_enough_requests_is_adequate() -> None:
    # 120 requests 0.1 s apart: window 0 .. 11.9 + 0.181 s, about 12 s >= 5 s and 5 x 1 s
    fig = summarize(_steady(120, 0.1), telemetry_interval_s=1.0)
    assert fig.adequacy == {"ok": True, "reasons": []}


def test_too_few_requests_and_too_short() -> None:
    # The README's old sweep: 64 requests in about one second
    fig = summarize(_steady(64, 0.015))
    assert fig.adequacy is not None
    assert fig.adequacy["ok"] is False
    assert codes(fig) == ["few_requests", "short"]
    assert "64 successful measured requests" in fig.adequacy["reasons"][0]["detail"]


def test_telemetry_interval_sets_the_shortest_window() -> None:
    # 12 s is long enough at 1 s scrapes, not at 5 s scrapes (5 x 5 = 25 s)
    assert "short" not in codes(summarize(_steady(120, 0.1), telemetry_interval_s=1.0))
    assert "short" in codes(summarize(_steady(120, 0.1), telemetry_interval_s=5.0))


def test_errors_and_client_bound_are_reasons() -> None:
    timings = _steady(120, 0.1)
    for t in timings[:10]:  # 10 of 120 failed: 8.3% > 5%
        t.error_class = "http_5xx"
    late = _steady(120, 0.1)
    for t in late:
        t.t_sched = t.t_send - 0.050  # every request sent 50 ms late: queue delay p99 50 ms
    assert codes(summarize(timings)) == ["errors"]
    assert codes(summarize(late)) == ["client_bound"]


def test_prompt_cache_hits_unless_the_workload_caches_on_purpose() -> None:
    cached = _steady(120, 0.1, cached=50)  # half of every prompt from the cache
    assert codes(summarize(cached)) == ["prompt_cache"]
    assert codes(summarize(cached, cache_expected=True)) == []
    # 10% or less is tolerated
    assert codes(summarize(_steady(120, 0.1, cached=10))) == []
