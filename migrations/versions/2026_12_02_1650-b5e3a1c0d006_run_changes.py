"""History: each run's change against the previous comparable run.

A run's baseline is the latest earlier succeeded run of the same endpoint, workload
fingerprint, mode and level (infercost.history); the worker stores the statistical
comparison with it as JSONB and its verdict as a column. One partial index serves both the
baseline look-up and GET /v1/endpoints/{id}/history, which reads an endpoint's runs series
by series in time order.

Revision ID: b5e3a1c0d006
Revises: b5e3a1c0d005
Create Date: 2026-12-02 16:50:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "b5e3a1c0d006"
down_revision: str | None = "b5e3a1c0d005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A copy as of this revision (infercost/jobs/models.py CHANGE_VERDICTS).
CHANGE_VERDICTS = ("regression", "improvement", "no_change", "insufficient_data", "baseline")


def upgrade() -> None:
    op.add_column("runs", sa.Column("baseline_run_id", sa.Uuid(), nullable=True))
    op.add_column("runs", sa.Column("change_verdict", sa.String(length=20), nullable=True))
    op.add_column(
        "runs",
        sa.Column("change", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )
    op.create_foreign_key(
        op.f("fk_runs_baseline_run_id_runs"),
        "runs",
        "runs",
        ["baseline_run_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.create_check_constraint(
        op.f("ck_runs_change_verdict"), "runs", f"change_verdict IN {CHANGE_VERDICTS}"
    )
    op.create_index(
        "ix_runs_history",
        "runs",
        ["team_id", "endpoint_id", "workload_fingerprint", "mode", "level", "finished_at"],
        postgresql_where=sa.text("status = 'succeeded'"),
    )
    op.create_index(
        "ix_runs_baseline_run_id",
        "runs",
        ["baseline_run_id"],
        postgresql_where=sa.text("baseline_run_id IS NOT NULL"),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_baseline_run_id", table_name="runs")
    op.drop_index("ix_runs_history", table_name="runs")
    op.drop_constraint(op.f("ck_runs_change_verdict"), "runs", type_="check")
    op.drop_constraint(op.f("fk_runs_baseline_run_id_runs"), "runs", type_="foreignkey")
    op.drop_column("runs", "change")
    op.drop_column("runs", "change_verdict")
    op.drop_column("runs", "baseline_run_id")
