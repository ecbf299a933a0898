"""Deployments: what a run measured (model, engine, hardware, GPU count), kept as it was.

An endpoint can be re-pointed or re-sized after it was measured (PATCH /v1/endpoints), so
comparisons and history must not read a run's deployment from the endpoint as it is now.
Each run refers to the deployment row its endpoint described when the run started; runs of
one model with one engine on the same hardware and GPU count share the row, so comparisons
group runs by one small integer instead of four texts.
"""

from __future__ import annotations

import uuid

from sqlalchemy import BigInteger, ForeignKey, Identity, Index, String, text
from sqlalchemy.ext.asyncio import AsyncSession
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base
from infercost.db.scope import readable_sql
from infercost.endpoints.models import Endpoint

#: The one rule: a row per (team, model, engine, hardware name, GPU count), made from an
#: endpoint's row `e`, whose source fills {endpoint}. DO UPDATE (a no-op write) rather than
#: DO NOTHING, so RETURNING always yields the id.
_UPSERT = (
    "INSERT INTO deployments (team_id, model, engine, hardware, gpu_count)"
    " SELECT e.team_id, e.model, e.engine, h.name, e.gpu_count FROM {endpoint}"
    " LEFT JOIN hardware h ON h.id = e.hardware_id"
    " ON CONFLICT (team_id, model, engine, hardware, gpu_count)"
    " DO UPDATE SET model = excluded.model RETURNING id"
)

#: deployment_of for writers that insert runs with plain SQL (test fixtures, benchmarks):
#: $1 is the endpoint's id; the statement returns its deployment's id.
DEPLOYMENT_OF_ENDPOINT_SQL = _UPSERT.format(endpoint="(SELECT * FROM endpoints WHERE id = $1) e")

# The same statement over an endpoint's values as the caller loaded them (a worker keeps
# measuring the endpoint it loaded at the job's start, even if it is changed meanwhile).
_DEPLOYMENT_OF_VALUES = text(
    _UPSERT.format(
        endpoint="(VALUES (CAST(:team_id AS uuid), CAST(:model AS text), CAST(:engine AS text),"
        " CAST(:hardware_id AS uuid), CAST(:gpu_count AS integer)))"
        " e (team_id, model, engine, hardware_id, gpu_count)"
    )
)


class Deployment(Base):
    """One (team, model, engine, hardware, GPU count) that runs were measured on."""

    __tablename__ = "deployments"
    __table_args__ = (
        # Hosted APIs have no engine or hardware: nulls must still make one row per key.
        Index(
            "uq_deployments_key",
            "team_id",
            "model",
            "engine",
            "hardware",
            "gpu_count",
            unique=True,
            postgresql_nulls_not_distinct=True,
        ),
    )

    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    model: Mapped[str] = mapped_column(String(256))
    engine: Mapped[str | None] = mapped_column(String(64))
    # The hardware's catalog name; null for a hosted API (then there are no GPUs to count,
    # and per-GPU figures are null).
    hardware: Mapped[str | None] = mapped_column(String(64))
    gpu_count: Mapped[int]


async def deployment_of(session: AsyncSession, endpoint: Endpoint) -> int:
    """The id of the deployment `endpoint` describes now (in the endpoint's team), created
    on first use."""
    statement = readable_sql(_DEPLOYMENT_OF_VALUES, endpoint.team_id)
    values = {
        "model": endpoint.model,
        "engine": endpoint.engine,
        "hardware_id": endpoint.hardware_id,
        "gpu_count": endpoint.gpu_count,
    }
    return int((await session.execute(statement, values)).scalar_one())
