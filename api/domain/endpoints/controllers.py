"""Endpoint routes."""

from __future__ import annotations

from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from api.auth import AppSettings, CurrentCaller
from api.db import DbSession
from api.domain.endpoints.schemas import EndpointCreate, EndpointRead, EndpointUpdate
from api.domain.endpoints.services import EndpointService
from api.schemas import Limit, Offset, Page, PathId


def provide_endpoint_service(
    db_session: DbSession, caller: CurrentCaller, state: State, settings: AppSettings
) -> EndpointService:
    """The service for the caller's team."""
    return EndpointService(
        db_session, caller.team_id, state.vault, state.outbound, settings.max_metrics_urls
    )


class EndpointController(Controller):
    """Registered deployments: GET, POST /v1/endpoints; GET, PATCH, DELETE /v1/endpoints/{id}."""

    path = "/v1/endpoints"
    tags = ["endpoints"]
    dependencies = {"endpoints": Provide(provide_endpoint_service, sync_to_thread=False)}

    @post("/", status_code=201, summary="Register an endpoint")
    async def create_endpoint(
        self, endpoints: NamedDependency[EndpointService], data: JSONBody[EndpointCreate]
    ) -> EndpointRead:
        """Register a deployment to benchmark; `api_key` is stored encrypted and never returned."""
        return await endpoints.to_read(await endpoints.create(data))

    @get("/", summary="List endpoints")
    async def list_endpoints(
        self, endpoints: NamedDependency[EndpointService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[EndpointRead]:
        """Your team's endpoints by name."""
        rows, total = await endpoints.page(limit, offset)
        items = [await endpoints.to_read(e) for e in rows]
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{endpoint_id:uuid}", summary="Read an endpoint")
    async def get_endpoint(
        self, endpoints: NamedDependency[EndpointService], endpoint_id: PathId
    ) -> EndpointRead:
        """One endpoint."""
        return await endpoints.to_read(await endpoints.get(endpoint_id))

    @patch("/{endpoint_id:uuid}", summary="Change an endpoint")
    async def update_endpoint(
        self,
        endpoints: NamedDependency[EndpointService],
        endpoint_id: PathId,
        data: JSONBody[EndpointUpdate],
    ) -> EndpointRead:
        """Change the fields you send; null clears an optional field."""
        return await endpoints.to_read(await endpoints.update(endpoint_id, data))

    @delete("/{endpoint_id:uuid}", summary="Remove an endpoint")
    async def delete_endpoint(
        self, endpoints: NamedDependency[EndpointService], endpoint_id: PathId
    ) -> None:
        """Remove it from listings; its jobs and runs stay readable."""
        await endpoints.delete(endpoint_id)
