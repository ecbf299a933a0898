"""A sweep's choices: rates evenly spaced strictly between its two closed-loop levels, and
the rules that stop it early."""

from __future__ import annotations

import itertools

import pytest

from infercost.sweep import (
    LevelOutcome,
    level_why,
    stop_after,
    sweep_planned_requests,
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


def test_planned_requests() -> None:
    load = {"mode": "sweep", "rate_levels": 3, "requests_per_level": 20, "warmup_requests": 2}
    assert sweep_planned_requests(load) == 5 * 22
    # Levels of fixed duration are counted as their rates become known.
    load = {"mode": "sweep", "rate_levels": 3, "duration_s": 10, "requests_per_level": None}
    assert sweep_planned_requests(load) == 0


def test_why() -> None:
    assert "1 user" in level_why("synchronous")
    assert "64 users" in level_why("throughput", users=64)
    why = level_why("rate", position=2, count=5, sync_rps=1.5, throughput_rps=9.0)
    assert "2 of 5" in why and "1.5" in why and "9" in why
