"""Fair share between teams: the broker priority a queued job's message went with (its place
in its own team's line, infercost/jobs/outbox.py), so a job's place in the queue follows the
order the broker serves.

Revision ID: f1c2a3b4d020
Revises: f2b8d4e6a020
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "f1c2a3b4d020"
down_revision: str | None = "f2b8d4e6a020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("jobs", sa.Column("queue_priority", sa.SmallInteger(), nullable=True))


def downgrade() -> None:
    op.drop_column("jobs", "queue_priority")
