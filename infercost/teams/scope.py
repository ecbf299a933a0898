"""Team scoping in one place: every read of a team-owned table starts from `readable`.

A table is team-owned when it has a `team_id` column (computed from the metadata, so a new
table is owned the moment it has one). A repository reads the team's rows through
`readable(Model, team_id)` (Polar's get_readable_statement is the model): a select already
filtered to the team, which the method narrows further. The few reads that must see any
team's row (a worker loading the job it was handed, a key looked up to learn its team) say
so with `unscoped(statement, reason)`, which names why in the statement itself.

`unscoped_tables` is the check: the team-owned tables a statement reads with no team
criterion. A table counts as scoped when the statement compares its team_id with a value,
or when it is joined by an equality of columns to a table that is scoped (a run's
deployment reached through the team's run). tests/infercost/test_team_scope.py runs every
repository method through `check_reads`, so a new method that reads a team-owned table
unscoped fails there.
"""

from __future__ import annotations

import operator
import re
import uuid
from collections.abc import Iterator
from functools import cache
from typing import Any, TypeVar, cast, overload

from sqlalchemy import ColumnElement, Executable, Select, TextClause, event, or_, select
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql import visitors
from sqlalchemy.sql.elements import BinaryExpression, ColumnClause
from sqlalchemy.sql.selectable import Alias, TableClause

from infercost.db.base import Base

#: The execution option that marks a statement as deliberately unscoped, with its reason.
UNSCOPED_OPTION = "infercost_unscoped"

E = TypeVar("E", bound=Executable)
M = TypeVar("M")


class UnscopedRead(Exception):
    """A statement read a team-owned table without a team criterion and without saying why."""


@cache
def team_owned_tables() -> frozenset[str]:
    """The tables with a team_id column: every model's, imported in one place."""
    import infercost.db.models  # noqa: F401 (the whole metadata, on first use)

    return frozenset(t.name for t in Base.metadata.tables.values() if "team_id" in t.c)


def owned_by(model: Any, team_id: uuid.UUID) -> ColumnElement[bool]:
    """The criterion that keeps `model`'s rows of one team (for counts, updates, joins)."""
    criterion: ColumnElement[bool] = model.team_id == team_id
    return criterion


@overload
def readable(model: type[M], team_id: uuid.UUID) -> Select[M]: ...
@overload
def readable(
    model: type[Any], team_id: uuid.UUID, column: Any, /, *columns: Any
) -> Select[*tuple[Any, ...]]: ...
def readable(model: Any, team_id: uuid.UUID, *columns: Any) -> Any:
    """A select of the team's `model` rows (or of `columns` of them), already filtered."""
    return select(*(columns or (model,))).where(owned_by(model, team_id))


def visible(model: type[M], team_id: uuid.UUID) -> Select[M]:
    """A select of the rows the team can see in a catalog with public rows (team_id null)
    beside each team's own: the hardware catalog."""
    team = cast(Any, model).team_id
    return select(model).where(or_(team.is_(None), team == team_id))


def unscoped(statement: E, reason: str) -> E:
    """`statement`, marked as reading any team's rows on purpose, for `reason`."""
    return statement.execution_options(**{UNSCOPED_OPTION: reason})


def _table_name(table: Any) -> str | None:
    while isinstance(table, Alias):
        table = table.element
    return table.name if isinstance(table, TableClause) else None


def _column_table(element: Any) -> str | None:
    if isinstance(element, ColumnClause) and element.table is not None:
        return _table_name(element.table)
    return None


def _walk(statement: Any) -> Iterator[Any]:
    yield from visitors.iterate(statement)
    # ORM joins (select(A).join(B, on)) are kept aside until compiled: walk their ON too.
    for join in getattr(statement, "_setup_joins", ()):
        for part in join:
            if isinstance(part, visitors.Visitable):
                yield from visitors.iterate(cast(Any, part))


_TEXT_TABLE = re.compile(r"\b(?:from|join)\s+([a-z_][a-z0-9_]*)", re.IGNORECASE)


def unscoped_tables(statement: Any) -> set[str]:
    """The team-owned tables `statement` reads with no team criterion reaching them."""
    owned = team_owned_tables()
    if isinstance(statement, TextClause):
        named = {m.lower() for m in _TEXT_TABLE.findall(statement.text)} & owned
        return set() if not named or "team_id" in statement.text else named
    read: set[str] = set()
    scoped: set[str] = set()
    joins: list[tuple[str, str]] = []
    for element in _walk(statement):
        name = _table_name(element) if isinstance(element, TableClause) else None
        if name is not None:
            read.add(name)
        if not isinstance(element, BinaryExpression) or element.operator is not operator.eq:
            continue
        left, right = _column_table(element.left), _column_table(element.right)
        if left is not None and right is not None:
            joins.append((left, right))
        for side, table in ((element.left, left), (element.right, right)):
            if table is not None and getattr(side, "name", None) == "team_id":
                scoped.add(table)
    grew = True
    while grew:
        grew = False
        for a, b in joins:
            if (a in scoped) != (b in scoped):
                scoped.update((a, b))
                grew = True
    return (read & owned) - scoped


_IN_WRITE = "infercost_in_write"


def _check(state: ORMExecuteState) -> Any:
    if state.is_update or state.is_delete:
        # An ORM update or delete may select the rows it changes first (synchronize_session
        # "fetch"): that select is the write's, not a read, and is let through.
        state.session.info[_IN_WRITE] = state.session.info.get(_IN_WRITE, 0) + 1
        try:
            return state.invoke_statement()
        finally:
            state.session.info[_IN_WRITE] -= 1
    reads = state.is_select or isinstance(state.statement, TextClause)
    if not reads or state.is_relationship_load or state.is_column_load:
        return None
    if state.session.info.get(_IN_WRITE):
        return None
    if state.execution_options.get(UNSCOPED_OPTION):
        return None
    tables = unscoped_tables(state.statement)
    if tables:
        raise UnscopedRead(
            f"{', '.join(sorted(tables))} read with no team criterion: build the statement "
            "with infercost.teams.scope.readable(Model, team_id), or mark a read that must "
            "see every team with unscoped(statement, reason)"
        )
    return None


def check_reads(session: AsyncSession | Session) -> None:
    """Make `session` refuse selects that read a team-owned table unscoped (UnscopedRead)."""
    target = session.sync_session if isinstance(session, AsyncSession) else session
    event.listen(target, "do_orm_execute", _check)
