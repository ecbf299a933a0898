"""Webhook routes: POST, GET /v1/webhooks; GET, DELETE /v1/webhooks/{id}; its deliveries
and ping."""

from __future__ import annotations

from urllib.parse import urlsplit

from litestar import Controller, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody

from api.auth import AppSettings, CurrentCaller
from api.db import DbSession
from api.domain.audit.services import AuditTrail
from api.domain.webhooks.schemas import DeliveryRead, WebhookCreate, WebhookCreated, WebhookRead
from api.domain.webhooks.services import WebhookService
from api.schemas import Limit, Offset, Page, PathId


def provide_webhook_service(
    db_session: DbSession, caller: CurrentCaller, state: State, settings: AppSettings
) -> WebhookService:
    """The service for the caller's team."""
    return WebhookService(
        db_session,
        caller.team_id,
        state.vault,
        outbound=state.outbound,
        max_webhooks=settings.max_webhooks,
    )


def _origin(url: str) -> str:
    """Where a webhook posts, without its path or query (which may carry a token)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"


class WebhookController(Controller):
    """Signed event notifications for portals: job.finished, regression.detected."""

    path = "/v1/webhooks"
    tags = ["webhooks"]
    dependencies = {"webhooks": Provide(provide_webhook_service, sync_to_thread=False)}

    @post("/", status_code=201, summary="Create a webhook")
    async def create_webhook(
        self,
        webhooks: NamedDependency[WebhookService],
        audit: NamedDependency[AuditTrail],
        data: JSONBody[WebhookCreate],
    ) -> WebhookCreated:
        """Subscribe an http(s) URL to events (default: all: job.finished, regression.detected,
        deployment.degraded, deployment.recovered).
        The answer holds `secret`, shown this once: each payload is signed with it in the
        Infercost-Signature header (`t=<unix s>,v1=<hex HMAC-SHA256(secret, "<t>." + body)>`)."""
        created = await webhooks.create(data)
        where = _origin(created.url)
        await audit.record(
            "webhook.create", "webhook", created.id, f"added a webhook to {where}", {"to": where}
        )
        return created

    @get("/", summary="List webhooks")
    async def list_webhooks(
        self, webhooks: NamedDependency[WebhookService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[WebhookRead]:
        """Your team's webhooks, newest first."""
        items, total = await webhooks.page(limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{webhook_id:uuid}", summary="Read a webhook")
    async def get_webhook(
        self, webhooks: NamedDependency[WebhookService], webhook_id: PathId
    ) -> WebhookRead:
        """One webhook (its secret is never shown again)."""
        return await webhooks.read(webhook_id)

    @delete("/{webhook_id:uuid}", summary="Delete a webhook")
    async def delete_webhook(
        self,
        webhooks: NamedDependency[WebhookService],
        audit: NamedDependency[AuditTrail],
        webhook_id: PathId,
    ) -> None:
        """Stop sending to this webhook and remove its delivery log (204)."""
        where = _origin((await webhooks.get(webhook_id)).url)
        await webhooks.delete(webhook_id)
        await audit.record(
            "webhook.delete",
            "webhook",
            webhook_id,
            f"removed the webhook to {where}",
            {"to": where},
        )

    @get("/{webhook_id:uuid}/deliveries", summary="A webhook's delivery log")
    async def list_deliveries(
        self,
        webhooks: NamedDependency[WebhookService],
        webhook_id: PathId,
        limit: Limit = 50,
        offset: Offset = 0,
    ) -> Page[DeliveryRead]:
        """Deliveries newest first: the event, its status (pending, delivered, failed), the
        payload sent, when the next attempt is due, and every attempt with the receiver's
        HTTP status or the reason it could not answer."""
        items, total = await webhooks.deliveries(webhook_id, limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)

    @post("/{webhook_id:uuid}/ping", status_code=202, summary="Send a test delivery")
    async def ping_webhook(
        self, webhooks: NamedDependency[WebhookService], webhook_id: PathId
    ) -> DeliveryRead:
        """Queue a `ping` event to this webhook (202); follow it in the delivery log."""
        return await webhooks.ping(webhook_id)
