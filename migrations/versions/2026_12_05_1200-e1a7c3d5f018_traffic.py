"""Request logs a team imports (traffic) and their requests, one row each.

Revision ID: e1a7c3d5f018
Revises: d8f2a5b0e017
Create Date: 2026-12-05 12:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e1a7c3d5f018"
down_revision: str | None = "d8f2a5b0e017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "traffic",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("requests", sa.Integer(), nullable=False),
        sa.Column("start_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("duration_s", sa.Double(), nullable=False),
        sa.Column("mean_requests_per_s", sa.Double(), nullable=True),
        sa.Column("peak_1m_requests_per_s", sa.Double(), nullable=False),
        sa.Column("peak_5m_requests_per_s", sa.Double(), nullable=False),
        sa.Column("input_tokens_total", sa.BigInteger(), nullable=False),
        sa.Column("output_tokens_total", sa.BigInteger(), nullable=False),
        sa.Column("block_tokens", sa.Integer(), nullable=True),
        sa.Column("prefix_reuse_share", sa.Double(), nullable=True),
        sa.Column("sessions", sa.Integer(), nullable=True),
        sa.Column("in_order", sa.Boolean(), nullable=False),
        sa.Column("minute_counts", postgresql.ARRAY(sa.Integer()), nullable=False),
        sa.Column("lengths", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("models", postgresql.JSONB(astext_type=sa.Text()), nullable=False),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint(
            "format IN ('azure', 'mooncake', 'burstgpt', 'infercost')",
            name=op.f("ck_traffic_format"),
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_traffic_team_id_teams"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_traffic")),
    )
    op.create_index("ix_traffic_team_created", "traffic", ["team_id", "created_at"])
    op.create_index("uq_traffic_team_name", "traffic", ["team_id", "name"], unique=True)
    op.create_table(
        "traffic_requests",
        sa.Column("traffic_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("at_us", sa.BigInteger(), nullable=False),
        sa.Column("input_tokens", sa.Integer(), nullable=False),
        sa.Column("output_tokens", sa.Integer(), nullable=False),
        sa.Column("model", sa.Text(), nullable=True),
        sa.Column("session_id", sa.Text(), nullable=True),
        sa.Column("prefix_blocks", postgresql.ARRAY(sa.Integer()), nullable=True),
        sa.ForeignKeyConstraint(
            ["traffic_id"],
            ["traffic.id"],
            name=op.f("fk_traffic_requests_traffic_id_traffic"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("traffic_id", "seq", name=op.f("pk_traffic_requests")),
    )
    op.create_index(
        "ix_traffic_requests_traffic_at", "traffic_requests", ["traffic_id", "at_us"]
    )


def downgrade() -> None:
    op.drop_index("ix_traffic_requests_traffic_at", table_name="traffic_requests")
    op.drop_table("traffic_requests")
    op.drop_index("uq_traffic_team_name", table_name="traffic")
    op.drop_index("ix_traffic_team_created", table_name="traffic")
    op.drop_table("traffic")
