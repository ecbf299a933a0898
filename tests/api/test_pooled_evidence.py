"""Capacity at the SLO from all the evidence, over runs written straight to the database with
figures chosen by hand: an older adequate job is not ignored for a newer, thinner one (and is
flagged stale, not dropped); a newer failure overrules an older pass at a higher rate; a
throughput that falls with load gives the best passing level and says so; a loose and a 20x
tighter SLO give different answers."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import pytest

from tests.conftest import ADEQUATE, StoredLevel, TeamClient, insert_finished_job

pytestmark = pytest.mark.integration

MODEL = "llama-pooled"
SLO = {"ttft_ms": {"p95": 100}}
LENGTHS = {"input_tokens": 100, "output_tokens": 100}


async def job_aged(
    db: asyncpg.Connection, team: TeamClient, endpoint: dict[str, Any], levels: list[StoredLevel],
    days: float,
) -> list[str]:  # fmt: skip
    """A finished job of `levels` whose runs finished `days` ago; its run ids."""
    job_id, run_ids = await insert_finished_job(db, team.team_id, endpoint["id"], levels, slo=SLO)
    for table, column in (("jobs", "id"), ("runs", "job_id")):
        await db.execute(
            f"UPDATE {table} SET finished_at = now() - make_interval(secs => $2)"
            f" WHERE {column} = $1",
            uuid.UUID(job_id),
            days * 86_400,
        )
    return run_ids


async def estimate(team: TeamClient, rps: float, slo: dict[str, Any] = SLO) -> dict[str, Any]:
    payload = {
        "model": MODEL,
        "traffic": {"requests_per_s": rps, "peak_to_mean": 1, **LENGTHS},
        "slo": slo,
        "include_projections": False,
    }
    response = await team.http.post("/v1/estimates", json=payload)
    assert response.status_code == 200, response.text
    return dict(response.json())


def roles(candidate: dict[str, Any]) -> dict[str, str]:
    return {p["run_id"]: p["role"] for p in candidate["load_points"]}


async def test_an_older_adequate_job_still_counts(team: TeamClient, db: asyncpg.Connection) -> None:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=2.0)
    # 100 days ago: passed at 6.55 requests/s (TTFT p95 80 ms), failed at 7.0 (400 ms).
    old = await job_aged(db, team, endpoint, [(1, 2.0, 40.0, ADEQUATE, False),
                                             (4, 6.55, 80.0, ADEQUATE, False),
                                             (8, 7.0, 400.0, ADEQUATE, False)], days=100)  # fmt: skip
    # Yesterday: one level, passing at 3.32 requests/s.
    new = await job_aged(db, team, endpoint, [(1, 3.32, 50.0, ADEQUATE, False)], days=1)
    [c] = (await estimate(team, 10.0))["candidates"]
    # The best passing point is the old 6.55, towards the failing 7.0 by the margins:
    # 6.55 + (1 - 0.8) / (4.0 - 0.8) x (7.0 - 6.55) = 6.578125 requests/s.
    assert c["capacity_rps"] == pytest.approx(6.578125)
    assert [e["run_id"] for e in c["evidence"]] == [old[1], old[2]]
    assert (c["capacity_rps_low"], c["capacity_rps_high"]) == (6.55, 7.0)
    assert roles(c) == {old[0]: "passed", old[1]: "basis", old[2]: "basis", new[0]: "passed"}
    stale = {p["run_id"]: p["stale"] for p in c["load_points"]}
    assert stale == {old[0]: True, old[1]: True, old[2]: True, new[0]: False}
    assert any("stale" in w for w in c["warnings"])
    # 10 requests/s at 80% of 6.578: 2 replicas (the newest job alone said at least 3.32: 4).
    assert c["replicas"] == 2
    assert c["monotone"] is True


async def test_a_newer_failure_overrules_an_older_pass(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=2.0)
    old = await job_aged(db, team, endpoint, [(1, 2.0, 40.0, ADEQUATE, False),
                                             (4, 6.55, 80.0, ADEQUATE, False),
                                             (8, 7.0, 400.0, ADEQUATE, False)], days=30)  # fmt: skip
    # Today it fails at 5.0 requests/s (TTFT 300 ms): the old pass at 6.55 no longer stands.
    new = await job_aged(db, team, endpoint, [(1, 2.5, 50.0, ADEQUATE, False),
                                             (4, 5.0, 300.0, ADEQUATE, False)], days=0.5)  # fmt: skip
    [c] = (await estimate(team, 2.0))["candidates"]
    # Best standing pass: 2.5 (new); next failure above: 5.0 (margin 3.0):
    # 2.5 + (1 - 0.5) / (3.0 - 0.5) x (5.0 - 2.5) = 3.0 requests/s.
    assert c["capacity_rps"] == pytest.approx(3.0)
    assert roles(c)[old[1]] == "overruled"
    assert roles(c)[old[0]] == "passed"
    assert [e["run_id"] for e in c["evidence"]] == [new[0], new[1]]
    assert any("overruled" in w for w in c["warnings"])


async def test_throughput_falling_with_load_gives_the_best_passing_level(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=2.0)
    # An overloaded engine: 8 users served fewer requests/s (5.0) than 4 users (6.55).
    job_id, run_ids = await insert_finished_job(
        db, team.team_id, endpoint["id"],
        [(1, 2.0, 40.0, ADEQUATE, False), (4, 6.55, 80.0, ADEQUATE, False),
         (8, 5.0, 150.0, ADEQUATE, False)],
        slo=SLO,
    )  # fmt: skip
    job = (await team.http.get(f"/v1/jobs/{job_id}")).json()
    capacity = job["capacity_at_slo"]
    # Interpolating 6.55 towards 5.0 would give 6.11, below the passing level's own rate.
    assert capacity["requests_per_s"] == pytest.approx(6.55)
    assert capacity["interpolated"] is False
    assert capacity["monotone"] is False and capacity["falls_with_load"] == [run_ids[2]]
    assert capacity["lower_bound"] is False
    [c] = (await estimate(team, 5.0))["candidates"]
    assert c["capacity_rps"] == pytest.approx(6.55)
    assert c["monotone"] is False
    falls = [p["run_id"] for p in c["load_points"] if p["falls_with_load"]]
    assert falls == [run_ids[2]]
    assert any("not monotone" in w and "6.55" in w for w in c["warnings"])


async def test_a_tighter_slo_gives_a_different_answer(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=2.0)
    await insert_finished_job(
        db, team.team_id, endpoint["id"],
        [(1, 2.0, 40.0, ADEQUATE, False), (4, 8.0, 60.0, ADEQUATE, False),
         (8, 14.0, 300.0, ADEQUATE, False), (16, 16.0, 1400.0, ADEQUATE, False)],
        slo=SLO,
    )  # fmt: skip
    loose = (await estimate(team, 20.0, {"ttft_ms": {"p95": 2000}}))["candidates"][0]
    tight = (await estimate(team, 20.0, {"ttft_ms": {"p95": 100}}))["candidates"][0]
    # Loose: every level passes, capacity at least 16 requests/s: ceil(20 / 12.8) = 2.
    assert loose["capacity_rps"] == pytest.approx(16.0) and loose["replicas"] == 2
    assert loose["capacity_rps_high"] is None
    # 20x tighter: 8 + (1 - 0.6) / (3.0 - 0.6) x (14 - 8) = 9 requests/s: ceil(20 / 7.2) = 3.
    assert tight["capacity_rps"] == pytest.approx(9.0) and tight["replicas"] == 3


#: A level whose load generator paused on 3% of its events (client_paused) and nothing else.
PAUSED: dict[str, Any] = {
    "ok": False,
    "reasons": [{"code": "client_paused", "detail": "3.0% of the level's events ..."}],
}


async def test_a_paused_level_that_passed_still_counts_and_one_that_failed_does_not(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    """Pauses only make stamps late: a paused level that met the SLO met it (a load point,
    marked client-bound), one that failed may have failed for the pauses (left out)."""
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=2.0)
    job_id, run_ids = await insert_finished_job(
        db, team.team_id, endpoint["id"],
        [(1, 2.0, 40.0, ADEQUATE, False), (4, 6.0, 80.0, PAUSED, True),
         (8, 9.0, 300.0, PAUSED, True)],
        slo=SLO,
    )  # fmt: skip
    capacity = (await team.http.get(f"/v1/jobs/{job_id}")).json()["capacity_at_slo"]
    # The paused pass at 6.0 stands; the paused failure at 9.0 is left out, so nothing above
    # 6.0 bounds it: at least 6.0 requests/s.
    assert capacity["requests_per_s"] == pytest.approx(6.0)
    assert capacity["lower_bound"] is True
    assert [s["run_id"] for s in capacity["skipped"]] == [run_ids[2]]
    assert [r["code"] for r in capacity["skipped"][0]["reasons"]] == [
        "client_paused",
        "client_bound",
    ]
    [c] = (await estimate(team, 4.0))["candidates"]
    assert c["capacity_rps"] == pytest.approx(6.0)
    assert {p["run_id"] for p in c["load_points"]} == {run_ids[0], run_ids[1]}
    # 4 requests/s at 80% of 6.0 (4.8): one replica.
    assert c["replicas"] == 1
