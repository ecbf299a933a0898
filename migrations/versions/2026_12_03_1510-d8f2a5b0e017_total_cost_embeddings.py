"""The cost per million total tokens of a hosted embeddings run, as its run summary says.

The generated column asked a hosted run for output tokens/s before pricing it, so a hosted
embeddings run (no output tokens; it pays for its prompt tokens) had no figure in
comparisons while its run summary priced it. The expression is now rendered from the one
definition in infercost/figures/cost.py; every other run's figure is recomputed from the same
columns by the same arithmetic, so it stays what it was (tests/test_migration_percentiles.py).

Revision ID: d8f2a5b0e017
Revises: c7e1f4a9d016
Create Date: 2026-12-03 15:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "d8f2a5b0e017"
down_revision: str | None = "c7e1f4a9d016"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Copies as of this revision (infercost/figures/cost.py RUN_PER_MILLION_TOTAL_TOKENS_SQL) and the
# previous one.
TOTAL = (
    "CASE WHEN total_tokens_per_s > 0 THEN"
    " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
    " CASE WHEN input_tokens_per_s IS NOT NULL THEN"
    " (input_tokens_per_s * usd_per_million_input_tokens"
    " + coalesce(output_tokens_per_s, 0.0) * coalesce(usd_per_million_output_tokens, 0.0))"
    " / 1e6 * 3600.0 / (total_tokens_per_s * 3600.0) * 1e6 END"
    " ELSE usd_per_hour / (total_tokens_per_s * 3600.0) * 1e6 END END"
)
OLD_TOTAL = (
    "CASE WHEN total_tokens_per_s > 0 THEN"
    " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
    " CASE WHEN input_tokens_per_s IS NOT NULL AND output_tokens_per_s IS NOT NULL THEN"
    " (input_tokens_per_s * usd_per_million_input_tokens"
    " + output_tokens_per_s * coalesce(usd_per_million_output_tokens, 0.0)) / 1e6 * 3600.0"
    " / (total_tokens_per_s * 3600.0) * 1e6 END"
    " ELSE usd_per_hour / (total_tokens_per_s * 3600.0) * 1e6 END END"
)
# ix_runs_comparisons includes the column.
INCLUDE = (
    "id", "job_id", "endpoint_id", "level", "mode", "workload_fingerprint", "client_bound",
    "slo_passed", "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "itl_p50_ms",
    "itl_p95_ms", "e2e_p50_ms", "e2e_p95_ms", "per_user_tokens_per_s_p50",
    "output_tokens_per_s", "input_tokens_per_s", "total_tokens_per_s", "requests_per_s",
    "mean_concurrency", "error_rate", "goodput_rps", "slo_attainment", "gpu_util_mean",
    "cost_per_million_output_tokens_usd", "cost_per_million_total_tokens_usd",
)  # fmt: skip


def _generate(expression: str) -> None:
    op.drop_index("ix_runs_comparisons", table_name="runs")
    op.drop_column("runs", "cost_per_million_total_tokens_usd")
    op.add_column(
        "runs",
        sa.Column(
            "cost_per_million_total_tokens_usd",
            sa.Float(),
            sa.Computed(expression, persisted=True),
            nullable=True,
        ),
    )
    op.create_index(
        "ix_runs_comparisons",
        "runs",
        ["team_id", "deployment_id", "finished_at"],
        postgresql_where=sa.text("status = 'succeeded'"),
        postgresql_include=list(INCLUDE),
    )


def upgrade() -> None:
    _generate(TOTAL)


def downgrade() -> None:
    _generate(OLD_TOTAL)
