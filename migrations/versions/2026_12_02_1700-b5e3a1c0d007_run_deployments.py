"""Runs keep the deployment they measured (model, engine, hardware, GPU count).

Until now comparisons read a run's deployment from its endpoint as it is today, so a
re-pointed or re-sized endpoint moved its old runs with it. Each run now refers to a
`deployments` row taken as it started; existing runs get their endpoint's current values
(the best that is known about them). The comparisons index is keyed by deployment.

Revision ID: b5e3a1c0d007
Revises: b5e3a1c0d006
Create Date: 2026-12-02 17:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b5e3a1c0d007"
down_revision: str | None = "b5e3a1c0d006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A copy as of this revision (infercost/jobs/models.py COMPARISON_INCLUDE).
INCLUDE = (
    "id", "job_id", "endpoint_id", "level", "mode", "workload_fingerprint", "client_bound",
    "slo_passed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "itl_p50_ms",
    "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms", "per_user_tokens_per_s_p50",
    "output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s", "requests_per_s",
    "mean_concurrency", "error_rate", "goodput_rps", "slo_attainment", "gpu_util_mean",
    "cost_per_million_output_tokens_usd",
)  # fmt: skip
OLD_INCLUDE = tuple(c for c in INCLUDE if c not in ("job_id", "endpoint_id"))


def _comparisons_index(key: str, include: Sequence[str]) -> None:
    op.create_index(
        "ix_runs_comparisons",
        "runs",
        ["team_id", key, "finished_at"],
        postgresql_where=sa.text("status = 'succeeded'"),
        postgresql_include=list(include),
    )


def upgrade() -> None:
    op.create_table(
        "deployments",
        sa.Column("id", sa.BigInteger(), sa.Identity(always=False), nullable=False),
        sa.Column("team_id", sa.Uuid(), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("engine", sa.String(length=64), nullable=True),
        sa.Column("hardware", sa.String(length=64), nullable=True),
        sa.Column("gpu_count", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["team_id"], ["teams.id"], name=op.f("fk_deployments_team_id_teams"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_deployments")),
    )
    op.create_index(
        "uq_deployments_key",
        "deployments",
        ["team_id", "model", "engine", "hardware", "gpu_count"],
        unique=True,
        postgresql_nulls_not_distinct=True,
    )
    op.add_column("runs", sa.Column("deployment_id", sa.BigInteger(), nullable=True))
    op.add_column("runs", sa.Column("engine_version", sa.String(length=64), nullable=True))
    op.execute(
        "INSERT INTO deployments (team_id, model, engine, hardware, gpu_count)"
        " SELECT DISTINCT r.team_id, e.model, e.engine, h.name, e.gpu_count"
        " FROM runs r JOIN endpoints e ON e.id = r.endpoint_id"
        " LEFT JOIN hardware h ON h.id = e.hardware_id"
    )
    op.execute(
        "UPDATE runs r SET deployment_id = d.id, engine_version = e.engine_version"
        " FROM endpoints e LEFT JOIN hardware h ON h.id = e.hardware_id, deployments d"
        " WHERE e.id = r.endpoint_id AND d.team_id = r.team_id AND d.model = e.model"
        " AND d.engine IS NOT DISTINCT FROM e.engine AND d.hardware IS NOT DISTINCT FROM h.name"
        " AND d.gpu_count = e.gpu_count"
    )
    op.alter_column("runs", "deployment_id", nullable=False)
    op.create_foreign_key(
        op.f("fk_runs_deployment_id_deployments"), "runs", "deployments", ["deployment_id"], ["id"]
    )
    op.drop_index("ix_runs_comparisons", table_name="runs")
    _comparisons_index("deployment_id", INCLUDE)


def downgrade() -> None:
    op.drop_index("ix_runs_comparisons", table_name="runs")
    _comparisons_index("endpoint_id", OLD_INCLUDE)
    op.drop_constraint(op.f("fk_runs_deployment_id_deployments"), "runs", type_="foreignkey")
    op.drop_column("runs", "engine_version")
    op.drop_column("runs", "deployment_id")
    op.drop_index("uq_deployments_key", table_name="deployments")
    op.drop_table("deployments")
