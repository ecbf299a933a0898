"""Data that can be corrected: price entries withdrawn (kept for the record) and the warning a
price far from the book's was entered with; retention: when a run's raw samples were pruned
(the status board's trigger ignores that change, which touches no figure); the audit log
(`audit_events`): who changed what in each team, and when.

Revision ID: f2b8c4d6a020
Revises: f2b8c4d6e020
Create Date: 2026-12-06 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f2b8c4d6a020"
down_revision: str | None = "f2b8c4d6e020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

_IN_EFFECT = ["team_id", "provider", "hardware_id", "pricing_model", "effective_from"]
_STATUS_TRIGGER = """
CREATE TRIGGER status_runs_update AFTER UPDATE ON runs FOR EACH ROW
  WHEN ((OLD.status = 'succeeded' OR NEW.status = 'succeeded'){extra})
  EXECUTE FUNCTION status_runs_row()
"""
_ONLY_FIGURES = " AND OLD.samples_pruned_at IS NOT DISTINCT FROM NEW.samples_pruned_at"


def upgrade() -> None:
    op.add_column("prices", sa.Column("withdrawn_at", sa.DateTime(timezone=True), nullable=True))
    op.add_column("prices", sa.Column("warning", sa.Text(), nullable=True))
    op.drop_index("uq_prices_in_effect", table_name="prices")
    op.create_index(
        "uq_prices_in_effect",
        "prices",
        _IN_EFFECT,
        unique=True,
        postgresql_where=sa.text("withdrawn_at IS NULL"),
    )
    op.add_column("runs", sa.Column("samples_pruned_at", sa.DateTime(timezone=True), nullable=True))
    op.execute("DROP TRIGGER status_runs_update ON runs")
    op.execute(_STATUS_TRIGGER.format(extra=_ONLY_FIGURES))
    op.create_table(
        "audit_events",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column(
            "at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.Column("actor", sa.String(length=200), nullable=False),
        sa.Column("key_id", sa.Uuid(), nullable=True),
        sa.Column("action", sa.String(length=64), nullable=False),
        sa.Column("target_type", sa.String(length=32), nullable=False),
        sa.Column("target_id", sa.Uuid(), nullable=True),
        sa.Column("summary", sa.Text(), nullable=False),
        sa.Column("detail", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name=op.f("fk_audit_events_team_id_teams"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_audit_events")),
    )
    op.create_index("ix_audit_events_team_at", "audit_events", ["team_id", "at", "id"])


def downgrade() -> None:
    op.drop_index("ix_audit_events_team_at", table_name="audit_events")
    op.drop_table("audit_events")
    op.execute("DROP TRIGGER status_runs_update ON runs")
    op.execute(_STATUS_TRIGGER.format(extra=""))
    op.drop_column("runs", "samples_pruned_at")
    # Withdrawn entries go: they may share a moment with the entry that replaced them, which
    # the older, whole unique index does not allow.
    op.execute("DELETE FROM prices WHERE withdrawn_at IS NOT NULL")
    op.drop_index("uq_prices_in_effect", table_name="prices")
    op.create_index("uq_prices_in_effect", "prices", _IN_EFFECT, unique=True)
    op.drop_column("prices", "warning")
    op.drop_column("prices", "withdrawn_at")
