"""Preflight: each endpoint keeps its last check and when it ran.

`endpoints.check` is the result POST /v1/endpoints/{id}/check returns (free-form per probe,
so JSONB); `checked_at` is when it ran. A failed check refuses jobs unless they say "force".

Revision ID: e8b2a1d4c012
Revises: d7a1f0c3b011
Create Date: 2026-12-03 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e8b2a1d4c012"
down_revision: str | None = "d7a1f0c3b011"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "endpoints", sa.Column("check", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column("endpoints", sa.Column("checked_at", sa.DateTime(timezone=True), nullable=True))


def downgrade() -> None:
    op.drop_column("endpoints", "checked_at")
    op.drop_column("endpoints", "check")
