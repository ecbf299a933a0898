"""Schedules (a job template and when to run it) and the ledger of their slots."""

from __future__ import annotations

import uuid
from datetime import datetime, time
from typing import Any

from sqlalchemy import (
    Boolean,
    CheckConstraint,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    Time,
    text,
)
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey

#: A watched deployment's state, decided after each scheduled job (infercost.schedules.alerts).
SCHEDULE_STATES = ("ok", "degraded")
#: What became of one slot: a job was submitted, or why none was.
SLOT_OUTCOMES = ("submitted", "skipped", "missed", "refused")


class Schedule(UUIDPrimaryKey, CreatedAt, Base):
    """A job template run by the maintenance process at each slot of a cron expression (in
    a time zone) or of a fixed interval, with the thresholds a watched deployment must hold."""

    __tablename__ = "schedules"
    __table_args__ = (
        # Exactly one way of saying when: a cron expression or an interval.
        CheckConstraint("(cron IS NULL) <> (interval_s IS NULL)", name="when"),
        CheckConstraint("interval_s IS NULL OR interval_s >= 60", name="interval_s"),
        CheckConstraint("jitter_s >= 0", name="jitter_s"),
        CheckConstraint("max_consecutive_failures >= 1", name="max_consecutive_failures"),
        CheckConstraint(f"state IS NULL OR state IN {SCHEDULE_STATES}", name="state"),
        Index("ix_schedules_team_created", "team_id", "created_at"),
        # The scheduler's tick reads the enabled schedules whose next slot is due: only those.
        Index("ix_schedules_due", "next_slot_at", postgresql_where=text("enabled")),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    endpoint_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("endpoints.id"), index=True)
    name: Mapped[str | None] = mapped_column(String(200))
    # The POST /v1/jobs body each slot submits (validated as a job is), minus endpoint_id.
    template: Mapped[dict[str, Any]] = mapped_column(JSONB)
    cron: Mapped[str | None] = mapped_column(String(200))
    timezone: Mapped[str] = mapped_column(String(64), default="UTC")
    interval_s: Mapped[int | None] = mapped_column(Integer)
    jitter_s: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    enabled: Mapped[bool] = mapped_column(Boolean, default=True, server_default=text("true"))
    # Quiet hours in the schedule's time zone (start > end spans midnight); slots inside
    # them are skipped and recorded.
    quiet_start: Mapped[time | None] = mapped_column(Time)
    quiet_end: Mapped[time | None] = mapped_column(Time)
    # {"slo": {...}, "max_cost_per_million_usd": x, "min_availability": y}: all optional.
    thresholds: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    max_consecutive_failures: Mapped[int] = mapped_column(Integer, default=3, server_default="3")
    consecutive_failures: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    # Why the scheduler stopped the schedule (N failures in a row); cleared by resume.
    disabled_reason: Mapped[str | None] = mapped_column(Text)
    # Where slots are counted from: the last slot the scheduler handled (submitted, skipped,
    # refused or missed), or when the schedule was created, changed or resumed; and the next
    # slot's due time (jitter included). A restarted scheduler carries on from here.
    last_slot_at: Mapped[datetime | None]
    next_slot_at: Mapped[datetime | None]
    last_job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL", use_alter=True)
    )
    # The deployment's state after the last judged job, since when, and the evidence of
    # the last change; a webhook goes out only when `state` changes.
    state: Mapped[str | None] = mapped_column(String(16))
    state_since: Mapped[datetime | None]
    state_evidence: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    # The last job whose outcome was judged (each job is judged once, by one process).
    judged_job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL", use_alter=True)
    )
    updated_at: Mapped[datetime | None]


class ScheduleRun(UUIDPrimaryKey, CreatedAt, Base):
    """One slot of a schedule and what became of it. The unique (schedule, slot) key is
    what makes a slot run once however many schedulers race for it or restart."""

    __tablename__ = "schedule_runs"
    __table_args__ = (
        CheckConstraint(f"outcome IN {SLOT_OUTCOMES}", name="outcome"),
        Index("uq_schedule_runs_schedule_slot", "schedule_id", "slot_at", unique=True),
    )

    schedule_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("schedules.id", ondelete="CASCADE"))
    slot_at: Mapped[datetime]
    outcome: Mapped[str] = mapped_column(String(16))
    job_id: Mapped[uuid.UUID | None] = mapped_column(
        ForeignKey("jobs.id", ondelete="SET NULL"), index=True
    )
    # Why no job was submitted (the previous job still running, quiet hours, a cap).
    reason: Mapped[str | None] = mapped_column(Text)
