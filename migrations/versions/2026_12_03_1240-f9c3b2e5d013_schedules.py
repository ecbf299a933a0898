"""Schedules: job templates the maintenance process runs at each slot, and their slot ledger.

`schedules` holds the template, when to run it (cron with a time zone, or an interval), the
thresholds of a watched deployment and its alert state; `schedule_runs` has one row per
handled slot, unique per (schedule, slot), which is what makes a slot run once across
scheduler replicas and restarts. `jobs.schedule_id` remembers which schedule sent a job.
Webhook deliveries may carry the two new events, deployment.degraded and .recovered.

Revision ID: f9c3b2e5d013
Revises: e8b2a1d4c012
Create Date: 2026-12-03 12:40:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f9c3b2e5d013"
down_revision: str | None = "e8b2a1d4c012"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


OLD_EVENTS = "event IN ('job.finished', 'regression.detected', 'ping')"
NEW_EVENTS = (
    "event IN ('job.finished', 'regression.detected', 'deployment.degraded', "
    "'deployment.recovered', 'ping')"
)


def _events(check: str) -> None:
    op.drop_constraint(op.f("ck_webhook_deliveries_event"), "webhook_deliveries", type_="check")
    op.create_check_constraint(op.f("ck_webhook_deliveries_event"), "webhook_deliveries", check)


def upgrade() -> None:
    _events(NEW_EVENTS)
    op.create_table(
        "schedules",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("endpoint_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=True),
        sa.Column("template", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("cron", sa.String(length=200), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("interval_s", sa.Integer(), nullable=True),
        sa.Column("jitter_s", sa.Integer(), server_default="0", nullable=False),
        sa.Column("enabled", sa.Boolean(), server_default=sa.text("true"), nullable=False),
        sa.Column("quiet_start", sa.Time(), nullable=True),
        sa.Column("quiet_end", sa.Time(), nullable=True),
        sa.Column("thresholds", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("max_consecutive_failures", sa.Integer(), server_default="3", nullable=False),
        sa.Column("consecutive_failures", sa.Integer(), server_default="0", nullable=False),
        sa.Column("disabled_reason", sa.Text(), nullable=True),
        sa.Column("last_slot_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("next_slot_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("last_job_id", sa.Uuid(), nullable=True),
        sa.Column("state", sa.String(length=16), nullable=True),
        sa.Column("state_since", sa.DateTime(timezone=True), nullable=True),
        sa.Column("state_evidence", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("judged_job_id", sa.Uuid(), nullable=True),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "(cron IS NULL) <> (interval_s IS NULL)", name=op.f("ck_schedules_when")
        ),
        sa.CheckConstraint(
            "interval_s IS NULL OR interval_s >= 60", name=op.f("ck_schedules_interval_s")
        ),
        sa.CheckConstraint("jitter_s >= 0", name=op.f("ck_schedules_jitter_s")),
        sa.CheckConstraint(
            "max_consecutive_failures >= 1", name=op.f("ck_schedules_max_consecutive_failures")
        ),
        sa.CheckConstraint(
            "state IS NULL OR state IN ('ok', 'degraded')", name=op.f("ck_schedules_state")
        ),
        sa.ForeignKeyConstraint(
            ["endpoint_id"], ["endpoints.id"], name=op.f("fk_schedules_endpoint_id_endpoints")
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_schedules_team_id_teams"), ondelete="CASCADE"
        ),
        sa.ForeignKeyConstraint(
            ["last_job_id"],
            ["jobs.id"],
            name=op.f("fk_schedules_last_job_id_jobs"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["judged_job_id"],
            ["jobs.id"],
            name=op.f("fk_schedules_judged_job_id_jobs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedules")),
    )
    op.create_index(op.f("ix_schedules_endpoint_id"), "schedules", ["endpoint_id"])
    op.create_index("ix_schedules_team_created", "schedules", ["team_id", "created_at"])
    op.create_index(
        "ix_schedules_due", "schedules", ["next_slot_at"], postgresql_where=sa.text("enabled")
    )
    op.create_table(
        "schedule_runs",
        sa.Column("schedule_id", sa.Uuid(), nullable=False),
        sa.Column("slot_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "outcome IN ('submitted', 'skipped', 'missed', 'refused')",
            name=op.f("ck_schedule_runs_outcome"),
        ),
        sa.ForeignKeyConstraint(
            ["schedule_id"],
            ["schedules.id"],
            name=op.f("fk_schedule_runs_schedule_id_schedules"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_schedule_runs_job_id_jobs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_schedule_runs")),
    )
    op.create_index(op.f("ix_schedule_runs_job_id"), "schedule_runs", ["job_id"])
    op.create_index(
        "uq_schedule_runs_schedule_slot", "schedule_runs", ["schedule_id", "slot_at"], unique=True
    )
    op.add_column("jobs", sa.Column("schedule_id", sa.Uuid(), nullable=True))
    op.create_index(op.f("ix_jobs_schedule_id"), "jobs", ["schedule_id"])
    op.create_foreign_key(
        op.f("fk_jobs_schedule_id_schedules"),
        "jobs",
        "schedules",
        ["schedule_id"],
        ["id"],
        ondelete="SET NULL",
    )


def downgrade() -> None:
    op.execute(
        "DELETE FROM webhook_deliveries WHERE event IN "
        "('deployment.degraded', 'deployment.recovered')"
    )
    _events(OLD_EVENTS)
    op.drop_constraint(op.f("fk_jobs_schedule_id_schedules"), "jobs", type_="foreignkey")
    op.drop_index(op.f("ix_jobs_schedule_id"), table_name="jobs")
    op.drop_column("jobs", "schedule_id")
    op.drop_table("schedule_runs")
    op.drop_table("schedules")
