"""Team scoping in one place: every repository method's reads of team-owned tables carry a
team criterion (infercost.db.scope), or say why they must see every team.

Every public coroutine of every repository of the core (a class's methods, and the module's
functions that take a session) is called against the real database, with arguments made
from its signature, on the application's own sessions (which refuse unscoped reads); a new
method that reads a team-owned table by id alone fails here, whether or not another test
calls it. tests/api/test_scope_in_production.py shows the same refusal in the running API.
"""

from __future__ import annotations

import dataclasses
import importlib
import inspect
import re
import types
import typing
import uuid
from collections.abc import AsyncIterator, Callable, Iterator, Sequence
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import func, not_, or_, select, text
from sqlalchemy.exc import ArgumentError, SQLAlchemyError
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

import infercost
from infercost.db.base import Base, utcnow
from infercost.db.scope import (
    UnscopedRead,
    check,
    owned_by,
    readable,
    readable_sql,
    team_owned_tables,
    unscoped,
    unscoped_tables,
    visible,
)
from infercost.errors import InvalidInput
from infercost.hardware.models import Hardware
from infercost.jobs.models import Job, Run

#: Values for parameters whose type alone would make a call that stops before any read.
BY_NAME: dict[str, Any] = {
    "figures": ["ttft_p50_ms"],
    "sort": [],
    "values": {},
    "items": [],
    "rows": [],
    "sweep": {},
    "change": {},
    "status": "succeeded",
    "limit": 5,
    "offset": 0,
    "token_hash": bytes(32),
}

Target = tuple[str, Callable[[AsyncSession], Callable[..., Any]], dict[str, Any]]


def _model(cls: type[Any]) -> Any:
    """A transient row with every attribute a repository method may read set."""
    row = cls()
    for column in cls.__table__.columns:
        if column.computed is not None:
            continue
        value = _value(column.name, column.type.python_type) if _simple(column) else None
        setattr(row, column.key, value)
    return row


def _simple(column: Any) -> bool:
    try:
        return column.type.python_type in (uuid.UUID, str, int, float, bool, datetime)
    except NotImplementedError:
        return False


def _value(name: str, hint: Any) -> Any:
    if name in BY_NAME:
        return BY_NAME[name]
    origin = typing.get_origin(hint)
    args = typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return _value(name, next(a for a in args if a is not type(None)))
    if origin is typing.Literal:
        return args[0]
    if origin in (list, set, frozenset, Sequence, tuple) and args:
        made = [_value(name, args[0])]
        return set(made) if origin in (set, frozenset) else made
    if origin is dict:
        return {}
    simple: dict[Any, Callable[[], Any]] = {
        uuid.UUID: uuid.uuid4,
        str: lambda: "x",
        int: lambda: 1,
        float: lambda: 1.0,
        bool: lambda: False,
        datetime: utcnow,
        timedelta: lambda: timedelta(minutes=5),
    }
    if hint in simple:
        return simple[hint]()
    if isinstance(hint, type) and issubclass(hint, Base):
        return _model(hint)
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return hint()
    raise TypeError(
        f"no value for parameter {name}: {hint!r}; add one to BY_NAME in "
        "tests/infercost/test_team_scope.py"
    )


def _arguments(function: Callable[..., Any], skip: int) -> dict[str, Any]:
    hints = typing.get_type_hints(function)
    params = list(inspect.signature(function).parameters.values())[skip:]
    return {
        p.name: _value(p.name, hints[p.name])
        for p in params
        if p.kind not in (p.VAR_KEYWORD, p.VAR_POSITIONAL)
        and (p.default is p.empty or p.name in BY_NAME)
    }


def repository_targets() -> Iterator[Target]:
    """Every public coroutine of every repository module (each infercost/*/repository.py,
    and any other module of the core with a ...Repository class), as (label, bind,
    arguments)."""
    root = Path(infercost.__file__).parent
    for path in sorted(root.rglob("*.py")):
        source = path.read_text()
        if path.name != "repository.py" and not re.search(r"^class \w+Repository\b", source, re.M):
            continue
        name = ".".join(path.relative_to(root.parent).with_suffix("").parts)
        yield from targets_of(importlib.import_module(name))


def targets_of(module: Any) -> Iterator[Target]:
    """The public coroutines of one module: its classes' methods (the class built over
    the session) and its functions whose first parameter is the session."""
    for name, obj in vars(module).items():
        if getattr(obj, "__module__", None) != module.__name__ or name.startswith("_"):
            continue
        if inspect.isclass(obj):
            for method_name, method in vars(obj).items():
                if method_name.startswith("_") or not _is_async(method):
                    continue
                yield (
                    f"{module.__name__}.{name}.{method_name}",
                    lambda session, cls=obj, m=method_name: getattr(cls(session), m),
                    _arguments(method, skip=1),
                )
        elif _is_async(obj) and next(iter(inspect.signature(obj).parameters)) == "session":
            yield (
                f"{module.__name__}.{name}",
                lambda session, f=obj: lambda **kw: f(session, **kw),
                _arguments(obj, skip=1),
            )


def _is_async(obj: Any) -> bool:
    return inspect.iscoroutinefunction(obj) or inspect.isasyncgenfunction(obj)


async def unscoped_reads(
    sessions: async_sessionmaker[AsyncSession], targets: Sequence[Target]
) -> tuple[dict[str, str], dict[str, str]]:
    """Run each target once on a session that refuses unscoped reads; returns the targets
    that read unscoped (with the message) and those that stopped on something else first."""
    refused: dict[str, str] = {}
    stopped: dict[str, str] = {}
    for label, bind, arguments in targets:
        async with sessions() as session:
            try:
                result = bind(session)(**arguments)
                if isinstance(result, AsyncIterator):
                    async for _ in result:
                        pass
                else:
                    await result
            except UnscopedRead as e:
                refused[label] = str(e)
            except (SQLAlchemyError, InvalidInput, LookupError, ValueError) as e:
                stopped[label] = f"{type(e).__name__}: {str(e)[:120]}"
            finally:
                await session.rollback()
    return refused, stopped


def test_team_owned_tables_come_from_the_metadata() -> None:
    """Every table with a team_id column is team-owned, with no list to keep up."""
    owned = team_owned_tables()
    assert {"endpoints", "jobs", "runs", "datasets", "prices", "webhooks"} <= owned
    assert {"schedules", "api_keys", "hardware", "deployments"} <= owned
    assert "request_samples" not in owned and "teams" not in owned


def test_the_check_tells_scoped_from_unscoped_statements() -> None:
    """The statement check, without a database: by id alone is unscoped; readable(), a join
    from the team's rows and a subquery of them are not; a team criterion written by hand,
    or one under OR or NOT, does not count."""
    team = uuid.uuid4()
    assert unscoped_tables(select(Run).where(Run.id == team)) == {"runs"}
    assert unscoped_tables(readable(Run, team).where(Run.id == team)) == set()
    assert unscoped_tables(select(func.count()).where(Run.id == team)) == {"runs"}
    joined = select(Run, Job).join(Job, Job.id == Run.job_id).where(Run.id == team)
    assert unscoped_tables(joined) == {"jobs", "runs"}
    assert unscoped_tables(joined.where(owned_by(Run, team))) == set()
    assert unscoped_tables(joined.where(Run.team_id == team)) == {"jobs", "runs"}
    by_team = select(Run, Job).join(Job, Job.team_id == Run.team_id)
    assert unscoped_tables(by_team) == {"jobs", "runs"}
    within = select(Run).where(Run.id.in_(readable(Run, team, Run.id)))
    assert unscoped_tables(within) == set()
    assert unscoped_tables(select(Run).where(or_(owned_by(Run, team), Run.id == team))) == {"runs"}
    assert unscoped_tables(select(Run).where(not_(owned_by(Run, team)))) == {"runs"}
    assert unscoped_tables(visible(Hardware, team)) == set()


def test_raw_sql_names_its_team_through_the_builder() -> None:
    """readable_sql binds the team as :team_id and refuses a text that has none; the check
    lets it through but refuses raw SQL that is neither scoped nor marked, and a scoped text
    run with a :team_id of its own."""
    team = uuid.uuid4()
    scoped = readable_sql("SELECT id FROM runs WHERE team_id = :team_id", team)
    check(scoped, scoped.get_execution_options(), {})
    with pytest.raises(ArgumentError):
        readable_sql("SELECT id FROM runs WHERE id = :id", team)
    bare = text("SELECT id FROM runs WHERE team_id = :team_id")
    with pytest.raises(UnscopedRead, match="raw SQL is neither readable_sql nor unscoped"):
        check(bare, bare.get_execution_options(), {"team_id": team})
    with pytest.raises(UnscopedRead, match="passes its own :team_id"):
        check(scoped, scoped.get_execution_options(), {"team_id": uuid.uuid4()})
    marked = unscoped(bare, "a sweep over every team")
    check(marked, marked.get_execution_options(), {})
    with pytest.raises(ValueError, match="reason"):
        unscoped(bare, " ")


@pytest.mark.asyncio
async def test_every_repository_read_is_scoped_by_team(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    targets = list(repository_targets())
    assert len(targets) > 60, "the repository modules were not found"
    refused, stopped = await unscoped_reads(sessions, targets)
    print("stopped before their reads:", stopped)
    assert not refused, "\n".join(f"{k}: {v}" for k, v in refused.items())
    # The calls must reach their reads: few may stop before on made-up arguments (inserts
    # of rows whose parents do not exist), never most of them.
    assert len(stopped) < len(targets) // 4, stopped


class LeakyRepository:
    """What the test must catch: a method that reads runs by id alone (by a select, and
    by session.get), beside a deliberately unscoped one that says why."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def run_by_id(self, run_id: uuid.UUID) -> Run | None:
        return await self.session.scalar(select(Run).where(Run.id == run_id))

    async def run_by_get(self, run_id: uuid.UUID) -> Run | None:
        return await self.session.get(Run, run_id)

    async def run_for_worker(self, run_id: uuid.UUID) -> Run | None:
        query = select(Run).where(Run.id == run_id)
        return await self.session.scalar(unscoped(query, "the worker owns the run"))

    async def run_of_team(self, team_id: uuid.UUID, run_id: uuid.UUID) -> Run | None:
        return await self.session.scalar(readable(Run, team_id).where(Run.id == run_id))


@pytest.mark.asyncio
async def test_an_unscoped_method_fails_the_check(
    sessions: async_sessionmaker[AsyncSession],
) -> None:
    module = types.ModuleType(__name__)
    LeakyRepository.__module__ = module.__name__
    module.LeakyRepository = LeakyRepository  # type: ignore[attr-defined]
    refused, stopped = await unscoped_reads(sessions, list(targets_of(module)))
    assert not stopped
    assert sorted(refused) == [
        f"{__name__}.LeakyRepository.run_by_get",
        f"{__name__}.LeakyRepository.run_by_id",
    ]
    assert "runs read with no team criterion" in refused[f"{__name__}.LeakyRepository.run_by_id"]
