"""A cap on the requests in flight of a rate level, and bursts.

Each request sample keeps how long it waited for a slot under the level's
load.max_concurrency (`cap_wait_ms`, part of its queue delay; null without a cap), and each
run whether its cap was reached and how often requests waited (`concurrency_cap`). A burst
level (load.mode "burst") needs nothing new: its run's mode is "burst" and its level the
requests sent at once.

Revision ID: a4c7e2f1b014
Revises: f9c3b2e5d013
Create Date: 2026-12-03 13:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "a4c7e2f1b014"
down_revision: str | None = "f9c3b2e5d013"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("request_samples", sa.Column("cap_wait_ms", sa.Float(), nullable=True))
    op.add_column(
        "runs",
        sa.Column("concurrency_cap", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("runs", "concurrency_cap")
    op.drop_column("request_samples", "cap_wait_ms")
