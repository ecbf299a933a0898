"""The models and the migrations never drift; the migrations go down and up again."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from alembic.script import ScriptDirectory

from infercost.db.migrate import alembic_config
from tests.conftest import ROOT, _pg_url, _run_sql

pytestmark = pytest.mark.integration


def alembic(database_url: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url}
    return subprocess.run(
        [sys.executable, "-m", "alembic", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_alembic_check_finds_no_drift(database_url: str) -> None:
    result = alembic(database_url, "check")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "No new upgrade operations detected" in result.stdout + result.stderr


@pytest.fixture
def scratch_url() -> Iterator[str]:
    """An empty database of its own, dropped afterwards."""
    name = f"infercost_mig_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url(name, "postgresql+asyncpg")
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def _sql(url: str, sql: str) -> list[Any]:
    async def go() -> list[Any]:
        conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
        try:
            return list(await conn.fetch(sql))
        finally:
            await conn.close()

    return asyncio.run(go())


def test_the_last_migration_goes_down_and_up_again(scratch_url: str) -> None:
    """docs/operations.md, Upgrades: `alembic downgrade -1` undoes the newest migration (to the
    revision before it) keeping what the older schema holds, and upgrading again gives the
    schema the models describe."""
    script = ScriptDirectory.from_config(alembic_config(scratch_url))
    head = script.get_current_head()
    assert head is not None
    before = script.get_revision(head).down_revision
    up = alembic(scratch_url, "upgrade", "head")
    assert up.returncode == 0, up.stderr
    team = uuid.uuid4()
    _sql(scratch_url, f"INSERT INTO teams (id, name) VALUES ('{team}', 'migrations')")

    down = alembic(scratch_url, "downgrade", "-1")
    assert down.returncode == 0, down.stdout + down.stderr
    assert alembic(scratch_url, "current").stdout.split()[0] == before
    # What the older schema holds survives the way down.
    assert [r["name"] for r in _sql(scratch_url, "SELECT name FROM teams")] == ["migrations"]

    again = alembic(scratch_url, "upgrade", "head")
    assert again.returncode == 0, again.stderr
    assert alembic(scratch_url, "current").stdout.split()[0] == head
    check = alembic(scratch_url, "check")
    assert check.returncode == 0, check.stdout + check.stderr


#: The migration of corrections, retention and the audit log.
CORRECTIONS = "f2b8c4d6a020"


def test_the_corrections_migration_goes_down_and_up_again(scratch_url: str) -> None:
    """Below the corrections migration the audit log and withdrawn price entries go (the
    older unique index cannot hold a withdrawn entry beside its correction); the rest stays."""
    up = alembic(scratch_url, "upgrade", "head")
    assert up.returncode == 0, up.stderr
    team = uuid.uuid4()
    _sql(scratch_url, f"INSERT INTO teams (id, name) VALUES ('{team}', 'migrations')")
    _sql(
        scratch_url,
        f"INSERT INTO audit_events (id, team_id, actor, action, target_type, summary, detail)"
        f" VALUES (gen_random_uuid(), '{team}', 'admin token', 'team.create', 'team', 'x', '{{}}')",
    )
    down = alembic(scratch_url, "downgrade", f"{CORRECTIONS}-1")
    assert down.returncode == 0, down.stdout + down.stderr
    tables = {r["tablename"] for r in _sql(scratch_url, "SELECT tablename FROM pg_tables")}
    assert "teams" in tables and "audit_events" not in tables
    columns = {
        r["column_name"]
        for r in _sql(
            scratch_url,
            "SELECT column_name FROM information_schema.columns WHERE table_name = 'prices'",
        )
    }
    assert "withdrawn_at" not in columns and "usd_per_gpu_hour" in columns
    assert [r["name"] for r in _sql(scratch_url, "SELECT name FROM teams")] == ["migrations"]
    again = alembic(scratch_url, "upgrade", "head")
    assert again.returncode == 0, again.stderr
    check = alembic(scratch_url, "check")
    assert check.returncode == 0, check.stdout + check.stderr
