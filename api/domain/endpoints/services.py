"""Registering, changing and removing endpoints for one team."""

from __future__ import annotations

import uuid
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.endpoints.schemas import (
    EndpointCheck,
    EndpointCreate,
    EndpointRead,
    EndpointUpdate,
)
from infercost.db.base import utcnow
from infercost.endpoints import preflight
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.errors import Conflict, InvalidInput, NotFound
from infercost.hardware.repository import HardwareRepository
from infercost.net.outbound import Policy, redact
from infercost.prices.models import DEFAULT_PRICING_MODEL
from infercost.schedules.repository import ScheduleRepository
from infercost.security import Vault
from infercost.teams.caps import check_room, check_tags


def _check_pricing(endpoint: Endpoint) -> None:
    """Per-token prices come as a pair and exclude an hourly price (one way to price)."""
    per_token = (endpoint.usd_per_million_input_tokens, endpoint.usd_per_million_output_tokens)
    if (per_token[0] is None) != (per_token[1] is None):
        missing = (
            "usd_per_million_input_tokens"
            if per_token[0] is None
            else "usd_per_million_output_tokens"
        )
        raise InvalidInput(
            missing,
            "a hosted API is priced per input and per output token: give both "
            "usd_per_million_input_tokens and usd_per_million_output_tokens",
        )
    if per_token[0] is not None and endpoint.usd_per_hour is not None:
        raise InvalidInput(
            "usd_per_hour",
            "give usd_per_hour (a deployment you rent by the hour) or per-token prices "
            "(a hosted API), not both",
        )


#: Fields whose change makes the last check stale.
PROBED_FIELDS = frozenset({"base_url", "model", "api", "engine", "api_key", "metrics_urls"})


def _probed(endpoint: Endpoint) -> tuple[Any, ...]:
    """What a check probes (PROBED_FIELDS, the key as stored): a check is of these values."""
    return (
        endpoint.base_url,
        endpoint.model,
        endpoint.api,
        endpoint.engine,
        endpoint.api_key_encrypted,
        tuple(endpoint.metrics_urls),
    )


def check_read(endpoint: Endpoint) -> EndpointCheck | None:
    """The stored check in its response shape, or None before the first one."""
    if endpoint.check is None:
        return None
    check = msgspec.convert(endpoint.check, EndpointCheck)
    return msgspec.structs.replace(check, checked_at=endpoint.checked_at)


class EndpointService:
    """Endpoint rules: unique live names, known hardware, URLs that parse, secrets encrypted."""

    def __init__(
        self,
        session: AsyncSession,
        team_id: uuid.UUID,
        vault: Vault,
        *,
        outbound: Policy,
        max_metrics_urls: int,
        preflight_on_register: bool = False,
        max_endpoints: int = 200,
        max_tags: int = 32,
        max_tag_chars: int = 256,
    ) -> None:
        self.repo = EndpointRepository(session)
        self.hardware = HardwareRepository(session)
        self.schedules = ScheduleRepository(session)
        self.team_id = team_id
        self.vault = vault
        self.outbound = outbound
        self.max_metrics_urls = max_metrics_urls
        self.preflight_on_register = preflight_on_register
        self.max_endpoints = max_endpoints
        self.max_tags = max_tags
        self.max_tag_chars = max_tag_chars

    def _url(self, field: str, url: str) -> str:
        """A URL the outbound policy accepts, without a trailing slash (422 naming `field`)."""
        return self.outbound.check_url(url, field).rstrip("/")

    async def get(self, endpoint_id: uuid.UUID) -> Endpoint:
        """One live endpoint of the team, or 404."""
        endpoint = await self.repo.get(self.team_id, endpoint_id)
        if endpoint is None:
            raise NotFound(f"no endpoint {endpoint_id}: GET /v1/endpoints lists yours")
        return endpoint

    async def page(self, limit: int, offset: int) -> tuple[list[Endpoint], int]:
        """A page of the team's endpoints."""
        return await self.repo.page(self.team_id, limit=limit, offset=offset)

    async def _apply(self, endpoint: Endpoint, changes: dict[str, Any]) -> None:
        if "name" in changes and await self.repo.name_taken(
            self.team_id, changes["name"], except_id=endpoint.id
        ):
            raise Conflict(f"an endpoint named '{changes['name']}' already exists in your team")
        if "base_url" in changes:
            changes["base_url"] = self._url("base_url", changes["base_url"])
        if changes.get("tags"):
            check_tags(changes["tags"], max_tags=self.max_tags, max_chars=self.max_tag_chars)
        if "metrics_urls" in changes:
            urls = changes["metrics_urls"]
            if len(urls) > self.max_metrics_urls:
                raise InvalidInput(
                    "metrics_urls",
                    f"{len(urls)} URLs is over this server's limit of {self.max_metrics_urls} "
                    "per endpoint (INFERCOST_MAX_METRICS_URLS): scrape fewer, or ask an admin",
                )
            changes["metrics_urls"] = [
                self._url(f"metrics_urls[{i}]", u) for i, u in enumerate(urls)
            ]
        if "hardware" in changes:
            name = changes.pop("hardware")
            endpoint.hardware_id = None
            if name is not None:
                endpoint.hardware_id = (await self.hardware.named(self.team_id, name)).id
        if "api_key" in changes:
            secret = changes.pop("api_key")
            endpoint.api_key_encrypted = None if secret is None else self.vault.encrypt(secret)
        for key, value in changes.items():
            setattr(endpoint, key, value)
        _check_pricing(endpoint)

    async def create(self, data: EndpointCreate) -> Endpoint:
        """Register an endpoint."""
        endpoint = Endpoint(team_id=self.team_id)
        await self._apply(endpoint, msgspec.structs.asdict(data))
        await check_room(
            self.repo.session,
            Endpoint,
            self.team_id,
            cap=self.max_endpoints,
            variable="INFERCOST_MAX_ENDPOINTS",
            noun="endpoints",
            delete="DELETE /v1/endpoints/{id}",
        )
        endpoint = await self.repo.add(endpoint)
        if self.preflight_on_register:
            endpoint = await self.check(endpoint)
        return endpoint

    async def update(self, endpoint_id: uuid.UUID, data: EndpointUpdate) -> Endpoint:
        """Change the fields given; leave the rest."""
        endpoint = await self.get(endpoint_id)
        changes = {k: v for k, v in msgspec.structs.asdict(data).items() if v is not msgspec.UNSET}
        stale = bool(PROBED_FIELDS.intersection(changes))  # before _apply pops api_key
        await self._apply(endpoint, changes)
        if stale:
            # The last check was of something else: run it again, or forget it.
            endpoint.check, endpoint.checked_at = None, None
            if self.preflight_on_register:
                return await self.check(endpoint)
        return await self.repo.save(endpoint)

    async def check(self, endpoint: Endpoint) -> Endpoint:
        """Run the preflight check now (a few seconds at most) and store its result.

        The probe runs outside any transaction: what this request wrote so far is committed
        first, so no row lock is held and no pooled connection is kept while remote servers
        take their time. The result is stored in a new transaction, and only if the endpoint
        still points where it was probed (a change made meanwhile keeps its own state)."""
        if endpoint.external:
            raise InvalidInput(
                "endpoint_id",
                f"endpoint '{endpoint.name}' holds results imported from another tool and has "
                "no server to probe: check the deployment registered with POST /v1/endpoints",
            )
        key = self.vault.decrypt(endpoint.api_key_encrypted) if endpoint.api_key_encrypted else None
        target = preflight.Target(
            base_url=endpoint.base_url,
            model=endpoint.model,
            api=endpoint.api,
            engine=endpoint.engine,
            api_key=key,
            metrics_urls=tuple(endpoint.metrics_urls),
        )
        probed = _probed(endpoint)
        await self.repo.session.commit()
        result = await preflight.run_check(target, self.outbound)
        # Locked until this request commits: a change now waits for the result to be stored.
        await self.repo.session.refresh(endpoint, with_for_update=True)
        if endpoint.deleted_at is not None:
            raise NotFound(f"no endpoint {endpoint.id}: it was removed during its check")
        if _probed(endpoint) != probed:
            return endpoint
        endpoint.check = result
        endpoint.checked_at = utcnow()
        return await self.repo.save(endpoint)

    async def delete(self, endpoint_id: uuid.UUID) -> None:
        """Remove from listings; past jobs keep pointing at it, and its schedules stop (a
        scheduler would otherwise keep submitting jobs against a deployment the user removed)."""
        await self.repo.delete(await self.get(endpoint_id))
        await self.schedules.disable_for_endpoint(
            self.team_id, endpoint_id, "its endpoint was deleted"
        )

    async def to_read(self, endpoint: Endpoint) -> EndpointRead:
        """The response shape, with the hardware's name resolved."""
        hw = (
            await self.hardware.get(self.team_id, endpoint.hardware_id)
            if endpoint.hardware_id
            else None
        )
        return EndpointRead(
            id=endpoint.id,
            name=endpoint.name,
            base_url=redact(endpoint.base_url),
            api=endpoint.api,
            model=endpoint.model,
            engine=endpoint.engine,
            engine_version=endpoint.engine_version,
            hardware=hw.name if hw else None,
            hardware_id=endpoint.hardware_id,
            gpu_count=endpoint.gpu_count,
            usd_per_hour=endpoint.usd_per_hour,
            provider=endpoint.provider,
            pricing_model=endpoint.pricing_model or DEFAULT_PRICING_MODEL,
            usd_per_million_input_tokens=endpoint.usd_per_million_input_tokens,
            usd_per_million_output_tokens=endpoint.usd_per_million_output_tokens,
            params_b=endpoint.params_b,
            precision=endpoint.precision,
            kv_bytes_per_token=endpoint.kv_bytes_per_token,
            has_api_key=endpoint.api_key_encrypted is not None,
            metrics_urls=[redact(u) for u in endpoint.metrics_urls],
            tags=dict(endpoint.tags),
            created_at=endpoint.created_at,
            updated_at=endpoint.updated_at,
            check=check_read(endpoint),
            checked_at=endpoint.checked_at,
            external=endpoint.external,
        )
