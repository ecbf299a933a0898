"""The request boundary: one session per request, committed (or rolled back) in one place."""

from __future__ import annotations

from collections.abc import AsyncGenerator, Awaitable, Callable

from litestar.datastructures import State
from litestar.di import NamedDependency
from sqlalchemy.ext.asyncio import AsyncSession

AfterCommit = Callable[[], Awaitable[None]]

#: The request's session (provide_db_session), injected by name: `db_session: DbSession`.
DbSession = NamedDependency[AsyncSession]


def after_commit(session: AsyncSession, hook: AfterCommit) -> None:
    """Run `hook` once this request's transaction has committed (e.g. enqueue a task)."""
    session.info.setdefault("after_commit", []).append(hook)


async def provide_db_session(state: State) -> AsyncGenerator[AsyncSession, None]:
    """A session for the request; commits when the handler succeeds, rolls back otherwise."""
    async with state.sessionmaker() as session:
        try:
            yield session
        except BaseException:
            await session.rollback()
            raise
        await session.commit()
        hooks: list[AfterCommit] = session.info.pop("after_commit", [])
        for hook in hooks:
            await hook()
