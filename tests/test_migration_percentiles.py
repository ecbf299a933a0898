"""Migrations of derived run columns keep the figures of runs stored before them: c7e1f4a9d016
(every percentile column written from stats) and d8f2a5b0e017 (the total-token cost of a
hosted embeddings run, the one figure it changes, from null to what the run summary says)."""

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


async def _seed(url: str, runs_columns: list[dict[str, object]]) -> list[uuid.UUID]:
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
        for index, columns in enumerate(runs_columns):
            names = ", ".join(columns)
            params = ", ".join(f"${i}" for i in range(7, 7 + len(columns)))
            runs.append(
                await conn.fetchval(
                    "INSERT INTO runs (id, team_id, job_id, endpoint_id, deployment_id,"
                    f" level_index, level, mode, status, requests_total, requests_succeeded,"
                    f" requests_failed, {names}) VALUES ($1, $2, $3, $4, $5, $6, 1,"
                    f" 'concurrency', 'succeeded', 0, 0, 0, {params}) RETURNING id",
                    uuid.uuid4(),
                    team,
                    job,
                    endpoint,
                    deployment,
                    index,
                    *columns.values(),
                )
            )
        return runs
    finally:
        await conn.close()


async def _figures(
    url: str, runs: list[uuid.UUID], columns: tuple[str, ...] = COLUMNS
) -> list[tuple[float | None, ...]]:
    conn = await asyncpg.connect(url)
    try:
        rows = [
            await conn.fetchrow(f"SELECT {', '.join(columns)} FROM runs WHERE id = $1", run)
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
        runs = asyncio.run(_seed(plain, [{"stats": json.dumps(stats)} for stats in STATS]))
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


#: Per hour (USD 3.50, 1,000 tokens/s), hosted chat (2,000 in and 500 out a second at USD 3
#: and 15 per million) and hosted embeddings (1,000 prompt tokens/s at USD 0.10 per million,
#: no output tokens).
COST_RUNS: list[dict[str, object]] = [
    {"usd_per_hour": 3.5, "total_tokens_per_s": 1000.0, "output_tokens_per_s": 800.0,
     "input_tokens_per_s": 200.0},
    {"usd_per_million_input_tokens": 3.0, "usd_per_million_output_tokens": 15.0,
     "input_tokens_per_s": 2000.0, "output_tokens_per_s": 500.0, "total_tokens_per_s": 2500.0},
    {"usd_per_million_input_tokens": 0.1, "input_tokens_per_s": 1000.0,
     "total_tokens_per_s": 1000.0},
]  # fmt: skip


def test_the_total_cost_migration_changes_only_hosted_embeddings() -> None:
    """Before: 3.5 / (1,000 x 3,600) x 1e6 = 0.9722 USD; hosted chat (6,000 + 7,500) / 1e6 x
    3,600 = 48.6 USD/h over 2,500 tokens/s = 5.4 USD; embeddings null. After: the same two,
    and the embeddings run's 0.36 USD/h over 1,000 tokens/s = 0.10 USD, its input price."""
    name = f"infercost_test_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    url, plain = _pg_url(name, "postgresql+asyncpg"), _pg_url(name)
    total = ("cost_per_million_total_tokens_usd",)
    try:
        up = alembic(url, "upgrade", REVISION)
        assert up.returncode == 0, up.stdout + up.stderr
        runs = asyncio.run(_seed(plain, COST_RUNS))
        before = [row[0] for row in asyncio.run(_figures(plain, runs, total))]
        assert before[0] == pytest.approx(3.5 / 3.6)
        assert before[1] == pytest.approx(5.4)
        assert before[2] is None
        up = alembic(url, "upgrade", "d8f2a5b0e017")
        assert up.returncode == 0, up.stdout + up.stderr
        after = [row[0] for row in asyncio.run(_figures(plain, runs, total))]
        assert after[:2] == before[:2]
        assert after[2] == pytest.approx(0.1)
        down = alembic(url, "downgrade", REVISION)
        assert down.returncode == 0, down.stdout + down.stderr
        assert [row[0] for row in asyncio.run(_figures(plain, runs, total))] == before
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


#: A run of two models as a worker stored its `models` block before run_models existed,
#: and a run of one model (no block).
MODELS_BLOCK = [
    {"model": "base", "requests": {"total": 20, "succeeded": 19, "failed": 1},
     "ttft_ms": {"p50": 41.5, "p95": 60.25}, "tpot_ms": {"p50": 8.0, "p95": 9.5},
     "e2e_ms": {"p50": 200.0, "p95": 260.0}, "output_tokens_per_s": 300.0,
     "input_tokens_per_s": 1200.0, "requests_per_s": 4.75, "error_rate": 0.05,
     "token_share": 0.6},
    {"model": "lora-a", "requests": {"total": 10, "succeeded": 10, "failed": 0},
     "ttft_ms": {"p50": 20.0, "p95": None}, "tpot_ms": {"p50": 4.0, "p95": 4.5},
     "e2e_ms": {"p50": 90.0, "p95": 99.0}, "output_tokens_per_s": 200.0,
     "input_tokens_per_s": 800.0, "requests_per_s": 2.5, "error_rate": 0.0,
     "token_share": 0.4},
]  # fmt: skip


def test_run_models_are_filled_in_from_the_blocks_of_runs_stored_before() -> None:
    name = f"infercost_test_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    url, plain = _pg_url(name, "postgresql+asyncpg"), _pg_url(name)

    async def rows() -> list[tuple[object, ...]]:
        conn = await asyncpg.connect(plain)
        try:
            found = await conn.fetch(
                "SELECT run_id, model, requests_total, requests_succeeded, ttft_p50_ms,"
                " ttft_p95_ms, tpot_p95_ms, e2e_p50_ms, output_tokens_per_s,"
                " input_tokens_per_s, requests_per_s, error_rate, token_share"
                " FROM run_models ORDER BY model"
            )
            return [tuple(r) for r in found]
        finally:
            await conn.close()

    try:
        up = alembic(url, "upgrade", "f1c2a3b4d021")
        assert up.returncode == 0, up.stdout + up.stderr
        mixed, single = asyncio.run(
            _seed(plain, [{"models": json.dumps(MODELS_BLOCK)}, {"stats": "{}"}])
        )
        up = alembic(url, "upgrade", "a7c9e1f3b022")
        assert up.returncode == 0, up.stdout + up.stderr
        # Each model's figures as its block holds them; a statistic the block lacks is null,
        # and the run of one model has no rows.
        assert asyncio.run(rows()) == [
            (mixed, "base", 20, 19, 41.5, 60.25, 9.5, 200.0, 300.0, 1200.0, 4.75, 0.05, 0.6),
            (mixed, "lora-a", 10, 10, 20.0, None, 4.5, 90.0, 200.0, 800.0, 2.5, 0.0, 0.4),
        ]
        assert single not in {r[0] for r in asyncio.run(rows())}
        down = alembic(url, "downgrade", "f1c2a3b4d021")
        assert down.returncode == 0, down.stdout + down.stderr
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
