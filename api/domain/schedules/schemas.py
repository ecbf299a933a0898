"""Request and response shapes of /v1/schedules."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any

import msgspec

from api.domain.jobs.schemas import JobCreate
from api.domain.plans.schemas import Slo

#: "HH:MM", 24-hour clock.
ClockTime = Annotated[
    str,
    msgspec.Meta(pattern=r"^([01][0-9]|2[0-3]):[0-5][0-9]$", description="HH:MM, 24 h",
                 examples=["22:00"]),
]  # fmt: skip


class When(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """A cron expression evaluated in a time zone, or a fixed interval (exactly one)."""

    cron: (
        Annotated[
            str,
            msgspec.Meta(
                max_length=200,
                description="Five-field cron expression, in `timezone`",
                examples=["0 */3 * * *"],
            ),
        ]
        | None
    ) = None
    timezone: Annotated[
        str,
        msgspec.Meta(max_length=64, description="IANA time zone of the cron expression and "
                     "the quiet hours", examples=["Europe/Berlin"]),
    ] = "UTC"  # fmt: skip
    interval_s: (
        Annotated[
            int,
            msgspec.Meta(ge=60, le=31 * 86400, description="Run every this many seconds, in "
                         "slots counted from the Unix epoch", examples=[10800]),
        ]
        | None
    ) = None  # fmt: skip


class QuietHours(msgspec.Struct, forbid_unknown_fields=True):
    """No job starts from `start` to `end` (schedule's time zone; may span midnight)."""

    start: ClockTime
    end: ClockTime


class Thresholds(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    """What the deployment must hold; a breach (or a regression verdict) makes it degraded."""

    slo: Annotated[
        Slo | None,
        msgspec.Meta(description="Limits on each run's p50 or p95 of ttft_ms, tpot_ms, itl_ms "
                     "or e2e_ms", examples=[{"ttft_ms": {"p95": 800}}]),
    ] = None  # fmt: skip
    max_cost_per_million_usd: (
        Annotated[
            float,
            msgspec.Meta(ge=0, description="Ceiling on each run's USD per million output "
                         "tokens", examples=[0.5]),
        ]
        | None
    ) = None  # fmt: skip
    min_availability: (
        Annotated[
            float,
            msgspec.Meta(ge=0, le=1, description="Floor on the share of the schedule's jobs "
                         "finished in the last 24 h that succeeded", examples=[0.9]),
        ]
        | None
    ) = None  # fmt: skip


JitterS = Annotated[
    int,
    msgspec.Meta(ge=0, le=3600, description="Start each slot up to this many seconds late "
                 "(the same delay on every replica)", examples=[600]),
]  # fmt: skip
MaxFailures = Annotated[
    int,
    msgspec.Meta(ge=1, le=100, description="Stop the schedule after this many failed jobs in a "
                 "row", examples=[3]),
]  # fmt: skip
Name = Annotated[
    str,
    msgspec.Meta(min_length=1, max_length=200, description="A name to find the schedule by",
                 examples=["nightly-llama"]),
]  # fmt: skip
Template = Annotated[
    JobCreate,
    msgspec.Meta(
        description="The job each slot submits: a POST /v1/jobs body, checked the same way",
        examples=[{"endpoint_id": "3f2b8c1d-5e6a-4b7c-8d9e-0f1a2b3c4d5e",
                   "workload": {"preset": "interactive-chatbot"},
                   "load": {"mode": "concurrency", "levels": [1, 8]}}],
    ),
]  # fmt: skip
WhenField = Annotated[
    When,
    msgspec.Meta(description="A cron expression with its time zone, or an interval",
                 examples=[{"cron": "0 */3 * * *", "timezone": "Europe/Berlin"},
                           {"interval_s": 10800}]),
]  # fmt: skip
Enabled = Annotated[
    bool, msgspec.Meta(description="Whether slots run (false: paused)", examples=[True])
]
Quiet = Annotated[
    QuietHours,
    msgspec.Meta(description="No job starts in this window (the schedule's time zone)",
                 examples=[{"start": "22:00", "end": "06:00"}]),
]  # fmt: skip
ThresholdsField = Annotated[
    Thresholds,
    msgspec.Meta(description="What the deployment must hold; a change of state sends "
                 "deployment.degraded or deployment.recovered",
                 examples=[{"slo": {"ttft_ms": {"p95": 800}}, "min_availability": 0.9}]),
]  # fmt: skip


class ScheduleCreate(msgspec.Struct, forbid_unknown_fields=True):
    """A job (the POST /v1/jobs body, checked the same way) and when to run it."""

    job: Template
    when: WhenField
    name: Name | None = None
    jitter_s: JitterS = 0
    enabled: Enabled = True
    quiet_hours: Quiet | None = None
    thresholds: ThresholdsField | None = None
    max_consecutive_failures: MaxFailures = 3


class ScheduleUpdate(msgspec.Struct, forbid_unknown_fields=True):
    """The fields to change; `null` clears name, quiet_hours and thresholds."""

    job: Template | msgspec.UnsetType = msgspec.UNSET
    when: WhenField | msgspec.UnsetType = msgspec.UNSET
    name: Name | msgspec.UnsetType | None = msgspec.UNSET
    jitter_s: JitterS | msgspec.UnsetType = msgspec.UNSET
    enabled: Enabled | msgspec.UnsetType = msgspec.UNSET
    quiet_hours: Quiet | msgspec.UnsetType | None = msgspec.UNSET
    thresholds: ThresholdsField | msgspec.UnsetType | None = msgspec.UNSET
    max_consecutive_failures: MaxFailures | msgspec.UnsetType = msgspec.UNSET


class SlotRead(msgspec.Struct):
    """One handled slot: submitted (with its job), skipped, missed or refused (with why)."""

    slot_at: datetime
    outcome: str
    job_id: uuid.UUID | None
    job_status: str | None
    reason: str | None
    recorded_at: datetime


class ScheduleRead(msgspec.Struct):
    """A schedule with its last handled slot and the next one due."""

    id: uuid.UUID
    name: str | None
    endpoint_id: uuid.UUID
    job: dict[str, Any]
    when: WhenField
    jitter_s: int
    enabled: bool
    disabled_reason: str | None
    quiet_hours: QuietHours | None
    thresholds: dict[str, Any] | None
    max_consecutive_failures: int
    consecutive_failures: int
    state: str | None
    state_since: datetime | None
    state_evidence: dict[str, Any] | None
    last_run: SlotRead | None
    next_run_at: datetime | None
    created_at: datetime
    updated_at: datetime | None
