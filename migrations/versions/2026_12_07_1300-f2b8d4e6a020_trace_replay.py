"""A trace replay's run keeps its replay block: send lateness against the trace's schedule,
what time_scale compressed, and each interval of trace time with its SLO attainment
(infercost/figures/replay.py).

Revision ID: f2b8d4e6a020
Revises: f2b4c6d8e020
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f2b8d4e6a020"
down_revision: str | None = "f2b4c6d8e020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("replay", postgresql.JSONB(astext_type=sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "replay")
