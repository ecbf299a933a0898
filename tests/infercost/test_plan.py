"""The job plan as a typed contract: the API's load and workload schemas and the plan the
worker decodes name the same fields, and rows stored before a field existed decode with the
values the API applied then."""

from __future__ import annotations

import uuid

import msgspec
import pytest

from api.domain.plans.schemas import Load, Workload
from infercost.jobs.plan import (
    LEGACY_LOAD,
    LEGACY_WORKLOAD,
    LengthSpec,
    LoadPlan,
    PrefixSpec,
    WorkloadPlan,
    decode_plan,
)


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
    )
    load = plan.load
    assert (load.mode, load.levels, load.requests_per_level, load.warmup_requests) == (
        "concurrency", [1.0, 4.0], 6, 1,
    )  # fmt: skip
    assert (load.arrival, load.burstiness, load.shards, load.cooldown_s) == ("poisson", 1.0, 1, 0.0)
    assert (load.telemetry_interval_s, load.timeout_s, load.warmup_s) == (1.0, 30.0, None)
    assert load.planned(4) == 7


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
    assert plan.load.planned(2.5) == 100
    assert plan.slo == {"ttft_ms": {"p95": 200.0}}


def test_strict_decoding_refuses_a_plan_with_a_default_left_unresolved() -> None:
    stored_load = msgspec.to_builtins(Load(mode="rate", levels=[5.0]))
    workload = {**msgspec.to_builtins(Workload()), "seed": 1}
    # The schema's own arrival is null until the API resolves it.
    with pytest.raises(msgspec.ValidationError, match="arrival"):
        decode_plan(workload, stored_load, None, strict=True)
    resolved = {**stored_load, "arrival": "poisson", "requests_per_level": 100}
    assert decode_plan(workload, resolved, None, strict=True).load.arrival == "poisson"
    with pytest.raises(msgspec.ValidationError, match="shards"):
        decode_plan(workload, {k: v for k, v in resolved.items() if k != "shards"}, None,
                    strict=True)  # fmt: skip


def test_a_lengthened_level_keeps_the_plan_but_its_count() -> None:
    load = decode_plan({}, {"mode": "sweep", "requests_per_level": 50, "rate_levels": 3}, None).load
    longer = load.for_duration(12.0)
    assert (longer.duration_s, longer.requests_per_level, longer.rate_levels) == (12.0, None, 3)
    assert longer.planned(4, "rate") == 48
    assert longer.planned(4, "concurrency") == 0
