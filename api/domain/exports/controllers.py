"""GET /v1/jobs/{id}/export: the whole job as one file."""

from __future__ import annotations

from typing import Annotated, Literal

from litestar import Controller, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import QueryParameter
from litestar.response.base import ASGIResponse

from api.domain.endpoints.controllers import provide_endpoint_service
from api.domain.endpoints.services import EndpointService
from api.domain.exports.llmd import LLMD_MEDIA_TYPE, report_lines
from api.domain.exports.services import (
    NDJSON_MEDIA_TYPE,
    accepts_gzip,
    export_response,
    job_endpoint,
)
from api.domain.jobs.controllers import provide_job_service
from api.domain.jobs.services import JobService
from api.schemas import PathId


class ExportController(Controller):
    """GET /v1/jobs/{id}/export (under the jobs tag, beside the job it exports)."""

    path = "/v1/jobs"
    tags = ["jobs"]
    dependencies = {"jobs": Provide(provide_job_service, sync_to_thread=False)}

    @get(
        "/{job_id:uuid}/export",
        summary="The whole job as one file",
        description="JSON Lines (`application/x-ndjson`): a `job` line, then per level a `run` "
        "line (its summary) followed by its `sample` lines; the README lists every field. "
        "Streamed; gzipped when Accept-Encoding allows gzip. With format=llmd: one llm-d "
        "benchmark report (version 0.2) per level, a line each.",
        media_type=NDJSON_MEDIA_TYPE,
        dependencies={"endpoints": Provide(provide_endpoint_service, sync_to_thread=False)},
    )
    async def export_job(
        self,
        request: Request[object, object, State],
        jobs: NamedDependency[JobService],
        endpoints: NamedDependency[EndpointService],
        job_id: PathId,
        fmt: Annotated[
            Literal["jsonl", "llmd"],
            QueryParameter(
                name="format",
                description="jsonl (infercost's own: job, runs and every sample) or llmd (an "
                "llm-d benchmark report v0.2 per level, one a line; summaries only)",
            ),
        ] = "jsonl",
    ) -> ASGIResponse:
        """One file to archive or load with pandas: the job, its runs' summaries and every
        raw sample, read page by page so a large job never sits in memory."""
        job = await jobs.read(await jobs.get(job_id))
        if fmt == "llmd":
            # A finished response like the streamed one (the handler returns ASGI responses
            # only: Litestar serialises nothing more).
            return ASGIResponse(
                body=report_lines(job, await job_endpoint(endpoints, job.endpoint_id)),
                media_type=LLMD_MEDIA_TYPE,
                headers={"Content-Disposition": f'attachment; filename="job-{job.id}.llmd.jsonl"'},
            )
        return export_response(
            request.app.state.sessionmaker,
            job,
            await job_endpoint(endpoints, job.endpoint_id),
            gzip=accepts_gzip(request.headers.get("accept-encoding", "")),
        )
