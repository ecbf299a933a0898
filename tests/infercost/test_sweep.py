"""A sweep's choices: rates evenly spaced strictly between its two closed-loop levels, and
the rules that stop it early."""

from __future__ import annotations

import itertools

import pytest

from infercost.jobs.sweep import (
    MAX_LENGTHENED_S,
    LevelOutcome,
    adequacy_codes,
    client_side_stop,
    final_stop,
    inadequate_note,
    lengthened_duration,
    level_why,
    stop_after,
    sweep_rates,
)


def test_rates_are_evenly_spaced_strictly_between() -> None:
    rates = sweep_rates(2.0, 14.0, 5)
    assert rates == pytest.approx([4.0, 6.0, 8.0, 10.0, 12.0])
    assert all(2.0 < r < 14.0 for r in rates)


@pytest.mark.parametrize(
    ("sync", "throughput", "count"), [(0.37, 41.9, 7), (1.0, 1.000001, 3), (0.0, 5.0, 1)]
)
def test_rates_stay_inside_and_equal_steps(sync: float, throughput: float, count: int) -> None:
    rates = sweep_rates(sync, throughput, count)
    assert len(rates) == count
    points = [sync, *rates, throughput]
    steps = [b - a for a, b in itertools.pairwise(points)]
    assert all(sync < r < throughput for r in rates)
    assert steps == pytest.approx([(throughput - sync) / (count + 1)] * (count + 1), rel=1e-6)


@pytest.mark.parametrize(("sync", "throughput"), [(5.0, 5.0), (5.0, 4.0)])
def test_no_rates_without_a_range(sync: float, throughput: float) -> None:
    assert sweep_rates(sync, throughput, 5) == []


def _sync(error_rate: float = 0.0, slo: bool | None = True) -> LevelOutcome:
    return LevelOutcome(0, "synchronous", 1, error_rate, slo)


def _throughput(error_rate: float = 0.0, slo: bool | None = False) -> LevelOutcome:
    return LevelOutcome(1, "throughput", 64, error_rate, slo)


def _rates(*verdicts: bool | None, error_rate: float = 0.0) -> list[LevelOutcome]:
    return [
        LevelOutcome(2 + i, "rate", 2.0 + i, error_rate, passed)
        for i, passed in enumerate(verdicts)
    ]


def test_goes_on_while_nothing_stops_it() -> None:
    assert stop_after([], 0.05) is None
    assert stop_after([_sync()], 0.05) is None
    # The throughput level failing the SLO is expected, and does not count as a rate level.
    assert stop_after([_sync(), _throughput()], 0.05) is None
    assert stop_after([_sync(), _throughput(), *_rates(False)], 0.05) is None
    # A failure, a pass, a failure: never two in a row.
    assert stop_after([_sync(), _throughput(), *_rates(False, True, False)], 0.05) is None
    # No SLO: every verdict is None and nothing fails it.
    levels = [_sync(slo=None), _throughput(slo=None), *_rates(None, None, None)]
    assert stop_after(levels, 0.05) is None


def test_two_consecutive_slo_failures_stop_it() -> None:
    stop = stop_after([_sync(), _throughput(), *_rates(True, False, False)], 0.05)
    assert stop is not None
    assert stop.reason == "slo_failed_twice"
    assert "(3 and 4 requests/s)" in stop.detail, stop.detail


def test_a_failed_throughput_level_and_first_rate_are_not_two_in_a_row() -> None:
    assert stop_after([_sync(), _throughput(slo=False), *_rates(False)], 0.05) is None


@pytest.mark.parametrize(
    "levels",
    [
        [_sync(error_rate=0.2)],
        [_sync(), _throughput(error_rate=0.06)],
        [_sync(), _throughput(), *_rates(True, error_rate=0.5)],
    ],
)
def test_an_error_rate_above_the_limit_stops_it(levels: list[LevelOutcome]) -> None:
    stop = stop_after(levels, 0.05)
    assert stop is not None
    assert stop.reason == "error_rate"
    assert f"level {levels[-1].index}" in stop.detail
    assert "load.max_error_rate 0.05" in stop.detail


def test_an_error_rate_at_the_limit_does_not_stop_it() -> None:
    assert stop_after([_sync(error_rate=0.05)], 0.05) is None
    assert stop_after([_sync(error_rate=None)], 0.0) is None


def test_the_error_rate_is_checked_before_the_slo() -> None:
    stop = stop_after([_sync(), _throughput(), *_rates(False, False, error_rate=0.3)], 0.05)
    assert stop is not None
    assert stop.reason == "error_rate"


def test_why() -> None:
    assert "1 user" in level_why("synchronous")
    assert "64 users" in level_why("throughput", users=64)
    why = level_why("rate", position=2, count=5, sync_rps=1.5, throughput_rps=9.0)
    assert "2 of 5" in why and "1.5" in why and "9" in why


# --- adequacy: lengthen, stop, never "completed" over inadequate levels ---------------------


def test_adequacy_codes() -> None:
    assert adequacy_codes(None) == ()
    assert adequacy_codes({"ok": True, "reasons": []}) == ()
    block = {"ok": False, "reasons": [{"code": "short", "detail": "."}, {"code": "errors"}]}
    assert adequacy_codes(block) == ("short", "errors")


def test_a_short_thin_level_is_lengthened_to_what_both_bars_need() -> None:
    # 64 requests in 1.6 s (40 req/s): 100 requests need 2.5 s, the window 5 s; with the
    # 1.25 margin 6.25 s, which is over 2 x 1.6 and under 4 x 1.6 = 6.4.
    seconds = lengthened_duration(("few_requests", "short"), window_s=1.6, succeeded=64,
                                  planned_s=None)  # fmt: skip
    assert seconds == pytest.approx(6.25)
    # A slow level: 10 requests in 30 s need 300 s, capped at 4 x the planned 30 s.
    assert lengthened_duration(
        ("few_requests",), window_s=30.0, succeeded=10, planned_s=30.0
    ) == pytest.approx(120.0)
    # Telemetry every 2 s asks for 5 intervals (10 s): 12.5 s with the margin, at most 4 x 4.
    assert lengthened_duration(
        ("short",), window_s=4.0, succeeded=400, planned_s=None, telemetry_interval_s=2.0
    ) == pytest.approx(12.5)
    # Never more than MAX_LENGTHENED_S, however slow.
    assert lengthened_duration(
        ("few_requests",), window_s=500.0, succeeded=1, planned_s=500.0
    ) == pytest.approx(MAX_LENGTHENED_S)


@pytest.mark.parametrize(
    "codes",
    [
        (),
        ("errors",),
        ("prompt_cache",),
        ("short", "client_bound"),
        ("few_requests", "rate_not_held"),
    ],
)
def test_levels_a_longer_try_cannot_cure_are_not_lengthened(codes: tuple[str, ...]) -> None:
    assert lengthened_duration(codes, window_s=1.0, succeeded=50, planned_s=None) is None


def test_nothing_measured_is_not_lengthened() -> None:
    assert (
        lengthened_duration(("few_requests",), window_s=None, succeeded=0, planned_s=None) is None
    )


def test_two_client_bound_rate_levels_stop_the_sweep() -> None:
    bound_throughput = LevelOutcome(1, "throughput", 64, 0.0, None, inadequate=("client_bound",))
    thin_rate = LevelOutcome(2, "rate", 5.0, 0.0, None, inadequate=("short",))
    bound_rate = LevelOutcome(3, "rate", 7.0, 0.0, None, inadequate=("rate_not_held",))
    assert client_side_stop([]) is None
    # A client-bound closed-loop level, or one rate level alone, does not stop it.
    assert client_side_stop([_sync(), bound_throughput]) is None
    assert client_side_stop([_sync(), bound_throughput, bound_rate]) is None
    assert client_side_stop([_sync(), _throughput(), thin_rate, bound_rate]) is None
    also_bound = LevelOutcome(4, "rate", 9.0, 0.0, None, inadequate=("client_bound", "short"))
    stop = client_side_stop([_sync(), _throughput(), bound_rate, also_bound])
    assert stop is not None and stop.reason == "inadequate"
    assert stop.detail.startswith(
        "level 3 (rate 7 requests/s) and level 4 (rate 9 requests/s) were inadequate "
        "(client_bound, rate_not_held)"
    )
    assert "load.shards" in stop.detail


def test_a_sweep_never_completes_over_inadequate_levels() -> None:
    adequate = [_sync(), _throughput(), *_rates(True, True)]
    stop = final_stop(adequate)
    assert stop.reason == "completed"
    thin = [_sync(), LevelOutcome(1, "throughput", 64, 0.0, None, inadequate=("short",)),
            *_rates(True, True)]  # fmt: skip
    stop = final_stop(thin)
    assert stop.reason == "inadequate"
    assert "1 of 4 stayed inadequate" in stop.detail
    assert "level 1 (throughput, 64 users): short" in stop.detail
    assert inadequate_note(adequate) == ""
    assert inadequate_note(thin) == "; inadequate evidence at level 1 (throughput, 64 users)"
