"""The engine's own timings and prefix-cache hits, per request and per run; adequacy.

Each request sample keeps the prompt tokens the server served from its prefix cache and,
where the engine reports them (llama.cpp's `timings`, TGI's headers), its own prefill time,
time per output token, queue time and token counts. Each run keeps them summarised beside
the client's figures (`server_timings`), its cache share (`cache`), and whether its evidence
supports its figures (`adequacy`).

Revision ID: c6f0a2b1e010
Revises: b5e3a1c0d009
Create Date: 2026-12-03 10:30:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "c6f0a2b1e010"
down_revision: str | None = "b5e3a1c0d009"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

# Copies as of this revision (infercost/jobs/models.py CHANGE_VERDICTS): runs whose prefix
# cache shares differ are judged `incomparable`, not compared.
OLD_VERDICTS = ("regression", "improvement", "no_change", "insufficient_data", "baseline")
NEW_VERDICTS = (*OLD_VERDICTS, "incomparable")


def _verdicts(allowed: tuple[str, ...]) -> None:
    op.drop_constraint(op.f("ck_runs_change_verdict"), "runs", type_="check")
    op.create_check_constraint(
        op.f("ck_runs_change_verdict"), "runs", f"change_verdict IN {allowed}"
    )


def upgrade() -> None:
    op.add_column("request_samples", sa.Column("cached_tokens", sa.Integer(), nullable=True))
    op.add_column("request_samples", sa.Column("server_source", sa.String(16), nullable=True))
    for name in ("server_prefill_ms", "server_tpot_ms", "server_queue_ms"):
        op.add_column("request_samples", sa.Column(name, sa.Float(), nullable=True))
    for name in ("server_n_out", "server_n_prefilled"):
        op.add_column("request_samples", sa.Column(name, sa.Integer(), nullable=True))
    jsonb = postgresql.JSONB(astext_type=sa.Text())
    op.add_column("runs", sa.Column("server_timings", jsonb, nullable=True))
    op.add_column("runs", sa.Column("cache", jsonb, nullable=True))
    op.add_column("runs", sa.Column("adequacy", jsonb, nullable=True))
    _verdicts(NEW_VERDICTS)


def downgrade() -> None:
    op.execute("UPDATE runs SET change_verdict = 'insufficient_data' "
               "WHERE change_verdict = 'incomparable'")
    _verdicts(OLD_VERDICTS)
    op.drop_column("runs", "adequacy")
    op.drop_column("runs", "cache")
    op.drop_column("runs", "server_timings")
    for name in (
        "server_n_prefilled",
        "server_n_out",
        "server_queue_ms",
        "server_tpot_ms",
        "server_prefill_ms",
        "server_source",
        "cached_tokens",
    ):
        op.drop_column("request_samples", name)
