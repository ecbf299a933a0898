"""A level interrupted by its worker's death is measured again (workers/app.py,
infercost.jobs.repository.JobRepository.interrupt): its run is kept as 'interrupted', so a
level may hold two runs, only one of them not interrupted; the run measured again names the
run it replaced; a job counts its interruptions (the second fails it).

Revision ID: f1c2a3b4d021
Revises: f1c2a3b4d020
Create Date: 2026-12-07 10:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f1c2a3b4d021"
down_revision: str | None = "f1c2a3b4d020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.drop_constraint(op.f("ck_runs_status"), "runs", type_="check")
    op.create_check_constraint(
        op.f("ck_runs_status"),
        "runs",
        "status IN ('running', 'succeeded', 'failed', 'cancelled', 'interrupted')",
    )
    op.drop_index("uq_runs_job_index", table_name="runs")
    op.create_index(
        "uq_runs_job_index",
        "runs",
        ["job_id", "level_index"],
        unique=True,
        postgresql_where=sa.text("status <> 'interrupted'"),
    )
    op.add_column("runs", sa.Column("replaces_run_id", sa.Uuid(), nullable=True))
    op.create_foreign_key(
        op.f("fk_runs_replaces_run_id_runs"),
        "runs",
        "runs",
        ["replaces_run_id"],
        ["id"],
        ondelete="SET NULL",
    )
    op.add_column(
        "jobs", sa.Column("interruptions", sa.SmallInteger(), server_default="0", nullable=False)
    )


def downgrade() -> None:
    op.drop_column("jobs", "interruptions")
    op.drop_constraint(op.f("fk_runs_replaces_run_id_runs"), "runs", type_="foreignkey")
    op.drop_column("runs", "replaces_run_id")
    op.execute("DELETE FROM runs WHERE status = 'interrupted'")
    op.drop_index("uq_runs_job_index", table_name="runs")
    op.create_index("uq_runs_job_index", "runs", ["job_id", "level_index"], unique=True)
    op.drop_constraint(op.f("ck_runs_status"), "runs", type_="check")
    op.create_check_constraint(
        op.f("ck_runs_status"), "runs", "status IN ('running', 'succeeded', 'failed', 'cancelled')"
    )
