"""The job plan as a typed contract: the API's load and workload schemas and the plan name
the same fields, a request resolves to one plan whose row stores every key, rows stored
before a field existed decode with the values the API applied then, and one method sizes a
plan."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
import pytest

from api.domain.plans.schemas import Load, Workload
from infercost.jobs.plan import (
    LEGACY_LOAD,
    LEGACY_WORKLOAD,
    LengthSpec,
    LoadPlan,
    Plan,
    PlanSize,
    PrefixSpec,
    WorkloadPlan,
    decode_load,
    decode_plan,
    read_load,
    read_plan,
    resolve_load,
    resolve_plan,
    seeded,
)
from infercost.planning.presets import get_preset


def test_the_plan_names_every_field_the_api_stores() -> None:
    # A field added to the API's schema but not to the plan would be stored and then
    # ignored by every worker; one the plan wants that the API never writes would fail them.
    assert set(Load.__struct_fields__) == set(LoadPlan.__struct_fields__)
    assert set(Workload.__struct_fields__) == set(WorkloadPlan.__struct_fields__)
    # Every field has the value old rows get when they lack it.
    assert set(LEGACY_LOAD) == set(LoadPlan.__struct_fields__) - {"mode"}
    assert set(LEGACY_WORKLOAD) == set(WorkloadPlan.__struct_fields__)


def test_a_row_as_the_first_api_stored_it_decodes_with_that_apis_values() -> None:
    # The first API's rows (2026-12-02): concurrency only, no seed, no arrival, no shards.
    plan = decode_plan(
        {"input_tokens": {"mean": 32, "std": 4}, "output_tokens": {"mean": 8}},
        {"mode": "concurrency", "levels": [1, 4], "requests_per_level": 6,
         "warmup_requests": 1, "timeout_s": 30.0},
        None,
    )  # fmt: skip
    assert plan.workload == WorkloadPlan(
        input_tokens=LengthSpec(mean=32, std=4),
        output_tokens=LengthSpec(mean=8),
        dataset_id=None,
        preset=None,
        sessions=None,
        prefix=None,
        ignore_eos=True,
        stream=True,
        temperature=None,
        seed=0,
        features=[],
        models=None,
        images=None,
    )
    load = plan.load
    assert (load.mode, load.levels, load.requests_per_level, load.warmup_requests) == (
        "concurrency", [1.0, 4.0], 6, 1,
    )  # fmt: skip
    assert (load.arrival, load.burstiness, load.shards, load.cooldown_s) == ("poisson", 1.0, 1, 0.0)
    assert (load.telemetry_interval_s, load.timeout_s, load.warmup_s) == (1.0, 30.0, None)
    assert load.level_size(4).planned == 7


def test_stored_nulls_take_the_old_value_and_a_count_is_filled_when_neither_is_given() -> None:
    plan = decode_plan(
        {"input_tokens": {"mean": 8}, "output_tokens": {"mean": 8}, "seed": None,
         "prefix": {"count": 2, "tokens": 4}, "dataset_id": str(uuid.UUID(int=7))},
        {"mode": "rate", "levels": [2.5], "arrival": None, "shards": None, "timeout_s": 5},
        {"ttft_ms": {"p95": 200}},
    )  # fmt: skip
    assert plan.workload.seed == 0
    assert plan.workload.prefix == PrefixSpec(count=2, tokens=4)
    assert plan.workload.dataset_id == uuid.UUID(int=7)
    assert (plan.load.arrival, plan.load.shards) == ("poisson", 1)
    # Neither requests_per_level nor duration_s: the 100 the API counted progress with.
    assert plan.load.requests_per_level == 100
    assert plan.load.level_size(2.5).planned == 100
    assert plan.slo == {"ttft_ms": {"p95": 200.0}}


def test_a_lengthened_level_keeps_the_plan_but_its_count() -> None:
    load = decode_plan({}, {"mode": "sweep", "requests_per_level": 50, "rate_levels": 3}, None).load
    longer = load.for_duration(12.0)
    assert (longer.duration_s, longer.requests_per_level, longer.rate_levels) == (12.0, None, 3)
    assert longer.level_size(4, "rate").planned == 48
    assert longer.level_size(4, "concurrency").planned == 0


# -- resolving a request once, and what its row stores


def _request(**load: Any) -> dict[str, Any]:
    """A load plan as the API's schema hands it over: every field, its defaults filled."""
    return msgspec.to_builtins(msgspec.convert(load, Load))


def _workload(**workload: Any) -> dict[str, Any]:
    return msgspec.to_builtins(msgspec.convert(workload, Workload))


def test_a_plan_without_a_count_or_a_duration_sends_100_requests_a_level() -> None:
    load = resolve_load(_request(mode="concurrency", levels=[1, 8]), max_concurrency=16)
    assert (load.requests_per_level, load.duration_s, load.arrival) == (100, None, "poisson")
    # A burst's levels are their own counts, all due at once.
    burst = resolve_load(_request(mode="burst", levels=[10]), max_concurrency=16)
    assert (burst.requests_per_level, burst.arrival) == (None, "constant")
    timed = resolve_load(_request(mode="rate", levels=[2], duration_s=5.0), max_concurrency=16)
    assert (timed.requests_per_level, timed.duration_s) == (None, 5.0)


def test_a_sweep_resolves_its_own_defaults_under_the_servers_limit() -> None:
    load = resolve_load(_request(mode="sweep"), max_concurrency=16)
    assert (load.rate_levels, load.max_concurrency, load.max_error_rate) == (5, 16, 0.05)
    assert (load.duration_s, load.requests_per_level, load.arrival) == (30.0, None, "constant")
    roomy = resolve_load(_request(mode="sweep", requests_per_level=20), max_concurrency=256)
    assert (roomy.max_concurrency, roomy.duration_s, roomy.requests_per_level) == (64, None, 20)


def test_a_preset_fills_what_the_request_leaves_out() -> None:
    # interactive-chatbot: input 1000 (std 400, 50 to 4000), output 250 (std 100, 16 to
    # 1000), TTFT p95 500 ms and TPOT p95 50 ms.
    plan = resolve_plan(
        _workload(preset="interactive-chatbot", output_tokens={"mean": 64}),
        _request(mode="concurrency", levels=[1]),
        None,
        preset=get_preset("interactive-chatbot"),
        max_concurrency=16,
        seed=9,
    )
    assert plan.workload.input_tokens == LengthSpec(mean=1000, std=400, min=50, max=4000)
    assert plan.workload.output_tokens == LengthSpec(mean=64)
    assert plan.slo == {"ttft_ms": {"p95": 500.0}, "tpot_ms": {"p95": 50.0}}
    assert plan.workload.seed == 9
    # Its own SLO wins, even an empty one; a dataset gives the prompts (no input lengths).
    own = resolve_plan(
        _workload(preset="interactive-chatbot", dataset_id=str(uuid.UUID(int=1)), seed=3),
        _request(mode="concurrency", levels=[1]),
        {},
        preset=get_preset("interactive-chatbot"),
        max_concurrency=16,
        seed=9,
    )
    assert (own.workload.input_tokens, own.slo, own.workload.seed) == (None, {}, 3)


def test_the_row_stores_every_key_with_whole_levels_as_integers() -> None:
    plan = resolve_plan(
        _workload(input_tokens={"mean": 512, "std": 64}, output_tokens={"mean": 128}),
        _request(mode="rate", levels=[1, 2.5], warmup_requests=2),
        {"ttft_ms": {"p95": 500}},
        preset=None,
        max_concurrency=16,
        seed=42,
    )
    stored = plan.encode()
    assert stored["load"] == {
        "mode": "rate", "levels": [1, 2.5], "requests_per_level": 100, "duration_s": None,
        "warmup_requests": 2, "warmup_s": None, "cooldown_s": 0.0, "arrival": "poisson",
        "burstiness": 1.0, "timeout_s": 300.0, "telemetry_interval_s": 1.0,
        "rate_levels": None, "max_concurrency": None, "max_error_rate": None,
        # Splitting decided per level (the default where nothing must stay in one process).
        "shards": "auto",
        # A trace replay's fields, null for every other mode.
        "traffic_id": None, "time_scale": None, "window": None, "interval_s": None,
    }  # fmt: skip
    assert [type(x) for x in stored["load"]["levels"]] == [int, float]
    assert stored["workload"] == {
        "input_tokens": {"distribution": "normal", "mean": 512.0, "std": 64.0, "min": None,
                         "max": None},
        "output_tokens": {"distribution": "normal", "mean": 128.0, "std": None, "min": None,
                          "max": None},
        "dataset_id": None, "preset": None, "sessions": None, "prefix": None,
        "ignore_eos": True, "stream": True, "temperature": None, "seed": 42, "features": [],
        "models": None, "images": None,
    }  # fmt: skip
    assert stored["slo"] == {"ttft_ms": {"p95": 500.0}}
    # What it stores decodes to the same plan; a template keeps no seed, and each job made
    # from it gets one of its own.
    assert decode_plan(stored["workload"], stored["load"], stored["slo"]) == plan
    template = plan.encode(seed=False)["workload"]
    assert template["seed"] is None
    assert seeded(template, 7)["seed"] == 7
    assert seeded(stored["workload"], 7)["seed"] == 42


def test_a_stored_burst_gets_no_count() -> None:
    # Its progress was counted as its levels, never as 100 a level.
    load = decode_load({"mode": "burst", "levels": [30], "arrival": "constant"})
    assert load.requests_per_level is None
    assert load.size().planned == 30


def test_a_row_in_no_shape_the_api_wrote_reads_as_none() -> None:
    assert read_load({}) is None
    assert read_plan({}, {"mode": "zigzag"}, None) is None
    assert read_load({"mode": "concurrency"}) is not None


# -- sizes: the one count of a plan's requests and seconds


@pytest.mark.parametrize(
    ("load", "level", "planned"),
    [
        ({"mode": "concurrency", "requests_per_level": 50}, 4, 50),
        ({"mode": "rate", "requests_per_level": 50, "warmup_requests": 5}, 2, 55),
        ({"mode": "rate"}, 2, 100),
        ({"mode": "rate", "duration_s": 3.0}, 10, 30),
        ({"mode": "rate", "duration_s": 0.1}, 1, 1),
        ({"mode": "concurrency", "duration_s": 3.0}, 10, 0),
        ({"mode": "burst"}, 12, 12),
    ],
)
def test_a_levels_planned_requests(load: dict[str, Any], level: float, planned: int) -> None:
    assert decode_load(load).level_size(level).planned == planned


def test_the_size_of_a_rate_plan_of_counts() -> None:
    # Levels 2 and 4 requests/s, 50 requests each after 10 s of warm-up, 5 s of cool-down:
    # 50 + 2 x 10 and 50 + 4 x 10 requests; 25 + 10 and 12.5 + 10 s, plus 2 x 5 s.
    load = decode_load(
        {"mode": "rate", "levels": [2, 4], "requests_per_level": 50, "warmup_s": 10,
         "cooldown_s": 5}
    )  # fmt: skip
    assert load.size() == PlanSize(planned=100, requests=160, seconds=67.5, uncounted=0)


def test_the_size_of_concurrency_and_burst_plans() -> None:
    # Counts at concurrency: their time is the server's (only the cool-downs are known).
    counted = decode_load(
        {"mode": "concurrency", "levels": [1, 8], "requests_per_level": 20, "warmup_requests": 4,
         "cooldown_s": 3}
    )  # fmt: skip
    assert counted.size() == PlanSize(planned=48, requests=48, seconds=6.0, uncounted=2)
    # Durations at concurrency: their counts are the server's.
    timed = decode_load({"mode": "concurrency", "levels": [1, 8], "duration_s": 30, "warmup_s": 5})
    assert timed.size() == PlanSize(planned=0, requests=0, seconds=70.0, uncounted=2)
    burst = decode_load({"mode": "burst", "levels": [10, 40], "cooldown_s": 2})
    assert burst.size() == PlanSize(planned=50, requests=50, seconds=4.0, uncounted=2)


def test_the_size_of_a_sweep() -> None:
    # 2 + 3 levels of 20 + 2 requests; their rates (so their lengths) are chosen as it runs.
    counted = decode_load(
        {"mode": "sweep", "rate_levels": 3, "requests_per_level": 20, "warmup_requests": 2,
         "cooldown_s": 4}
    )  # fmt: skip
    assert counted.size() == PlanSize(planned=110, requests=110, seconds=0.0, uncounted=5)
    # Levels of 10 s after 2 s of warm-up and before 1 s of cool-down, counted as they run.
    timed = decode_load(
        {"mode": "sweep", "rate_levels": 3, "duration_s": 10, "warmup_s": 2, "cooldown_s": 1}
    )
    assert timed.size() == PlanSize(planned=0, requests=0, seconds=65.0, uncounted=5)


def test_a_trace_plan_is_its_window_at_its_speed() -> None:
    traffic_id = "6c1d2e3f-4a5b-4c6d-8e7f-9a0b1c2d3e4f"
    load = resolve_load(
        _request(mode="trace", traffic_id=traffic_id, window={"start_s": 30, "duration_s": 600}),
        max_concurrency=16,
    )
    # One process (a session's order, a cap), no arrival process of its own, x1, 60 s
    # intervals; no count until the API sets the window's.
    assert (load.shards, load.arrival, load.time_scale, load.interval_s) == (
        1,
        "constant",
        1.0,
        60.0,
    )
    assert load.requests_per_level is None
    # The API sets requests_per_level to the window's count: 1,200 requests over 600 s of
    # trace at x10 are 60 s of sending, 1,200 requests planned.
    counted = msgspec.structs.replace(load, requests_per_level=1200, time_scale=10.0)
    assert counted.size() == PlanSize(planned=1200, requests=1200, seconds=60.0, uncounted=0)
    # Stored and read back unchanged, a row without the trace keys reads as before.
    stored = Plan(msgspec.convert(_workload(seed=3), WorkloadPlan), counted, None).encode()
    assert stored["load"]["window"] == {"start_s": 30.0, "duration_s": 600.0}
    assert decode_plan(stored["workload"], stored["load"], None).load == counted
