"""Webhooks: a team's subscriptions, the outbox of deliveries, signing and sending them.

Producers call `record_event` inside their own transaction (the outbox), then send one
`webhooks.deliver` task per returned id after commit; the worker signs and posts each one,
retrying with backoff, and keeps every attempt as the delivery log.
"""

from infercost.webhooks.models import EVENTS, Webhook, WebhookAttempt, WebhookDelivery
from infercost.webhooks.outbox import record_event, record_job_finished, record_ping

__all__ = [
    "EVENTS",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
    "record_event",
    "record_job_finished",
    "record_ping",
]
