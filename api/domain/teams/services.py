"""Creating teams and minting, listing and revoking their keys."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.errors import Conflict, NotFound
from infercost.security import mint_api_key
from infercost.teams.models import ApiKey, Team
from infercost.teams.repository import TeamRepository


class TeamService:
    """Admin operations on teams; the request boundary commits."""

    def __init__(self, session: AsyncSession, secret_keys: Sequence[str]) -> None:
        self.repo = TeamRepository(session)
        self.secret_keys = secret_keys

    async def create_team(self, name: str) -> Team:
        """A new team; names are unique."""
        if await self.repo.get_by_name(name) is not None:
            raise Conflict(f"a team named '{name}' already exists")
        return await self.repo.add(Team(name=name))

    async def teams(self) -> list[Team]:
        """Every team, by name."""
        return await self.repo.all()

    async def _team(self, team_id: uuid.UUID) -> Team:
        team = await self.repo.get(team_id)
        if team is None:
            raise NotFound(f"no team {team_id}")
        return team

    async def create_key(self, team_id: uuid.UUID, name: str) -> tuple[ApiKey, str]:
        """A new key row and its token, which the caller shows once."""
        await self._team(team_id)
        minted = mint_api_key(self.secret_keys)
        key = await self.repo.add_key(
            ApiKey(team_id=team_id, name=name, prefix=minted.prefix, key_hash=minted.digest)
        )
        return key, minted.token

    async def list_keys(self, team_id: uuid.UUID) -> list[ApiKey]:
        """The team's keys."""
        await self._team(team_id)
        return await self.repo.list_keys(team_id)

    async def revoke_key(self, team_id: uuid.UUID, key_id: uuid.UUID) -> None:
        """Revoke a live key at once."""
        if not await self.repo.revoke_key(team_id, key_id):
            raise NotFound(f"team {team_id} has no live key {key_id}")
