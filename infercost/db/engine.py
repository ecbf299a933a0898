"""Engine and session factory; created by each process at start, never at import."""

from __future__ import annotations

from sqlalchemy.ext.asyncio import (
    AsyncEngine,
    AsyncSession,
    async_sessionmaker,
    create_async_engine,
)

from infercost.db.scope import ScopedSession, guard_engine
from infercost.settings import Settings

_DEFAULTS = Settings()


def _ms(seconds: float) -> str:
    """A Postgres duration setting in milliseconds; 0 turns the timeout off."""
    return str(max(0, round(seconds * 1000)))


def make_engine(
    database_url: str,
    *,
    pool_size: int = 5,
    statement_timeout_s: float = _DEFAULTS.db_statement_timeout_s,
    idle_in_transaction_timeout_s: float = _DEFAULTS.db_idle_in_transaction_timeout_s,
) -> AsyncEngine:
    """An asyncpg engine with pre-ping, so a restarted Postgres does not fail the first query.

    Every connection carries a statement timeout and an idle-in-transaction timeout: a
    query stuck behind a lock, or a transaction its process forgot, is ended by the server
    instead of holding rows (a job's lease, an outbox row) forever.
    """
    server_settings = {
        "application_name": "infercost",
        "timezone": "UTC",
        "statement_timeout": _ms(statement_timeout_s),
        "idle_in_transaction_session_timeout": _ms(idle_in_transaction_timeout_s),
    }
    return create_async_engine(
        database_url,
        pool_size=pool_size,
        max_overflow=pool_size,
        pool_pre_ping=True,
        connect_args={"server_settings": server_settings},
    )


def engine_for(settings: Settings, *, pool_size: int = 5) -> AsyncEngine:
    """make_engine with the settings' database URL and timeouts."""
    return make_engine(
        settings.require_database_url(),
        pool_size=pool_size,
        statement_timeout_s=settings.db_statement_timeout_s,
        idle_in_transaction_timeout_s=settings.db_idle_in_transaction_timeout_s,
    )


def make_sessionmaker(engine: AsyncEngine) -> async_sessionmaker[AsyncSession]:
    """Sessions that keep loaded values after commit (responses are built after the commit)
    and refuse a read of a team-owned table that is not scoped to a team or marked as
    crossing teams (infercost.db.scope), as do the statements run on `engine`'s connections
    directly."""
    guard_engine(engine)
    return async_sessionmaker(engine, expire_on_commit=False, sync_session_class=ScopedSession)
