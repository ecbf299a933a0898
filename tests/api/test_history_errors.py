"""A run's verdict counts its failed requests, and an outage shows as time: over runs and
samples written with SQL and judged by the code the worker runs when a job ends."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import numpy as np
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.history.availability import availability, error_change
from infercost.history.changes import record_changes
from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

T0 = datetime(2026, 11, 2, 9, tzinfo=UTC)
FP = "cccccccccccccccc"
COLUMNS = ["run_id", "seq", "warmup", "t_sched", "t_send", "ttfb_ms", "ttft_ms", "tpot_ms",
           "e2e_ms", "n_in", "n_out", "count_source", "error_class", "chunk_times_ms"]  # fmt: skip


async def stored(
    db: asyncpg.Connection,
    team: TeamClient,
    endpoint: dict[str, Any],
    *,
    finished: datetime,
    samples: list[tuple[float, str | None]],
    seed: int,
) -> tuple[str, str]:
    """A succeeded run whose measured requests are `samples`: (send time s, error class or
    None); successes take ~50 ms TTFT drawn with `seed`."""
    failed = sum(1 for _, e in samples if e is not None)
    job_id, run_id = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        workload_fingerprint=FP,
        started_at=finished - timedelta(minutes=1),
        finished_at=finished,
        requests_total=len(samples),
        requests_succeeded=len(samples) - failed,
        requests_failed=failed,
        error_rate=failed / len(samples),
    )
    rng = np.random.default_rng(seed)
    rows = []
    for seq, (t, error) in enumerate(samples):
        if error is None:
            ttft = 50.0 * float(rng.lognormal(0.0, 0.1))
            rows.append((uuid.UUID(run_id), seq, False, t, t, ttft, ttft, 10.0, ttft + 150.0,
                         32, 16, "usage", None, []))  # fmt: skip
        else:
            rows.append((uuid.UUID(run_id), seq, False, t, t, None, None, None, 1.0, 32, 0,
                         "events", error, []))  # fmt: skip
    await db.copy_records_to_table("request_samples", records=rows, columns=COLUMNS)
    return job_id, run_id


async def judge(sessions: async_sessionmaker[AsyncSession], job_id: str) -> dict[str, Any]:
    async with sessions() as session:
        [change] = await record_changes(session, uuid.UUID(job_id))
        await session.commit()
    return change.as_dict()


async def test_sixty_two_percent_failed_is_a_regression_and_the_outage_is_time(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    endpoint = await team.create_endpoint()
    healthy = [(k * 0.5, None) for k in range(100)]
    base = await stored(db, team, endpoint, finished=T0, samples=healthy, seed=1)
    # The server went down: a closed loop failed 62 requests in 0.062 s, then 38 succeeded
    # as fast as before, one every half second from 1 s.
    down = [(k * 0.001, "connect") for k in range(62)]
    down += [(1.0 + k * 0.5, None) for k in range(38)]
    now = await stored(db, team, endpoint, finished=T0 + timedelta(hours=1), samples=down, seed=2)
    first = await judge(sessions, base[0])
    assert first["verdict"] == "baseline"
    assert first["change"]["availability"]["unavailable_s"] == 0
    change = await judge(sessions, now[0])
    # The 38 that succeeded are as fast as the baseline's: latency alone says no change.
    assert change["change"]["metrics"]["ttft_ms"]["verdict"] == "no_change"
    assert change["verdict"] == "regression"
    errors = change["change"]["errors"]
    assert errors["verdict"] == "regression"
    assert (errors["baseline"], errors["current"]) == (0.0, 0.62)
    assert errors["p_value"] < 0.01
    # Unavailable from the first failed send (0 s) to the next success's send (1 s), of a
    # window from 0 s to the last end (19.5 s + ~200 ms).
    avail = change["change"]["availability"]
    assert avail["outages"] == 1
    assert avail["unavailable_s"] == pytest.approx(1.0)
    [outage] = avail["longest"]
    assert (outage["start_s"], outage["end_s"], outage["failed"]) == (0.0, 1.0, 62)
    assert outage["errors"] == {"connect": 62}
    assert any(
        "62% of this run's requests failed against 0%" in n for n in change["change"]["notes"]
    )
    assert any("unavailable for 1 s" in n for n in change["change"]["notes"])
    read = (await team.http.get(f"/v1/runs/{now[1]}")).json()
    assert read["change"]["verdict"] == "regression"
    assert read["change"]["availability"]["unavailable_s"] == pytest.approx(1.0)


def test_error_rates_within_noise_and_a_dead_level() -> None:
    # 2 of 300 against 1 of 300: under one point, no change.
    assert error_change(1, 300, 2, 300).verdict == "no_change"
    # 5 of 100 against 0 of 100: five points, but p = 0.06: not beyond noise.
    small = error_change(0, 100, 5, 100)
    assert small.verdict == "no_change" and small.p_value == pytest.approx(0.0594, abs=1e-3)
    assert error_change(20, 200, 0, 200).verdict == "improvement"
    assert error_change(0, 0, 1, 1).verdict == "insufficient_data"
    # Every request of a closed loop against a dead server: the whole window is an outage.
    dead = availability([k * 0.001 for k in range(100)], [1.0] * 100, ["connect"] * 100)
    assert dead.count == 1 and dead.share == pytest.approx(1.0)
    assert dead.window_s == pytest.approx(0.1)
    # Scattered single failures: short gaps, a small share.
    sends = [k * 1.0 for k in range(100)]
    scattered = availability(sends, [100.0] * 100, ["http_5xx" if k % 25 == 3 else None
                                                    for k in range(100)])  # fmt: skip
    assert scattered.count == 4 and scattered.unavailable_s == pytest.approx(4.0)
    assert availability([], [], []).share is None
