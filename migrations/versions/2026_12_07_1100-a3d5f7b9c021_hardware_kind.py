"""Hardware entries say whether they are a GPU or a CPU machine, so a llama.cpp or
transformers server on CPUs can be registered with hardware of its own (`kind`).

Revision ID: a3d5f7b9c021
Revises: f2b8c4d6a020
Create Date: 2026-12-07 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a3d5f7b9c021"
down_revision: str | None = "f2b8c4d6a020"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column(
        "hardware", sa.Column("kind", sa.String(length=8), server_default="gpu", nullable=False)
    )
    op.create_check_constraint(op.f("ck_hardware_kind"), "hardware", "kind IN ('gpu', 'cpu')")


def downgrade() -> None:
    op.drop_constraint(op.f("ck_hardware_kind"), "hardware", type_="check")
    op.drop_column("hardware", "kind")
