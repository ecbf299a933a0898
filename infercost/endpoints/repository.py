"""Queries about registered endpoints."""

from __future__ import annotations

import uuid

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.db.scope import owned_by, readable, unscoped
from infercost.endpoints.models import Endpoint


class EndpointRepository:
    """Endpoints of one team; deleted ones are hidden but kept for their jobs' history."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, team_id: uuid.UUID, endpoint_id: uuid.UUID) -> Endpoint | None:
        """A live endpoint of the team."""
        return await self.session.scalar(
            readable(Endpoint, team_id).where(
                Endpoint.id == endpoint_id, Endpoint.deleted_at.is_(None)
            )
        )

    async def get_kept(self, team_id: uuid.UUID, endpoint_id: uuid.UUID) -> Endpoint | None:
        """An endpoint of the team, deleted or not (a job's history keeps what it measured)."""
        return await self.session.scalar(
            readable(Endpoint, team_id).where(Endpoint.id == endpoint_id)
        )

    async def get_any(self, endpoint_id: uuid.UUID) -> Endpoint | None:
        """An endpoint by id whatever its team or state (workers load what a job names)."""
        return await self.session.scalar(
            unscoped(
                select(Endpoint).where(Endpoint.id == endpoint_id),
                "a worker loads the endpoint of the job it was handed",
            )
        )

    async def name_taken(
        self, team_id: uuid.UUID, name: str, *, except_id: uuid.UUID | None = None
    ) -> bool:
        """True when another live endpoint of the team has this name."""
        query = readable(Endpoint, team_id, Endpoint.id).where(
            Endpoint.name == name, Endpoint.deleted_at.is_(None)
        )
        if except_id is not None:
            query = query.where(Endpoint.id != except_id)
        return (await self.session.scalar(query)) is not None

    async def by_name(self, team_id: uuid.UUID, name: str) -> Endpoint | None:
        """The team's live endpoint of this name."""
        return await self.session.scalar(
            readable(Endpoint, team_id).where(Endpoint.name == name, Endpoint.deleted_at.is_(None))
        )

    async def page(
        self, team_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[Endpoint], int]:
        """One page of the team's live endpoints by name, and how many there are."""
        where = (owned_by(Endpoint, team_id), Endpoint.deleted_at.is_(None))
        total = await self.session.scalar(select(func.count()).select_from(Endpoint).where(*where))
        rows = await self.session.scalars(
            select(Endpoint).where(*where).order_by(Endpoint.name).limit(limit).offset(offset)
        )
        return list(rows), int(total or 0)

    async def add(self, endpoint: Endpoint) -> Endpoint:
        """Insert an endpoint."""
        self.session.add(endpoint)
        await self.session.flush()
        await self.session.refresh(endpoint)
        return endpoint

    async def save(self, endpoint: Endpoint) -> Endpoint:
        """Flush changes made to a loaded endpoint."""
        await self.session.flush()
        await self.session.refresh(endpoint)
        return endpoint

    async def delete(self, endpoint: Endpoint) -> None:
        """Hide the endpoint; its jobs and runs stay readable."""
        endpoint.deleted_at = utcnow()
        await self.session.flush()
