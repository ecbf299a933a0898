"""Backups as docs/operations.md describes them: `pg_dump -Fc` of the database with the tools of
the server's own major version, `pg_restore` into an empty database, and the restored copy
holds a job's figures (and the migration head, so upgrades go on from it)."""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import asyncpg
import pytest

from tests.conftest import _pg_url, _run_sql, insert_finished_run
from tests.test_migrations import alembic

pytestmark = pytest.mark.integration


def _major(version_text: str) -> int | None:
    found = re.search(r"\b(\d+)(?:\.\d+)?", version_text)
    return int(found[1]) if found else None


def server_tools(server_major: int) -> Path | None:
    """The folder of pg_dump and pg_restore of the server's major version: the Debian
    layout's /usr/lib/postgresql/<major>/bin, else the ones on PATH when their major is the
    server's (a newer pg_dump writes archives an older server's pg_restore cannot read, an
    older one refuses a newer server)."""
    candidates = [Path(f"/usr/lib/postgresql/{server_major}/bin")]
    on_path = shutil.which("pg_dump")
    if on_path:
        candidates.append(Path(on_path).parent)
    for folder in candidates:
        dump = folder / "pg_dump"
        if not (dump.exists() and (folder / "pg_restore").exists()):
            continue
        version = subprocess.run(
            [str(dump), "--version"], capture_output=True, text=True, check=False
        ).stdout
        if _major(version) == server_major:
            return folder
    return None


def _libpq(url: str) -> tuple[dict[str, str], str]:
    """The environment and database name the Postgres tools take for a SQLAlchemy URL."""
    match = re.match(
        r"postgresql(?:\+\w+)?://(?:([^:@/]+)(?::([^@/]*))?@)?([^:/]+)(?::(\d+))?/(\w+)", url
    )
    assert match, url
    user, password, host, port, name = match.groups()
    env = {**os.environ, "PGHOST": host, "PGPORT": port or "5432", "PGUSER": user or "postgres"}
    if password:
        env["PGPASSWORD"] = password
    return env, name


@pytest.fixture
def restored_url() -> Iterator[str]:
    """An empty database to restore into, dropped afterwards."""
    name = f"infercost_restore_{uuid.uuid4().hex[:10]}"
    _run_sql(f'CREATE DATABASE "{name}"')
    try:
        yield _pg_url(name, "postgresql+asyncpg")
    finally:
        _run_sql(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


async def _fetch(url: str, sql: str, *args: Any) -> list[asyncpg.Record]:
    conn = await asyncpg.connect(url.replace("postgresql+asyncpg", "postgresql"))
    try:
        return list(await conn.fetch(sql, *args))
    finally:
        await conn.close()


async def test_dump_and_restore_keeps_a_jobs_figures(
    database_url: str, restored_url: str, db: asyncpg.Connection, tmp_path: Path
) -> None:
    server_major = int(await db.fetchval("SHOW server_version_num")) // 10000
    tools = server_tools(server_major)
    if tools is None:
        pytest.skip(f"no pg_dump and pg_restore of the server's version {server_major} here")
    team = await db.fetchval(
        "INSERT INTO teams (id, name) VALUES (gen_random_uuid(), $1) RETURNING id",
        f"backup-{uuid.uuid4().hex[:6]}",
    )
    endpoint = await db.fetchval(
        "INSERT INTO endpoints (id, team_id, name, base_url, api, model, gpu_count, created_at)"
        " VALUES (gen_random_uuid(), $1, 'backed-up', 'http://192.0.2.10:8000/v1',"
        " 'openai-chat', 'm', 1, now()) RETURNING id",
        team,
    )
    job_id, run_id = await insert_finished_run(
        db,
        str(team),
        str(endpoint),
        usd_per_hour=3.6,
        output_tokens_per_s=1250.0,
        requests_per_s=2.5,
        requests_total=300,
        requests_succeeded=300,
    )

    dump = tmp_path / "infercost.dump"
    env, name = _libpq(database_url)
    out = await asyncio.to_thread(
        subprocess.run,
        [str(tools / "pg_dump"), "--format=custom", "--no-owner", f"--file={dump}", name],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    restore_env, restore_name = _libpq(restored_url)
    back = await asyncio.to_thread(
        subprocess.run,
        [str(tools / "pg_restore"), "--no-owner", "--exit-on-error", "-d", restore_name, str(dump)],
        env=restore_env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert back.returncode == 0, back.stderr

    [run] = await _fetch(
        restored_url,
        "SELECT r.output_tokens_per_s, r.requests_per_s, r.usd_per_hour, r.requests_total,"
        " r.cost_per_million_output_tokens_usd, j.status FROM runs r JOIN jobs j ON j.id = r.job_id"
        " WHERE r.id = $1 AND j.id = $2",
        uuid.UUID(run_id),
        uuid.UUID(job_id),
    )
    assert run["status"] == "succeeded"
    assert (run["output_tokens_per_s"], run["requests_per_s"], run["usd_per_hour"]) == (
        1250.0,
        2.5,
        3.6,
    )
    assert run["requests_total"] == 300
    # USD 3.60 an hour over 1,250 output tokens a second: 3.6 / (1250 x 3600) x 1e6 = 0.8.
    assert run["cost_per_million_output_tokens_usd"] == pytest.approx(0.8)
    # The restored copy is at the migration head: `infercost migrate` goes on from it.
    head = alembic(restored_url, "heads").stdout.split()[0]
    assert alembic(restored_url, "current").stdout.split()[0] == head
    # The status board's triggers came back too: a new run there updates its summaries.
    triggers = await _fetch(
        restored_url, "SELECT tgname FROM pg_trigger WHERE tgname = 'status_runs_update'"
    )
    assert len(triggers) == 1
