"""Sending one delivery: sign, POST, record the attempt, schedule the next one.

A delivery row is locked (FOR UPDATE SKIP LOCKED) for the whole attempt, so a duplicate
message (a re-send by the sweep, a redelivery by the broker) finds it locked or done and
sends nothing: a receiver sees each attempt once. Receivers should still de-duplicate on
the Infercost-Delivery header, since a worker that dies after the POST but before the
commit leaves the delivery pending and it is sent again.
"""

from __future__ import annotations

import json
import logging
import time
import uuid
from dataclasses import dataclass
from datetime import timedelta
from typing import Any, Final

import httpx
from sqlalchemy.ext.asyncio import AsyncSession

from infercost import __version__
from infercost.db.base import utcnow
from infercost.security import CredentialError, Vault
from infercost.webhooks.repository import WebhookRepository
from infercost.webhooks.signing import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign

log = logging.getLogger("infercost.webhooks")

#: A receiver gets this long to answer; it should queue its work and answer at once.
TIMEOUT_S: Final = 10.0
#: A message may arrive a little before its countdown ends (clocks, broker polling).
EARLY_SLACK: Final = timedelta(seconds=2)
_ERROR_CHARS: Final = 300


def backoff_s(attempts: int, base_s: float, max_attempts: int) -> float | None:
    """Seconds to wait after `attempts` failed attempts before the next one: base_s, then
    doubling (10, 20, 40, 80, 160 s by default); None once `max_attempts` were made."""
    if attempts >= max_attempts:
        return None
    return float(base_s * 2 ** (attempts - 1))


def encode(payload: dict[str, Any]) -> bytes:
    """The exact bytes sent and signed: compact JSON, keys in a fixed order."""
    return json.dumps(payload, separators=(",", ":"), sort_keys=True).encode()


@dataclass(frozen=True, slots=True)
class Outcome:
    """What one attempt did; `retry_in_s` is set when another attempt is scheduled."""

    status: str
    response_status: int | None
    error: str | None
    retry_in_s: float | None = None


async def post(
    client: httpx.AsyncClient, url: str, secret: str, event: str, payload: dict[str, Any]
) -> tuple[int | None, str | None]:
    """POST the signed payload; the receiver's status, or None and why it could not answer."""
    body = encode(payload)
    headers = {
        "Content-Type": "application/json",
        "User-Agent": f"infercost-webhooks/{__version__}",
        EVENT_HEADER: event,
        DELIVERY_HEADER: str(payload["id"]),
        SIGNATURE_HEADER: sign(secret, body),
    }
    try:
        response = await client.post(
            url, content=body, headers=headers, timeout=TIMEOUT_S, follow_redirects=False
        )
    except httpx.TimeoutException:
        return None, f"no answer within {TIMEOUT_S:g} s"
    except httpx.HTTPError as exc:
        # The exception's text names the address and reason, never the secret or body.
        return None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
    if 200 <= response.status_code < 300:
        return response.status_code, None
    if 300 <= response.status_code < 400:
        where = response.headers.get("location", "")
        return response.status_code, f"redirects are not followed (Location: {where})"[
            :_ERROR_CHARS
        ]
    return response.status_code, f"the receiver answered HTTP {response.status_code}"


async def deliver(
    session: AsyncSession,
    vault: Vault,
    client: httpx.AsyncClient,
    delivery_id: uuid.UUID,
    *,
    backoff_base_s: float,
    max_attempts: int,
) -> Outcome | None:
    """Make one attempt of a due delivery and record it in the session (the caller
    commits, which also releases the row lock); None when there was nothing to send."""
    repo = WebhookRepository(session)
    delivery = await repo.lock_due(delivery_id, EARLY_SLACK)
    if delivery is None:
        return None
    webhook = await repo.webhook_of(delivery)
    if webhook is None:
        return None
    at = utcnow()
    started = time.perf_counter()
    code: int | None
    error: str | None
    try:
        secret = vault.decrypt(webhook.secret_encrypted)
    except CredentialError as exc:
        code, error = None, str(exc)
    else:
        code, error = await post(client, webhook.url, secret, delivery.event, delivery.payload)
    duration_ms = (time.perf_counter() - started) * 1000.0
    if error is None:
        outcome = Outcome("delivered", code, None)
    else:
        wait = backoff_s(delivery.attempts + 1, backoff_base_s, max_attempts)
        outcome = Outcome("failed" if wait is None else "pending", code, error, wait)
    await repo.record_attempt(
        delivery,
        at=at,
        response_status=code,
        error=error,
        duration_ms=round(duration_ms, 3),
        status=outcome.status,
        next_attempt_at=None
        if outcome.retry_in_s is None
        else utcnow() + timedelta(seconds=outcome.retry_in_s),
    )
    return outcome
