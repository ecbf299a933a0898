"""The plan's cross-field rules (infercost/jobs/rules.py), one by one: what each accepts, and
the exact sentence each refuses with (the `detail` POST /v1/jobs answers with its 422)."""

from __future__ import annotations

from typing import Any

import msgspec
import pytest

from api.domain.plans.schemas import Load, Slo, Workload
from infercost.errors import InvalidInput
from infercost.jobs.plan import Plan, resolve_plan
from infercost.jobs.rules import (
    RULES,
    Rule,
    ServerLimits,
    burst_levels,
    burstiness,
    check_for_embeddings,
    check_plan,
    concurrency_cap,
    concurrency_levels,
    count_or_duration,
    job_size,
    prefix_room,
    rate_duration,
    sessions_mode,
    sweep_fields,
    warmup_count_or_seconds,
)

LIMITS = ServerLimits(max_concurrency=16, max_requests_per_job=1_000_000, max_job_duration_s=86_400)
SYNTHETIC = {"input_tokens": {"mean": 512}, "output_tokens": {"mean": 64}}


def plan(
    workload: dict[str, Any] | None = None, slo: dict[str, Any] | None = None, **load: Any
) -> Plan:
    """A request resolved as the API resolves it: through its schemas, then the plan's
    defaults, on a server that allows 16 requests in flight."""
    body = msgspec.convert(workload or SYNTHETIC, Workload)
    return resolve_plan(
        msgspec.to_builtins(body),
        msgspec.to_builtins(msgspec.convert(load, Load)),
        None if slo is None else msgspec.to_builtins(msgspec.convert(slo, Slo)),
        preset=None,
        max_concurrency=LIMITS.max_concurrency,
        seed=1,
    )


def with_levels(resolved: Plan, levels: list[float]) -> Plan:
    """A plan with levels the schema would refuse, for the rules behind it."""
    return msgspec.structs.replace(
        resolved, load=msgspec.structs.replace(resolved.load, levels=levels)
    )


def refusal(rule: Rule, resolved: Plan, limits: ServerLimits = LIMITS) -> str:
    with pytest.raises(InvalidInput) as refused:
        rule(resolved, limits)
    return refused.value.detail


GOOD = [
    plan(mode="concurrency", levels=[1, 8], requests_per_level=10),
    plan(mode="concurrency", levels=[32], shards=2, warmup_s=2),
    plan(mode="rate", levels=[2, 4.5], duration_s=5, warmup_requests=9, max_concurrency=4),
    plan(mode="rate", levels=[2], arrival="gamma", burstiness=0.5),
    plan(mode="burst", levels=[40], max_concurrency=8),
    plan(mode="sweep"),
    plan(mode="sweep", max_concurrency=16, requests_per_level=20, arrival="gamma", burstiness=2),
    plan(
        {**SYNTHETIC, "input_tokens": {"mean": 200}, "prefix": {"count": 2, "tokens": 100}},
        mode="concurrency",
        levels=[2],
    ),
    plan({**SYNTHETIC, "sessions": {"turns": 3}}, mode="concurrency", levels=[2]),
]


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.__name__)
@pytest.mark.parametrize("resolved", GOOD)
def test_every_rule_accepts_good_plans(rule: Rule, resolved: Plan) -> None:
    rule(resolved, LIMITS)


def test_job_size() -> None:
    many = plan(mode="concurrency", levels=[1, 2], requests_per_level=1_000_000, warmup_requests=10)
    assert refusal(job_size, many) == (
        "load: this plan sends about 2,000,020 requests (warm-up included), over this "
        "server's limit of 1,000,000 per job (INFERCOST_MAX_REQUESTS_PER_JOB): use fewer "
        "levels or fewer requests per level"
    )
    # 100 requests at 0.001 requests/s: 100,000 s.
    slow = plan(mode="rate", levels=[0.001], requests_per_level=100)
    assert refusal(job_size, slow) == (
        "load: this plan runs for about 27.8 h (100,000 s, warm-up and cool-down included), "
        "over this server's limit of 24 h per job (INFERCOST_MAX_JOB_DURATION_S=86400): "
        "shorten the levels, raise the rates or split the job"
    )
    # Two concurrency levels of a count and 40 s of cool-down after each: 80 s known.
    short = ServerLimits(max_concurrency=16, max_requests_per_job=100, max_job_duration_s=60)
    cooled = plan(mode="concurrency", levels=[1, 2], requests_per_level=10, cooldown_s=40)
    assert refusal(job_size, cooled, short) == (
        "load: this plan runs for about 0.0 h (80 s, warm-up and cool-down included) (2 "
        "concurrency levels of a request count not included: their duration depends on the "
        "server), over this server's limit of 0.0166667 h per job "
        "(INFERCOST_MAX_JOB_DURATION_S=60): shorten the levels, raise the rates or split the job"
    )
    job_size(plan(mode="concurrency", levels=[1, 2], requests_per_level=10), short)


def test_count_or_duration() -> None:
    both = plan(mode="rate", levels=[2], requests_per_level=10, duration_s=5)
    assert refusal(count_or_duration, both) == (
        "load.duration_s: give load.requests_per_level or load.duration_s, not both"
    )


def test_warmup_count_or_seconds() -> None:
    both = plan(mode="concurrency", levels=[1], warmup_s=2, warmup_requests=4)
    assert refusal(warmup_count_or_seconds, both) == (
        "load.warmup_s: give load.warmup_requests (a count) or load.warmup_s (seconds), not both"
    )


def test_sweep_fields() -> None:
    assert refusal(sweep_fields, plan(mode="sweep", levels=[1, 2])) == (
        "load.levels: a sweep chooses its own levels: leave load.levels out (load.rate_levels "
        "sets how many request rates it measures, load.max_concurrency the users of its "
        "throughput level)"
    )
    assert refusal(sweep_fields, plan(mode="sweep", max_concurrency=32)) == (
        "load.max_concurrency: 32 exceeds this server's limit of 16 concurrent requests "
        "(INFERCOST_MAX_CONCURRENCY)"
    )
    for mode, unit in [
        ("concurrency", "users"),
        ("rate", "requests/s"),
        ("burst", "requests sent at once"),
    ]:
        assert refusal(sweep_fields, plan(mode=mode)) == (
            f"load.levels: mode '{mode}' needs levels ({unit}, e.g. [1, 8, 32]); or use mode "
            "'sweep' to have them chosen"
        )
    assert refusal(sweep_fields, plan(mode="rate", levels=[2], rate_levels=3)) == (
        "load.rate_levels: applies only to mode 'sweep' (this plan has 'rate'); leave it out"
    )
    assert refusal(sweep_fields, plan(mode="concurrency", levels=[2], max_error_rate=0.1)) == (
        "load.max_error_rate: applies only to mode 'sweep' (this plan has 'concurrency'); "
        "leave it out"
    )


def test_concurrency_cap() -> None:
    assert refusal(concurrency_cap, plan(mode="concurrency", levels=[2], max_concurrency=4)) == (
        "load.max_concurrency: a concurrency level's users are already its cap on requests in "
        "flight: leave max_concurrency out, or use mode 'rate' (requests/s) with max_concurrency"
    )
    assert refusal(concurrency_cap, plan(mode="rate", levels=[2], max_concurrency=32)) == (
        "load.max_concurrency: 32 exceeds this server's limit of 16 concurrent requests "
        "(INFERCOST_MAX_CONCURRENCY); lower it"
    )
    sharded = plan(mode="burst", levels=[8], max_concurrency=4, shards=2)
    assert refusal(concurrency_cap, sharded) == (
        "load.max_concurrency: a cap on requests in flight is kept by one worker process: "
        "leave load.shards out (or 1), or leave max_concurrency out"
    )


def test_burst_levels() -> None:
    for name, value in [("requests_per_level", 10), ("duration_s", 5.0), ("warmup_s", 1.0)]:
        assert refusal(burst_levels, plan(mode="burst", levels=[8], **{name: value})) == (
            f"load.{name}: a burst level is the number of requests sent at once (load.levels), "
            f"all due at its start: leave {name} out"
        )
    assert refusal(burst_levels, plan(mode="burst", levels=[8], warmup_requests=2)) == (
        "load.warmup_requests: a burst sends every request at once, so no request warms the "
        "server for the others: leave warmup_requests out (run a short concurrency job first "
        "to warm the server)"
    )
    arrival = (
        "load.arrival: a burst has no arrival process (every request is due at once): leave "
        "arrival and burstiness out"
    )
    assert refusal(burst_levels, plan(mode="burst", levels=[8], arrival="poisson")) == arrival
    assert refusal(burst_levels, plan(mode="burst", levels=[8], burstiness=2)) == arrival
    burst_levels(plan(mode="burst", levels=[8], arrival="constant"), LIMITS)
    assert refusal(burst_levels, plan(mode="burst", levels=[2.5])) == (
        "load.levels: 2.5 is not a whole number; a burst level is a number of requests sent at once"
    )
    over = with_levels(plan(mode="burst", levels=[8]), [2e6])
    assert refusal(burst_levels, over) == (
        "load.levels: 2e+06 requests at once is over the limit of 1,000,000 per level"
    )
    assert refusal(burst_levels, plan(mode="burst", levels=[40])) == (
        "load.levels: 40 requests at once exceeds this server's limit of 16 concurrent "
        "requests (INFERCOST_MAX_CONCURRENCY); lower the level, raise load.shards or set "
        "load.max_concurrency"
    )
    # Two shards send 20 each.
    assert refusal(burst_levels, plan(mode="burst", levels=[40], shards=2)) == (
        "load.levels: 40 requests at once exceeds this server's limit of 16 concurrent "
        "requests (INFERCOST_MAX_CONCURRENCY) per shard (2 shards); lower the level, raise "
        "load.shards or set load.max_concurrency"
    )
    burst_levels(plan(mode="burst", levels=[40], shards=3), LIMITS)


def test_concurrency_levels() -> None:
    assert refusal(concurrency_levels, plan(mode="concurrency", levels=[1, 1.5])) == (
        "load.levels: 1.5 is not a whole number; a concurrency level is a number of users "
        "(use mode 'rate' for requests per second)"
    )
    assert refusal(concurrency_levels, plan(mode="concurrency", levels=[8, 32])) == (
        "load.levels: 32 exceeds this server's limit of 16 concurrent requests "
        "(INFERCOST_MAX_CONCURRENCY); lower the level or raise load.shards"
    )
    assert refusal(concurrency_levels, plan(mode="concurrency", levels=[40], shards=2)) == (
        "load.levels: 40 exceeds this server's limit of 16 concurrent requests "
        "(INFERCOST_MAX_CONCURRENCY) per shard (2 shards); lower the level or raise load.shards"
    )


def test_burstiness() -> None:
    assert refusal(burstiness, plan(mode="rate", levels=[2], burstiness=0.5)) == (
        "load.burstiness: applies only to arrival 'gamma' (this plan has 'poisson'); set "
        "load.arrival to 'gamma' or leave burstiness out"
    )
    assert refusal(burstiness, plan(mode="sweep", burstiness=2)) == (
        "load.burstiness: applies only to arrival 'gamma' (this plan has 'constant'); set "
        "load.arrival to 'gamma' or leave burstiness out"
    )


def test_rate_duration() -> None:
    flood = plan(mode="rate", levels=[100_000], duration_s=86_400)
    assert refusal(rate_duration, flood) == (
        "load.duration_s: 86400 s at 100000 requests/s is about 8,640,000,000 requests, over "
        "the limit of 1,000,000 per level"
    )
    # 5 s at 2 requests/s: 10 requests, all of them warm-up.
    warm = plan(mode="rate", levels=[4, 2], duration_s=5, warmup_requests=10)
    assert refusal(rate_duration, warm) == (
        "load.warmup_requests: 10 warm-up requests fill the whole 5 s level at 2 requests/s "
        "(about 10 requests); lower it or raise load.duration_s"
    )


def test_sessions_mode() -> None:
    sessions = {**SYNTHETIC, "sessions": {"turns": 4}}
    expected = "workload.sessions: multi-turn sessions need load.mode 'concurrency' and one shard"
    assert refusal(sessions_mode, plan(sessions, mode="rate", levels=[2])) == expected
    assert refusal(sessions_mode, plan(sessions, mode="concurrency", levels=[4], shards=2)) == (
        expected
    )


def test_prefix_room() -> None:
    prefix = {"count": 2, "tokens": 100}
    on_dataset = {"dataset_id": "0b6f7a52-3c1e-4d2a-9f0e-6a1b2c3d4e5f", "prefix": prefix}
    assert refusal(prefix_room, plan(on_dataset, mode="concurrency", levels=[1])) == (
        "workload.prefix: shared prefixes apply to synthetic prompts: leave out dataset_id and "
        "sessions"
    )
    tight = {**SYNTHETIC, "input_tokens": {"mean": 64}, "prefix": prefix}
    assert refusal(prefix_room, plan(tight, mode="concurrency", levels=[1])) == (
        "workload.prefix.tokens: 100 tokens of prefix leave no room in prompts of 64 tokens: "
        "input_tokens is the whole prompt (prefix included), so make it longer than the prefix "
        "(its min, or its mean when no min is given)"
    )
    # The shortest prompt is its min when it gives one.
    clipped = {**SYNTHETIC, "input_tokens": {"mean": 500, "min": 100}, "prefix": prefix}
    assert refusal(prefix_room, plan(clipped, mode="concurrency", levels=[1])) == (
        "workload.prefix.tokens: 100 tokens of prefix leave no room in prompts of 100 tokens: "
        "input_tokens is the whole prompt (prefix included), so make it longer than the prefix "
        "(its min, or its mean when no min is given)"
    )


def test_embeddings() -> None:
    for name in ("ttft_ms", "tpot_ms", "itl_ms"):
        limited = plan(slo={name: {"p95": 50}}, mode="concurrency", levels=[1])
        with pytest.raises(InvalidInput) as refused:
            check_for_embeddings(limited)
        assert refused.value.detail == (
            f"slo.{name}: an openai-embeddings endpoint streams no tokens: limit e2e_ms instead"
        )
    chat = plan({**SYNTHETIC, "sessions": {"turns": 2}}, mode="concurrency", levels=[1])
    with pytest.raises(InvalidInput) as refused:
        check_for_embeddings(chat)
    assert refused.value.detail == (
        "workload.sessions: an openai-embeddings endpoint takes texts, not chat sessions"
    )
    check_for_embeddings(plan(slo={"e2e_ms": {"p95": 80}}, mode="concurrency", levels=[1]))


def test_the_first_broken_rule_is_the_one_answered() -> None:
    # Two levels of a day each (over the per-job cap), a count and a duration, warm-up
    # requests and seconds: the cap comes first (as the API has always checked it first),
    # then the count, then the warm-up.
    broken = plan(
        mode="rate", levels=[1, 2], requests_per_level=10, duration_s=86_400, warmup_s=1,
        warmup_requests=2,
    )  # fmt: skip
    with pytest.raises(InvalidInput) as refused:
        check_plan(broken, LIMITS)
    assert refused.value.detail.startswith("load: this plan runs for about")
    roomy = ServerLimits(max_concurrency=16, max_requests_per_job=10**9, max_job_duration_s=1e9)
    with pytest.raises(InvalidInput) as refused:
        check_plan(broken, roomy)
    assert refused.value.detail.startswith("load.duration_s: give load.requests_per_level")
    fixed = msgspec.structs.replace(
        broken, load=msgspec.structs.replace(broken.load, requests_per_level=None)
    )
    with pytest.raises(InvalidInput) as refused:
        check_plan(fixed, roomy)
    assert refused.value.detail.startswith("load.warmup_s: give load.warmup_requests")
