"""Admin routes: teams and their API keys."""

from __future__ import annotations

import uuid

import msgspec
from litestar import Controller, delete, get, post
from litestar.di import NamedDependency, Provide
from litestar.params import JSONBody
from sqlalchemy.ext.asyncio import AsyncSession

from api.auth import AdminOnly, AppSettings, provide_admin
from api.db import DbSession
from api.domain.audit.services import ADMIN_ACTOR, AuditTrail
from api.domain.teams.schemas import KeyCreate, KeyCreated, KeyRead, TeamCreate, TeamRead
from api.domain.teams.services import TeamService
from api.schemas import PathId
from infercost.security import KEY_SCHEME


def provide_team_service(db_session: DbSession, settings: AppSettings) -> TeamService:
    """The service, bound to this request's session."""
    return TeamService(db_session, settings.secret_keys)


def _admin(db_session: AsyncSession, team_id: uuid.UUID) -> AuditTrail:
    """The audit trail of the admin token's changes to a team."""
    return AuditTrail(db_session, team_id, ADMIN_ACTOR)


class TeamController(Controller):
    """Admin token only: teams are the unit of ownership."""

    path = "/v1/teams"
    tags = ["teams"]
    dependencies = {
        "admin": Provide(provide_admin),
        "teams": Provide(provide_team_service, sync_to_thread=False),
    }

    @post("/", status_code=201, summary="Create a team")
    async def create_team(
        self,
        admin: AdminOnly,
        teams: NamedDependency[TeamService],
        db_session: DbSession,
        data: JSONBody[TeamCreate],
    ) -> TeamRead:
        """Create a team; then create a key for it."""
        team = await teams.create_team(data.name)
        await _admin(db_session, team.id).record(
            "team.create", "team", team.id, f"created team '{team.name}'"
        )
        return TeamRead(id=team.id, name=team.name, created_at=team.created_at)

    @get("/", summary="List teams")
    async def list_teams(
        self, admin: AdminOnly, teams: NamedDependency[TeamService]
    ) -> list[TeamRead]:
        """Every team, by name (for `infercost teams list` and the key commands)."""
        return [
            TeamRead(id=t.id, name=t.name, created_at=t.created_at) for t in await teams.teams()
        ]

    @post("/{team_id:uuid}/keys", status_code=201, summary="Create an API key (shown once)")
    async def create_key(
        self,
        admin: AdminOnly,
        teams: NamedDependency[TeamService],
        db_session: DbSession,
        team_id: PathId,
        data: JSONBody[KeyCreate],
    ) -> KeyCreated:
        """Mint a key; the response is the only place its secret ever appears."""
        key, token = await teams.create_key(team_id, data.name)
        await _admin(db_session, team_id).record(
            "key.create",
            "key",
            key.id,
            f"created API key '{key.name}' ({KEY_SCHEME}_{key.prefix})",
            {"name": key.name, "prefix": key.prefix},
        )
        return KeyCreated(
            id=key.id,
            team_id=key.team_id,
            name=key.name,
            prefix=key.prefix,
            key=token,
            created_at=key.created_at,
        )

    @get("/{team_id:uuid}/keys", summary="List a team's API keys")
    async def list_keys(
        self, admin: AdminOnly, teams: NamedDependency[TeamService], team_id: PathId
    ) -> list[KeyRead]:
        """Keys with their prefixes; secrets are never stored, so never shown."""
        keys = await teams.list_keys(team_id)
        return [msgspec.convert(k, KeyRead, from_attributes=True) for k in keys]

    @delete("/{team_id:uuid}/keys/{key_id:uuid}", summary="Revoke an API key")
    async def revoke_key(
        self,
        admin: AdminOnly,
        teams: NamedDependency[TeamService],
        db_session: DbSession,
        team_id: PathId,
        key_id: PathId,
    ) -> None:
        """Revoke a key; requests with it get 401 from now on."""
        await teams.revoke_key(team_id, key_id)
        await _admin(db_session, team_id).record(
            "key.revoke", "key", key_id, f"revoked API key {key_id}"
        )
