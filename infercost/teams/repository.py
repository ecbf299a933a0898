"""Queries about teams and API keys."""

from __future__ import annotations

import uuid

from sqlalchemy import select, update
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.db.scope import owned_by, readable, unscoped
from infercost.teams.models import ApiKey, Team


class TeamRepository:
    """Teams and their keys; callers commit."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def get(self, team_id: uuid.UUID) -> Team | None:
        """The team, if it exists."""
        return await self.session.get(Team, team_id)

    async def get_by_name(self, name: str) -> Team | None:
        """The team called `name`, if any."""
        return await self.session.scalar(select(Team).where(Team.name == name))

    async def all(self) -> list[Team]:
        """Every team, by name (for the admin)."""
        return list(await self.session.scalars(select(Team).order_by(Team.name)))

    async def add(self, team: Team) -> Team:
        """Insert a team."""
        self.session.add(team)
        await self.session.flush()
        return team

    async def add_key(self, key: ApiKey) -> ApiKey:
        """Insert a key row (hash and prefix only)."""
        self.session.add(key)
        await self.session.flush()
        return key

    async def live_key_by_prefix(self, prefix: str) -> ApiKey | None:
        """The unrevoked key with this prefix, if any."""
        query = select(ApiKey).where(ApiKey.prefix == prefix, ApiKey.revoked_at.is_(None))
        reason = "authentication: the key is how a request learns its team"
        return await self.session.scalar(unscoped(query, reason))

    async def revoke_key(self, team_id: uuid.UUID, key_id: uuid.UUID) -> bool:
        """Mark a key revoked; False when the team has no such live key."""
        result = await self.session.execute(
            update(ApiKey)
            .where(ApiKey.id == key_id, owned_by(ApiKey, team_id), ApiKey.revoked_at.is_(None))
            .values(revoked_at=utcnow())
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def list_keys(self, team_id: uuid.UUID) -> list[ApiKey]:
        """The team's keys, newest first (revoked ones included, marked)."""
        rows = await self.session.scalars(
            readable(ApiKey, team_id).order_by(ApiKey.created_at.desc())
        )
        return list(rows)
