"""GET /v1/endpoints/{id}/history and the run summary's `change`, over runs and per-request
samples written with SQL and judged by the same code the worker runs when a job ends
(infercost.history.changes.record_changes): baselines, series, filters, errors."""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import numpy as np
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.db.engine import make_engine, make_sessionmaker
from infercost.history.changes import record_changes
from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
HOUR = timedelta(hours=1)
FP_A, FP_B = "aaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbb"


@pytest.fixture
async def sessions(database_url: str) -> AsyncIterator[async_sessionmaker[AsyncSession]]:
    """Sessions on the test database, as the worker opens them."""
    engine = make_engine(database_url, pool_size=1)
    try:
        yield make_sessionmaker(engine)
    finally:
        await engine.dispose()


async def store_run(
    db: asyncpg.Connection,
    team: TeamClient,
    endpoint: dict[str, Any],
    *,
    finished: datetime,
    ttft_ms: float,
    seed: int,
    n: int = 60,
    level: float = 1.0,
    fingerprint: str = FP_A,
    **columns: Any,
) -> tuple[str, str]:
    """A succeeded run of its own job with `n` measured successful requests whose TTFT has
    median ~`ttft_ms` (TPOT ~10 ms, 16 output tokens), plus warm-up and failed requests
    with absurd timings that must never be compared. Returns (job id, run id)."""
    rng = np.random.default_rng(seed)
    ttft = ttft_ms * rng.lognormal(0.0, 0.1, n)
    tpot = 10.0 * rng.lognormal(0.0, 0.05, n)
    e2e = ttft + 15 * tpot
    job_id, run_id = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        level=level,
        workload_fingerprint=fingerprint,
        started_at=finished - timedelta(minutes=1),
        finished_at=finished,
        requests_total=n,
        requests_succeeded=n,
        ttft_p50_ms=float(np.median(ttft)),
        ttft_p95_ms=float(np.percentile(ttft, 95)),
        tpot_p50_ms=float(np.median(tpot)),
        tpot_p95_ms=float(np.percentile(tpot, 95)),
        output_tokens_per_s=1600.0 / float(np.mean(e2e)) * 1000 / 16,
        usd_per_hour=3.5,
        client_bound=columns.pop("client_bound", False),
        **columns,
    )
    rows: list[tuple[Any, ...]] = []
    run = uuid.UUID(run_id)

    def sample(seq: int, warmup: bool, t: float, p: float, e: float, error: str | None) -> None:
        rows.append(
            (run, seq, warmup, seq * 0.1, seq * 0.1, t, t, p, e, 32, 16, "usage", error, [])
        )

    seq = 0
    for _ in range(40):  # warm-up: slow, and more of them than the measured ones' margin
        sample(seq, True, 5000.0, 500.0, 9000.0, None)
        seq += 1
    for _ in range(40):  # failures: their timings describe the failure, not the endpoint
        sample(seq, False, 9000.0, 900.0, 9500.0, "http_5xx")
        seq += 1
    for t, p, e in zip(ttft, tpot, e2e, strict=True):
        sample(seq, False, float(t), float(p), float(e), None)
        seq += 1
    await db.copy_records_to_table(
        "request_samples",
        records=rows,
        columns=[
            "run_id",
            "seq",
            "warmup",
            "t_sched",
            "t_send",
            "ttfb_ms",
            "ttft_ms",
            "tpot_ms",
            "e2e_ms",
            "n_in",
            "n_out",
            "count_source",
            "error_class",
            "chunk_times_ms",
        ],
    )
    return job_id, run_id


async def judge(sessions: async_sessionmaker[AsyncSession], job_id: str) -> list[dict[str, Any]]:
    """What the worker does when the job ends: decide and store its runs' changes."""
    async with sessions() as session:
        changes = await record_changes(session, uuid.UUID(job_id))
        await session.commit()
    return [c.as_dict() for c in changes]


async def test_history_series_and_changes(
    team: TeamClient,
    new_team: Any,
    db: asyncpg.Connection,
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    endpoint = await team.create_endpoint()
    other_endpoint = await team.create_endpoint()
    # Series A, level 1: a first run, one like it, a client-bound slow one, then a slow one.
    first = await store_run(db, team, endpoint, finished=T0, ttft_ms=100.0, seed=1)
    same = await store_run(db, team, endpoint, finished=T0 + HOUR, ttft_ms=100.0, seed=2)
    bound = await store_run(
        db, team, endpoint, finished=T0 + 2 * HOUR, ttft_ms=150.0, seed=3, client_bound=True
    )
    # The slow one measured a newer engine release (as the worker snapshots it per run).
    slow = await store_run(
        db, team, endpoint, finished=T0 + 3 * HOUR, ttft_ms=150.0, seed=4, engine_version="0.7.0"
    )
    # Series A, level 8 (a single run); series B (another workload); too few requests.
    level8 = await store_run(db, team, endpoint, finished=T0 + HOUR, ttft_ms=90.0, seed=5, level=8)
    other_workload = await store_run(
        db, team, endpoint, finished=T0 + 2 * HOUR, ttft_ms=300.0, seed=6, fingerprint=FP_B
    )
    few = await store_run(db, team, endpoint, finished=T0 + 4 * HOUR, ttft_ms=100.0, seed=7, n=10)
    # Same workload on another endpoint: never a baseline for this one.
    await store_run(db, team, other_endpoint, finished=T0 - HOUR, ttft_ms=10.0, seed=8)

    for job, _ in (first, same, bound, slow, level8, other_workload, few):
        await judge(sessions, job)

    # What record_changes returns is what it stored.
    again = await judge(sessions, slow[0])
    assert len(again) == 1
    assert again[0]["run_id"] == slow[1]
    assert again[0]["verdict"] == "regression"
    assert again[0]["baseline_run_id"] == same[1]

    response = await team.http.get(f"/v1/endpoints/{endpoint['id']}/history")
    assert response.status_code == 200, response.text
    history = response.json()
    assert history["endpoint_id"] == endpoint["id"]
    keys = [(s["workload_fingerprint"], s["mode"], s["level"]) for s in history["series"]]
    assert keys == [(FP_A, "concurrency", 1), (FP_A, "concurrency", 8), (FP_B, "concurrency", 1)]

    series_a = history["series"][0]
    assert series_a["total"] == 5
    points = series_a["points"]
    assert [p["run_id"] for p in points] == [first[1], same[1], bound[1], slow[1], few[1]]
    assert [p["job_id"] for p in points] == [first[0], same[0], bound[0], slow[0], few[0]]
    finished = [datetime.fromisoformat(p["finished_at"]) for p in points]
    assert finished == sorted(finished)
    # Each point says which engine release measured it (null where none was stated).
    assert [p["engine_version"] for p in points] == [None, None, None, "0.7.0", None]
    verdicts = [p["change"]["verdict"] for p in points]
    assert verdicts == ["baseline", "no_change", "regression", "regression", "insufficient_data"]
    assert series_a["latest_verdict"] == "insufficient_data"

    base = points[0]["change"]
    assert base["baseline_run_id"] is None and base["metrics"] == {}
    assert "first succeeded run" in base["notes"][0]

    unchanged = points[1]["change"]
    assert unchanged["baseline_run_id"] == first[1]
    assert unchanged["baseline_job_id"] == first[0]
    ttft = unchanged["metrics"]["ttft_ms"]
    # Warm-up and failed requests were left out: 60 a side, medians near 100 ms.
    assert (ttft["n_baseline"], ttft["n_current"]) == (60, 60)
    assert 90 < ttft["baseline_p50_ms"] < 110 and 90 < ttft["current_p50_ms"] < 110
    assert set(unchanged["metrics"]) == {"ttft_ms", "tpot_ms", "e2e_ms"}
    assert all(m["verdict"] == "no_change" for m in unchanged["metrics"].values())
    # 60 requests a side are too few for the p95 check; the median check decides alone.
    assert ttft["p95_verdict"] == "insufficient_data" and ttft["p95_ci_low"] is None
    assert ttft["median_verdict"] == "no_change" and ttft["flagged_by"] == []

    # The client-bound run is judged (and says so) but is nobody's baseline.
    assert points[2]["client_bound"] is True
    assert points[2]["change"]["baseline_run_id"] == same[1]
    assert any("client-bound" in note for note in points[2]["change"]["notes"])
    regression = points[3]["change"]
    assert regression["baseline_run_id"] == same[1]
    ttft = regression["metrics"]["ttft_ms"]
    assert ttft["verdict"] == "regression"
    assert ttft["p_value"] < 1e-6
    assert 0.35 < ttft["relative_change"] < 0.65
    assert 0 < ttft["ci_low"] < ttft["relative_change"] < ttft["ci_high"]
    assert ttft["cliffs_delta"] > 0.8
    assert regression["metrics"]["tpot_ms"]["verdict"] == "no_change"
    assert regression["method"]["alpha"] == 0.01
    assert regression["method"]["min_effect"] == 0.05
    assert ttft["flagged_by"] == ["median"]
    assert regression["method"]["min_tail_effect"] == 0.10
    assert regression["method"]["min_tail_samples"] == 100
    assert regression["output_tokens_per_s"]["relative_change"] < 0
    # Figures a chart reads, from the run's own columns.
    assert points[3]["ttft_p50_ms"] == pytest.approx(ttft["current_p50_ms"])
    assert points[3]["cost_per_million_output_tokens_usd"] > 0

    few_change = points[4]["change"]
    assert few_change["baseline_run_id"] == slow[1]
    assert few_change["metrics"]["ttft_ms"]["n_current"] == 10
    assert few_change["metrics"]["ttft_ms"]["p_value"] is None

    assert [p["change"]["verdict"] for p in history["series"][1]["points"]] == ["baseline"]
    assert history["series"][2]["points"][0]["run_id"] == other_workload[1]
    assert history["series"][2]["points"][0]["change"]["verdict"] == "baseline"
    assert history["regressions"] == [slow[1], bound[1]]

    # The run summary carries the same block.
    run = (await team.http.get(f"/v1/runs/{slow[1]}")).json()
    assert run["change"] == regression
    job_runs = (await team.http.get(f"/v1/jobs/{same[0]}/runs")).json()
    assert job_runs[0]["change"]["verdict"] == "no_change"
    # Filters and the per-series limit.
    only_b = (
        await team.http.get(
            f"/v1/endpoints/{endpoint['id']}/history", params={"workload_fingerprint": FP_B}
        )
    ).json()
    assert [s["workload_fingerprint"] for s in only_b["series"]] == [FP_B]
    level8_only = (
        await team.http.get(
            f"/v1/endpoints/{endpoint['id']}/history", params={"level": 8, "mode": "concurrency"}
        )
    ).json()
    assert [p["run_id"] for s in level8_only["series"] for p in s["points"]] == [level8[1]]
    window = (
        await team.http.get(
            f"/v1/endpoints/{endpoint['id']}/history",
            params={
                "workload_fingerprint": FP_A,
                "level": 1,
                "since": (T0 + HOUR).isoformat(),
                "until": (T0 + 3 * HOUR).isoformat(),
            },
        )
    ).json()
    assert [p["run_id"] for p in window["series"][0]["points"]] == [same[1], bound[1]]
    latest = (
        await team.http.get(
            f"/v1/endpoints/{endpoint['id']}/history", params={"level": 1, "limit": 2}
        )
    ).json()
    assert [(s["total"], [p["run_id"] for p in s["points"]]) for s in latest["series"]] == [
        (5, [slow[1], few[1]]),
        (1, [other_workload[1]]),
    ]
    assert latest["limit"] == 2
    rate = await team.http.get(f"/v1/endpoints/{endpoint['id']}/history", params={"mode": "rate"})
    assert rate.status_code == 200 and rate.json()["series"] == []

    # Another team sees no such endpoint; nor does anyone for an unknown id.
    stranger: TeamClient = await new_team()
    hidden = await stranger.http.get(f"/v1/endpoints/{endpoint['id']}/history")
    assert hidden.status_code == 404
    assert hidden.headers["content-type"].startswith("application/problem+json")
    unknown = await team.http.get(f"/v1/endpoints/{uuid.uuid4()}/history")
    assert unknown.status_code == 404


@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"workload_fingerprint": "not-a-fingerprint"}, "workload_fingerprint"),
        ({"mode": "sweep"}, "mode"),
        ({"level": 0}, "level"),
        ({"since": "2026-11-01T00:00:00"}, "since"),
        ({"since": "2026-11-02T00:00:00Z", "until": "2026-11-01T00:00:00Z"}, "until"),
        ({"limit": 0}, "limit"),
        ({"limit": 1001}, "limit"),
    ],
)
async def test_bad_query_values_are_422(
    team: TeamClient, params: dict[str, Any], field: str
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.http.get(f"/v1/endpoints/{endpoint['id']}/history", params=params)
    assert response.status_code == 422, response.text
    problem = response.json()
    assert response.headers["content-type"].startswith("application/problem+json")
    assert problem["errors"][0]["field"] == field
    assert problem["detail"].startswith(f"{field}: ")


async def test_runs_without_a_change_show_null(team: TeamClient, db: asyncpg.Connection) -> None:
    # A run stored before history existed (or whose job has not ended) has no change yet.
    endpoint = await team.create_endpoint()
    _, run_id = await store_run(db, team, endpoint, finished=T0, ttft_ms=50.0, seed=9)
    history = (await team.http.get(f"/v1/endpoints/{endpoint['id']}/history")).json()
    point = history["series"][0]["points"][0]
    assert point["run_id"] == run_id
    assert point["change"] is None
    assert history["series"][0]["latest_verdict"] is None
    assert (await team.http.get(f"/v1/runs/{run_id}")).json()["change"] is None


async def test_a_rerun_served_from_the_prefix_cache_is_not_compared(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    """The real-engine finding: a rerun with identical prompts was answered from llama.cpp's
    prompt cache (TTFT 346 -> 22 ms) and was called a -93.7% "improvement". A run whose cache
    share differs from its baseline's by more than 10 points is `incomparable`, saying why."""
    endpoint = await team.create_endpoint()
    uncached = {"requests": 60, "requests_with_hits": 0, "prompt_tokens": 15360,
                "cached_prompt_tokens": 0, "share": 0.0}  # fmt: skip
    cached = {**uncached, "requests_with_hits": 60, "cached_prompt_tokens": 15300,
              "share": 15300 / 15360}  # fmt: skip
    first = await store_run(
        db, team, endpoint, finished=T0, ttft_ms=346.0, seed=11, cache=json.dumps(uncached)
    )
    rerun = await store_run(
        db, team, endpoint, finished=T0 + HOUR, ttft_ms=22.0, seed=12, cache=json.dumps(cached)
    )
    await judge(sessions, first[0])
    [change] = await judge(sessions, rerun[0])
    assert change["verdict"] == "incomparable"
    assert change["baseline_run_id"] == first[1]
    assert change["change"]["metrics"] == {}
    note = change["change"]["notes"][0]
    assert "100% of this run's prompt tokens were served from the prefix cache against 0%" in note
    # Same cache share (both uncached): compared as usual.
    again = await store_run(
        db,
        team,
        endpoint,
        finished=T0 + 2 * HOUR,
        ttft_ms=346.0,
        seed=13,
        cache=json.dumps(uncached),
        fingerprint=FP_B,
    )
    base = await store_run(
        db,
        team,
        endpoint,
        finished=T0 + HOUR,
        ttft_ms=346.0,
        seed=14,
        cache=json.dumps(uncached),
        fingerprint=FP_B,
    )
    await judge(sessions, base[0])
    [same] = await judge(sessions, again[0])
    assert same["verdict"] == "no_change"
    response = await team.http.get(f"/v1/runs/{rerun[1]}")
    assert response.status_code == 200, response.text
    assert response.json()["change"]["verdict"] == "incomparable"
    assert response.json()["cache"]["share"] == pytest.approx(15300 / 15360)
