"""What a plan decides about its levels' adequacy before they run, held against the rule's
numbers by hand: 100 measured requests, a window of 5 s (and 5 telemetry intervals)."""

from __future__ import annotations

from typing import Any

from infercost.jobs.foresight import foreseen_inadequacy
from infercost.jobs.plan import LoadPlan, read_load


def _load(**fields: Any) -> LoadPlan:
    load = read_load(fields)
    assert load is not None
    return load


def _codes(load: LoadPlan, *, scraped: bool = False) -> dict[str, tuple[float, ...]]:
    return {f.code: f.levels for f in foreseen_inadequacy(load, scraped=scraped)}


def test_sixty_four_users_with_ten_requests() -> None:
    load = _load(mode="concurrency", levels=[1, 64], requests_per_level=10)
    found = foreseen_inadequacy(load, scraped=False)
    assert {f.code: f.levels for f in found} == {
        "few_requests": (1.0, 64.0),
        "concurrency_not_held": (64.0,),
    }
    few = next(f for f in found if f.code == "few_requests")
    assert "(1 user: 10, 64 users: 10)" in few.detail and "under the 100" in few.detail


def test_enough_requests_at_concurrency_is_not_foreseen_short() -> None:
    # How long 100 requests at 8 users take depends on the server: nothing to say.
    assert _codes(_load(mode="concurrency", levels=[8], requests_per_level=100)) == {}
    assert _codes(_load(mode="concurrency", levels=[8], requests_per_level=99)) == {
        "few_requests": (8.0,)
    }


def test_rate_levels_by_count_and_by_duration() -> None:
    # 120 requests at 30 req/s: a 4 s window (short); at 20 req/s: 6 s (enough).
    assert _codes(_load(mode="rate", levels=[20, 30], requests_per_level=120)) == {"short": (30.0,)}
    # 10 s at 5 req/s: 50 requests (few); at 10 req/s: 100 (enough), and 10 s is long enough.
    assert _codes(_load(mode="rate", levels=[5, 10], duration_s=10)) == {"few_requests": (5.0,)}


def test_a_scraped_endpoint_needs_five_telemetry_intervals() -> None:
    # 8 s windows: enough alone (5 s), short of 5 intervals of 2 s (10 s) when scraped.
    load = _load(mode="concurrency", levels=[4], duration_s=8, telemetry_interval_s=2)
    assert _codes(load, scraped=False) == {}
    assert _codes(load, scraped=True) == {"short": (4.0,)}
    (short,) = foreseen_inadequacy(load, scraped=True)
    assert "shorter than 10 s" in short.detail and "5 telemetry intervals of 2 s" in short.detail


def test_bursts_are_their_own_counts_and_sweeps_lengthen_themselves() -> None:
    assert _codes(_load(mode="burst", levels=[50, 200])) == {"few_requests": (50.0,)}
    sweep = _load(mode="sweep", requests_per_level=10, rate_levels=4, max_concurrency=64)
    assert _codes(sweep) == {}
