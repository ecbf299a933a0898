"""POST /v1/imports: a result file of vLLM's bench, GuideLLM or AIPerf as labelled runs."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, post
from litestar.di import NamedDependency, Provide
from litestar.params import QueryParameter

from api.auth import AppSettings, team_service
from api.domain.audit.services import AuditTrail
from api.domain.imports.services import ImportOptions, ImportService
from api.domain.jobs.controllers import provide_job_service
from api.domain.jobs.schemas import JobRead
from api.domain.jobs.services import JobService
from api.domain.traffic.services import too_large
from api.openapi import problem_responses
from api.uploads import file_body, read_capped
from infercost.imports.parse import ImportFormat

CONTENT_TYPES = ("application/json", "application/x-ndjson", "application/octet-stream")


ImportOperation = file_body(
    "the result file as the tool wrote it: vLLM's --save-result JSON (one "
    "result, or one a line), GuideLLM's benchmarks.json, AIPerf's "
    "profile_export_aiperf.json or profile_export.jsonl",
    CONTENT_TYPES,
)


class ImportController(Controller):
    """POST /v1/imports."""

    path = "/v1/imports"
    tags = ["imports"]
    dependencies = {
        "imports": team_service(ImportService),
        "jobs": Provide(provide_job_service, sync_to_thread=False),
    }

    @post(
        "/",
        status_code=201,
        summary="Import another tool's results",
        request_max_body_size=None,
        operation_class=ImportOperation,
        responses=problem_responses(409, 413),
    )
    async def import_results(
        self,
        *,
        request: Request[Any, Any, Any],
        imports: NamedDependency[ImportService],
        jobs: NamedDependency[JobService],
        audit: NamedDependency[AuditTrail],
        settings: AppSettings,
        fmt: Annotated[
            ImportFormat,
            QueryParameter(
                name="format",
                description="vllm (vllm bench serve --save-result JSON), guidellm "
                "(benchmarks.json) or aiperf (profile_export_aiperf.json or "
                "profile_export.jsonl)",
            ),
        ],
        name: Annotated[
            str | None,
            QueryParameter(
                description="the external endpoint the runs go under: your team's one of this "
                "name, or a new one (default: '<tool>: <model>')",
                min_length=1,
                max_length=100,
            ),
        ] = None,
        model: Annotated[
            str | None,
            QueryParameter(
                description="the model measured, where the file does not say (or to override it)",
                min_length=1,
                max_length=256,
            ),
        ] = None,
        engine: Annotated[
            str | None,
            QueryParameter(description="the serving engine, e.g. vllm or sglang", max_length=64),
        ] = None,
        hardware: Annotated[
            str | None,
            QueryParameter(description="the GPU, a name from GET /v1/hardware", max_length=64),
        ] = None,
        gpu_count: Annotated[
            int, QueryParameter(description="GPUs of the deployment measured", ge=1, le=4096)
        ] = 1,
        usd_per_hour: Annotated[
            float | None,
            QueryParameter(
                description="what the deployment cost per hour, to price the runs", ge=0
            ),
        ] = None,
    ) -> Response[JobRead]:
        """The body is the file. Stores a job marked `imported` under an endpoint marked
        `external` (never benchmarked), with one run per benchmark of the file; each run's
        `source` names the tool, its version and whose definitions its figures follow. 201
        with the job; 422 naming what is wrong with the file (nothing stored); 409 when
        `name` is a deployment registered to be benchmarked; 413 over
        INFERCOST_MAX_TRAFFIC_BYTES."""
        cap = settings.max_traffic_bytes
        data = await read_capped(request, cap, too_large(cap))
        options = ImportOptions(
            name=name,
            model=model,
            engine=engine,
            hardware=hardware,
            gpu_count=gpu_count,
            usd_per_hour=usd_per_hour,
        )
        job_id = await imports.import_file(fmt, data, options)
        job = await jobs.get(job_id)
        await audit.record(
            "job.import",
            "job",
            job_id,
            f"imported {fmt} results as job {job_id} under endpoint {job.endpoint_id}",
            {"format": fmt, "endpoint_id": job.endpoint_id, "name": name},
        )
        return Response(await jobs.read(job), status_code=201)
