"""Retrying a unit of database work through a lost connection, for a bounded time.

A Postgres restart, a failover or a dropped TCP connection lasts seconds; a level measured
over minutes must not be lost to it. Only errors that say the connection (not the query) is
at fault are retried, and the unit must be safe to run again: one transaction that either
committed whole or not at all, written so that running it twice stores the same rows.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from sqlalchemy.exc import DBAPIError

log = logging.getLogger("infercost.db")

T = TypeVar("T")

#: SQLSTATEs of a server going away or refusing for now: admin/crash shutdown, starting
#: up; and of transactions Postgres asks to run again (serialization failure, deadlock).
_TRANSIENT_STATES = {"57P01", "57P02", "57P03", "40001", "40P01"}


def _sqlstate(exc: BaseException) -> str | None:
    state = getattr(exc, "sqlstate", None) or getattr(exc, "pgcode", None)
    return state if isinstance(state, str) else None


def is_transient(exc: BaseException) -> bool:
    """Whether `exc` (or what it wraps) is a lost or refused connection, worth a retry."""
    seen: set[int] = set()
    todo: list[BaseException | None] = [exc]
    while todo:
        e = todo.pop()
        if e is None or id(e) in seen:
            continue
        seen.add(id(e))
        if isinstance(e, OSError | TimeoutError):
            return True
        if isinstance(e, DBAPIError) and e.connection_invalidated:
            return True
        state = _sqlstate(e)
        if state is not None and (state.startswith("08") or state in _TRANSIENT_STATES):
            return True
        # asyncpg's "connection is closed" / "connection was closed in the middle of operation"
        if type(e).__name__ in {"InterfaceError", "ConnectionDoesNotExistError"} and (
            "closed" in str(e)
        ):
            return True
        todo.extend([getattr(e, "orig", None), e.__cause__, e.__context__])
    return False


async def retry_transient(
    work: Callable[[], Awaitable[T]],
    *,
    budget_s: float,
    what: str,
    first_delay_s: float = 0.25,
    max_delay_s: float = 5.0,
) -> T:
    """Run `work` until it succeeds; after a transient error wait (doubling from
    first_delay_s, at most max_delay_s) and run it again, for at most budget_s in all.
    Any other error, or a transient one past the budget, is raised."""
    deadline = time.monotonic() + budget_s
    delay = first_delay_s
    attempt = 1
    while True:
        try:
            return await work()
        except Exception as exc:
            left = deadline - time.monotonic()
            if not is_transient(exc) or left <= 0:
                raise
            log.warning(
                "%s: attempt %d lost its database connection (%s); again in %.2g s",
                what,
                attempt,
                type(exc).__name__,
                min(delay, left),
            )
            await asyncio.sleep(min(delay, left))
            delay = min(delay * 2, max_delay_s)
            attempt += 1
