"""Pages for people: share links (`shares`) and browser sessions signed in with a team key
(`browser_sessions`).

Neither table holds a token a person carries: a share link's token is an HMAC of the
share's id under the server's secret keys, so it is checked, not looked up; a session's
cookie is stored as its SHA-256.

Revision ID: e1a7c3d5f019
Revises: e1a7c3d5f018
Create Date: 2026-12-06 10:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "e1a7c3d5f019"
down_revision: str | None = "e1a7c3d5f018"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "shares",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("page", sa.String(length=16), nullable=False),
        sa.Column("job_ids", postgresql.ARRAY(sa.UUID()), nullable=False),
        sa.Column("window", sa.String(length=8), nullable=True),
        sa.Column("all_endpoints", sa.Boolean(), server_default=sa.false(), nullable=False),
        sa.Column("label", sa.String(length=200), nullable=True),
        sa.Column("created_by", sa.String(length=200), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.CheckConstraint(
            "page IN ('report', 'comparison', 'status')", name=op.f("ck_shares_page")
        ),
        sa.CheckConstraint(
            "(page = 'report' AND cardinality(job_ids) = 1)"
            " OR (page = 'comparison' AND cardinality(job_ids) BETWEEN 2 AND 8)"
            " OR (page = 'status' AND cardinality(job_ids) = 0)",
            name=op.f("ck_shares_job_ids"),
        ),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_shares_team_id_teams"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_shares")),
    )
    op.create_index("ix_shares_team_created", "shares", ["team_id", "created_at"], unique=False)
    op.create_table(
        "browser_sessions",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("key_id", sa.Uuid(), nullable=False),
        sa.Column("token_hash", sa.LargeBinary(length=32), nullable=False),
        sa.Column("expires_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("ended_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at", sa.DateTime(timezone=True), server_default=sa.text("now()"), nullable=False
        ),
        sa.ForeignKeyConstraint(
            ["key_id"],
            ["api_keys.id"],
            name=op.f("fk_browser_sessions_key_id_api_keys"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["team_id"],
            ["teams.id"],
            name=op.f("fk_browser_sessions_team_id_teams"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_browser_sessions")),
        sa.UniqueConstraint("token_hash", name=op.f("uq_browser_sessions_token_hash")),
    )
    op.create_index(
        op.f("ix_browser_sessions_key_id"), "browser_sessions", ["key_id"], unique=False
    )
    op.create_index(
        op.f("ix_browser_sessions_team_id"), "browser_sessions", ["team_id"], unique=False
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_browser_sessions_team_id"), table_name="browser_sessions")
    op.drop_index(op.f("ix_browser_sessions_key_id"), table_name="browser_sessions")
    op.drop_table("browser_sessions")
    op.drop_index("ix_shares_team_created", table_name="shares")
    op.drop_table("shares")
