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
    """docs/operations.md, Upgrades: `alembic downgrade -1` undoes the newest migration with
    the data it can keep, and upgrading again gives the schema the models describe."""
    up = alembic(scratch_url, "upgrade", "head")
    assert up.returncode == 0, up.stderr
    head = alembic(scratch_url, "heads").stdout.split()[0]
    team = uuid.uuid4()
    _sql(scratch_url, f"INSERT INTO teams (id, name) VALUES ('{team}', 'migrations')")
    columns = (
        "SELECT table_name, column_name FROM information_schema.columns"
        " WHERE table_schema = 'public'"
    )
    at_head = {tuple(r) for r in _sql(scratch_url, columns)}

    down = alembic(scratch_url, "downgrade", "-1")
    assert down.returncode == 0, down.stdout + down.stderr
    current = alembic(scratch_url, "current").stdout.split()
    assert current and current[0] != head
    # The newest migration's tables or columns are gone, and what the older schema holds
    # survives the way down.
    assert {tuple(r) for r in _sql(scratch_url, columns)} != at_head
    assert [r["name"] for r in _sql(scratch_url, "SELECT name FROM teams")] == ["migrations"]

    again = alembic(scratch_url, "upgrade", "head")
    assert again.returncode == 0, again.stderr
    assert alembic(scratch_url, "current").stdout.split()[0] == head
    assert {tuple(r) for r in _sql(scratch_url, columns)} == at_head
    check = alembic(scratch_url, "check")
    assert check.returncode == 0, check.stdout + check.stderr
