"""Each shard's reading-side health (read lag, loop lag and stalls, collections, pause
exposure), so a sharded level's run carries every shard's figures and their merge instead of
none (workers/loadgen/health.py).

Revision ID: e9a3b6c1f018
Revises: e1a7c3d5f019
Create Date: 2026-12-05 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e9a3b6c1f018"
down_revision: str | None = "e1a7c3d5f019"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "run_shards", sa.Column("reading", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("run_shards", "reading")
