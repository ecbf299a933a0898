"""Each model's figures in a run spread over several (workload.models) as rows of
`run_models`, one a model, written with the run's `models` block (JobRepository.update_run),
so comparisons and history group by the model a request asked for from columns. Runs stored
before are filled in from their blocks.

Revision ID: a7c9e1f3b022
Revises: f1c2a3b4d021
Create Date: 2026-12-07 15:00:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "a7c9e1f3b022"
down_revision: str | None = "f1c2a3b4d021"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

#: (column, the block's key, the statistic or None), as infercost.figures.metrics.MODEL_COLUMNS
#: reads them (kept here as written: a migration does not change when the code does).
_FIGURES = (
    ("ttft_p50_ms", "ttft_ms", "p50"),
    ("ttft_p95_ms", "ttft_ms", "p95"),
    ("tpot_p50_ms", "tpot_ms", "p50"),
    ("tpot_p95_ms", "tpot_ms", "p95"),
    ("e2e_p50_ms", "e2e_ms", "p50"),
    ("e2e_p95_ms", "e2e_ms", "p95"),
    ("output_tokens_per_s", "output_tokens_per_s", None),
    ("input_tokens_per_s", "input_tokens_per_s", None),
    ("requests_per_s", "requests_per_s", None),
    ("error_rate", "error_rate", None),
    ("token_share", "token_share", None),
)


def upgrade() -> None:
    op.create_table(
        "run_models",
        sa.Column("run_id", sa.Uuid(), nullable=False),
        sa.Column("model", sa.String(length=256), nullable=False),
        sa.Column("requests_total", sa.Integer(), nullable=False),
        sa.Column("requests_succeeded", sa.Integer(), nullable=False),
        *(sa.Column(name, sa.Float(), nullable=True) for name, _, _ in _FIGURES),
        sa.ForeignKeyConstraint(
            ["run_id"], ["runs.id"], name=op.f("fk_run_models_run_id_runs"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("run_id", "model", name=op.f("pk_run_models")),
    )
    reads = ", ".join(
        f"(m -> '{key}' ->> '{stat}')::double precision"
        if stat
        else f"(m ->> '{key}')::double precision"
        for _, key, stat in _FIGURES
    )
    op.execute(
        "INSERT INTO run_models (run_id, model, requests_total, requests_succeeded, "
        f"{', '.join(name for name, _, _ in _FIGURES)}) "
        "SELECT runs.id, m ->> 'model', coalesce((m -> 'requests' ->> 'total')::int, 0), "
        f"coalesce((m -> 'requests' ->> 'succeeded')::int, 0), {reads} "
        "FROM runs CROSS JOIN LATERAL jsonb_array_elements(runs.models) AS m "
        "WHERE jsonb_typeof(runs.models) = 'array' AND m ->> 'model' IS NOT NULL "
        "ON CONFLICT DO NOTHING"
    )


def downgrade() -> None:
    op.drop_table("run_models")
