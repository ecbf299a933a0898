"""Comparisons: the cost per million total tokens as a generated column of runs.

Priced with the run's own snapshot like the output-token figure, and included in the
covering index so a comparison sorted by it stays an index-only scan.

Revision ID: b5e3a1c0d009
Revises: b5e3a1c0d008
Create Date: 2026-12-02 17:20:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b5e3a1c0d009"
down_revision: str | None = "b5e3a1c0d008"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Copies as of this revision (infercost/figures/cost.py, infercost/jobs/models.py).
PER_MILLION_TOTAL_TOKENS = (
    "CASE WHEN total_tokens_per_s > 0 THEN"
    " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
    " CASE WHEN input_tokens_per_s IS NOT NULL AND output_tokens_per_s IS NOT NULL THEN"
    " (input_tokens_per_s * usd_per_million_input_tokens"
    " + output_tokens_per_s * coalesce(usd_per_million_output_tokens, 0.0)) / 1e6 * 3600.0"
    " / (total_tokens_per_s * 3600.0) * 1e6 END"
    " ELSE usd_per_hour / (total_tokens_per_s * 3600.0) * 1e6 END END"
)
OLD_INCLUDE = (
    "id", "job_id", "endpoint_id", "level", "mode", "workload_fingerprint", "client_bound",
    "slo_passed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "itl_p50_ms",
    "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms", "per_user_tokens_per_s_p50",
    "output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s", "requests_per_s",
    "mean_concurrency", "error_rate", "goodput_rps", "slo_attainment", "gpu_util_mean",
    "cost_per_million_output_tokens_usd",
)  # fmt: skip
INCLUDE = (*OLD_INCLUDE, "cost_per_million_total_tokens_usd")


def _comparisons_index(include: Sequence[str]) -> None:
    op.create_index(
        "ix_runs_comparisons",
        "runs",
        ["team_id", "deployment_id", "finished_at"],
        postgresql_where=sa.text("status = 'succeeded'"),
        postgresql_include=list(include),
    )


def upgrade() -> None:
    op.add_column(
        "runs",
        sa.Column(
            "cost_per_million_total_tokens_usd",
            sa.Float(),
            sa.Computed(PER_MILLION_TOTAL_TOKENS, persisted=True),
            nullable=True,
        ),
    )
    op.drop_index("ix_runs_comparisons", table_name="runs")
    _comparisons_index(INCLUDE)


def downgrade() -> None:
    op.drop_index("ix_runs_comparisons", table_name="runs")
    _comparisons_index(OLD_INCLUDE)
    op.drop_column("runs", "cost_per_million_total_tokens_usd")
