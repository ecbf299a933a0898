"""load.shards "auto": the decision a level's expected events and one process's budget make,
worked out by hand, and the plan's default."""

from __future__ import annotations

from typing import Any

import pytest

from infercost.errors import InvalidInput
from infercost.jobs.plan import resolve_plan
from infercost.jobs.rules import ServerLimits, check_plan
from infercost.shards.auto import (
    CPU_SHARE_LIMIT,
    DEFAULT_STREAM_EVENTS_PER_S,
    Budget,
    decide,
    expected_events,
)

#: 10 us of CPU per event: 0.5 core / 10 us = 50,000 events/s per process.
BUDGET = Budget(10.0, measured=True)


def test_a_process_budget_is_its_cpu_share_over_its_cost_per_event() -> None:
    assert BUDGET.events_per_s == pytest.approx(CPU_SHARE_LIMIT / 10e-6) == pytest.approx(50_000)


def test_expected_events_of_each_kind_of_level() -> None:
    events, basis = expected_events("rate", 200, output_tokens=256, stream_events_per_s=None)
    assert events == 51_200
    assert "the plan's" in basis
    events, basis = expected_events("concurrency", 64, output_tokens=None, stream_events_per_s=80.0)
    assert events == 64 * 80.0
    assert "measured on the previous level" in basis
    events, basis = expected_events("concurrency", 8, output_tokens=None, stream_events_per_s=None)
    assert events == 8 * DEFAULT_STREAM_EVENTS_PER_S
    assert "assumed" in basis


def test_a_light_level_stays_in_one_process() -> None:
    got = decide("rate", 10, expected=(2_560.0, "x"), budget=BUDGET, workers_free=None)
    assert (got.shards, got.needed, got.client_bound) == (1, 1, False)
    assert "fit one process" in got.reason


def test_a_heavy_level_takes_what_it_needs_when_workers_are_free() -> None:
    # 120,000 events/s over 50,000 a process: 3 processes.
    got = decide("rate", 400, expected=(120_000.0, "x"), budget=BUDGET, workers_free=4)
    assert (got.shards, got.needed, got.client_bound) == (3, 3, False)
    assert got.reason == "120,000 expected events/s need 3 processes (50,000 events/s per process)"


def test_too_few_workers_flag_the_level_before_it_starts() -> None:
    got = decide("rate", 400, expected=(120_000.0, "x"), budget=BUDGET, workers_free=2)
    assert (got.shards, got.needed, got.client_bound) == (2, 3, True)
    assert got.reason.endswith("; 2 free to take a shard")
    assert got.block()["client_bound"] is True


def test_a_concurrency_level_never_has_more_shards_than_users() -> None:
    got = decide("concurrency", 2, expected=(150_000.0, "x"), budget=BUDGET, workers_free=8)
    assert (got.shards, got.needed) == (2, 3)


def test_sessions_stay_together_and_say_what_they_would_need() -> None:
    got = decide(
        "concurrency", 64, expected=(120_000.0, "x"), budget=BUDGET, workers_free=None,
        together="multi-turn sessions",
    )  # fmt: skip
    assert (got.shards, got.needed, got.client_bound) == (1, 3, True)
    assert got.reason.startswith("multi-turn sessions stay in one process, but")


def _plan(load: dict[str, Any], workload: dict[str, Any] | None = None) -> Any:
    full_load: dict[str, Any] = {
        "mode": "concurrency", "levels": [4], "requests_per_level": 10, "duration_s": None,
        "warmup_requests": 0, "warmup_s": None, "cooldown_s": 0.0, "arrival": None,
        "burstiness": 1.0, "timeout_s": 60.0, "telemetry_interval_s": 1.0, "rate_levels": None,
        "max_concurrency": None, "max_error_rate": None, "shards": None, "traffic_id": None,
        "time_scale": None, "window": None, "interval_s": None, **load,
    }  # fmt: skip
    full_workload: dict[str, Any] = {
        "input_tokens": {"mean": 8}, "output_tokens": {"mean": 8}, "dataset_id": None,
        "preset": None, "sessions": None, "prefix": None, "ignore_eos": True, "stream": True,
        "temperature": None, "seed": 1, "features": [], "models": None, "images": None,
        **(workload or {}),
    }  # fmt: skip
    return resolve_plan(full_workload, full_load, None, preset=None, max_concurrency=1024, seed=1)


def test_auto_is_the_default_where_nothing_must_stay_together() -> None:
    assert _plan({}).load.shards == "auto"
    assert _plan({}).load.fixed_shards == 1
    assert _plan({"shards": 3}).load.shards == 3
    sessions = {"sessions": {"turns": 3, "system_prompt_tokens": 16}}
    assert _plan({}, sessions).load.shards == 1
    capped = {"mode": "rate", "levels": [4.0], "max_concurrency": 8}
    assert _plan(capped).load.shards == 1


def test_auto_asked_with_a_cap_keeps_one_process_and_is_not_refused() -> None:
    limits = ServerLimits(
        max_concurrency=1024, max_requests_per_job=100_000, max_job_duration_s=3600.0
    )
    check_plan(
        _plan({"mode": "rate", "levels": [4.0], "max_concurrency": 8, "shards": "auto"}), limits
    )
    with pytest.raises(InvalidInput):
        check_plan(
            _plan({"mode": "rate", "levels": [4.0], "max_concurrency": 8, "shards": 2}), limits
        )
