"""A trace replay's intervals as load points (capacity at the SLO and the estimate's pooled
evidence), by hand: each interval stands at the requests/s it achieved and is judged on its
own statistics; thin intervals are left out."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from api.domain.estimates.evidence import capacity_of, pooled_evidence
from infercost.jobs.models import Job, Run

SLO = {"ttft_ms": {"p95": 500.0}}


def interval(start_s: float, rps: float, ttft_p95: float, succeeded: int) -> dict[str, Any]:
    return {
        "start_s": start_s,
        "requests": succeeded,
        "succeeded": succeeded,
        "offered_requests_per_s": rps,
        "requests_per_s": rps,
        "output_tokens_per_s": rps * 100,
        "error_rate": 0.0,
        "slo_attainment": None,
        "goodput_rps": None,
        "slo_passed": None,
        "stats": {"ttft_ms": {"p95": ttft_p95}},
    }


def trace_run() -> Run:
    return Run(
        id=uuid.uuid4(),
        job_id=uuid.uuid4(),
        mode="trace",
        level=3.0,
        status="succeeded",
        requests_per_s=3.0,
        output_tokens_per_s=300.0,
        requests_succeeded=630,
        client_bound=False,
        adequacy={"ok": True, "reasons": []},
        error_rate=0.0,
        replay={
            "intervals": [
                interval(0, 2.0, 200.0, 100),  # margin 0.4: passes
                interval(60, 4.0, 400.0, 200),  # margin 0.8: passes
                interval(120, 6.0, 900.0, 300),  # margin 1.8: fails
                interval(180, 1.0, 9000.0, 30),  # 30 requests: too thin to stand
            ]
        },
    )


def test_each_interval_of_a_replay_is_a_load_point() -> None:
    run = trace_run()
    found = capacity_of([run], SLO)
    assert found.capacity is not None
    # Between the passing 4.0 (margin 0.8) and the failing 6.0 (1.8): 4 + 0.2 / 1.0 x 2.
    assert found.capacity.requests_per_s == pytest.approx(4.4)
    assert found.capacity.between == (4.0, 6.0)
    assert found.run_ids == [run.id]
    # The thin interval at 1 request/s (its p95 far over the limit) was not taken.
    assert found.capacity.requests_per_s_low == 4.0

    job = Job(id=run.job_id, load={"mode": "trace"})
    pooled = pooled_evidence([(job, [run])], SLO)
    assert pooled.capacity is not None
    assert pooled.capacity.requests_per_s == pytest.approx(4.4)
    assert pooled.runs == [run] and pooled.basis == [run.id]
    # One interval failed: the run as a whole did not pass.
    assert pooled.passed == {run.id: False}
    # A looser SLO (1 s) passes every interval: the best, 6.0, at least.
    loose = capacity_of([run], {"ttft_ms": {"p95": 1000.0}})
    assert loose.capacity is not None and loose.capacity.requests_per_s == 6.0
    assert loose.capacity.limited_by_measurements
