"""Queries about webhooks, their deliveries and attempts. Callers commit."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import delete, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.db.scope import owned_by, readable, unscoped
from infercost.webhooks.models import Webhook, WebhookAttempt, WebhookDelivery


class WebhookRepository:
    """Webhooks of a team (reads scoped by team_id) and their delivery log."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, values: dict[str, Any]) -> Webhook:
        """Insert a webhook in the caller's transaction."""
        webhook = Webhook(id=uuid.uuid4(), **values)
        self.session.add(webhook)
        await self.session.flush()
        return webhook

    async def get(self, team_id: uuid.UUID, webhook_id: uuid.UUID) -> Webhook | None:
        """The team's webhook."""
        return await self.session.scalar(readable(Webhook, team_id).where(Webhook.id == webhook_id))

    async def page(
        self, team_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[Webhook], int]:
        """One page of the team's webhooks, newest first, and how many there are."""
        total = await self.session.scalar(select(func.count()).where(owned_by(Webhook, team_id)))
        rows = await self.session.scalars(
            readable(Webhook, team_id)
            .order_by(Webhook.created_at.desc(), Webhook.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows), int(total or 0)

    async def count(self, team_id: uuid.UUID) -> int:
        """How many webhooks the team has (for its cap, INFERCOST_MAX_WEBHOOKS)."""
        total = await self.session.scalar(select(func.count()).where(owned_by(Webhook, team_id)))
        return int(total or 0)

    async def delete(self, webhook_id: uuid.UUID) -> None:
        """Remove the webhook with its delivery log; a delivery still queued finds nothing."""
        await self.session.execute(delete(Webhook).where(Webhook.id == webhook_id))

    async def subscribed(self, team_id: uuid.UUID, event: str) -> list[Webhook]:
        """The team's webhooks that want `event`."""
        rows = await self.session.scalars(
            readable(Webhook, team_id).where(Webhook.events.contains([event]))
        )
        return list(rows)

    async def add_deliveries(self, rows: Sequence[dict[str, Any]]) -> None:
        """Insert pending deliveries, due now, in the caller's transaction."""
        if rows:
            now = utcnow()
            values = [
                {"status": "pending", "attempts": 0, "next_attempt_at": now, **r} for r in rows
            ]
            await self.session.execute(insert(WebhookDelivery), values)

    async def deliveries_page(
        self, webhook_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[WebhookDelivery], int]:
        """One page of a webhook's deliveries, newest first, and how many there are."""
        where = WebhookDelivery.webhook_id == webhook_id
        total = await self.session.scalar(select(func.count()).where(where))
        rows = await self.session.scalars(
            select(WebhookDelivery)
            .where(where)
            .order_by(WebhookDelivery.created_at.desc(), WebhookDelivery.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows), int(total or 0)

    async def attempts_of(
        self, delivery_ids: Sequence[uuid.UUID]
    ) -> dict[uuid.UUID, list[WebhookAttempt]]:
        """Every attempt of these deliveries, first attempt first, by delivery."""
        found: dict[uuid.UUID, list[WebhookAttempt]] = {d: [] for d in delivery_ids}
        if not delivery_ids:
            return found
        rows = await self.session.scalars(
            select(WebhookAttempt)
            .where(WebhookAttempt.delivery_id.in_(delivery_ids))
            .order_by(WebhookAttempt.delivery_id, WebhookAttempt.attempt)
        )
        for row in rows:
            found[row.delivery_id].append(row)
        return found

    # --- worker side ----------------------------------------------------------------------

    async def lock_next_due(self) -> WebhookDelivery | None:
        """The pending delivery due the longest, row-locked until the caller's transaction
        ends; None when none is due. Rows other couriers hold are skipped (SKIP LOCKED), so
        several workers share the outbox and a receiver sees each attempt once."""
        delivery: WebhookDelivery | None = await self.session.scalar(
            select(WebhookDelivery)
            .where(
                WebhookDelivery.status == "pending",
                WebhookDelivery.next_attempt_at <= utcnow(),
            )
            .order_by(WebhookDelivery.next_attempt_at)
            .limit(1)
            .with_for_update(skip_locked=True)
        )
        return delivery

    async def webhook_of(self, delivery: WebhookDelivery) -> Webhook | None:
        """The webhook a delivery goes to."""
        query = select(Webhook).where(Webhook.id == delivery.webhook_id)
        reason = "the courier delivers to the webhook its delivery row names"
        webhook: Webhook | None = await self.session.scalar(unscoped(query, reason))
        return webhook

    async def record_attempt(
        self,
        delivery: WebhookDelivery,
        *,
        at: datetime,
        response_status: int | None,
        error: str | None,
        duration_ms: float,
        status: str,
        next_attempt_at: datetime | None,
    ) -> None:
        """Append an attempt to the log and move the delivery on (delivered, failed, or
        pending until `next_attempt_at`)."""
        attempt = delivery.attempts + 1
        await self.session.execute(
            insert(WebhookAttempt).values(
                delivery_id=delivery.id,
                attempt=attempt,
                at=at,
                response_status=response_status,
                error=error,
                duration_ms=duration_ms,
            )
        )
        await self.session.execute(
            update(WebhookDelivery)
            .where(WebhookDelivery.id == delivery.id)
            .values(
                attempts=attempt,
                status=status,
                next_attempt_at=next_attempt_at,
                delivered_at=at if status == "delivered" else None,
            )
        )
