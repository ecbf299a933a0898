"""Endpoint routes."""

from __future__ import annotations

import msgspec
from litestar import Controller, delete, get, patch, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from api.auth import AppSettings, CurrentCaller
from api.db import DbSession
from api.domain.audit.services import AuditTrail
from api.domain.endpoints.schemas import (
    EndpointCheck,
    EndpointCreate,
    EndpointRead,
    EndpointUpdate,
)
from api.domain.endpoints.services import EndpointService, check_read
from api.schemas import Limit, Offset, Page, PathId


def provide_endpoint_service(
    db_session: DbSession, caller: CurrentCaller, state: State, settings: AppSettings
) -> EndpointService:
    """The service for the caller's team."""
    return EndpointService(
        db_session,
        caller.team_id,
        state.vault,
        outbound=state.outbound,
        max_metrics_urls=settings.max_metrics_urls,
        preflight_on_register=settings.preflight_on_register,
        max_endpoints=settings.max_endpoints,
        max_tags=settings.max_tags,
        max_tag_chars=settings.max_tag_chars,
    )


class EndpointController(Controller):
    """Registered deployments: GET, POST /v1/endpoints; GET, PATCH, DELETE /v1/endpoints/{id}."""

    path = "/v1/endpoints"
    tags = ["endpoints"]
    dependencies = {"endpoints": Provide(provide_endpoint_service, sync_to_thread=False)}

    @post("/", status_code=201, summary="Register an endpoint")
    async def create_endpoint(
        self,
        endpoints: NamedDependency[EndpointService],
        audit: NamedDependency[AuditTrail],
        data: JSONBody[EndpointCreate],
    ) -> EndpointRead:
        """Register a deployment to benchmark; `api_key` is stored encrypted and never returned.
        The preflight check runs at once (a few seconds at most) and comes back in `check`;
        a failed check does not refuse the registration, only jobs (without "force")."""
        read = await endpoints.to_read(await endpoints.create(data))
        await audit.record(
            "endpoint.create",
            "endpoint",
            read.id,
            f"registered endpoint '{read.name}' ({read.base_url})",
            {"name": read.name, "base_url": read.base_url, "model": read.model},
        )
        return read

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

    @post("/{endpoint_id:uuid}/check", status_code=200, summary="Check an endpoint now")
    async def check_endpoint(
        self, endpoints: NamedDependency[EndpointService], endpoint_id: PathId
    ) -> EndpointCheck:
        """Preflight: probe the endpoint now (reachable, OpenAI route, model served, streaming,
        usage in the stream, tokenizer route, engine, metrics URLs), store and return the
        result. A failed check refuses jobs against it unless they send `"force": true`."""
        endpoint = await endpoints.check(await endpoints.get(endpoint_id))
        check = check_read(endpoint)
        assert check is not None  # just stored
        return check

    @patch("/{endpoint_id:uuid}", summary="Change an endpoint")
    async def update_endpoint(
        self,
        endpoints: NamedDependency[EndpointService],
        audit: NamedDependency[AuditTrail],
        endpoint_id: PathId,
        data: JSONBody[EndpointUpdate],
    ) -> EndpointRead:
        """Change the fields you send; null clears an optional field. Changing where it
        points (base_url, model, api, engine, api_key, metrics_urls) checks it again."""
        read = await endpoints.to_read(await endpoints.update(endpoint_id, data))
        # The names of the fields changed, never their values (api_key is one).
        changed = sorted(msgspec.to_builtins(data))
        await audit.record(
            "endpoint.update",
            "endpoint",
            read.id,
            f"changed endpoint '{read.name}': {', '.join(changed) or 'nothing'}",
            {"fields": changed},
        )
        return read

    @delete("/{endpoint_id:uuid}", summary="Remove an endpoint")
    async def delete_endpoint(
        self,
        endpoints: NamedDependency[EndpointService],
        audit: NamedDependency[AuditTrail],
        endpoint_id: PathId,
    ) -> None:
        """Remove it from listings; its jobs and runs stay readable."""
        endpoint = await endpoints.get(endpoint_id)
        await endpoints.delete(endpoint_id)
        await audit.record(
            "endpoint.delete",
            "endpoint",
            endpoint_id,
            f"removed endpoint '{endpoint.name}'",
            {"name": endpoint.name},
        )
