"""Engine and session factory; created by each process at start, never at import."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)


def make_engine(database_url: str, *, pool_size: int = 5) -> AsyncEngine:
    """An asyncpg engine with pre-ping, so a restarted Postgres does not fail the first query."""
    return create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args={"server_settings": {"application_name": "infercost", "timezone": "UTC"}},
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded values after commit (responses are built after the commit)."""
    return async_sessionmaker(engine, expire_on_commit=False)
