"""Team scoping in one place: the builder every read of a team-owned table starts from, and
the guard every session of the application runs, which refuses a read that did not.

A table is team-owned when it has a `team_id` column (computed from the metadata, so a new
table is owned the moment it has one). A read of the team's rows starts from
`readable(Model, team_id)` (a select already filtered to the team, which the caller narrows)
or puts `owned_by(Model, team_id)` in its WHERE or join; raw SQL is `readable_sql(sql,
team_id)`, whose text names the team as `:team_id`, bound here. The few reads that must see
any team's rows (a worker loading the job it was handed, a key looked up to learn its team,
the maintenance sweeps) say so with `unscoped(statement, reason)`, which carries why in the
statement, for review.

The guard: sessions made by `make_sessionmaker` (infercost.db.engine) are `ScopedSession`s,
whose `do_orm_execute` hook checks every select, and their engine's `before_execute` hook
checks the Core statements run on a connection directly. A select passes when every
team-owned table it reads is filtered by a criterion the builder made (found by the
annotation it carries, never by the criterion's text), or joined by an equality of columns
to such a table (a run's job reached through the team's run); a criterion under OR, NOT or
any other expression does not count. Raw SQL passes only when built by `readable_sql` or
marked `unscoped`. Anything else raises UnscopedRead before the statement reaches the
database, and is logged. The verdict of a select depends only on its structure, so it is
kept per statement shape (SQLAlchemy's cache key, which the compiled-statement cache
computes anyway): a hot read pays one dictionary lookup after its first execution.

Writes (INSERT, UPDATE, DELETE) are not checked: the API's writes name a row the team's
scoped read found first, and the workers' name the job they hold.
"""

from __future__ import annotations

import logging
import operator
import uuid
from collections.abc import Iterable, Iterator, Mapping
from functools import cache
from typing import Any, Final, TypeVar, cast, overload

from sqlalchemy import (
    ColumnElement,
    Executable,
    Select,
    TextClause,
    event,
    inspect,
    or_,
    select,
    text,
)
from sqlalchemy.engine import Connection
from sqlalchemy.ext.asyncio import AsyncEngine
from sqlalchemy.orm import ORMExecuteState, Session
from sqlalchemy.sql import operators, visitors
from sqlalchemy.sql.elements import (
    BinaryExpression,
    BooleanClauseList,
    ClauseElement,
    ColumnClause,
    Grouping,
)
from sqlalchemy.sql.selectable import Alias, SelectBase, TableClause, TextualSelect

from infercost.db.base import Base

log = logging.getLogger("infercost.scope")

#: The annotation on a criterion the builder made; its value is the table it scopes.
TEAM_SCOPE: Final = "infercost_team_scope"
#: The execution option that marks a statement as deliberately unscoped, with its reason.
UNSCOPED_OPTION: Final = "infercost_unscoped"
#: The execution option on raw SQL built by readable_sql.
SCOPED_SQL_OPTION: Final = "infercost_scoped_sql"
#: The bound parameter that names the team in raw SQL.
TEAM_PARAM: Final = "team_id"
#: Set by the session's check on what it let through, so the engine's does not check again.
_CHECKED: Final = "infercost_scope_checked"
_IN_WRITE: Final = "infercost_in_write"
#: What unscoped_tables names for raw SQL inside a statement (its text is not read).
RAW_SQL: Final = "raw SQL"
#: Statement shapes whose verdict is kept (a few hundred in the application).
_VERDICTS_MAX: Final = 4096

E = TypeVar("E", bound=Executable)
M = TypeVar("M")


class UnscopedRead(Exception):
    """A statement read a team-owned table without the team's criterion and without saying
    why: a defect of the code that built it, refused before it reached the database."""


@cache
def team_owned_tables() -> frozenset[str]:
    """The tables with a team_id column: every model's, imported in one place."""
    import infercost.db.models  # noqa: F401 (the whole metadata, on first use)

    return frozenset(t.name for t in Base.metadata.tables.values() if "team_id" in t.c)


# --- the builder ---------------------------------------------------------------------------


def _table_of(model: Any) -> str:
    """The table a mapped class (or an alias of one) reads."""
    return str(inspect(model).mapper.local_table.name)


def owned_by(model: Any, team_id: uuid.UUID) -> ColumnElement[bool]:
    """The criterion that keeps `model`'s rows of one team (for counts, joins, updates)."""
    criterion: ColumnElement[bool] = model.team_id == team_id
    return criterion._annotate({TEAM_SCOPE: _table_of(model)})


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
    criterion = or_(team.is_(None), team == team_id)._annotate({TEAM_SCOPE: _table_of(model)})
    return select(model).where(criterion)


def readable_sql(sql: str | TextClause, team_id: uuid.UUID) -> TextClause:
    """Raw SQL over the team's rows: the text filters every team-owned table it reads by
    `:team_id`, which is bound here (a text without it is refused at once)."""
    clause = text(sql) if isinstance(sql, str) else sql
    return clause.bindparams(**{TEAM_PARAM: team_id}).execution_options(**{SCOPED_SQL_OPTION: True})


def unscoped(statement: E, reason: str) -> E:
    """`statement`, marked as reading any team's rows on purpose, for `reason` (said in the
    code, so a reviewer sees every read that crosses teams)."""
    if not reason.strip():
        raise ValueError("unscoped() needs the reason the statement must see every team")
    return statement.execution_options(**{UNSCOPED_OPTION: reason})


# --- the check -----------------------------------------------------------------------------


def _table_name(table: Any) -> str | None:
    while isinstance(table, Alias):
        table = table.element
    return table.name if isinstance(table, TableClause) else None


def _column_table(element: Any) -> str | None:
    if isinstance(element, ColumnClause) and element.table is not None:
        return _table_name(element.table)
    return None


def _read_by(element: Any) -> str | None:
    """The table an element reads: a table's (or alias's) own, a column's table."""
    if isinstance(element, TableClause):
        return _table_name(element)
    return _column_table(element)


def _joined(scoped: set[str], joins: list[tuple[str, str]]) -> set[str]:
    """`scoped` grown by the tables joined to it by equalities of columns, transitively."""
    scoped = set(scoped)
    grew = True
    while grew:
        grew = False
        for a, b in joins:
            if (a in scoped) != (b in scoped):
                scoped.update((a, b))
                grew = True
    return scoped


def _keeps_strength(element: Any) -> bool:
    """Whether a criterion below `element` still restricts the rows: AND lists and
    parentheses keep it; OR, NOT, CASE, comparisons and functions of it do not."""
    if isinstance(element, BooleanClauseList):
        return element.operator is operators.and_
    return isinstance(element, Grouping) or not isinstance(element, ColumnElement)


def _children(element: Any) -> Iterator[Any]:
    yield from element.get_children()
    # ORM joins (select(A).join(B, on)) are kept aside until compiled: walk their ON too.
    for join in getattr(element, "_setup_joins", ()):
        for part in join:
            if isinstance(part, visitors.Visitable):
                yield part


def unscoped_tables(statement: Any) -> set[str]:
    """The team-owned tables `statement` reads with no builder criterion reaching them, and
    RAW_SQL when it holds raw SQL (select(...).from_statement(text(...)), a text WHERE).

    Table by table over the whole statement, subqueries included: a table is scoped when a
    criterion from `owned_by` (or `readable`, `visible`) on it stands in a WHERE or ON of
    the statement (not under OR, NOT or an expression), or when it is joined by an equality
    of columns to a scoped table."""
    owned = team_owned_tables()
    read: set[str] = set()
    scoped: set[str] = set()
    joins: list[tuple[str, str]] = []
    seen: set[tuple[int, bool]] = set()
    stack: list[tuple[Any, bool]] = [(statement, True)]
    raw = False
    while stack:
        element, strong = stack.pop()
        key = (id(element), strong)
        if key in seen:
            continue
        seen.add(key)
        raw = raw or isinstance(element, TextClause)
        name = _read_by(element)
        if name is not None:
            read.add(name)
        annotations: Mapping[str, Any] = getattr(element, "_annotations", {})
        if strong and TEAM_SCOPE in annotations:
            scoped.add(annotations[TEAM_SCOPE])
        if strong and isinstance(element, BinaryExpression) and element.operator is operator.eq:
            left, right = _column_table(element.left), _column_table(element.right)
            if left is not None and right is not None:
                joins.append((left, right))
        # A nested select is judged as its own statement: its WHERE counts again.
        below = isinstance(element, SelectBase) or (strong and _keeps_strength(element))
        stack.extend((child, below) for child in _children(element))
    return (read & owned) - _joined(scoped, joins) | ({RAW_SQL} if raw else set())


_verdicts: dict[Any, frozenset[str]] = {}


def _unscoped_of(statement: ClauseElement) -> frozenset[str]:
    """unscoped_tables, kept per statement shape (its cache key: structure and annotations,
    not bound values, so the same read with another team or id reuses the verdict)."""
    cache_key = statement._generate_cache_key()
    if cache_key is None:
        return frozenset(unscoped_tables(statement))
    verdict = _verdicts.get(cache_key.key)
    if verdict is None:
        verdict = frozenset(unscoped_tables(statement))
        if len(_verdicts) >= _VERDICTS_MAX:
            _verdicts.clear()
        _verdicts[cache_key.key] = verdict
    return verdict


def _refuse(tables: Iterable[str], how: str) -> UnscopedRead:
    message = (
        f"{', '.join(sorted(tables))} {how}: build the statement with "
        "infercost.db.scope.readable(Model, team_id) or owned_by(Model, team_id) (raw SQL: "
        "readable_sql(sql, team_id)), or mark a read that must see every team with "
        "unscoped(statement, reason)"
    )
    log.error("unscoped read refused: %s", message)
    return UnscopedRead(message)


def _binds_team(parameters: Any) -> bool:
    if isinstance(parameters, Mapping):
        return TEAM_PARAM in parameters
    if isinstance(parameters, list | tuple):
        return any(_binds_team(p) for p in parameters)
    return False


def check(statement: Any, options: Mapping[str, Any], parameters: Any = None) -> None:
    """Raise UnscopedRead unless `statement`, run with execution `options` and
    `parameters`, reads team-owned tables only through the builder, or says why not."""
    if options.get(UNSCOPED_OPTION):
        return
    if isinstance(statement, TextClause | TextualSelect):
        if not options.get(SCOPED_SQL_OPTION):
            raise _refuse([RAW_SQL], "is neither readable_sql nor unscoped")
        if _binds_team(parameters):
            # The team is bound by readable_sql; a value given at execution would replace it.
            raise _refuse([RAW_SQL], f"passes its own :{TEAM_PARAM} at execution")
        return
    tables = _unscoped_of(statement)
    if tables:
        raise _refuse(tables, "read with no team criterion")


class ScopedSession(Session):
    """A session that refuses a read of a team-owned table the builder did not scope (the
    application's sessions, made by infercost.db.engine.make_sessionmaker)."""


@event.listens_for(ScopedSession, "do_orm_execute")
def _check_orm(state: ORMExecuteState) -> Any:
    if state.is_update or state.is_delete:
        # An ORM update or delete may select the rows it changes first (synchronize_session
        # "fetch"): that select is the write's, not a read, and is let through.
        state.update_execution_options(**{_CHECKED: True})
        state.session.info[_IN_WRITE] = state.session.info.get(_IN_WRITE, 0) + 1
        try:
            return state.invoke_statement()
        finally:
            state.session.info[_IN_WRITE] -= 1
    statement = state.statement
    reads = state.is_select or isinstance(statement, TextClause)
    if (
        reads
        and not state.is_relationship_load
        and not state.is_column_load
        and not state.session.info.get(_IN_WRITE)
    ):
        check(statement, state.execution_options, state.parameters)
    state.update_execution_options(**{_CHECKED: True})
    return None


def _check_core(
    conn: Connection,
    clauseelement: Any,
    multiparams: Any,
    params: Any,
    execution_options: Mapping[str, Any],
) -> None:
    """The same check for statements run on a connection, not through a session."""
    if execution_options.get(_CHECKED):
        return
    if isinstance(clauseelement, SelectBase | TextClause):
        check(clauseelement, execution_options, [multiparams, params])


def guard_engine(engine: AsyncEngine) -> None:
    """Check the reads run on `engine`'s connections directly (Core statements on
    `session.connection()`, a health check); once per engine."""
    target = engine.sync_engine
    if not event.contains(target, "before_execute", _check_core):
        event.listen(target, "before_execute", _check_core)
