"""Datasets, multi-turn sessions and workload fingerprints.

Datasets and their items; jobs name the dataset they replay; jobs and runs carry the
workload fingerprint that says which runs are comparable.

Revision ID: b5e3a1c0d002
Revises: b5e3a1c0d001
Create Date: 2026-12-02 16:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "b5e3a1c0d002"
down_revision: str | None = "b5e3a1c0d001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "datasets",
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("name", sa.String(length=200), nullable=False),
        sa.Column("format", sa.String(length=16), nullable=False),
        sa.Column("content_sha256", sa.String(length=64), nullable=False),
        sa.Column("size_bytes", sa.BigInteger(), nullable=False),
        sa.Column("item_count", sa.Integer(), nullable=False),
        sa.Column("chat_items", sa.Integer(), nullable=False),
        sa.Column("max_tokens_items", sa.Integer(), nullable=False),
        sa.Column("max_turns", sa.Integer(), nullable=False),
        sa.Column("skipped_items", sa.Integer(), nullable=False),
        sa.Column("deleted_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("id", sa.Uuid(), nullable=False),
        sa.Column(
            "created_at",
            sa.DateTime(timezone=True),
            server_default=sa.text("now()"),
            nullable=False,
        ),
        sa.CheckConstraint("format IN ('jsonl', 'sharegpt')", name=op.f("ck_datasets_format")),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_datasets_team_id_teams"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_datasets")),
    )
    op.create_index("ix_datasets_team_created", "datasets", ["team_id", "created_at"])
    op.create_index(
        "uq_datasets_team_content",
        "datasets",
        ["team_id", "content_sha256"],
        unique=True,
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.create_table(
        "dataset_items",
        sa.Column("dataset_id", sa.Uuid(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("prompt", sa.Text(), nullable=True),
        sa.Column("messages", postgresql.JSONB(astext_type=sa.Text()), nullable=True),
        sa.Column("max_tokens", sa.Integer(), nullable=True),
        sa.CheckConstraint(
            "(prompt IS NULL) <> (messages IS NULL)",
            name=op.f("ck_dataset_items_prompt_or_messages"),
        ),
        sa.ForeignKeyConstraint(
            ["dataset_id"],
            ["datasets.id"],
            name=op.f("fk_dataset_items_dataset_id_datasets"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("dataset_id", "seq", name=op.f("pk_dataset_items")),
    )
    op.add_column("jobs", sa.Column("dataset_id", sa.Uuid(), nullable=True))
    op.add_column("jobs", sa.Column("workload_fingerprint", sa.String(length=16), nullable=True))
    op.create_index(op.f("ix_jobs_dataset_id"), "jobs", ["dataset_id"])
    op.create_foreign_key(
        op.f("fk_jobs_dataset_id_datasets"), "jobs", "datasets", ["dataset_id"], ["id"]
    )
    op.add_column("runs", sa.Column("workload_fingerprint", sa.String(length=16), nullable=True))
    op.create_index(op.f("ix_runs_workload_fingerprint"), "runs", ["workload_fingerprint"])


def downgrade() -> None:
    op.drop_index(op.f("ix_runs_workload_fingerprint"), table_name="runs")
    op.drop_column("runs", "workload_fingerprint")
    op.drop_constraint(op.f("fk_jobs_dataset_id_datasets"), "jobs", type_="foreignkey")
    op.drop_index(op.f("ix_jobs_dataset_id"), table_name="jobs")
    op.drop_column("jobs", "workload_fingerprint")
    op.drop_column("jobs", "dataset_id")
    op.drop_table("dataset_items")
    op.drop_index(
        "uq_datasets_team_content",
        table_name="datasets",
        postgresql_where=sa.text("deleted_at IS NULL"),
    )
    op.drop_index("ix_datasets_team_created", table_name="datasets")
    op.drop_table("datasets")
