"""Every table, imported in one place so Alembic and the tests see the whole metadata."""

from infercost.access.models import BrowserSession, Share
from infercost.audit.models import AuditEvent
from infercost.datasets.models import Dataset, DatasetItem
from infercost.db.base import Base
from infercost.endpoints.models import Endpoint
from infercost.hardware.models import Hardware
from infercost.jobs.deployments import Deployment
from infercost.jobs.models import Job, RequestSample, Run, RunModelFigures
from infercost.jobs.outbox import TaskOutbox
from infercost.prices.models import Price
from infercost.schedules.models import Schedule, ScheduleRun
from infercost.shards.store import RunShard
from infercost.status.models import StatusJobSeries, StatusSeries
from infercost.teams.models import ApiKey, Team
from infercost.traffic.models import Traffic, TrafficRequest
from infercost.webhooks.models import Webhook, WebhookAttempt, WebhookDelivery

__all__ = [
    "ApiKey",
    "AuditEvent",
    "Base",
    "BrowserSession",
    "Dataset",
    "DatasetItem",
    "Deployment",
    "Endpoint",
    "Hardware",
    "Job",
    "Price",
    "RequestSample",
    "Run",
    "RunModelFigures",
    "RunShard",
    "Schedule",
    "ScheduleRun",
    "Share",
    "StatusJobSeries",
    "StatusSeries",
    "TaskOutbox",
    "Team",
    "Traffic",
    "TrafficRequest",
    "Webhook",
    "WebhookAttempt",
    "WebhookDelivery",
]
