"""Webhook subscriptions, their deliveries (the outbox) and every attempt to send one."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import (
    CheckConstraint,
    ForeignKey,
    Index,
    LargeBinary,
    SmallInteger,
    String,
    Text,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey

#: Events a webhook can subscribe to.
Event = Literal[
    "job.finished",
    "regression.detected",
    # A scheduled deployment crossed a threshold, or came back (infercost.schedules.alerts).
    "deployment.degraded",
    "deployment.recovered",
]
EVENTS: tuple[str, ...] = get_args(Event)
#: `ping` is sent on request (POST /v1/webhooks/{id}/ping) to one webhook, never subscribed.
DELIVERY_EVENTS: tuple[str, ...] = (*EVENTS, "ping")
DELIVERY_STATUSES = ("pending", "delivered", "failed")


class Webhook(UUIDPrimaryKey, CreatedAt, Base):
    """A team's receiver URL and the events it wants. The signing secret is kept encrypted
    (infercost.security.Vault) because the worker needs the plaintext to sign each payload."""

    __tablename__ = "webhooks"
    __table_args__ = (Index("ix_webhooks_team_created", "team_id", "created_at"),)

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    url: Mapped[str] = mapped_column(String(2048))
    events: Mapped[list[str]] = mapped_column(ARRAY(String(32)))
    description: Mapped[str | None] = mapped_column(String(500))
    secret_encrypted: Mapped[bytes] = mapped_column(LargeBinary)


class WebhookDelivery(UUIDPrimaryKey, CreatedAt, Base):
    """One event for one webhook: the payload as first built (every retry sends the same
    content), its state, and when the next attempt is due."""

    __tablename__ = "webhook_deliveries"
    __table_args__ = (
        CheckConstraint(f"status IN {DELIVERY_STATUSES}", name="status"),
        CheckConstraint(f"event IN {DELIVERY_EVENTS}", name="event"),
        Index("ix_webhook_deliveries_webhook_created", "webhook_id", "created_at"),
        # The worker's sweep looks for pending deliveries whose message was lost.
        Index(
            "ix_webhook_deliveries_pending_due",
            "next_attempt_at",
            postgresql_where=text("status = 'pending'"),
        ),
    )

    webhook_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("webhooks.id", ondelete="CASCADE"))
    event: Mapped[str] = mapped_column(String(32))
    # {"id", "event", "created_at", "data"}: the JSON document the receiver gets.
    payload: Mapped[dict[str, Any]] = mapped_column(JSONB)
    status: Mapped[str] = mapped_column(String(16), default="pending")
    attempts: Mapped[int] = mapped_column(SmallInteger, default=0)
    # Null once delivered or failed.
    next_attempt_at: Mapped[datetime | None]
    delivered_at: Mapped[datetime | None]


class WebhookAttempt(Base):
    """One POST of a delivery: when, how the receiver answered (or why it could not), and
    how long it took; the delivery log a portal shows."""

    __tablename__ = "webhook_attempts"

    delivery_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("webhook_deliveries.id", ondelete="CASCADE"), primary_key=True
    )
    attempt: Mapped[int] = mapped_column(SmallInteger, primary_key=True)
    at: Mapped[datetime]
    response_status: Mapped[int | None] = mapped_column(SmallInteger)
    error: Mapped[str | None] = mapped_column(Text)
    duration_ms: Mapped[float]
