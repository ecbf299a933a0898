"""Queries behind history and regressions: a run's baseline, the per-request samples the
tests read, the stored change, and an endpoint's runs as series over time. Callers commit."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import ColumnElement, Row, String, func, literal, select, tuple_, update
from sqlalchemy.dialects.postgresql import distinct_on
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import owned_by, readable, unscoped
from infercost.endpoints.models import Endpoint
from infercost.history.stats import METRICS, FloatArray
from infercost.jobs.deployments import Deployment
from infercost.jobs.models import RequestSample, Run, RunModelFigures
from infercost.jobs.per_model import MODEL_FIGURES, of_model, served_model

#: What a history point says of a run's requests as a whole: null on a model's point
#: (split=model), whose figures are its own (infercost.jobs.per_model.MODEL_FIGURES).
_WHOLE_RUN = ("change_verdict", "change")

#: The run columns a history point shows (GET /v1/endpoints/{id}/history).
POINT_COLUMNS = (
    "id",
    "job_id",
    "workload_fingerprint",
    "mode",
    "level",
    "started_at",
    "finished_at",
    "engine_version",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "output_tokens_per_s",
    "cost_per_million_output_tokens_usd",
    "client_bound",
    "slo_passed",
    "change_verdict",
    "change",
)


#: The run columns a plain twin shows beside a structured run (HistoryRepository.newest_like).
TWIN_COLUMNS = (
    "id",
    "job_id",
    "endpoint_id",
    "deployment_id",
    "workload_fingerprint",
    "mode",
    "level",
    "finished_at",
    "ttft_p50_ms",
    "ttft_p95_ms",
    "tpot_p50_ms",
    "tpot_p95_ms",
    "e2e_p50_ms",
    "e2e_p95_ms",
    "output_tokens_per_s",
)


@dataclass(frozen=True, slots=True)
class HistoryFilter:
    """Which of an endpoint's succeeded runs history reads; None matches any."""

    workload_fingerprint: str | None = None
    mode: str | None = None
    level: float | None = None
    since: datetime | None = None
    until: datetime | None = None
    #: split=model: a series per model a run's requests asked for (workload.models), each
    #: point that model's figures; `model` then keeps one model's series only.
    split_by_model: bool = False
    model: str | None = None


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One run as a point of a series, and how many runs its series holds in the window."""

    values: dict[str, Any]
    series_total: int


def not_client_bound() -> ColumnElement[bool]:
    """Runs not flagged client-bound, unknown (NULL) included: a client-bound run measured
    the load generator as much as the endpoint, so baselines and comparisons skip it."""
    return Run.client_bound.is_not(True)


class HistoryRepository:
    """History reads scoped by team; the worker side reads by id (it owns the job)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    # --- worker side: deciding a run's change ---------------------------------------------

    async def succeeded_runs(self, job_id: uuid.UUID) -> list[Run]:
        """The job's succeeded runs in level order."""
        query = (
            select(Run)
            .where(Run.job_id == job_id, Run.status == "succeeded")
            .order_by(Run.level_index)
        )
        reason = "the worker that ran the job decides its runs' changes"
        rows = await self.session.scalars(unscoped(query, reason))
        return list(rows)

    async def baseline(self, run: Run) -> Run | None:
        """The latest succeeded, not client-bound run of another job that finished before
        `run`, on the same endpoint with the same workload fingerprint, mode and level:
        what `run` is judged against. None when there is none (or `run` has no
        fingerprint, so nothing is known to be comparable)."""
        if run.workload_fingerprint is None or run.finished_at is None:
            return None
        baseline: Run | None = await self.session.scalar(
            readable(Run, run.team_id)
            .where(
                Run.endpoint_id == run.endpoint_id,
                Run.workload_fingerprint == run.workload_fingerprint,
                Run.mode == run.mode,
                Run.level == run.level,
                Run.status == "succeeded",
                Run.finished_at < run.finished_at,
                Run.job_id != run.job_id,
                not_client_bound(),
            )
            .order_by(Run.finished_at.desc(), Run.id.desc())
            .limit(1)
        )
        return baseline

    # --- API side: a structured run's plain twin ----------------------------------------

    async def newest_like(
        self,
        team_id: uuid.UUID,
        keys: Sequence[tuple[uuid.UUID, int, str, str, float]],
        *,
        client_bound: bool = False,
    ) -> dict[tuple[uuid.UUID, int, str, str, float], Row[Any]]:
        """For each (endpoint, deployment, workload fingerprint, mode, level) of `keys`, the
        team's
        newest succeeded, not client-bound run there (TWIN_COLUMNS of it), in one query;
        keys without such a run are left out. A structured run's plain twin is the one of
        its fingerprint without `structured` (docs/figures.md). With `client_bound`, the
        newest client-bound one instead (to say why a key has no twin)."""
        if not keys:
            return {}
        series = (Run.endpoint_id, Run.deployment_id, Run.workload_fingerprint, Run.mode, Run.level)
        rows = await self.session.execute(
            readable(Run, team_id, *(getattr(Run, name) for name in TWIN_COLUMNS))
            .where(
                tuple_(*series).in_(list(dict.fromkeys(tuple(k) for k in keys))),
                Run.status == "succeeded",
                Run.finished_at.is_not(None),
                Run.client_bound.is_(True) if client_bound else not_client_bound(),
            )
            .ext(distinct_on(*series))
            .order_by(*series, Run.finished_at.desc(), Run.id.desc())
        )
        return {
            (
                row.endpoint_id,
                row.deployment_id,
                row.workload_fingerprint,
                row.mode,
                float(row.level),
            ): row
            for row in rows
        }

    async def samples(self, run_id: uuid.UUID) -> dict[str, FloatArray]:
        """Each tested metric's values over the run's measured window (warm-up excluded),
        successful requests only (a failed request's timings describe the failure).
        TPOT is null for requests with one output token and is left out, never zero."""
        measured = (
            RequestSample.run_id == run_id,
            RequestSample.warmup.is_(False),
            RequestSample.error_class.is_(None),
        )
        columns = [getattr(RequestSample, name) for name in METRICS]
        row = (
            await self.session.execute(
                select(*(func.array_agg(c).filter(c.is_not(None)) for c in columns)).where(
                    *measured
                )
            )
        ).one()
        return {
            name: np.asarray(values or [], dtype=np.float64)
            for name, values in zip(METRICS, row, strict=True)
        }

    async def outcomes(
        self, run_id: uuid.UUID
    ) -> tuple[list[float], list[float | None], list[str | None]]:
        """The measured requests' send times, end-to-end times and error classes (None for
        a success), for the time the endpoint was unavailable."""
        rows = await self.session.execute(
            select(RequestSample.t_send, RequestSample.e2e_ms, RequestSample.error_class).where(
                RequestSample.run_id == run_id, RequestSample.warmup.is_(False)
            )
        )
        sends, e2e, errors = [], [], []
        for t_send, e2e_ms, error_class in rows:
            sends.append(float(t_send))
            e2e.append(None if e2e_ms is None else float(e2e_ms))
            errors.append(error_class)
        return sends, e2e, errors

    async def store_change(
        self,
        run_id: uuid.UUID,
        *,
        baseline_run_id: uuid.UUID | None,
        verdict: str,
        change: dict[str, Any],
    ) -> None:
        """Record a run's change (recomputing replaces it, so a redelivered task is safe)."""
        await self.session.execute(
            update(Run)
            .where(Run.id == run_id)
            .values(baseline_run_id=baseline_run_id, change_verdict=verdict, change=change)
        )

    # --- API side: reading history --------------------------------------------------------

    async def endpoint_exists(self, team_id: uuid.UUID, endpoint_id: uuid.UUID) -> bool:
        """True when the team has (or had: deleted endpoints keep their history) it."""
        found = await self.session.scalar(
            readable(Endpoint, team_id, Endpoint.id).where(Endpoint.id == endpoint_id)
        )
        return found is not None

    async def history(
        self,
        team_id: uuid.UUID,
        endpoint_id: uuid.UUID,
        f: HistoryFilter,
        *,
        per_series: int,
    ) -> list[HistoryRow]:
        """The endpoint's succeeded runs matching `f`, the latest `per_series` of each series
        (workload fingerprint, mode, level), ordered series by series and in time order
        within one. Walks ix_runs_history, which is keyed in that order."""
        where: list[ColumnElement[bool]] = [
            owned_by(Run, team_id),
            Run.endpoint_id == endpoint_id,
            Run.status == "succeeded",
            Run.finished_at.is_not(None),
        ]
        if f.workload_fingerprint is not None:
            where.append(Run.workload_fingerprint == f.workload_fingerprint)
        if f.mode is not None:
            where.append(Run.mode == f.mode)
        if f.level is not None:
            where.append(Run.level == f.level)
        if f.since is not None:
            where.append(Run.finished_at >= f.since)
        if f.until is not None:
            where.append(Run.finished_at < f.until)
        columns: list[Any] = [getattr(Run, name) for name in POINT_COLUMNS]
        model: ColumnElement[Any] = literal(None, String)
        if f.split_by_model:
            # A model's point: its figures; the run's change judged all its requests, so a
            # model's point has none.
            columns = [
                of_model(name, getattr(Run, name)).label(name)
                if name in MODEL_FIGURES or name in _WHOLE_RUN
                else getattr(Run, name).label(name)
                for name in POINT_COLUMNS
            ]
            model = served_model()
            if f.model is not None:
                where.append(model == f.model)
        series: tuple[Any, ...] = (Run.workload_fingerprint, Run.mode, Run.level)
        if f.split_by_model:
            series += (model,)
        query = select(
            *columns,
            model.label("model"),
            func.row_number()
            .over(partition_by=series, order_by=(Run.finished_at.desc(), Run.id.desc()))
            .label("newest"),
            func.count().over(partition_by=series).label("series_total"),
        )
        if f.split_by_model:
            query = query.outerjoin(Deployment, Deployment.id == Run.deployment_id).outerjoin(
                RunModelFigures, RunModelFigures.run_id == Run.id
            )
        ranked = query.where(*where).subquery("ranked")
        rows = await self.session.execute(
            select(ranked)
            .where(ranked.c.newest <= per_series)
            .order_by(
                ranked.c.workload_fingerprint.asc().nulls_last(),
                ranked.c.mode,
                ranked.c.level,
                ranked.c.model.asc().nulls_last(),
                ranked.c.finished_at,
                ranked.c.id,
            )
        )
        return [
            HistoryRow(
                values={name: row._mapping[name] for name in (*POINT_COLUMNS, "model")},
                series_total=int(row.series_total),
            )
            for row in rows
        ]


def series_key(values: dict[str, Any]) -> tuple[str | None, str, float, str | None]:
    """The series a history row belongs to (its model with split=model)."""
    return (
        values["workload_fingerprint"],
        values["mode"],
        float(values["level"]),
        values.get("model"),
    )


def group_series(rows: Sequence[HistoryRow]) -> list[list[HistoryRow]]:
    """Consecutive rows of one series (history returns them series by series)."""
    groups: list[list[HistoryRow]] = []
    for row in rows:
        if groups and series_key(groups[-1][0].values) == series_key(row.values):
            groups[-1].append(row)
        else:
            groups.append([row])
    return groups
