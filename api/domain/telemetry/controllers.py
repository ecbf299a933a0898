"""GET /v1/runs/{id}/telemetry: the time series scraped from the endpoint during a run."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, MediaType, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import QueryParameter
from litestar.response.base import ASGIResponse

from api.csv import csv_attachment, wants_csv
from api.db import DbSession
from api.domain.jobs.controllers import provide_job_service
from api.domain.jobs.services import JobService
from api.domain.telemetry.schemas import TelemetrySeries
from api.domain.telemetry.services import TelemetryService, telemetry_csv
from api.schemas import PathId


def provide_telemetry_service(db_session: DbSession) -> TelemetryService:
    """The service on the request's session (runs are checked through the job service)."""
    return TelemetryService(db_session)


class TelemetryController(Controller):
    """GET /v1/runs/{id}/telemetry (JSON series, or CSV rows with Accept: text/csv)."""

    path = "/v1/runs"
    tags = ["runs"]
    dependencies = {
        "jobs": Provide(provide_job_service, sync_to_thread=False),
        "telemetry": Provide(provide_telemetry_service, sync_to_thread=False),
    }

    @get(
        "/{run_id:uuid}/telemetry",
        summary="Telemetry scraped during a run",
        description="JSON series by default; send `Accept: text/csv` for one row a sample.",
        responses={
            200: ResponseSpec(
                data_container=TelemetrySeries,
                # Examples come from the fields' own; generated ones are random text.
                generate_examples=False,
                description="Series (JSON), or every sample as CSV (Accept: text/csv)",
            )
        },
    )
    async def get_telemetry(
        self,
        *,
        request: Request[object, object, State],
        jobs: NamedDependency[JobService],
        telemetry: NamedDependency[TelemetryService],
        run_id: PathId,
        metric: Annotated[
            list[str] | None,
            QueryParameter(description="only these metric names (repeat the parameter for more)"),
        ] = None,
    ) -> ASGIResponse:
        """Every value scraped from the endpoint's metrics_urls while the run was measured."""
        run = await jobs.run(run_id)  # 404 unless the run is the caller's team's
        if wants_csv(request):
            return csv_attachment(
                telemetry_csv(request.app.state.sessionmaker, run_id, metric),
                f"run-{run_id}-telemetry.csv",
            )
        series = await telemetry.series(run, metric)
        return ASGIResponse(body=msgspec.json.encode(series), media_type=MediaType.JSON)
