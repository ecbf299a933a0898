"""Job, run and raw-sample routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Literal

import msgspec
from litestar import Controller, MediaType, Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import FromQuery, HeaderParameter, JSONBody, QueryParameter
from litestar.response.base import ASGIResponse

from api.auth import AppSettings, CurrentCaller
from api.csv import csv_attachment, wants_csv
from api.db import DbSession
from api.domain.audit.services import AuditTrail
from api.domain.jobs.limits import JobLimits
from api.domain.jobs.schemas import JobCreate, JobListItem, JobRead, JobSubmitted
from api.domain.jobs.services import JobService, Repricing, job_list_item, samples_csv
from api.domain.runs.definitions import (
    DefinitionsParam,
    DefinitionsService,
    parse_tool,
    provide_definitions_service,
)
from api.domain.runs.schemas import RunSummary, SamplePage
from api.schemas import Limit, Offset, Page, PathId
from infercost.jobs.rules import ServerLimits

IdempotencyKey = Annotated[
    str | None,
    HeaderParameter(
        name="Idempotency-Key", max_length=200, description="the same key returns the same job"
    ),
]
JobStatus = Literal["queued", "running", "succeeded", "failed", "cancelled"]
PriceAt = Annotated[
    datetime | None,
    QueryParameter(
        description="RFC 3339: re-price with the price book in effect at that time "
        "(the run's endpoint's provider, hardware, pricing model and GPU count)"
    ),
]
UsdPerHour = Annotated[
    float | None,
    QueryParameter(ge=0, description="re-price at this USD per hour instead (not with price_at)"),
]


def provide_job_service(
    db_session: DbSession, caller: CurrentCaller, state: State, settings: AppSettings
) -> JobService:
    """The service for the caller's team."""
    return JobService(
        db_session, caller.team_id, state.task_queue, ServerLimits.from_settings(settings)
    )


def provide_job_limits(
    db_session: DbSession, caller: CurrentCaller, settings: AppSettings
) -> JobLimits:
    """The caps on the caller's team's jobs."""
    return JobLimits(db_session, caller.team_id, settings)


class JobController(Controller):
    """POST /v1/jobs (202); GET /v1/jobs; GET, DELETE /v1/jobs/{id}; POST /v1/jobs/{id}/cancel;
    runs."""

    path = "/v1/jobs"
    tags = ["jobs"]
    dependencies = {
        "jobs": Provide(provide_job_service, sync_to_thread=False),
        "job_limits": Provide(provide_job_limits, sync_to_thread=False),
    }

    @post("/", status_code=202, summary="Submit a benchmark job")
    async def submit_job(
        self,
        jobs: NamedDependency[JobService],
        job_limits: NamedDependency[JobLimits],
        audit: NamedDependency[AuditTrail],
        data: JSONBody[JobCreate],
        idempotency_key: IdempotencyKey = None,
    ) -> Response[JobSubmitted]:
        """Queue a job; poll GET /v1/jobs/{id} for progress. A repeated Idempotency-Key
        returns the job it first created (200) instead of creating another. A plan over the
        server's caps answers 422; a team at its cap of queued and running jobs, 409. A plan
        whose levels cannot be adequate (too few requests, windows too short) is accepted
        with `warnings`, or refused (422) when the body says `strict: true`."""
        job, created, warnings = await jobs.submit(data, idempotency_key)
        if created:
            # After the insert, under a per-team lock: the count includes this job.
            await job_limits.check_active()
            await audit.record(
                "job.create",
                "job",
                job.id,
                f"submitted job {job.id} against endpoint {job.endpoint_id}",
                {"endpoint_id": job.endpoint_id, "load": job.load},
            )
        return Response(await jobs.submitted(job, warnings), status_code=202 if created else 200)

    @get("/", summary="List jobs")
    async def list_jobs(
        self,
        jobs: NamedDependency[JobService],
        limit: Limit = 50,
        offset: Offset = 0,
        status: FromQuery[JobStatus | None] = None,
    ) -> Page[JobListItem]:
        """Your team's jobs, newest first."""
        rows, total = await jobs.page(limit, offset, status)
        return Page(items=[job_list_item(j) for j in rows], total=total, limit=limit, offset=offset)

    @get("/{job_id:uuid}", summary="Read a job")
    async def get_job(
        self,
        jobs: NamedDependency[JobService],
        job_id: PathId,
        price_at: PriceAt = None,
        usd_per_hour: UsdPerHour = None,
    ) -> JobRead:
        """Status, progress and a summary per finished level; `price_at` or `usd_per_hour`
        re-price the runs' cost blocks (the stored runs do not change)."""
        pricing = Repricing(price_at=price_at, usd_per_hour=usd_per_hour)
        return await jobs.read(await jobs.get(job_id), pricing)

    @post("/{job_id:uuid}/cancel", status_code=200, summary="Cancel a job")
    async def cancel_job(
        self, jobs: NamedDependency[JobService], audit: NamedDependency[AuditTrail], job_id: PathId
    ) -> JobRead:
        """Stop a queued or running job; levels already measured are kept."""
        job = await jobs.cancel(job_id)
        await audit.record("job.cancel", "job", job_id, f"cancelled job {job_id}")
        return await jobs.read(job)

    @delete("/{job_id:uuid}", summary="Delete a job")
    async def delete_job(
        self, jobs: NamedDependency[JobService], audit: NamedDependency[AuditTrail], job_id: PathId
    ) -> None:
        """Remove an ended job with its runs, raw samples and telemetry (204): comparisons,
        history, the status board and exports stop showing it. A queued or running job
        answers 409: cancel it first."""
        job = await jobs.delete(job_id)
        await audit.record(
            "job.delete",
            "job",
            job_id,
            f"deleted {job.status} job {job_id} with its runs and samples",
            {"endpoint_id": job.endpoint_id, "status": job.status, "created_at": job.created_at},
        )

    @get("/{job_id:uuid}/runs", summary="List a job's runs")
    async def list_runs(
        self,
        jobs: NamedDependency[JobService],
        job_id: PathId,
        price_at: PriceAt = None,
        usd_per_hour: UsdPerHour = None,
    ) -> list[RunSummary]:
        """One summary per load level, in level order; `price_at` or `usd_per_hour` re-price."""
        return await jobs.runs(job_id, Repricing(price_at=price_at, usd_per_hour=usd_per_hour))


class RunController(Controller):
    """GET /v1/runs/{id}; GET /v1/runs/{id}/requests (JSON pages or CSV)."""

    path = "/v1/runs"
    tags = ["runs"]
    dependencies = {
        "jobs": Provide(provide_job_service, sync_to_thread=False),
        "recompute": Provide(provide_definitions_service, sync_to_thread=False),
    }

    @get("/{run_id:uuid}", summary="Read a run summary")
    async def get_run(
        self,
        *,
        jobs: NamedDependency[JobService],
        recompute: NamedDependency[DefinitionsService],
        run_id: PathId,
        price_at: PriceAt = None,
        usd_per_hour: UsdPerHour = None,
        definitions: DefinitionsParam = None,
    ) -> RunSummary:
        """Every figure of one load level; `price_at` or `usd_per_hour` re-price its cost
        block (the stored run does not change); `definitions` adds the run's TPOT, ITL and
        throughput as vllm, guidellm or aiperf define them, from its raw samples (none once
        retention deleted them: `samples_pruned_at` says when)."""
        tool = None if definitions is None else parse_tool(definitions)
        summary = await jobs.summary(
            run_id, Repricing(price_at=price_at, usd_per_hour=usd_per_hour)
        )
        if tool is None or summary.samples_pruned_at is not None:
            # Definitions are recomputed from raw samples: a pruned run has none, and says
            # so in samples_pruned_at.
            return summary
        # jobs.summary answered 404 unless the run is the caller's team's; recompute reads
        # the samples scoped to the team as well.
        return msgspec.structs.replace(summary, definitions=await recompute.block(run_id, tool))

    @get(
        "/{run_id:uuid}/requests",
        summary="Raw per-request samples",
        description="JSON pages by default; send `Accept: text/csv` for the whole run as CSV.",
        responses={
            200: ResponseSpec(
                data_container=SamplePage,
                # Examples come from the fields' own; generated ones are random text.
                generate_examples=False,
                description="A page of samples (JSON), or all of them as CSV (Accept: text/csv)",
            )
        },
    )
    async def list_samples(
        self,
        *,
        request: Request[object, object, State],
        jobs: NamedDependency[JobService],
        run_id: PathId,
        after: Annotated[
            int,
            QueryParameter(
                ge=-1, le=2**31 - 1, description="last seq of the previous page (-1: the start)"
            ),
        ] = -1,
        limit: Annotated[int, QueryParameter(ge=1, le=5000)] = 1000,
        warmup: Annotated[
            bool | None, QueryParameter(description="only warm-up (true) or measured (false)")
        ] = None,
    ) -> ASGIResponse:
        """One row a request, in send order; warm-up requests are marked. Once retention
        deleted the run's samples, JSON answers no items with `samples_pruned_at` and a
        `note`, CSV a 410 saying so."""
        # Two media types from one route: Litestar sends a returned ASGI response as built.
        if wants_csv(request):
            await jobs.run_with_samples(run_id)
            return csv_attachment(
                samples_csv(request.app.state.sessionmaker, run_id, warmup), f"run-{run_id}.csv"
            )
        page = await jobs.samples(run_id, after=after, limit=limit, warmup=warmup)
        return ASGIResponse(body=msgspec.json.encode(page), media_type=MediaType.JSON)
