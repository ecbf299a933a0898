"""Samples: time to first output, tokens per event, prompt length asked for and if exact.

Runs get prompt_lengths: whether their prompts were exactly the drawn lengths.

Revision ID: edd6b0d73313
Revises: 7d5198517a3d
Create Date: 2026-12-02 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "edd6b0d73313"
down_revision: str | None = "7d5198517a3d"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("prompt_lengths", sa.String(length=16), nullable=True))
    op.add_column("request_samples", sa.Column("ttfo_ms", sa.Double(), nullable=True))
    op.add_column(
        "request_samples", sa.Column("chunk_tokens", postgresql.ARRAY(sa.Integer()), nullable=True)
    )
    op.add_column("request_samples", sa.Column("n_in_target", sa.Integer(), nullable=True))
    op.add_column(
        "request_samples", sa.Column("prompt_length", sa.String(length=16), nullable=True)
    )


def downgrade() -> None:
    op.drop_column("request_samples", "prompt_length")
    op.drop_column("request_samples", "n_in_target")
    op.drop_column("request_samples", "chunk_tokens")
    op.drop_column("request_samples", "ttfo_ms")
    op.drop_column("runs", "prompt_lengths")
