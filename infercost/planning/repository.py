"""The rows an estimate rests on: a team's endpoints serving a model, their finished jobs
and runs, and the price book entries in effect (every read scoped by team_id)."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import readable
from infercost.endpoints.models import Endpoint
from infercost.jobs.deployments import Deployment
from infercost.jobs.models import Job
from infercost.prices.models import Price
from infercost.prices.repository import in_effect_at


class EvidenceRepository:
    """Read-only queries for the planner."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def endpoints_serving(self, team_id: uuid.UUID, model: str) -> list[Endpoint]:
        """The team's live endpoints that generate with `model`, by name: an estimate sizes
        generation traffic, so embeddings endpoints (their own kind) are left out."""
        rows = await self.session.scalars(
            readable(Endpoint, team_id)
            .where(
                Endpoint.model == model,
                Endpoint.deleted_at.is_(None),
                Endpoint.api != "openai-embeddings",
            )
            .order_by(Endpoint.name)
        )
        return list(rows)

    async def models(self, team_id: uuid.UUID) -> list[str]:
        """Every model the team's live endpoints serve, sorted."""
        rows = await self.session.scalars(
            readable(Endpoint, team_id, Endpoint.model)
            .where(Endpoint.deleted_at.is_(None))
            .distinct()
            .order_by(Endpoint.model)
        )
        return list(rows)

    async def finished_jobs(
        self, team_id: uuid.UUID, endpoint_id: uuid.UUID, limit: int = 20
    ) -> list[Job]:
        """The endpoint's latest jobs that measured something (succeeded, or failed or
        cancelled after some levels), newest first."""
        rows = await self.session.scalars(
            readable(Job, team_id)
            .where(
                Job.endpoint_id == endpoint_id,
                Job.status.in_(("succeeded", "failed", "cancelled")),
            )
            .order_by(Job.finished_at.desc().nulls_last(), Job.created_at.desc())
            .limit(limit)
        )
        return list(rows)

    async def deployment_model(self, team_id: uuid.UUID, deployment_id: int) -> str | None:
        """The model a deployment (what runs measured) served; None if it is not the team's."""
        row = await self.session.scalar(
            readable(Deployment, team_id, Deployment.model).where(Deployment.id == deployment_id)
        )
        return None if row is None else str(row)

    async def prices_in_effect(self, team_id: uuid.UUID, at: datetime) -> list[Price]:
        """For each provider, hardware and pricing model, the entry in effect at `at`."""
        rows = await self.session.scalars(in_effect_at(readable(Price, team_id), at))
        return list(rows)
