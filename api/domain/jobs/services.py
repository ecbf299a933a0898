"""Submitting, reading and cancelling jobs; reading runs and their raw samples."""

from __future__ import annotations

import csv
import io
import uuid
from collections.abc import AsyncIterator
from functools import partial
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.db import after_commit
from api.domain.jobs.schemas import (
    CSV_COLUMNS,
    ClientHealth,
    Cost,
    Distribution,
    JobCreate,
    JobListItem,
    JobRead,
    Progress,
    RequestCounts,
    RunSummary,
    Sample,
    SamplePage,
    Telemetry,
)
from api.queue import TaskQueue
from infercost.cost import run_cost
from infercost.endpoints.repository import EndpointRepository
from infercost.errors import Conflict, InvalidInput, NotFound
from infercost.jobs.models import Job, RequestSample, Run
from infercost.jobs.repository import JobRepository
from infercost.metrics import distribution


def run_summary(run: Run) -> RunSummary:
    """The CONTRACT.md run summary of a stored run."""
    stats: dict[str, Any] = run.stats or {}
    empty = distribution([])

    def dist(name: str) -> Distribution:
        return msgspec.convert(stats.get(name) or empty, Distribution)

    cost = run_cost(
        run.usd_per_hour,
        output_tokens_per_s=run.output_tokens_per_s,
        total_tokens_per_s=run.total_tokens_per_s,
        requests_per_s=run.requests_per_s,
        goodput_output_tokens_per_s=run.goodput_output_tokens_per_s,
        reason=run.price_note,
    )
    client = stats.get("client")
    return RunSummary(
        id=run.id,
        job_id=run.job_id,
        level=run.level,
        mode=run.mode,
        status=run.status,
        started_at=run.started_at,
        finished_at=run.finished_at,
        requests=RequestCounts(
            total=run.requests_total,
            succeeded=run.requests_succeeded,
            failed=run.requests_failed,
            errors=dict(stats.get("errors") or {}),
        ),
        duration_s=run.duration_s,
        count_source=run.count_source,
        ttft_ms=dist("ttft_ms"),
        tpot_ms=dist("tpot_ms"),
        itl_ms=dist("itl_ms"),
        e2e_ms=dist("e2e_ms"),
        queue_delay_ms=dist("queue_delay_ms"),
        per_user_tokens_per_s=dist("per_user_tokens_per_s"),
        output_tokens_per_s=run.output_tokens_per_s,
        input_tokens_per_s=run.input_tokens_per_s,
        total_tokens_per_s=run.total_tokens_per_s,
        requests_per_s=run.requests_per_s,
        mean_concurrency=run.mean_concurrency,
        error_rate=run.error_rate,
        goodput_rps=run.goodput_rps,
        slo_attainment=run.slo_attainment,
        slo_passed=run.slo_passed,
        client_bound=run.client_bound,
        client=msgspec.convert(client, ClientHealth) if client else None,
        telemetry=Telemetry(),
        cost=msgspec.convert(cost, Cost, from_attributes=True),
    )


def _progress(job: Job) -> Progress:
    return Progress(done=job.progress_done, total=job.progress_total)


def job_list_item(job: Job) -> JobListItem:
    """A job without its runs."""
    return JobListItem(
        id=job.id,
        endpoint_id=job.endpoint_id,
        status=job.status,
        progress=_progress(job),
        created_at=job.created_at,
        started_at=job.started_at,
        finished_at=job.finished_at,
        error=job.error,
    )


def sample_read(sample: RequestSample) -> Sample:
    """The response shape of one stored request."""
    return Sample(
        seq=sample.seq,
        warmup=sample.warmup,
        t_sched=sample.t_sched,
        t_send=sample.t_send,
        ttfb_ms=sample.ttfb_ms,
        ttft_ms=sample.ttft_ms,
        e2e_ms=sample.e2e_ms,
        n_in=sample.n_in,
        n_out=sample.n_out,
        count_source=sample.count_source,
        status=sample.status,
        error_class=sample.error_class,
        error=sample.error,
        chunk_times_ms=list(sample.chunk_times_ms),
    )


class JobService:
    """Job rules for one team: valid plans, known endpoints, enqueue after commit."""

    def __init__(
        self, session: AsyncSession, team_id: uuid.UUID, queue: TaskQueue, max_concurrency: int
    ) -> None:
        self.session = session
        self.jobs = JobRepository(session)
        self.endpoints = EndpointRepository(session)
        self.team_id = team_id
        self.queue = queue
        self.max_concurrency = max_concurrency

    def _check(self, data: JobCreate) -> None:
        too_high = [lvl for lvl in data.load.levels if lvl > self.max_concurrency]
        if too_high:
            raise InvalidInput(
                "load.levels",
                f"{too_high[0]} exceeds this server's limit of {self.max_concurrency} "
                "concurrent requests (INFERCOST_MAX_CONCURRENCY)",
            )
        for name in ("input_tokens", "output_tokens"):
            lengths = getattr(data.workload, name)
            if lengths.min is not None and lengths.max is not None and lengths.min > lengths.max:
                raise InvalidInput(f"workload.{name}", "min is greater than max")

    async def submit(self, data: JobCreate, idempotency_key: str | None) -> tuple[Job, bool]:
        """Store a queued job and enqueue it once committed; the bool says whether it is new."""
        self._check(data)
        if await self.endpoints.get(self.team_id, data.endpoint_id) is None:
            raise InvalidInput(
                "endpoint_id", f"no endpoint {data.endpoint_id} in your team: GET /v1/endpoints"
            )
        load = data.load
        job, created = await self.jobs.add_job(
            {
                "team_id": self.team_id,
                "endpoint_id": data.endpoint_id,
                "status": "queued",
                "workload": msgspec.to_builtins(data.workload),
                "load": msgspec.to_builtins(load),
                "slo": msgspec.to_builtins(data.slo) if data.slo else None,
                "idempotency_key": idempotency_key,
                "progress_total": len(load.levels)
                * (load.requests_per_level + load.warmup_requests),
            }
        )
        if created:
            after_commit(self.session, partial(self.queue.enqueue_job, job.id))
        return job, created

    async def get(self, job_id: uuid.UUID) -> Job:
        """The team's job, or 404."""
        job = await self.jobs.get_job(self.team_id, job_id)
        if job is None:
            raise NotFound(f"no job {job_id}: GET /v1/jobs lists yours")
        return job

    async def read(self, job: Job) -> JobRead:
        """The job with its runs."""
        runs = await self.jobs.runs_of_jobs([job.id])
        return JobRead(
            **msgspec.structs.asdict(job_list_item(job)),
            workload=job.workload,
            load=job.load,
            slo=job.slo,
            runs=[run_summary(r) for r in runs],
        )

    async def page(self, limit: int, offset: int, status: str | None) -> tuple[list[Job], int]:
        """A page of the team's jobs."""
        return await self.jobs.page_jobs(self.team_id, limit=limit, offset=offset, status=status)

    async def cancel(self, job_id: uuid.UUID) -> Job:
        """Stop a queued or running job; finished jobs cannot be cancelled."""
        job = await self.get(job_id)
        cancelled = await self.jobs.cancel(self.team_id, job_id)
        if cancelled is None:
            raise Conflict(f"job {job_id} is already {job.status}")
        return cancelled

    async def runs(self, job_id: uuid.UUID) -> list[RunSummary]:
        """Summaries of the job's runs, in level order."""
        await self.get(job_id)
        return [run_summary(r) for r in await self.jobs.runs_of_jobs([job_id])]

    async def run(self, run_id: uuid.UUID) -> Run:
        """The team's run, or 404."""
        run = await self.jobs.get_run(self.team_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        return run

    async def samples(
        self, run_id: uuid.UUID, *, after: int, limit: int, warmup: bool | None
    ) -> SamplePage:
        """One page of a run's raw samples."""
        await self.run(run_id)
        rows = await self.jobs.samples_page(run_id, after_seq=after, limit=limit, warmup=warmup)
        return SamplePage(
            items=[sample_read(s) for s in rows],
            next_after=rows[-1].seq if len(rows) == limit else None,
        )


async def samples_csv(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: uuid.UUID, warmup: bool | None
) -> AsyncIterator[str]:
    """A run's samples as CSV text, streamed in batches over a session of its own.

    The response outlives the request's session, so the export opens its own; the caller
    checks the team's access first.
    """
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    async with sessionmaker() as session:
        count = 0
        async for sample in JobRepository(session).stream_samples(run_id, warmup=warmup):
            writer.writerow(
                [
                    ""
                    if (v := getattr(sample, c)) is None
                    else str(v).lower()
                    if isinstance(v, bool)
                    else v
                    for c in CSV_COLUMNS
                ]
            )
            count += 1
            if count % 1000 == 0:
                yield buffer.getvalue()
                buffer.seek(0)
                buffer.truncate()
    yield buffer.getvalue()
