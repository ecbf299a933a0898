"""The comparison query: a team's finished runs, filtered, grouped by deployment and load
level, aggregated in the database, sorted and paged. It reads run-level columns only (the
generated figure columns of `runs`), never the JSONB summaries or the raw samples."""

from __future__ import annotations

import itertools
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any, Literal

from sqlalchemy import (
    CTE,
    ColumnElement,
    String,
    and_,
    any_,
    case,
    distinct,
    func,
    literal,
    or_,
    select,
)
from sqlalchemy.dialects.postgresql import aggregate_order_by, distinct_on
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import InstrumentedAttribute

from infercost.db.scope import owned_by, readable
from infercost.endpoints.models import Endpoint
from infercost.figures.metrics import ADEQUATE_MIN_REQUESTS
from infercost.history.repository import not_client_bound
from infercost.jobs.deployments import Deployment
from infercost.jobs.models import Job, Run, RunModelFigures
from infercost.jobs.per_model import MODEL_FIGURES, of_model, served_model
from infercost.planning.capacity import inadequate_reasons

GroupBy = Literal["deployment", "deployment_level"]
Aggregate = Literal["median", "latest"]


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure a comparison can show: its per-run value and what it means."""

    value: ColumnElement[Any] | InstrumentedAttribute[Any]
    description: str


def _per_gpu(
    tokens_per_s: ColumnElement[Any] | InstrumentedAttribute[Any],
) -> ColumnElement[Any]:
    """Tokens/s per GPU; a hosted API (no hardware) says nothing about its GPUs, so null."""
    return case(
        (Deployment.hardware.is_(None), literal(None)),
        else_=tokens_per_s / Deployment.gpu_count,
    )


#: Every figure GET /v1/comparisons can show, in their default order (docs/figures.md defines each).
FIGURES: dict[str, Figure] = {
    "ttft_p50_ms": Figure(Run.ttft_p50_ms, "time to first token, median"),
    "ttft_p95_ms": Figure(Run.ttft_p95_ms, "time to first token, p95"),
    "tpot_p50_ms": Figure(Run.tpot_p50_ms, "time per output token, median"),
    "tpot_p95_ms": Figure(Run.tpot_p95_ms, "time per output token, p95"),
    "itl_p50_ms": Figure(Run.itl_p50_ms, "inter-token latency, median"),
    "itl_p95_ms": Figure(Run.itl_p95_ms, "inter-token latency, p95"),
    "e2e_p50_ms": Figure(Run.e2e_p50_ms, "end-to-end latency, median"),
    "e2e_p95_ms": Figure(Run.e2e_p95_ms, "end-to-end latency, p95"),
    "per_user_tokens_per_s_p50": Figure(
        Run.per_user_tokens_per_s_p50, "per-user speed (1 / TPOT), median"
    ),
    "output_tokens_per_s": Figure(Run.output_tokens_per_s, "output tokens/s"),
    "input_tokens_per_s": Figure(Run.input_tokens_per_s, "input tokens/s"),
    "total_tokens_per_s": Figure(Run.total_tokens_per_s, "input + output tokens/s"),
    "output_tokens_per_s_per_gpu": Figure(
        _per_gpu(Run.output_tokens_per_s),
        "output tokens/s / gpu_count (null without hardware, e.g. hosted APIs)",
    ),
    "total_tokens_per_s_per_gpu": Figure(
        _per_gpu(Run.total_tokens_per_s),
        "input + output tokens/s / gpu_count (null without hardware)",
    ),
    "requests_per_s": Figure(Run.requests_per_s, "successful requests/s"),
    "mean_concurrency": Figure(Run.mean_concurrency, "mean concurrency (Little's law)"),
    "error_rate": Figure(Run.error_rate, "failed / all measured requests"),
    "goodput_rps": Figure(Run.goodput_rps, "requests/s meeting the SLO"),
    "slo_attainment": Figure(Run.slo_attainment, "requests meeting the SLO / all"),
    "gpu_util_mean": Figure(Run.gpu_util_mean, "GPU utilisation 0..1, time-averaged"),
    "cost_per_million_output_tokens_usd": Figure(
        Run.cost_per_million_output_tokens_usd,
        "USD per million output tokens at the run's stored price (per GPU-hour or per token)",
    ),
    "cost_per_million_total_tokens_usd": Figure(
        Run.cost_per_million_total_tokens_usd,
        "USD per million input + output tokens at the run's stored price",
    ),
}


def _figure(name: str, split: bool) -> ColumnElement[Any] | InstrumentedAttribute[Any]:
    """A figure's per-run value, or per model of the run with split=model (a run of one
    model keeps its own; per GPU divides the model's tokens/s)."""
    if not split:
        return FIGURES[name].value
    if name in ("output_tokens_per_s_per_gpu", "total_tokens_per_s_per_gpu"):
        tokens = MODEL_FIGURES[name.removesuffix("_per_gpu")]
        return of_model(name, FIGURES[name].value, _per_gpu(tokens))
    return of_model(name, FIGURES[name].value)


#: Sort keys besides the figures.
SORT_KEYS = ("model", "engine", "hardware", "gpu_count", "mode", "level", "runs", "measured_at")


@dataclass(frozen=True, slots=True)
class ComparisonFilter:
    """Which runs a comparison reads; lists match any of their values, tags all of theirs."""

    models: Sequence[str] = ()
    hardware: Sequence[str] = ()
    engines: Sequence[str] = ()
    endpoint_ids: Sequence[uuid.UUID] = ()
    tags: Sequence[tuple[str, str | None]] = ()
    fingerprints: Sequence[str] = ()
    #: Workload presets the runs' jobs named (workload.preset).
    presets: Sequence[str] = ()
    modes: Sequence[str] = ()
    levels: Sequence[float] = ()
    since: datetime | None = None
    until: datetime | None = None
    slo_passed: bool | None = None
    include_client_bound: bool = False
    #: Only runs whose evidence is adequate (the frontier's rule); runs stored before
    #: adequacy verdicts count when they have enough successful requests.
    adequate_only: bool = False
    #: split=model: a row per model a run's requests asked for (workload.models); `models`
    #: then matches that model as well as the deployment's.
    split_by_model: bool = False


@dataclass(frozen=True, slots=True)
class ComparisonRow:
    """One deployment (at one load level) over the runs it aggregates."""

    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int
    mode: str
    level: float
    workload_fingerprint: str | None
    #: With split=model, the model this row's requests asked for; None otherwise.
    served_model: str | None
    runs: int
    run_ids: list[uuid.UUID]
    endpoint_ids: list[uuid.UUID]
    client_bound: bool
    slo_passed: bool | None
    first_measured_at: datetime | None
    last_measured_at: datetime | None
    figures: dict[str, float | None] = field(default_factory=dict)
    #: False when any of its runs was inadequate evidence (then `inadequate` says why, one
    #: reason per code), True when all were adequate, None when none had a verdict.
    adequate: bool | None = None
    inadequate: list[dict[str, str]] = field(default_factory=list)

    @property
    def deployment(self) -> dict[str, Any]:
        """What was measured (model, engine, hardware, GPU count), as the API nests it."""
        return {
            "model": self.model,
            "engine": self.engine,
            "hardware": self.hardware,
            "gpu_count": self.gpu_count,
        }


@dataclass(frozen=True, slots=True)
class ComparisonResult:
    """A page of rows, how many rows match in all, and the workloads they come from."""

    rows: list[ComparisonRow]
    total: int
    fingerprints: list[str | None]


@dataclass(frozen=True, slots=True)
class LeftOut:
    """A run a query left out, and why (adequacy reasons)."""

    run_id: uuid.UUID
    level: float
    mode: str
    reasons: list[dict[str, str]]


def adequate_clause() -> ColumnElement[bool]:
    """Runs whose evidence is adequate: their verdict says ok, or (stored before verdicts)
    they have at least ADEQUATE_MIN_REQUESTS successful requests."""
    return or_(
        Run.adequacy["ok"].as_boolean().is_(True),
        and_(Run.adequacy.is_(None), Run.requests_succeeded >= ADEQUATE_MIN_REQUESTS),
    )


def _where(team_id: uuid.UUID, f: ComparisonFilter) -> list[ColumnElement[bool]]:
    where: list[ColumnElement[bool]] = [owned_by(Run, team_id), Run.status == "succeeded"]
    # Model, engine, hardware and GPU count as the run measured them (its deployment);
    # tags are the endpoint's as they are now (they label, they do not measure).
    any_of: list[tuple[Any, Sequence[Any]]] = [
        (Deployment.model, () if f.split_by_model else f.models),
        (func.lower(Deployment.hardware), [h.lower() for h in f.hardware]),
        (Deployment.engine, f.engines),
        (Run.endpoint_id, f.endpoint_ids),
        (Run.workload_fingerprint, f.fingerprints),
        (Run.mode, f.modes),
        (Run.level, [float(x) for x in f.levels]),
    ]
    where += [column.in_(values) for column, values in any_of if values]
    if f.split_by_model and f.models:
        # A run whose deployment is one of them, or that sent requests to one of them.
        spread = select(RunModelFigures.run_id).where(RunModelFigures.model.in_(f.models))
        where.append(or_(Deployment.model.in_(f.models), Run.id.in_(spread)))
    if f.tags:
        tagged = readable(Endpoint, team_id, Endpoint.id)
        for key, value in f.tags:
            tagged = tagged.where(
                Endpoint.tags.has_key(key)
                if value is None
                else Endpoint.tags.contains({key: value})
            )
        where.append(Run.endpoint_id.in_(tagged))
    if f.presets:
        named = readable(Job, team_id, Job.id).where(Job.workload["preset"].astext.in_(f.presets))
        where.append(Run.job_id.in_(named))
    if f.since is not None:
        where.append(Run.finished_at >= f.since)
    if f.until is not None:
        where.append(Run.finished_at < f.until)
    if f.slo_passed is not None:
        where.append(Run.slo_passed.is_(f.slo_passed))
    if not f.include_client_bound:
        where.append(not_client_bound())
    if f.adequate_only:
        where.append(adequate_clause())
    return where


async def count_client_bound_left_out(
    session: AsyncSession, team_id: uuid.UUID, f: ComparisonFilter
) -> int:
    """Runs that match `f` but were left out for being client-bound (0 when `f` includes
    them), whatever their adequacy verdict says (it says client_bound too)."""
    if f.include_client_bound:
        return 0
    wider = replace(f, include_client_bound=True, adequate_only=False)
    query = (
        select(func.count())
        .select_from(Run)
        .join(Deployment, Deployment.id == Run.deployment_id)
        .where(and_(*_where(team_id, wider)), Run.client_bound.is_(True))
    )
    return int((await session.execute(query)).scalar_one())


async def inadequate_left_out(
    session: AsyncSession, team_id: uuid.UUID, f: ComparisonFilter, *, limit: int = 200
) -> tuple[int, list[LeftOut]]:
    """Runs that match `f` except that their evidence is inadequate (client-bound ones are
    counted apart): how many, and up to `limit` of them with their reasons, newest first."""
    wider = replace(f, adequate_only=False)
    where = [*_where(team_id, wider), ~adequate_clause()]
    base = select(Run).join(Deployment, Deployment.id == Run.deployment_id).where(and_(*where))
    total = int(
        (await session.execute(select(func.count()).select_from(base.subquery()))).scalar_one()
    )
    rows = (
        await session.execute(
            select(
                Run.id,
                Run.level,
                Run.mode,
                Run.adequacy,
                Run.client_bound,
                Run.requests_succeeded,
            )
            .join(Deployment, Deployment.id == Run.deployment_id)
            .where(and_(*where))
            .order_by(Run.finished_at.desc().nullslast(), Run.id)
            .limit(limit)
        )
    ).all()
    return total, [
        LeftOut(
            r.id,
            r.level,
            r.mode,
            inadequate_reasons(
                r.adequacy, client_bound=r.client_bound, requests_succeeded=r.requests_succeeded
            ),
        )
        for r in rows
    ]


_DEPLOYMENT_KEYS = ("model", "engine", "hardware", "gpu_count")
_LEVEL_KEYS = ("workload_fingerprint", "mode", "level")


def _level_keys(split: bool) -> tuple[str, ...]:
    """A group's keys besides its deployment: with split=model, the model asked for too
    (never carried otherwise: a constant column in every CTE costs the query a third)."""
    return (*_LEVEL_KEYS, "served_model") if split else _LEVEL_KEYS


def _aggregate(
    value: ColumnElement[Any] | InstrumentedAttribute[Any],
    how: Aggregate,
    finished_at: ColumnElement[Any] | InstrumentedAttribute[Any],
    run_id: ColumnElement[Any] | InstrumentedAttribute[Any],
) -> ColumnElement[Any]:
    if how == "median":
        return func.percentile_cont(0.5).within_group(value)
    newest_first = aggregate_order_by(value, finished_at.desc().nullslast(), run_id.desc())
    return func.array_agg(newest_first)[1]


def _deployments(team_id: uuid.UUID) -> CTE:
    """The team's deployments, each with its number in (model, engine, hardware, GPU count)
    order, so runs group and sort by one integer instead of four texts."""
    return (
        select(
            Deployment.id.label("deployment_id"),
            func.row_number()
            .over(
                order_by=(
                    Deployment.model,
                    Deployment.engine,
                    Deployment.hardware,
                    Deployment.gpu_count,
                )
            )
            .label("deployment"),
            Deployment.model.label("model"),
            Deployment.engine.label("engine"),
            Deployment.hardware.label("hardware"),
            Deployment.gpu_count.label("gpu_count"),
        )
        .where(owned_by(Deployment, team_id))
        .cte("numbered")
    )


def _groups(
    team_id: uuid.UUID,
    f: ComparisonFilter,
    deployments: CTE,
    *,
    figures: Sequence[str],
    group_by: GroupBy,
    aggregate: Aggregate,
) -> CTE:
    """One row per group with its run ids and only what choosing and ordering the groups
    needs (the sort figures), read from the covering index ix_runs_comparisons: cheap over
    thousands of groups, where every figure of every group is not."""
    d = deployments.c
    # Byte order ("C") for the texts: grouping sorts 10^4 runs, and locale-aware comparison
    # would cost more than everything else together.
    split = f.split_by_model
    level_keys: list[ColumnElement[Any]] = [
        Run.workload_fingerprint.collate("C").label("workload_fingerprint"),
        Run.mode.collate("C").label("mode"),
        Run.level.label("level"),
    ]
    if split:
        level_keys.append(served_model().collate("C").label("served_model"))
    where = _where(team_id, f)
    if split and f.models:
        where.append(served_model().in_(f.models))
    levels = (
        select(
            d.deployment,
            *level_keys,
            func.count().label("runs"),
            func.max(Run.finished_at).label("last_measured_at"),
            func.array_agg(Run.id).label("run_ids"),
            *(
                _aggregate(_figure(n, split), aggregate, Run.finished_at, Run.id).label(n)
                for n in figures
            ),
        )
        .select_from(Run)
        .join(Deployment, Deployment.id == Run.deployment_id)
        .join(deployments, d.deployment_id == Run.deployment_id)
    )
    if split:
        levels = levels.outerjoin(RunModelFigures, RunModelFigures.run_id == Run.id)
    levels = levels.where(and_(*where)).group_by(d.deployment, *level_keys)
    if group_by == "deployment_level":
        return levels.cte("groups")
    sub = levels.subquery("levels")
    # One row per deployment and workload (and model asked for, with split=model).
    per = [sub.c.deployment, sub.c.workload_fingerprint]
    if split:
        per.append(sub.c.served_model)
    return (
        select(sub)
        .ext(distinct_on(*per))
        .order_by(*per, sub.c.output_tokens_per_s.desc().nullslast(), sub.c.level.desc())
        .cte("groups")
    )


async def compare(
    session: AsyncSession,
    team_id: uuid.UUID,
    f: ComparisonFilter,
    *,
    figures: Sequence[str],
    group_by: GroupBy = "deployment_level",
    aggregate: Aggregate = "median",
    sort: Sequence[tuple[str, bool]] = (),
    limit: int | None = None,
    offset: int = 0,
) -> ComparisonResult:
    """Rows of the comparison, sorted by `sort` ((key, descending) pairs; nulls last) and
    then by deployment and level, one page of them, with the total and the fingerprints of
    every matching row (not just this page's).

    A row is one deployment, load level and workload (group_by deployment_level; repeated
    runs aggregated by `aggregate`), or one deployment and workload at its level with the
    highest output tokens/s (group_by deployment). The groups are chosen and ordered over
    narrow rows first; every figure is then aggregated for the page's groups only, from
    their runs looked up by id.
    """
    sort_figures = [k for k, _ in sort if k in FIGURES]
    shown = list(dict.fromkeys([*figures, *sort_figures]))
    choose = list(
        dict.fromkeys(sort_figures + (["output_tokens_per_s"] if group_by == "deployment" else []))
    )
    deployments = _deployments(team_id)
    groups = _groups(
        team_id, f, deployments, figures=choose, group_by=group_by, aggregate=aggregate
    )
    g = groups.c
    # One row per deployment: its number and names.
    info = deployments
    column = {"measured_at": g.last_measured_at, "runs": g.runs, "mode": g.mode, "level": g.level}
    column.update({k: info.c[k] for k in _DEPLOYMENT_KEYS})
    order: list[ColumnElement[Any]] = []
    for key, descending in sort:
        col = column[key] if key in column else g[key]
        order.append(col.desc().nullslast() if descending else col.asc().nullslast())
    order += [g.deployment.asc(), g.workload_fingerprint.asc().nullslast(), g.mode, g.level]
    split = f.split_by_model
    if split:
        order.append(g.served_model.asc().nullslast())
    keys = _level_keys(split)
    fingerprints = select(func.array_agg(distinct(g.workload_fingerprint))).scalar_subquery()
    page_query = (
        select(
            g.deployment,
            *(g[k] for k in keys),
            g.run_ids,
            func.row_number().over(order_by=order).label("position"),
            func.count().over().label("total"),
            fingerprints.label("fingerprints"),
        )
        .select_from(groups)
        .order_by(*order)
        .offset(offset)
    )
    if any(key in _DEPLOYMENT_KEYS for key, _ in sort):
        # Their names only when sorted by them: the deployment number already orders by
        # model, engine, hardware and GPU count.
        page_query = page_query.join(info, info.c.deployment == g.deployment)
    if limit is not None:
        page_query = page_query.limit(limit)
    page = page_query.cte("page")
    # The page's runs, one line each in page order, aggregated here: thousands of tiny
    # per-group medians are far cheaper in Python than as ordered-set aggregates in SQL.
    runs_query = (
        select(
            page.c.position,
            page.c.total,
            # Once, not on every line: it is the same list for the whole page.
            case((page.c.position == offset + 1, page.c.fingerprints)).label("fingerprints"),
            *(info.c[k] for k in _DEPLOYMENT_KEYS),
            *(page.c[k] for k in _LEVEL_KEYS),
            (page.c.served_model if split else literal(None, String)).label("served_model"),
            Run.id.label("run_id"),
            Run.endpoint_id.label("endpoint_id"),
            Run.finished_at.label("finished_at"),
            Run.client_bound.label("client_bound"),
            Run.slo_passed.label("slo_passed"),
            Run.adequacy.label("adequacy"),
            # With split=model, the row's model's own successful requests (its evidence).
            (
                of_model(
                    "requests_succeeded", Run.requests_succeeded, RunModelFigures.requests_succeeded
                )
                if split
                else Run.requests_succeeded
            ).label("requests_succeeded"),
            *(_figure(n, f.split_by_model).label(n) for n in shown),
        )
        .select_from(page)
        .join(info, info.c.deployment == page.c.deployment)
        .join(Run, Run.id == any_(page.c.run_ids))
        .join(Deployment, Deployment.id == Run.deployment_id)
        .order_by(page.c.position)
    )
    if f.split_by_model:
        # The row's model of each of its runs (none for a run of one model).
        runs_query = runs_query.outerjoin(
            RunModelFigures,
            and_(
                RunModelFigures.run_id == Run.id,
                RunModelFigures.model == page.c.served_model,
            ),
        )
    # Core execution on the connection: the ORM's row processing would cost more than the
    # query itself on a 500-row page.
    result = (await (await session.connection()).execute(runs_query)).all()
    if result:
        total, seen = int(result[0].total), list(result[0].fingerprints or [])
    else:
        summary = (
            await session.execute(
                select(func.count(), func.array_agg(distinct(g.workload_fingerprint)))
            )
        ).one()
        total, seen = int(summary[0]), list(summary[1] or [])
    rows = [
        _row(list(runs), shown, aggregate, split=split)
        for _, runs in itertools.groupby(result, key=lambda r: r[0])
    ]
    # Nulls (runs measured before fingerprints) last, so the list reads the same every time.
    return ComparisonResult(rows, total, sorted(seen, key=lambda x: (x is None, x or "")))


#: Positions of the lines of the page query (after position, total and fingerprints).
_MODEL, _ENGINE, _HARDWARE, _GPUS, _FINGERPRINT, _MODE, _LEVEL, _SERVED = range(3, 11)
_RUN_ID, _ENDPOINT_ID, _FINISHED, _CLIENT_BOUND, _SLO_PASSED = range(11, 16)
_ADEQUACY, _SUCCEEDED, _FIGURES = range(16, 19)


def _newest(run: Sequence[Any]) -> tuple[bool, datetime, uuid.UUID]:
    """Order of "latest": by finish time, then id, as `_aggregate` orders in SQL."""
    return (run[_FINISHED] is not None, run[_FINISHED] or datetime.min, run[_RUN_ID])


def median(values: Sequence[float]) -> float | None:
    """The median as Postgres's percentile_cont(0.5) computes it (same arithmetic), so a
    row shows exactly the value it was sorted by."""
    n = len(values)
    if n <= 1:
        return values[0] if values else None
    ordered = sorted(values)
    half = n // 2
    if n % 2:
        return ordered[half]
    # percentile_cont at position (n - 1) / 2, halfway between two order statistics.
    low, high = ordered[half - 1], ordered[half]
    return low + (high - low) * 0.5


def _row(
    runs: Sequence[Sequence[Any]],
    figures: Sequence[str],
    aggregate: Aggregate,
    *,
    split: bool = False,
) -> ComparisonRow:
    """One row from the lines of its runs (all of one group, at least one). With `split`,
    a model's row is also inadequate when that model's own successful requests in a run are
    too few for its percentiles, whatever the run's verdict on all of them says."""
    first = runs[0]
    by_time = sorted(runs, key=_newest) if len(runs) > 1 else runs
    columns = list(zip(*runs, strict=True))
    finished = [t for t in columns[_FINISHED] if t is not None]
    passed = [p for p in columns[_SLO_PASSED] if p is not None]
    values: dict[str, float | None]
    if aggregate == "median" and len(runs) > 1:
        values = {
            name: median([v for v in columns[_FIGURES + i] if v is not None])
            for i, name in enumerate(figures)
        }
    elif aggregate == "median":
        values = dict(zip(figures, first[_FIGURES:], strict=True))
    else:
        values = {name: by_time[-1][_FIGURES + i] for i, name in enumerate(figures)}
    reasons: dict[str, dict[str, str]] = {}
    verdicts = 0
    for run in runs:
        verdicts += run[_ADEQUACY] is not None
        succeeded = run[_SUCCEEDED] or 0
        if split and succeeded < ADEQUATE_MIN_REQUESTS:
            # Said first: the model's own count, which the run's verdict on all its
            # requests does not see.
            reasons.setdefault(
                "few_requests",
                {
                    "code": "few_requests",
                    "detail": f"{succeeded} successful measured requests of model "
                    f"{run[_SERVED]} in run {run[_RUN_ID]}: fewer than "
                    f"{ADEQUATE_MIN_REQUESTS}, too few for its percentiles",
                },
            )
        for reason in inadequate_reasons(
            run[_ADEQUACY],
            client_bound=run[_CLIENT_BOUND],
            requests_succeeded=run[_SUCCEEDED],
        ):
            reasons.setdefault(reason["code"], reason)
    adequate = False if reasons else (True if verdicts else None)
    return ComparisonRow(
        model=first[_MODEL],
        engine=first[_ENGINE],
        hardware=first[_HARDWARE],
        gpu_count=first[_GPUS],
        mode=first[_MODE],
        level=first[_LEVEL],
        workload_fingerprint=first[_FINGERPRINT],
        served_model=first[_SERVED],
        runs=len(runs),
        run_ids=[r[_RUN_ID] for r in by_time],
        endpoint_ids=sorted(set(columns[_ENDPOINT_ID])),
        client_bound=any(columns[_CLIENT_BOUND]),
        slo_passed=all(passed) if passed else None,
        first_measured_at=min(finished, default=None),
        last_measured_at=max(finished, default=None),
        figures=values,
        adequate=adequate,
        inadequate=list(reasons.values()),
    )
