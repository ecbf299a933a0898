"""Request features (issue 29): reasoning tokens apart from answer tokens, per request and
per run, as columns where they are queried (the rates, a sample's counts and times) and the
per-request detail as a JSONB block; the model each request asked for (workload.models) and
each run's per-model figures; tool calls and structured answers judged valid or not; images sent and their tokens; a dataset item's own request features.

Revision ID: f2b4c6d8e020
Revises: a3d5f7b9c021
Create Date: 2026-12-07 09:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "f2b4c6d8e020"
down_revision: str | None = "a3d5f7b9c021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("reasoning_tokens_per_s", sa.Double(), nullable=True))
    op.add_column("runs", sa.Column("answer_tokens_per_s", sa.Double(), nullable=True))
    op.add_column(
        "runs", sa.Column("reasoning", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column("request_samples", sa.Column("n_reasoning", sa.Integer(), nullable=True))
    op.add_column("request_samples", sa.Column("ttfr_ms", sa.Double(), nullable=True))
    op.add_column(
        "request_samples", sa.Column("reasoning_source", sa.String(length=16), nullable=True)
    )
    op.add_column(
        "runs", sa.Column("models", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column("request_samples", sa.Column("model", sa.String(length=256), nullable=True))
    op.add_column("runs", sa.Column("tool_calls_valid_share", sa.Double(), nullable=True))
    op.add_column("runs", sa.Column("structured_valid_share", sa.Double(), nullable=True))
    for name in ("tools", "structured"):
        op.add_column(
            "runs", sa.Column(name, postgresql.JSONB(astext_type=sa.Text()), nullable=True)
        )
    op.add_column("request_samples", sa.Column("tool_calls", sa.Integer(), nullable=True))
    op.add_column("request_samples", sa.Column("tool_calls_valid", sa.Integer(), nullable=True))
    op.add_column("request_samples", sa.Column("structured_valid", sa.Boolean(), nullable=True))
    op.add_column(
        "request_samples",
        sa.Column("invalid_reasons", postgresql.ARRAY(sa.String(length=16)), nullable=True),
    )
    op.add_column(
        "runs", sa.Column("image", postgresql.JSONB(astext_type=sa.Text()), nullable=True)
    )
    op.add_column("request_samples", sa.Column("images", sa.SmallInteger(), nullable=True))
    op.add_column("request_samples", sa.Column("image_tokens", sa.Integer(), nullable=True))
    op.add_column(
        "dataset_items",
        sa.Column("features", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
    )


def downgrade() -> None:
    op.drop_column("dataset_items", "features")
    op.drop_column("request_samples", "image_tokens")
    op.drop_column("request_samples", "images")
    op.drop_column("runs", "image")
    for column in ("invalid_reasons", "structured_valid", "tool_calls_valid", "tool_calls"):
        op.drop_column("request_samples", column)
    for column in ("structured", "tools", "structured_valid_share", "tool_calls_valid_share"):
        op.drop_column("runs", column)
    op.drop_column("request_samples", "model")
    op.drop_column("runs", "models")
    op.drop_column("request_samples", "reasoning_source")
    op.drop_column("request_samples", "ttfr_ms")
    op.drop_column("request_samples", "n_reasoning")
    op.drop_column("runs", "reasoning")
    op.drop_column("runs", "answer_tokens_per_s")
    op.drop_column("runs", "reasoning_tokens_per_s")
