"""Migration c7e1f4a9d016 (every percentile column written from stats): the figures of runs
stored before it stay exactly what they were, and going down regenerates the same values."""

from __future__ import annotations

import asyncio
import json
import uuid

import asyncpg
import pytest

from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL
from tests.conftest import _pg_url, _run_sql
from tests.test_migrations import alembic

pytestmark = pytest.mark.integration

BEFORE = "b6d9e4a2c015"
REVISION = "c7e1f4a9d016"
COLUMNS = ("itl_p50_ms", "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms", "per_user_tokens_per_s_p50")
#: A run's stats as a worker stores them (floats that do not print short), and one stored
#: before some distributions were kept (null where they are missing).
STATS = (
    {
        "itl_ms": {"p50": 10.123456789012345, "p95": 13.7},
        "e2e_ms": {"p50": 401.1, "p95": 1 / 3},
        "per_user_tokens_per_s": {"p50": 98.76543210987654},
    },
    {"ttft_ms": {"p50": 41.0}},
)


async def _seed(url: str) -> list[uuid.UUID]:
    conn = await asyncpg.connect(url)
    try:
        team = await conn.fetchval("INSERT INTO teams (id, name) VALUES ($1, 'm') RETURNING id",
                                   uuid.uuid4())  # fmt: skip
        endpoint = await conn.fetchval(
            "INSERT INTO endpoints (id, team_id, name, base_url, api, model, gpu_count)"
            " VALUES ($1, $2, 'e', 'http://127.0.0.1:9', 'openai-chat', 'm', 1) RETURNING id",
            uuid.uuid4(),
            team,
        )
        job = await conn.fetchval(
            "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
            " progress_total) VALUES ($1, $2, $3, 'succeeded', '{}', '{}', 0, 0) RETURNING id",
            uuid.uuid4(),
            team,
            endpoint,
        )
        deployment = await conn.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, endpoint)
        runs = []
        for index, stats in enumerate(STATS):
            runs.append(
                await conn.fetchval(
                    "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id,"
                    " level_index, level, mode, status, requests_total, requests_succeeded,"
                    " requests_failed, stats) VALUES ($1, $2, $3, $4, $5, $6, 1, 'concurrency',"
                    " 'succeeded', 0, 0, 0, $7) RETURNING id",
                    uuid.uuid4(),
                    team,
                    job,
                    endpoint,
                    deployment,
                    index,
                    json.dumps(stats),
                )
            )
        return runs
    finally:
        await conn.close()


async def _figures(url: str, runs: list[uuid.UUID]) -> list[tuple[float | None, ...]]:
    conn = await asyncpg.connect(url)
    try:
        rows = [
            await conn.fetchrow(f"SELECT {', '.join(COLUMNS)} FROM runs WHERE id = $1", run)
            for run in runs
        ]
        return [tuple(row) for row in rows]
    finally:
        await conn.close()


def test_stored_percentiles_survive_the_migration_unchanged() -> None:
    name = f"infercost_test_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    url, plain = _pg_url(name, "postgresql+asyncpg"), _pg_url(name)
    try:
        up = alembic(url, "upgrade", BEFORE)
        assert up.returncode == 0, up.stdout + up.stderr
        runs = asyncio.run(_seed(plain))
        before = asyncio.run(_figures(plain, runs))
        # What the database generated from the stats: each statistic exactly, null if absent.
        assert before == [
            (10.123456789012345, 13.7, 401.1, 1 / 3, 98.76543210987654),
            (None,) * 5,
        ]
        up = alembic(url, "upgrade", REVISION)
        assert up.returncode == 0, up.stdout + up.stderr
        assert asyncio.run(_figures(plain, runs)) == before
        down = alembic(url, "downgrade", BEFORE)
        assert down.returncode == 0, down.stdout + down.stderr
        assert asyncio.run(_figures(plain, runs)) == before
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
