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
from litestar.response.streaming import ASGIStreamingResponse

from api.auth import CurrentCaller
from api.db import DbSession
from api.domain.telemetry.schemas import TelemetrySeries
from api.domain.telemetry.services import TelemetryService, telemetry_csv
from api.schemas import PathId


def provide_telemetry_service(db_session: DbSession, caller: CurrentCaller) -> TelemetryService:
    """The service for the caller's team."""
    return TelemetryService(db_session, caller.team_id)


class TelemetryController(Controller):
    """GET /v1/runs/{id}/telemetry (JSON series, or CSV rows with Accept: text/csv)."""

    path = "/v1/runs"
    tags = ["runs"]
    dependencies = {"telemetry": Provide(provide_telemetry_service, sync_to_thread=False)}

    @get(
        "/{run_id:uuid}/telemetry",
        summary="Telemetry scraped during a run",
        description="JSON series by default; send `Accept: text/csv` for one row a sample.",
        responses={
            200: ResponseSpec(
                data_container=TelemetrySeries,
                description="Series (JSON), or every sample as CSV (Accept: text/csv)",
            )
        },
    )
    async def get_telemetry(
        self,
        *,
        request: Request[object, object, State],
        telemetry: NamedDependency[TelemetryService],
        run_id: PathId,
        metric: Annotated[
            list[str] | None,
            QueryParameter(description="only these metric names (repeat the parameter for more)"),
        ] = None,
    ) -> ASGIResponse:
        """Every value scraped from the endpoint's metrics_urls while the run was measured."""
        if "text/csv" in request.headers.get("accept", ""):
            await telemetry.run(run_id)
            return ASGIStreamingResponse(
                iterator=telemetry_csv(request.app.state.sessionmaker, run_id, metric),
                media_type="text/csv; charset=utf-8",
                headers={
                    "Content-Disposition": f'attachment; filename="run-{run_id}-telemetry.csv"'
                },
            )
        series = await telemetry.series(run_id, metric)
        return ASGIResponse(body=msgspec.json.encode(series), media_type=MediaType.JSON)
