"""One model of a mix as its own evidence (an estimate's served_model), by hand: each run of a
job that spread its requests over a base model and an adapter is a load point at the adapter's
own requests/s, judged on its own TTFT and error rate; its capacity, replicas and cost follow
from those figures and its token share, as docs/figures.md ("Capacity of one model") says."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from api.domain.estimates.evidence import Served, load_figures, pooled_evidence
from api.domain.estimates.services import EstimateService, Measured, _share_read
from infercost.endpoints.models import Endpoint
from infercost.jobs.models import Job, Run
from infercost.planning.estimate import Traffic, self_hosted_cost

SLO = {"ttft_ms": {"p95": 500.0}}
ADAPTER = Served("lora-a", base="base")
BASE = Served("base", base="base")
NOW = datetime(2026, 12, 5, tzinfo=UTC)


def block(
    model: str, rps: float, ttft_p95: float, share: float, error_rate: float = 0.0
) -> dict[str, Any]:
    """A run's models entry: `rps` requests/s of 100 output and 64 prompt tokens each."""
    return {
        "model": model,
        "requests": {"total": 200, "succeeded": 200, "failed": 0, "errors": {}},
        "ttft_ms": {"p50": ttft_p95 / 2, "p95": ttft_p95},
        "tpot_ms": {"p50": 10.0, "p95": 12.0},
        "e2e_ms": {"p50": 900.0, "p95": 1500.0},
        "output_tokens_per_s": rps * 100,
        "input_tokens_per_s": rps * 64,
        "requests_per_s": rps,
        "error_rate": error_rate,
        "token_share": share,
    }


def run(
    job: Job, level: float, rps: float, ttft_p95: float, models: list[dict[str, Any]] | None
) -> Run:
    """An adequate concurrency level whose run as a whole had `rps` and TTFT p95 `ttft_p95`."""
    return Run(
        id=uuid.uuid4(),
        job_id=job.id,
        mode="concurrency",
        level=level,
        status="succeeded",
        requests_per_s=rps,
        output_tokens_per_s=rps * 100,
        input_tokens_per_s=rps * 64,
        requests_succeeded=800,
        client_bound=False,
        adequacy={"ok": True, "reasons": []},
        error_rate=0.0,
        stats={"ttft_ms": {"p95": ttft_p95}},
        models=models,
        finished_at=NOW,
    )


def mixed_job(adapter_error_at_8: float = 0.0) -> tuple[Job, list[Run]]:
    """A job of three levels sending 3 in 4 requests to `base` and 1 in 4 to `lora-a`. The
    runs as a whole meet the SLO at every level (TTFT p95 300, 400, 480 ms); the adapter,
    slower, meets it at 4 and 8 users (margins 300 / 500 = 0.6 and 450 / 500 = 0.9) and
    fails at 16 (700 / 500 = 1.4)."""
    job = Job(id=uuid.uuid4(), load={"mode": "concurrency", "levels": [4, 8, 16]})
    runs = [
        run(
            job,
            4,
            10.0,
            300.0,
            [block("base", 7.5, 200.0, 0.75), block("lora-a", 2.5, 300.0, 0.25)],
        ),
        run(
            job,
            8,
            20.0,
            400.0,
            [
                block("base", 16.0, 250.0, 0.8),
                block("lora-a", 4.0, 450.0, 0.2, error_rate=adapter_error_at_8),
            ],
        ),
        run(
            job,
            16,
            25.0,
            480.0,
            [block("base", 20.0, 300.0, 0.8), block("lora-a", 5.0, 700.0, 0.2)],
        ),
    ]
    return job, runs


def test_a_run_is_a_load_point_of_the_model_it_sent_requests_to() -> None:
    job, runs = mixed_job()
    figures = load_figures(runs[1], ADAPTER)
    assert figures is not None
    assert (figures.requests_per_s, figures.output_tokens_per_s) == (4.0, 400.0)
    assert figures.stats["ttft_ms"]["p95"] == 450.0 and figures.token_share == 0.2
    assert figures.model == "lora-a"
    # Without a model, the run as a whole, all of its tokens.
    whole = load_figures(runs[1])
    assert whole is not None
    assert (whole.requests_per_s, whole.token_share, whole.model) == (20.0, 1.0, None)
    # A model the run did not send requests to: no evidence of it.
    assert load_figures(runs[1], Served("lora-b", base="base")) is None
    # A run without a models block is evidence of its deployment's own model only.
    plain = run(job, 4, 10.0, 300.0, None)
    assert load_figures(plain, ADAPTER) is None
    served_base = load_figures(plain, BASE)
    assert served_base is not None
    assert (served_base.requests_per_s, served_base.token_share) == (10.0, 1.0)


def test_the_adapter_passes_low_and_fails_high_and_its_capacity_lies_between() -> None:
    job, runs = mixed_job()
    whole = pooled_evidence([(job, runs)], SLO)
    # The runs as a whole pass everywhere: at least the top level's 25 requests/s.
    assert whole.capacity is not None
    assert whole.capacity.requests_per_s == 25.0 and whole.capacity.limited_by_measurements

    pooled = pooled_evidence([(job, runs)], SLO, ADAPTER)
    capacity = pooled.capacity
    assert capacity is not None
    # Between the adapter's 4.0 requests/s at 8 users (margin 0.9) and 5.0 at 16 (1.4):
    # weight (1 - 0.9) / (1.4 - 0.9) = 0.2, so 4.0 + 0.2 x 1.0 = 4.2 requests/s and
    # 400 + 0.2 x 100 = 420 output tokens/s.
    assert capacity.requests_per_s == pytest.approx(4.2)
    assert capacity.output_tokens_per_s == pytest.approx(420.0)
    assert (capacity.requests_per_s_low, capacity.requests_per_s_high) == (4.0, 5.0)
    assert pooled.basis == [runs[1].id, runs[2].id]
    assert pooled.passed == {runs[0].id: True, runs[1].id: True, runs[2].id: False}
    # The share at the basis level (8 users): 0.2 of the replica's tokens.
    assert pooled.token_share == 0.2
    # The base model, judged on its own figures, passes everywhere: 20 requests/s at least.
    base = pooled_evidence([(job, runs)], SLO, BASE)
    assert base.capacity is not None and base.capacity.requests_per_s == 20.0
    assert base.token_share == 0.8


def test_the_models_own_error_rate_fails_a_level() -> None:
    # 2% of the adapter's requests failed at 8 users (over the 1% an estimate allows), though
    # its TTFT met the SLO: the capacity is its 2.5 requests/s at 4 users, not interpolated
    # (the margins 0.6 and 0.9 do not bracket 1), the failing 4.0 above it.
    job, runs = mixed_job(adapter_error_at_8=0.02)
    pooled = pooled_evidence([(job, runs)], SLO, ADAPTER)
    assert pooled.capacity is not None
    assert pooled.capacity.requests_per_s == 2.5 and not pooled.capacity.interpolated
    assert pooled.capacity.requests_per_s_high == 4.0
    assert pooled.token_share == 0.25


def test_runs_of_other_models_are_no_evidence() -> None:
    job, runs = mixed_job()
    older = Job(id=uuid.uuid4(), load={"mode": "concurrency", "levels": [4]})
    plain = [run(older, 4, 12.0, 100.0, None)]
    pooled = pooled_evidence([(job, runs), (older, plain)], SLO, ADAPTER)
    # The plain job measured the base model alone: not the adapter's evidence.
    assert plain[0].id not in pooled.figures and pooled.runs == runs
    assert pooled.capacity is not None and pooled.capacity.requests_per_s == pytest.approx(4.2)
    nothing = pooled_evidence([(job, runs)], SLO, Served("lora-b", base="base"))
    assert nothing.capacity is None and nothing.runs == [] and nothing.skipped == []


def test_replicas_and_cost_of_the_adapter_at_its_traffic() -> None:
    job, runs = mixed_job()
    pooled = pooled_evidence([(job, runs)], SLO, ADAPTER)
    assert pooled.capacity is not None
    measured = Measured(job, pooled, pooled.capacity, 1.0)
    endpoint = Endpoint(id=uuid.uuid4(), name="mix", model="base", engine="vllm", gpu_count=1)
    deployment = EstimateService._deployment(
        endpoint, None, measured, usd_per_hour=4.0, stale_before=NOW - timedelta(days=90)
    )
    # 10 requests/s of the adapter (64 in, 100 out), each replica at most 80% of its 4.2:
    # ceil(10 / 3.36) = 3 replicas; the adapter bears 3 x USD 4/h x 0.2 = USD 2.4/h, and per
    # million output tokens 2.4 / (10 x 100 x 3600) x 1e6 = USD 0.667.
    estimate = self_hosted_cost(Traffic(10.0, 64.0, 100.0), deployment, 0.8)
    assert estimate.capacity_rps == pytest.approx(4.2)
    assert estimate.replicas == 3
    assert estimate.usd_per_hour == pytest.approx(2.4)
    assert estimate.per_million_output_tokens_usd == pytest.approx(2.4 / 3.6)
    # The levels the capacity was chosen from, at the adapter's own requests/s.
    assert deployment.measured_range_rps == (2.5, 5.0)
    share = _share_read(measured, 4.0)
    assert share is not None
    assert (share.model, share.token_share, share.whole_runs) == ("lora-a", 0.2, False)
    assert share.replica_usd_per_hour == 4.0
    assert share.capacity_output_tokens_per_s == pytest.approx(420.0)
    points = measured.points(NOW - timedelta(days=90))
    assert [(p.requests_per_s, p.role) for p in points] == [
        (2.5, "passed"),
        (4.0, "basis"),
        (5.0, "basis"),
    ]


def test_a_trace_replay_of_several_models_is_left_out_for_one_of_them() -> None:
    # Its intervals are judged on every model's requests together: no point of one model.
    job = Job(id=uuid.uuid4(), load={"mode": "trace"})
    replay = run(
        job, 3, 3.0, 100.0, [block("base", 2.0, 80.0, 0.7), block("lora-a", 1.0, 90.0, 0.3)]
    )
    replay.mode = "trace"
    pooled = pooled_evidence([(job, [replay])], SLO, ADAPTER)
    assert pooled.capacity is None and pooled.runs == []
    (skipped,) = pooled.skipped
    assert skipped.run_id == replay.id
    assert [r.code for r in skipped.reasons] == ["per_model_intervals"]
