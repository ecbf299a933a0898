"""Results of other tools taken in (POST /v1/imports): an endpoint that holds only imported
results is marked external (it is never benchmarked), the job that holds them imported, and
each imported run carries its source: the tool, its version and whose definitions its figures
follow, so comparisons label them and never mix definitions silently.

Revision ID: f2b8c4d6e020
Revises: e9a3b6c1f018
Create Date: 2026-12-07 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f2b8c4d6e020"
down_revision: str | None = "e9a3b6c1f018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "endpoints",
        sa.Column("external", sa.Boolean(), server_default=sa.text("false"), nullable=False),
    )
    op.add_column(
        "jobs", sa.Column("imported", sa.Boolean(), server_default=sa.text("false"), nullable=False)
    )
    op.add_column(
        "runs", sa.Column("source", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column("runs", sa.Column("source_tool", sa.String(length=16), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "source_tool")
    op.drop_column("runs", "source")
    op.drop_column("jobs", "imported")
    op.drop_column("endpoints", "external")
