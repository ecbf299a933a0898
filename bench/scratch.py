"""A scratch database for a benchmark: created on the Postgres server named by --pg, built
by running the migrations, and dropped at the end unless kept."""

from __future__ import annotations

import argparse
import asyncio
import os
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import asyncpg

from infercost.db.migrate import upgrade_head

DEFAULT_PG = os.environ.get("INFERCOST_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres")


def add_database_options(parser: argparse.ArgumentParser) -> None:
    """--pg (a server, any database on it) and --keep."""
    parser.add_argument("--pg", default=DEFAULT_PG, help="postgresql:// URL of the server")
    parser.add_argument("--keep", action="store_true", help="leave the database for a look")


@dataclass(frozen=True, slots=True)
class Scratch:
    """The database: its name, its SQLAlchemy URL (asyncpg) and its plain asyncpg DSN."""

    name: str
    url: str
    dsn: str


async def _admin(pg: str, sql: str) -> None:
    conn = await asyncpg.connect(pg)
    try:
        await conn.execute(sql)
    finally:
        await conn.close()


@contextmanager
def scratch_database(pg: str, *, keep: bool) -> Iterator[Scratch]:
    """Create and migrate a database named infercost_bench_<random>; drop it on the way out
    (even on failure) unless `keep`."""
    name = f"infercost_bench_{uuid.uuid4().hex[:8]}"
    base = pg.rpartition("/")[0]
    scratch = Scratch(
        name, f"{base.replace('postgresql', 'postgresql+asyncpg', 1)}/{name}", f"{base}/{name}"
    )
    asyncio.run(_admin(pg, f'CREATE DATABASE "{name}"'))
    try:
        upgrade_head(scratch.url)
        yield scratch
    finally:
        if keep:
            print(f"# kept database {name}")
        else:
            asyncio.run(_admin(pg, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
