"""A job's place in the queue and its expected start and end, against hand-computed times."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from api.domain.jobs.eta import ActiveJob, Pace, estimate

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def job(
    status: str,
    load: dict[str, Any],
    *,
    created_min: int,
    started_s_ago: float | None = None,
    done: int = 0,
    total: int = 0,
    pace: Pace | None = None,
    priority: int = 0,
) -> ActiveJob:
    return ActiveJob(
        id=uuid.uuid4(),
        status=status,
        load=load,
        created_at=NOW - timedelta(minutes=60 - created_min),
        started_at=None if started_s_ago is None else NOW - timedelta(seconds=started_s_ago),
        done=done,
        total=total,
        pace=pace,
        priority=priority,
    )


# 100 requests at 2/s = 50 s, plus 5 s cool-down: 55 s.
RATE = {"mode": "rate", "levels": [2], "requests_per_level": 100, "cooldown_s": 5}
# Two 30 s levels with 10 s warm-up each: 80 s.
TIMED = {"mode": "concurrency", "levels": [1, 4], "duration_s": 30, "warmup_s": 10}
# 40 + 8 requests at 1 user then at 4 users, 0.5 s a request: 24 s + 6 s = 30 s.
COUNTED = {"mode": "concurrency", "levels": [1, 4], "requests_per_level": 40, "warmup_requests": 8}


def test_queued_behind_a_running_job_starts_when_it_ends() -> None:
    # Running 20 s into its 55 s plan, 5 requests done (too few to trust its own pace).
    running = job("running", RATE, created_min=0, started_s_ago=20, done=5, total=100)
    first = job("queued", TIMED, created_min=1)
    second = job("queued", COUNTED, created_min=2, pace=Pace(0.5, True))
    active = [second, running, first]

    a = estimate(first, active, NOW)
    assert (a.position, a.jobs_running) == (1, 1)
    assert a.estimated_start_at == NOW + timedelta(seconds=35)
    assert a.estimated_end_at == NOW + timedelta(seconds=35 + 80)

    b = estimate(second, active, NOW)
    assert b.position == 2
    assert b.estimated_start_at == NOW + timedelta(seconds=115)
    assert b.estimated_end_at == NOW + timedelta(seconds=115 + 30)
    assert "0.5 s a request" in b.basis


def test_a_running_job_follows_its_own_pace_once_it_has_one() -> None:
    # 60 of 240 requests in 30 s: 180 left at 2/s = 90 s more.
    running = job("running", RATE, created_min=0, started_s_ago=30, done=60, total=240)
    est = estimate(running, [running], NOW)
    assert est.position is None
    assert est.estimated_start_at == NOW - timedelta(seconds=30)
    assert est.estimated_end_at == NOW + timedelta(seconds=90)
    assert "60 of 240" in est.basis


def test_two_running_jobs_count_as_two_workers() -> None:
    # Ends in 10 s and in 40 s; the first queued job takes the worker freed at 10 s (for
    # 80 s, to 90 s), the second the one freed at 40 s.
    soon = job("running", TIMED, created_min=0, started_s_ago=70)
    later = job("running", TIMED, created_min=0, started_s_ago=40)
    first = job("queued", TIMED, created_min=1)
    second = job("queued", RATE, created_min=2)
    active = [soon, later, first, second]
    assert estimate(first, active, NOW).estimated_start_at == NOW + timedelta(seconds=10)
    est = estimate(second, active, NOW)
    assert est.estimated_start_at == NOW + timedelta(seconds=40)
    assert est.estimated_end_at == NOW + timedelta(seconds=95)
    assert "2 workers" in est.basis


def test_nothing_ahead_starts_now() -> None:
    alone = job("queued", RATE, created_min=0)
    est = estimate(alone, [alone], NOW)
    assert (est.position, est.jobs_running) == (1, 0)
    assert est.estimated_start_at == NOW
    assert est.estimated_end_at == NOW + timedelta(seconds=55)


def test_an_unknown_length_ahead_leaves_no_estimate_behind_it() -> None:
    # A request-count concurrency job on an endpoint that has never been measured.
    unknown = job("queued", COUNTED, created_min=0)
    behind = job("queued", RATE, created_min=1)
    own = estimate(unknown, [unknown, behind], NOW)
    assert own.estimated_start_at == NOW
    assert own.estimated_end_at is None
    assert "no succeeded run" in own.basis
    est = estimate(behind, [unknown, behind], NOW)
    assert est.position == 2
    assert (est.estimated_start_at, est.estimated_end_at) == (None, None)
    assert est.basis.startswith("no estimate")


def test_a_sweep_of_durations_is_planned_by_its_levels() -> None:
    # 2 + 3 levels of 30 s each (rate_levels 3): 150 s.
    sweep = job("queued", {"mode": "sweep", "rate_levels": 3, "duration_s": 30}, created_min=0)
    assert estimate(sweep, [sweep], NOW).estimated_end_at == NOW + timedelta(seconds=150)


def test_a_burst_lasts_as_long_as_its_requests_at_its_concurrency() -> None:
    # At 0.5 s a request: 30 requests at once take 0.5 s, and so do 12 at once; with 2 s of
    # cool-down per level the first job takes 4 + 0.5 + 0.5 = 5 s. 12 at once with at most 3
    # in flight take four rounds, 2 s, plus 2 s of cool-down.
    burst = {"mode": "burst", "levels": [30, 12], "max_concurrency": None, "cooldown_s": 2}
    capped = {**burst, "levels": [12], "max_concurrency": 3}
    first = job("queued", burst, created_min=1, pace=Pace(0.5, True))
    second = job("queued", capped, created_min=2, pace=Pace(0.5, True))
    a = estimate(first, [first, second], NOW)
    assert a.estimated_end_at == NOW + timedelta(seconds=5)
    b = estimate(second, [first, second], NOW)
    assert b.estimated_end_at - b.estimated_start_at == timedelta(seconds=2 + 2)


def test_a_capped_rate_lasts_as_long_as_the_cap_lets_it() -> None:
    # 1000 requests at 100/s would take 10 s, but at 2 s a request and 4 in flight they take
    # 1000 x 2 / 4 = 500 s.
    capped = {"mode": "rate", "levels": [100], "requests_per_level": 1000, "max_concurrency": 4}
    alone = job("queued", capped, created_min=0, pace=Pace(2.0, True))
    assert estimate(alone, [alone], NOW).estimated_end_at == NOW + timedelta(seconds=500)
    # A cap the rate never reaches changes nothing: 0.1 s a request, 10 in flight at most.
    loose = job("queued", {**capped, "max_concurrency": 50}, created_min=0, pace=Pace(0.1, True))
    assert estimate(loose, [loose], NOW).estimated_end_at == NOW + timedelta(seconds=10)


def test_another_team_s_first_job_goes_ahead_of_a_team_s_backlog() -> None:
    # Team C's job runs 20 s into its 55 s plan; its second and third were sent at
    # priorities 1 and 2 (their places in C's line); team A's one job, submitted last, at 0.
    running = job("running", RATE, created_min=0, started_s_ago=20, done=5, total=100)
    c2 = job("queued", RATE, created_min=1, priority=1)
    c3 = job("queued", RATE, created_min=2, priority=2)
    a1 = job("queued", TIMED, created_min=3, priority=0)
    active = [running, c2, c3, a1]

    a = estimate(a1, active, NOW)
    assert a.position == 1
    assert a.estimated_start_at == NOW + timedelta(seconds=35)
    # C's second waits for A's 80 s after the running job's 35 s left.
    b = estimate(c2, active, NOW)
    assert b.position == 2
    assert b.estimated_start_at == NOW + timedelta(seconds=35 + 80)
    assert estimate(c3, active, NOW).position == 3
