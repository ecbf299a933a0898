"""Comparisons: indexes and summary tables for queries across runs.

Figures that live inside runs.stats and runs.telemetry, and the cost per million output
tokens at the run's price snapshot, become generated columns, so GET /v1/comparisons reads
run-level columns only; one partial covering index holds every column it reads.

Revision ID: b5e3a1c0d004
Revises: b5e3a1c0d003
Create Date: 2026-12-02 16:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "b5e3a1c0d004"
down_revision: str | None = "b5e3a1c0d003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# A copy as of this revision (infercost/figures/cost.py RUN_PER_MILLION_OUTPUT_TOKENS_SQL), so the
# migration means the same thing whatever the code does later.
PER_MILLION_OUTPUT_TOKENS = (
    "CASE WHEN output_tokens_per_s > 0 THEN"
    " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
    " CASE WHEN input_tokens_per_s IS NOT NULL THEN"
    " (input_tokens_per_s * usd_per_million_input_tokens"
    " + output_tokens_per_s * coalesce(usd_per_million_output_tokens, 0.0)) / 1e6 * 3600.0"
    " / (output_tokens_per_s * 3600.0) * 1e6 END"
    " ELSE usd_per_hour / (output_tokens_per_s * 3600.0) * 1e6 END END"
)
FIGURES = {
    "itl_p50_ms": "(stats -> 'itl_ms' ->> 'p50')::double precision",
    "itl_p95_ms": "(stats -> 'itl_ms' ->> 'p95')::double precision",
    "e2e_p50_ms": "(stats -> 'e2e_ms' ->> 'p50')::double precision",
    "e2e_p95_ms": "(stats -> 'e2e_ms' ->> 'p95')::double precision",
    "per_user_tokens_per_s_p50": "(stats -> 'per_user_tokens_per_s' ->> 'p50')::double precision",
    "gpu_util_mean": "(telemetry ->> 'gpu_util_mean')::double precision",
    "cost_per_million_output_tokens_usd": PER_MILLION_OUTPUT_TOKENS,
}

# Everything a comparison reads, so it is answered by an index-only scan of a narrow index
# rather than by reading each wide run row past its JSONB summaries.
INCLUDE = (
    "id", "level", "mode", "workload_fingerprint", "client_bound", "slo_passed",
    "ttft_p50_ms", "ttft_p95_ms", "tpot_p50_ms", "tpot_p95_ms", "itl_p50_ms", "itl_p95_ms",
    "e2e_p50_ms", "e2e_p95_ms", "per_user_tokens_per_s_p50", "output_tokens_per_s",
    "input_tokens_per_s", "total_tokens_per_s", "requests_per_s", "mean_concurrency",
    "error_rate", "goodput_rps", "slo_attainment", "gpu_util_mean",
    "cost_per_million_output_tokens_usd",
)


def upgrade() -> None:
    for name, expression in FIGURES.items():
        op.add_column(
            "runs",
            sa.Column(name, sa.Float(), sa.Computed(expression, persisted=True), nullable=True),
        )
    op.create_index(
        "ix_runs_comparisons",
        "runs",
        ["team_id", "endpoint_id", "finished_at"],
        postgresql_where=sa.text("status = 'succeeded'"),
        postgresql_include=list(INCLUDE),
    )


def downgrade() -> None:
    op.drop_index("ix_runs_comparisons", table_name="runs")
    for name in reversed(FIGURES):
        op.drop_column("runs", name)
