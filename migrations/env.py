"""Alembic environment: async engine, the project's one metadata, DATABASE_URL by default."""

from __future__ import annotations

import asyncio
from logging.config import fileConfig

from alembic import context
from sqlalchemy.engine import Connection

from infercost.db.engine import make_engine
from infercost.db.models import Base
from infercost.settings import Settings

config = context.config
if config.config_file_name is not None and config.attributes.get("configure_logger", True):
    fileConfig(config.config_file_name, disable_existing_loggers=False)

target_metadata = Base.metadata


def _url() -> str:
    return config.get_main_option("sqlalchemy.url") or Settings.from_env().require_database_url()


def _run(connection: Connection) -> None:
    context.configure(connection=connection, target_metadata=target_metadata, compare_type=True)
    lock_timeout_ms = round(Settings.from_env().migration_lock_timeout_s * 1000)
    with context.begin_transaction():
        # A migration waits at most lock_timeout for a table's lock, then fails and can be run
        # again: never queue every query of a live service behind an ALTER that waits on a
        # long transaction. Its own statements may take as long as they need.
        connection.exec_driver_sql(f"SET LOCAL lock_timeout = {max(0, lock_timeout_ms)}")
        connection.exec_driver_sql("SET LOCAL statement_timeout = 0")
        context.run_migrations()


async def _run_online() -> None:
    engine = make_engine(_url(), pool_size=1)
    try:
        async with engine.connect() as connection:
            await connection.run_sync(_run)
    finally:
        await engine.dispose()


if context.is_offline_mode():
    context.configure(url=_url(), target_metadata=target_metadata, literal_binds=True)
    with context.begin_transaction():
        context.run_migrations()
else:
    asyncio.run(_run_online())
