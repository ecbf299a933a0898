"""Sending one delivery: sign, POST, record the attempt, schedule the next one.

The delivery row is locked (FOR UPDATE SKIP LOCKED) for the whole attempt, so another
courier passes over it: a receiver sees each attempt once. Receivers should still
de-duplicate on the Infercost-Delivery header, since a worker that dies after the POST but
before the commit leaves the delivery pending and it is sent again.
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
from infercost.net.outbound import OutboundRefused, Pinned, Policy, pinned
from infercost.security import CredentialError, Vault
from infercost.webhooks.repository import WebhookRepository
from infercost.webhooks.signing import DELIVERY_HEADER, EVENT_HEADER, SIGNATURE_HEADER, sign

log = logging.getLogger("infercost.webhooks")

#: A receiver gets this long to answer; it should queue its work and answer at once.
TIMEOUT_S: Final = 10.0
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
    delivery_id: uuid.UUID | None = None


async def _target(url: str, policy: Policy | None) -> tuple[Pinned | None, str | None]:
    """Where to send: the receiver's first checked address (its name resolved and every
    address checked now, so a name re-pointed after registration is caught), or why not."""
    if policy is None:
        return Pinned(url, {}), None
    try:
        addresses = await policy.check_connect(url)
    except OutboundRefused as exc:
        return None, f"refused by the outbound policy: {exc.detail}"[:_ERROR_CHARS]
    except OSError as exc:  # the name does not resolve
        return None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
    return pinned(url, addresses[0]), None


async def post(
    client: httpx.AsyncClient,
    url: str,
    secret: str,
    event: str,
    payload: dict[str, Any],
    *,
    policy: Policy | None = None,
) -> tuple[int | None, str | None]:
    """POST the signed payload; the receiver's status, or None and why it could not answer.
    With a `policy`, only to an address it allows (see _target)."""
    target, refused = await _target(url, policy)
    if target is None:
        return None, refused
    body = encode(payload)
    headers = {
        **target.headers,
        "Content-Type": "application/json",
        "User-Agent": f"infercost-webhooks/{__version__}",
        EVENT_HEADER: event,
        DELIVERY_HEADER: str(payload["id"]),
        SIGNATURE_HEADER: sign(secret, body),
    }
    try:
        # Streamed and never read: only the status matters, and a receiver must not be
        # able to fill the worker's memory with its answer.
        async with client.stream(
            "POST",
            target.url,
            content=body,
            headers=headers,
            timeout=TIMEOUT_S,
            follow_redirects=False,
            extensions=target.extensions,
        ) as response:
            code = response.status_code
    except httpx.TimeoutException:
        return None, f"no answer within {TIMEOUT_S:g} s"
    except (httpx.HTTPError, httpx.InvalidURL, ValueError) as exc:
        # A refused connection, or a URL httpx cannot use (a bad port, an invalid host
        # name): an attempt that failed like any other. The text names the address and
        # reason, never the secret or the body.
        return None, f"{type(exc).__name__}: {exc}"[:_ERROR_CHARS]
    if 200 <= code < 300:
        return code, None
    if 300 <= code < 400:
        return code, "redirects are not followed: give the webhook its final URL"
    return code, f"the receiver answered HTTP {code}"


async def deliver_next(
    session: AsyncSession,
    vault: Vault,
    client: httpx.AsyncClient,
    *,
    backoff_base_s: float,
    max_attempts: int,
    policy: Policy | None = None,
) -> Outcome | None:
    """Make one attempt of the delivery due the longest and record it in the session (the
    caller commits, which also releases the row lock); None when none is due."""
    repo = WebhookRepository(session)
    delivery = await repo.lock_next_due()
    if delivery is None:
        return None
    webhook = await repo.webhook_of(delivery)
    if webhook is None:  # never: a webhook's deliveries are deleted with it
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
        code, error = await post(
            client, webhook.url, secret, delivery.event, delivery.payload, policy=policy
        )
    duration_ms = (time.perf_counter() - started) * 1000.0
    if error is None:
        outcome = Outcome("delivered", code, None, delivery_id=delivery.id)
    else:
        wait = backoff_s(delivery.attempts + 1, backoff_base_s, max_attempts)
        outcome = Outcome(
            "failed" if wait is None else "pending", code, error, wait, delivery_id=delivery.id
        )
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
