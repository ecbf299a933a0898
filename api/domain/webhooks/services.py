"""Webhook rules for one team: http(s) URLs only, the secret shown once, the log read back."""

from __future__ import annotations

import uuid
from urllib.parse import urlsplit

import httpx
import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.webhooks.schemas import (
    AttemptRead,
    DeliveryRead,
    WebhookCreate,
    WebhookCreated,
    WebhookRead,
)
from api.rows import from_row
from infercost.errors import Conflict, InvalidInput, NotFound
from infercost.net.outbound import Policy
from infercost.security import Vault
from infercost.webhooks.models import Webhook, WebhookAttempt, WebhookDelivery
from infercost.webhooks.outbox import record_ping
from infercost.webhooks.repository import WebhookRepository
from infercost.webhooks.signing import new_secret


def _receiver_url(url: str) -> str:
    """`url` if the courier can POST to it: http(s), a host, a numeric port if any."""
    problem = f"'{url}' is not an http(s) URL such as https://portal.example.com/hooks"
    try:
        parts = urlsplit(url)
        _ = parts.port  # a port that is not a number raises here
        parsed = httpx.URL(url)  # as the courier will read it
        host = parts.hostname or ""
        if ":" not in host:  # a name (or IPv4), not an IPv6 literal: it must encode
            host.encode("idna")
    except (ValueError, httpx.InvalidURL):  # UnicodeError is a ValueError
        raise InvalidInput("url", problem) from None
    if parts.scheme not in ("http", "https") or not host or not parsed.host:
        raise InvalidInput("url", problem)
    return url


def to_read(webhook: Webhook) -> WebhookRead:
    """The response shape of a webhook (never its secret)."""
    return from_row(webhook, WebhookRead)


def _delivery_read(delivery: WebhookDelivery, attempts: list[WebhookAttempt]) -> DeliveryRead:
    log = msgspec.convert(attempts, list[AttemptRead], from_attributes=True)
    return from_row(delivery, DeliveryRead, attempt_log=log)


class WebhookService:
    """Webhooks of one team. Deliveries commit with the request; the courier sends them."""

    def __init__(
        self,
        session: AsyncSession,
        team_id: uuid.UUID,
        vault: Vault,
        *,
        outbound: Policy,
        max_webhooks: int,
    ) -> None:
        self.session = session
        self.repo = WebhookRepository(session)
        self.team_id = team_id
        self.vault = vault
        self.outbound = outbound
        self.max_webhooks = max_webhooks

    async def create(self, data: WebhookCreate) -> WebhookCreated:
        """Store a webhook with a fresh secret, encrypted at rest; the secret is returned
        here and never again."""
        # Private addresses are allowed (portals often live on internal networks); loopback
        # only where INFERCOST_OUTBOUND_ALLOW says so, metadata services never.
        url = _receiver_url(self.outbound.check_url(data.url, "url"))
        count = await self.repo.count(self.team_id)
        if count >= self.max_webhooks:
            raise Conflict(
                f"your team has {count} webhooks, this server's limit "
                f"(INFERCOST_MAX_WEBHOOKS={self.max_webhooks}): delete one first "
                "(DELETE /v1/webhooks/{id}) or ask an admin to raise the limit",
                limit=self.max_webhooks,
            )
        secret = new_secret()
        webhook = await self.repo.add(
            {
                "team_id": self.team_id,
                "url": url,
                "events": sorted(set(data.events)),
                "description": data.description,
                "secret_encrypted": self.vault.encrypt(secret),
            }
        )
        return WebhookCreated(**msgspec.structs.asdict(to_read(webhook)), secret=secret)

    async def get(self, webhook_id: uuid.UUID) -> Webhook:
        """The team's webhook, or 404."""
        webhook = await self.repo.get(self.team_id, webhook_id)
        if webhook is None:
            raise NotFound(f"no webhook {webhook_id}: GET /v1/webhooks lists yours")
        return webhook

    async def read(self, webhook_id: uuid.UUID) -> WebhookRead:
        """One webhook."""
        return to_read(await self.get(webhook_id))

    async def page(self, limit: int, offset: int) -> tuple[list[WebhookRead], int]:
        """A page of the team's webhooks, newest first."""
        rows, total = await self.repo.page(self.team_id, limit=limit, offset=offset)
        return [to_read(w) for w in rows], total

    async def delete(self, webhook_id: uuid.UUID) -> None:
        """Remove a webhook and its delivery log; nothing more is sent to it."""
        await self.repo.delete((await self.get(webhook_id)).id)

    async def deliveries(
        self, webhook_id: uuid.UUID, limit: int, offset: int
    ) -> tuple[list[DeliveryRead], int]:
        """A page of the webhook's delivery log, newest first, each with its attempts."""
        webhook = await self.get(webhook_id)
        rows, total = await self.repo.deliveries_page(webhook.id, limit=limit, offset=offset)
        attempts = await self.repo.attempts_of([d.id for d in rows])
        return [_delivery_read(d, attempts[d.id]) for d in rows], total

    async def ping(self, webhook_id: uuid.UUID) -> DeliveryRead:
        """Queue a `ping` delivery to the webhook, sent once this request commits."""
        webhook = await self.get(webhook_id)
        delivery_id = await record_ping(self.session, webhook)
        delivery = await self.session.get(WebhookDelivery, delivery_id)
        assert delivery is not None
        return _delivery_read(delivery, [])
