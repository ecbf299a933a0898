"""Nothing lost: a task outbox, a fencing token on each job's lease, a reason on runs.

`task_outbox` holds a task to send, written in the transaction of the job it starts, until
the API or the maintenance relay hands it to the broker. `jobs.lease_token` goes up on each
claim and every write of a runner carries it; `jobs.enqueue_count` spaces re-publishing of
jobs whose message may be gone. `runs.error` says why a level failed when no request can
(its worker died). A partial index keeps the sweep's look at unfinished jobs cheap.

Revision ID: d7a1f0c3b011
Revises: c6f0a2b1e010
Create Date: 2026-12-03 11:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "d7a1f0c3b011"
down_revision: str | None = "c6f0a2b1e010"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "task_outbox",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("task", sa.String(64), nullable=False),
        sa.Column("args", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("job_id", sa.Uuid(), nullable=True),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.func.now(), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["job_id"], ["jobs.id"], name=op.f("fk_task_outbox_job_id_jobs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_task_outbox")),
    )
    op.create_index(op.f("ix_task_outbox_job_id"), "task_outbox", ["job_id"])
    op.add_column(
        "jobs", sa.Column("enqueue_count", sa.Integer(), server_default="0", nullable=False)
    )
    op.add_column(
        "jobs", sa.Column("lease_token", sa.BigInteger(), server_default="0", nullable=False)
    )
    op.add_column("runs", sa.Column("error", sa.Text(), nullable=True))
    op.create_index(
        "ix_jobs_unfinished",
        "jobs",
        ["status", "heartbeat_at"],
        postgresql_where=sa.text("status IN ('queued', 'running')"),
    )


def downgrade() -> None:
    op.drop_index("ix_jobs_unfinished", table_name="jobs")
    op.drop_column("runs", "error")
    op.drop_column("jobs", "lease_token")
    op.drop_column("jobs", "enqueue_count")
    op.drop_index(op.f("ix_task_outbox_job_id"), table_name="task_outbox")
    op.drop_table("task_outbox")
