"""Webhooks: a team's subscriptions, the outbox of deliveries, signing and sending them.

Producers call `record_event` inside their own transaction: the event becomes delivery rows
in the outbox, committed (or rolled back) with the change that caused it. No message is
sent: each worker's courier (workers/webhooks.py) polls the outbox for due deliveries, signs
and posts each one, retries with backoff, and keeps every attempt as the delivery log.
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
