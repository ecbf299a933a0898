"""Request and response shapes for webhooks and their delivery log."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal, cast

import msgspec

from infercost.webhooks.models import EVENTS, Event

Url = Annotated[str, msgspec.Meta(min_length=1, max_length=2048)]
Description = Annotated[str, msgspec.Meta(max_length=500)]
Events = Annotated[list[Event], msgspec.Meta(min_length=1, max_length=len(EVENTS))]
DeliveryStatus = Literal["pending", "delivered", "failed"]


class WebhookCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/webhooks: where to POST, and which events (default: all of them)."""

    url: Annotated[
        Url,
        msgspec.Meta(
            description="Where each event is POSTed (JSON, signed with the secret returned once)",
            examples=["https://hooks.example.com/infercost"],
        ),
    ]
    events: Annotated[
        Events,
        msgspec.Meta(
            description="Which events to send; default: all of them", examples=[["job.finished"]]
        ),
    ] = msgspec.field(default_factory=lambda: cast(list[Event], list(EVENTS)))
    description: Annotated[
        Description | None,
        msgspec.Meta(description="A note to tell webhooks apart", examples=["alerts channel"]),
    ] = None


class WebhookRead(msgspec.Struct):
    """A webhook as listed and read; its secret is shown only when it is created."""

    id: uuid.UUID
    url: str
    events: list[str]
    description: str | None
    created_at: datetime


class WebhookCreated(WebhookRead):
    """The answer to POST /v1/webhooks: `secret` signs every payload (Infercost-Signature)
    and is shown this once; store it with the receiver."""

    secret: str


class AttemptRead(msgspec.Struct):
    """One POST of a delivery: the receiver's HTTP status, or why there was none."""

    attempt: int
    at: datetime
    response_status: int | None
    error: str | None
    duration_ms: float


class DeliveryRead(msgspec.Struct):
    """One event sent (or being sent) to a webhook, with every attempt so far."""

    id: uuid.UUID
    event: str
    status: DeliveryStatus
    attempts: int
    next_attempt_at: datetime | None
    delivered_at: datetime | None
    created_at: datetime
    payload: dict[str, Any]
    attempt_log: list[AttemptRead]
