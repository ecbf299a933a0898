"""GET /v1/status over runs written with SQL: rolling figures against hand-computed values,
the window filter, sorting, CSV columns and tenancy."""

from __future__ import annotations

import csv
import io
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest

from tests.conftest import TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

FP = "aaaaaaaaaaaaaaaa"
HOUR = timedelta(hours=1)


async def run(
    db: asyncpg.Connection,
    team: TeamClient,
    endpoint: dict[str, Any],
    *,
    ago: timedelta,
    ttft: float,
    goodput: float = 1000.0,
    failed: int = 0,
    total: int = 100,
    adequate: bool = True,
    schedule: uuid.UUID | None = None,
    **columns: Any,
) -> tuple[str, str]:
    """A succeeded run `ago` before now: 1000 output tokens/s at 3.5 USD/hour, its job
    created when it finished, carrying the workload fingerprint and `schedule`."""
    finished = datetime.now(UTC) - ago
    job_id, run_id = await insert_finished_run(
        db,
        team.team_id,
        endpoint["id"],
        workload_fingerprint=FP,
        started_at=finished - timedelta(minutes=2),
        finished_at=finished,
        requests_total=total,
        requests_succeeded=total - failed,
        requests_failed=failed,
        ttft_p50_ms=ttft,
        ttft_p95_ms=ttft * 2,
        tpot_p50_ms=10.0,
        output_tokens_per_s=1000.0,
        goodput_output_tokens_per_s=goodput,
        usd_per_hour=3.5,
        adequacy=json.dumps({"ok": adequate, "reasons": []}),
        **columns,
    )
    await db.execute(
        "UPDATE jobs SET created_at = $2, finished_at = $2, workload_fingerprint = $3,"
        " schedule_id = $4 WHERE id = $1",
        uuid.UUID(job_id),
        finished,
        FP,
        schedule,
    )
    return job_id, run_id


async def board(team: TeamClient, **params: Any) -> dict[str, Any]:
    response = await team.http.get("/v1/status", params={"all": "true", **params})
    assert response.status_code == 200, response.text
    return dict(response.json())


async def test_rolling_figures_windows_sort_csv_and_tenancy(
    team: TeamClient, new_team: Any, db: asyncpg.Connection
) -> None:
    a = await team.create_endpoint(name="alpha", gpu_count=2)
    b = await team.create_endpoint(name="bravo")
    # Alpha is watched: a schedule sends its jobs (bravo's jobs were submitted by hand).
    watch = await db.fetchval(
        "INSERT INTO schedules (id, team_id, endpoint_id, template, interval_s, timezone,"
        " created_at) VALUES (gen_random_uuid(), $1, $2, '{}', 10800, 'UTC', now()) RETURNING id",
        uuid.UUID(team.team_id),
        uuid.UUID(a["id"]),
    )
    # Counted runs of alpha (adequate, not client-bound), TTFT medians 400, 200, 100, 300.
    _, newest = await run(db, team, a, schedule=watch, ago=1 * HOUR, ttft=400.0, goodput=500.0)
    _, regressed = await run(
        db, team, a, schedule=watch, ago=5 * HOUR, ttft=200.0, failed=4, change_verdict="regression"
    )
    await run(db, team, a, schedule=watch, ago=10 * HOUR, ttft=100.0, goodput=0.0)
    await run(db, team, a, schedule=watch, ago=31 * HOUR, ttft=300.0, goodput=250.0)
    # Left out of the figures (but not of request availability): client-bound, inadequate.
    await run(db, team, a, schedule=watch, ago=2 * HOUR, ttft=9999.0, client_bound=True)
    await run(
        db, team, a, schedule=watch, ago=3 * HOUR, ttft=5000.0, adequate=False, total=50, failed=25
    )
    # Outside 72 h, inside 30 d.
    await run(db, team, a, schedule=watch, ago=80 * HOUR, ttft=1000.0)
    # A failed scheduled job of alpha's workload in the window, and a cancelled one.
    for status in ("failed", "cancelled"):
        await db.execute(
            "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
            " progress_total, created_at, finished_at, workload_fingerprint, schedule_id)"
            " VALUES (gen_random_uuid(), $1, $2, $3, '{}', '{}', 0, 1,"
            " now() - interval '20 hours', now() - interval '20 hours', $4, $5)",
            uuid.UUID(team.team_id),
            uuid.UUID(a["id"]),
            status,
            FP,
            watch,
        )
    await run(db, team, b, ago=4 * HOUR, ttft=50.0)
    body = await board(team)
    assert body["window"] == "72h" and body["total"] == 2
    alpha = next(r for r in body["rows"] if r["endpoint"]["name"] == "alpha")
    assert alpha["workload_fingerprint"] == FP and alpha["level"] == 1.0
    assert (alpha["runs"], alpha["runs_counted"]) == (6, 4)
    ttft = alpha["figures"]["ttft_p50_ms"]
    # Sorted 100, 200, 300, 400: median 250; p95 at position 2.85: 300 + 0.85 x 100.
    assert ttft["latest"] == 400.0
    assert ttft["median"] == pytest.approx(250.0)
    assert ttft["p95"] == pytest.approx(385.0)
    # 24 slices of 3 h: the runs 1, 5, 10 and 31 h ago fall in slices 23, 22, 20 and 13.
    expected = [None] * 24
    expected[23], expected[22], expected[20], expected[13] = 400.0, 200.0, 100.0, 300.0
    assert ttft["trend"] == expected
    # 1000 tokens/s on 2 GPUs.
    assert alpha["figures"]["output_tokens_per_s_per_gpu"]["median"] == pytest.approx(500.0)
    # Cost at SLO = 3.5 USD/h / (goodput tokens/s x 3600) x 1e6: 1.9444 (500/s), 0.9722
    # (1000/s), 3.8889 (250/s) and infinite (none met it): the median is (1.9444 + 3.8889) / 2
    # and the p95 is infinite, shown as null.
    cost = alpha["figures"]["cost_per_million_at_slo_usd"]
    assert cost["latest"] == pytest.approx(3.5e6 / (500 * 3600))
    assert cost["median"] == pytest.approx((3.5e6 / (500 * 3600) + 3.5e6 / (250 * 3600)) / 2)
    assert cost["p95"] is None
    # Requests: 4 x 100 counted + 100 client-bound + 50 inadequate; 4 + 25 failed.
    availability = alpha["availability"]
    assert (availability["requests_total"], availability["requests_failed"]) == (550, 29)
    assert availability["requests_share"] == pytest.approx(1 - 29 / 550)
    # Scheduled jobs created in 72 h: 6 succeeded, 1 failed (the cancelled one says nothing).
    assert (availability["jobs_succeeded"], availability["jobs_finished"]) == (6, 7)
    assert availability["jobs_share"] == pytest.approx(6 / 7)
    assert alpha["scheduled"] is True
    bravo = next(r for r in body["rows"] if r["endpoint"]["name"] == "bravo")
    assert bravo["scheduled"] is False and bravo["availability"]["jobs_share"] is None
    assert alpha["last_verdict"] == {"verdict": "regression", "run_id": regressed}
    assert alpha["latest"]["run_id"] == newest
    assert alpha["latest"]["report_url"] == f"/v1/jobs/{alpha['latest']['job_id']}/report"

    # Windows: 24 h keeps 100, 200, 400 (median 200, p95 200 + 0.9 x 200); 30 d adds 1000.
    day = next(
        r for r in (await board(team, window="24h"))["rows"] if r["endpoint"]["id"] == a["id"]
    )
    assert day["figures"]["ttft_p50_ms"]["median"] == pytest.approx(200.0)
    assert day["figures"]["ttft_p50_ms"]["p95"] == pytest.approx(380.0)
    month = next(
        r for r in (await board(team, window="30d"))["rows"] if r["endpoint"]["id"] == a["id"]
    )
    assert month["figures"]["ttft_p50_ms"]["median"] == pytest.approx(300.0)
    assert month["runs_counted"] == 5

    # Sorting by the rolling median, both ways.
    names = [r["endpoint"]["name"] for r in (await board(team, sort="-ttft_p50_ms"))["rows"]]
    assert names == ["alpha", "bravo"]
    names = [r["endpoint"]["name"] for r in (await board(team, sort="ttft_p50_ms"))["rows"]]
    assert names == ["bravo", "alpha"]

    # Without ?all=true only endpoints with a schedule show.
    response = await team.http.get("/v1/status")
    assert response.status_code == 200
    assert [r["endpoint"]["name"] for r in response.json()["rows"]] == ["alpha"]

    # CSV: a fixed header, one line per row, the same figures.
    response = await team.http.get(
        "/v1/status", params={"all": "true", "sort": "endpoint"}, headers={"Accept": "text/csv"}
    )
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    lines = list(csv.reader(io.StringIO(response.text)))
    header = lines[0]
    assert header[:3] == ["endpoint_id", "endpoint", "model"]
    for column in (
        "workload_fingerprint", "level", "runs", "runs_counted", "latest_job_id",
        "last_verdict", "jobs_share", "requests_share", "ttft_p50_ms_median",
        "ttft_p50_ms_p95", "cost_per_million_at_slo_usd_median",
    ):  # fmt: skip
        assert column in header
    assert len(lines) == 3 and [line[1] for line in lines[1:]] == ["alpha", "bravo"]
    first = dict(zip(header, lines[1], strict=True))
    assert float(first["ttft_p50_ms_median"]) == pytest.approx(250.0)
    assert first["last_verdict"] == "regression" and first["runs"] == "6"

    # Another team sees none of it.
    other: TeamClient = await new_team()
    assert (await board(other))["rows"] == []
    response = await other.http.get("/v1/status/page", params={"all": "true"})
    assert response.status_code == 200 and "alpha" not in response.text


@pytest.mark.parametrize(
    ("params", "field"), [({"window": "5d"}, "window"), ({"sort": "colour"}, "sort")]
)
async def test_bad_parameters_are_422(team: TeamClient, params: dict[str, Any], field: str) -> None:
    response = await team.http.get("/v1/status", params=params)
    assert response.status_code == 422, response.text
    assert response.json()["errors"][0]["field"] == field


async def schedule_for(
    db: asyncpg.Connection, team: TeamClient, endpoint: dict[str, Any], **columns: Any
) -> uuid.UUID:
    """A schedule of `endpoint` written straight to the database (every 3 h)."""
    values = {"enabled": True, "next_slot_at": None, **columns}
    schedule: uuid.UUID = await db.fetchval(
        "INSERT INTO schedules (id, team_id, endpoint_id, template, interval_s, timezone,"
        " created_at, enabled, next_slot_at) VALUES (gen_random_uuid(), $1, $2, '{}', 10800,"
        " 'UTC', now(), $3, $4) RETURNING id",
        uuid.UUID(team.team_id),
        uuid.UUID(endpoint["id"]),
        values["enabled"],
        values["next_slot_at"],
    )
    return schedule


async def test_watched_endpoint_without_runs_has_a_row(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    fresh = await team.create_endpoint(name="fresh")
    failing = await team.create_endpoint(name="failing")
    paused = await team.create_endpoint(name="paused")
    measured = await team.create_endpoint(name="measured")
    next_slot = datetime.now(UTC).replace(microsecond=0) + 2 * HOUR
    await schedule_for(db, team, fresh, next_slot_at=next_slot)
    watch = await schedule_for(db, team, failing, next_slot_at=next_slot)
    await schedule_for(db, team, paused, enabled=False)
    await schedule_for(db, team, measured, next_slot_at=next_slot)
    # Failing: its only succeeded run is 4 days old, and two scheduled jobs failed since.
    await run(db, team, failing, schedule=watch, ago=96 * HOUR, ttft=100.0)
    for hours in (5, 2):
        await db.execute(
            "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
            " progress_total, created_at, finished_at, workload_fingerprint, schedule_id)"
            " VALUES (gen_random_uuid(), $1, $2, 'failed', '{}', '{}', 0, 1,"
            " now() - make_interval(hours => $3), now(), $4, $5)",
            uuid.UUID(team.team_id),
            uuid.UUID(failing["id"]),
            hours,
            FP,
            watch,
        )
    await run(db, team, measured, ago=HOUR, ttft=80.0)

    body = await board(team, all="false", sort="endpoint")
    rows = {r["endpoint"]["name"]: r for r in body["rows"]}
    assert sorted(rows) == ["failing", "fresh", "measured", "paused"]
    for name in ("fresh", "failing", "paused"):
        row = rows[name]
        assert (row["mode"], row["level"], row["runs"], row["latest"]) == (None, None, 0, None)
        assert all(f["median"] is None and f["latest"] is None for f in row["figures"].values())
        assert row["scheduled"] is True
    assert rows["fresh"]["note"] == "no run yet"
    assert datetime.fromisoformat(rows["fresh"]["next_run_at"]) == next_slot
    assert rows["failing"]["note"] == "no succeeded run in this window"
    availability = rows["failing"]["availability"]
    assert (availability["jobs_succeeded"], availability["jobs_finished"]) == (0, 2)
    assert rows["paused"]["note"] == "no run yet; its schedules are paused"
    assert rows["paused"]["next_run_at"] is None
    assert rows["measured"]["note"] is None and rows["measured"]["runs"] == 1
    # Over 7 days the failing endpoint's old run counts: a row with figures, no note.
    week = {r["endpoint"]["name"]: r for r in (await board(team, window="7d"))["rows"]}
    assert week["failing"]["note"] is None
    assert week["failing"]["figures"]["ttft_p50_ms"]["median"] == 100.0
    assert (week["failing"]["availability"]["jobs_finished"]) == 3
    # CSV carries the note and the next run.
    response = await team.http.get(
        "/v1/status", params={"sort": "endpoint"}, headers={"Accept": "text/csv"}
    )
    lines = list(csv.DictReader(io.StringIO(response.text)))
    assert [line["note"] for line in lines][:2] == ["no succeeded run in this window", "no run yet"]
    # The page says why instead of drawing empty charts.
    page = await team.http.get("/v1/status/page")
    assert page.status_code == 200 and "no run yet" in page.text


async def test_figures_follow_updates_and_deletes(team: TeamClient, db: asyncpg.Connection) -> None:
    """The summaries follow every write: a run finishing as the worker stores it (an
    UPDATE of a running run), a verdict decided later, a job deleted with its runs."""
    e = await team.create_endpoint(name="echo")
    await schedule_for(db, team, e)
    job_a, _ = await run(db, team, e, ago=2 * HOUR, ttft=100.0)
    job_b, run_b = await run(db, team, e, ago=HOUR, ttft=300.0)
    # As the worker stores a level: the run is inserted running, then updated.
    await db.execute(
        "UPDATE runs SET status = 'running', finished_at = NULL WHERE id = $1", uuid.UUID(run_b)
    )
    figures = (await board(team))["rows"][0]
    assert figures["runs"] == 1 and figures["figures"]["ttft_p50_ms"]["median"] == 100.0
    await db.execute(
        "UPDATE runs SET status = 'succeeded', finished_at = now() - interval '1 hour'"
        " WHERE id = $1",
        uuid.UUID(run_b),
    )
    row = (await board(team))["rows"][0]
    assert row["runs"] == 2 and row["figures"]["ttft_p50_ms"]["median"] == 200.0
    assert row["latest"]["run_id"] == run_b and row["last_verdict"] is None
    await db.execute(
        "UPDATE runs SET change_verdict = 'regression' WHERE id = $1", uuid.UUID(run_b)
    )
    row = (await board(team))["rows"][0]
    assert row["last_verdict"] == {"verdict": "regression", "run_id": run_b}
    await db.execute("DELETE FROM jobs WHERE id = $1", uuid.UUID(job_b))
    row = (await board(team))["rows"][0]
    assert row["runs"] == 1 and row["figures"]["ttft_p50_ms"]["median"] == 100.0
    assert row["last_verdict"] is None
    await db.execute("DELETE FROM jobs WHERE id = $1", uuid.UUID(job_a))
    row = (await board(team))["rows"][0]
    assert row["note"] == "no run yet" and row["runs"] == 0
    # A team deleted with its history takes its summaries along (no error on the way).
    await run(db, team, e, ago=HOUR, ttft=100.0, schedule=await schedule_for(db, team, e))
    team_id = uuid.UUID(team.team_id)
    assert await db.fetchval("SELECT count(*) FROM status_series WHERE team_id = $1", team_id)
    await db.execute("DELETE FROM schedules WHERE team_id = $1", team_id)
    await db.execute("DELETE FROM teams WHERE id = $1", team_id)
    for table in ("status_series", "status_job_series"):
        assert await db.fetchval(f"SELECT count(*) FROM {table} WHERE team_id = $1", team_id) == 0


_REFERENCE_SQL = """
WITH r AS (
  SELECT r.level, r.finished_at, r.ttft_p50_ms,
         least(greatest(floor(extract(epoch FROM r.finished_at - $3) / $5)::int, 0), 23) AS b,
         coalesce((r.adequacy ->> 'ok')::boolean, false) AND r.client_bound IS NOT TRUE AS counted,
         CASE WHEN r.goodput_output_tokens_per_s > 0
              THEN r.cost_per_million_output_tokens_usd * r.output_tokens_per_s
                   / r.goodput_output_tokens_per_s
              ELSE 'Infinity'::float8 END AS cost
  FROM runs r WHERE r.team_id = $1 AND r.endpoint_id = $2 AND r.status = 'succeeded'
    AND r.finished_at >= $3 AND r.finished_at <= $4
)
SELECT level, NULL::int AS b, count(*),
       percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY ttft_p50_ms)
         FILTER (WHERE counted),
       percentile_cont(ARRAY[0.5, 0.95]) WITHIN GROUP (ORDER BY cost) FILTER (WHERE counted)
FROM r GROUP BY level
UNION ALL
SELECT level, b, count(*),
       ARRAY[percentile_cont(0.5) WITHIN GROUP (ORDER BY ttft_p50_ms) FILTER (WHERE counted)],
       ARRAY[percentile_cont(0.5) WITHIN GROUP (ORDER BY cost) FILTER (WHERE counted)]
FROM r GROUP BY level, b
"""


def _shown(value: float | None) -> float | None:
    return (
        None if value is None or value != value or value in (float("inf"), -float("inf")) else value
    )


async def test_figures_equal_postgres_percentiles_over_the_runs(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    """Random history (several runs per trend slice, ties, runs that met no SLO, runs left
    out of the figures): every window's medians, p95s and slice medians equal PostgreSQL's
    percentile_cont over the runs themselves."""
    import random

    rng = random.Random(15)
    e = await team.create_endpoint(name="random")
    await schedule_for(db, team, e)
    for level in (1.0, 4.0):
        for _ in range(45):
            ago = timedelta(hours=rng.choice([rng.uniform(0, 24), rng.uniform(0, 720)]))
            await run(
                db,
                team,
                e,
                ago=ago,
                ttft=float(rng.choice([100, 150, 150, rng.uniform(50, 500)])),
                goodput=rng.choice([0.0, 400.0, rng.uniform(100, 1000)]),
                adequate=rng.random() > 0.1,
                client_bound=rng.random() < 0.05,
                level=level,
            )
    for window in ("24h", "72h", "7d", "30d"):
        body = await board(team, window=window)
        since = datetime.fromisoformat(body["since"])
        until = datetime.fromisoformat(body["until"])
        reference = await db.fetch(
            _REFERENCE_SQL,
            uuid.UUID(team.team_id),
            uuid.UUID(e["id"]),
            since,
            until,
            body["bucket_seconds"],
        )
        assert [r["level"] for r in body["rows"]] == [1.0, 4.0], window
        # Some slices hold several runs: their medians are interpolated, not picked.
        assert max(r["count"] for r in reference if r["b"] is not None) > 1, window
        for row in body["rows"]:
            whole = next(r for r in reference if r["level"] == row["level"] and r["b"] is None)
            assert row["runs"] == whole["count"], window
            for name, column in (("ttft_p50_ms", 3), ("cost_per_million_at_slo_usd", 4)):
                figure = row["figures"][name]
                expected = whole[column] or [None, None]
                assert figure["median"] == pytest.approx(_shown(expected[0])), (window, name)
                assert figure["p95"] == pytest.approx(_shown(expected[1])), (window, name)
                trend: list[float | None] = [None] * 24
                for r in reference:
                    if r["level"] == row["level"] and r["b"] is not None and r[column]:
                        trend[r["b"]] = _shown(r[column][0])
                assert figure["trend"] == pytest.approx(trend), (window, name)
