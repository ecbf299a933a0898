"""Mask endpoints' keys in what was stored before the redactor (infercost/net/redact.py)
masked them on the way in: `infercost scrub` runs it once after an upgrade, and again is
harmless.

For each endpoint with a key: its last check, its jobs' and runs' errors, and the payloads of
webhook deliveries about its jobs pass the endpoint's redactor; a row is written only where
that changed it. Endpoints whose key cannot be decrypted with INFERCOST_SECRET_KEYS are
counted and left as they are.
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import unscoped
from infercost.endpoints.models import Endpoint
from infercost.jobs.models import Job, Run
from infercost.net.redact import Redactor
from infercost.security import CredentialError, Vault
from infercost.webhooks.models import WebhookDelivery

_WHY = "an operator's scrub of every team's stored texts for their own endpoint's key"


async def scrub_stored_secrets(session: AsyncSession, vault: Vault) -> Counter[str]:
    """Mask every endpoint's key in the texts stored about it; how many rows of each kind
    changed (and `undecryptable` endpoints skipped). The caller commits."""
    changed: Counter[str] = Counter()
    rows = await session.execute(
        unscoped(
            select(Endpoint.id, Endpoint.api_key_encrypted, Endpoint.check).where(
                Endpoint.api_key_encrypted.is_not(None)
            ),
            _WHY,
        )
    )
    for endpoint_id, encrypted, check in rows.all():
        try:
            redact = Redactor.for_endpoint(vault.decrypt(encrypted))
        except CredentialError:
            changed["undecryptable"] += 1
            continue
        if check is not None and (masked := redact.data(check)) != check:
            await session.execute(
                update(Endpoint).where(Endpoint.id == endpoint_id).values(check=masked)
            )
            changed["checks"] += 1
        for model, kind in ((Job, "jobs"), (Run, "runs")):
            errors = await session.execute(
                unscoped(
                    select(model.id, model.error).where(
                        model.endpoint_id == endpoint_id, model.error.is_not(None)
                    ),
                    _WHY,
                )
            )
            for row_id, error in errors.all():
                if error is not None and (masked_error := redact.text(error)) != error:
                    await session.execute(
                        update(model).where(model.id == row_id).values(error=masked_error)
                    )
                    changed[kind] += 1
        payloads = await session.execute(
            select(WebhookDelivery.id, WebhookDelivery.payload).where(
                WebhookDelivery.payload["data"]["job"]["endpoint_id"].astext == str(endpoint_id)
            )
        )
        for delivery_id, payload in payloads.all():
            masked_payload: dict[str, Any] = redact.data(payload)
            if masked_payload != payload:
                await session.execute(
                    update(WebhookDelivery)
                    .where(WebhookDelivery.id == delivery_id)
                    .values(payload=masked_payload)
                )
                changed["webhook deliveries"] += 1
    return changed
