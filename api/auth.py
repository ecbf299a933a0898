"""Bearer authentication: team API keys for everything, the admin token for teams and keys."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

from litestar import Request
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from sqlalchemy.ext.asyncio import AsyncSession

from api.db import DbSession
from infercost.errors import Forbidden, Unauthorized
from infercost.security import key_prefix, same_token, verify_api_key
from infercost.settings import Settings
from infercost.teams.repository import TeamRepository

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Caller:
    """The team on whose behalf a request acts; every query is scoped by its id."""

    team_id: uuid.UUID


# The app-wide dependencies, injected by name (Litestar 3 infers none): declare them as
# `caller: CurrentCaller`, `settings: AppSettings`, `admin: AdminOnly`.
#: The authenticated team (provide_caller).
CurrentCaller = NamedDependency[Caller]
#: The process's settings (provide_settings).
AppSettings = NamedDependency[Settings]
#: Present only to require the admin token (provide_admin); its value is None.
AdminOnly = NamedDependency[None]


def _bearer(request: Request[object, object, State]) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise Unauthorized("send your API key as `Authorization: Bearer <key>`")
    return token.strip()


def provide_settings(state: State) -> Settings:
    """The process's settings, read once at startup."""
    settings: Settings = state.settings
    return settings


async def provide_caller(
    request: Request[object, object, State], db_session: DbSession, settings: AppSettings
) -> Caller:
    """Resolve the bearer key to its team, or answer 401."""
    token = _bearer(request)
    prefix = key_prefix(token)
    key = await TeamRepository(db_session).live_key_by_prefix(prefix) if prefix else None
    if key is None or not verify_api_key(settings.secret_keys, token, key.key_hash):
        if same_token(token, settings.admin_token):
            raise Forbidden("the admin token manages teams and keys; use a team's API key here")
        raise Unauthorized("this API key is unknown or revoked: ask an admin for a new key")
    return Caller(team_id=key.team_id)


async def provide_admin(request: Request[object, object, State], settings: AppSettings) -> None:
    """Allow only the admin token (INFERCOST_ADMIN_TOKEN)."""
    token = _bearer(request)
    if settings.admin_token is None:
        raise Forbidden("no admin token is configured: set INFERCOST_ADMIN_TOKEN on the server")
    if not same_token(token, settings.admin_token):
        raise Forbidden("this route needs the admin token (INFERCOST_ADMIN_TOKEN)")


def team_service(service: Callable[[AsyncSession, uuid.UUID], S]) -> Provide:
    """The dependency of a service built from the request's session and the caller's team
    id, e.g. `dependencies = {"prices": team_service(PriceService)}`."""

    def provide(db_session: DbSession, caller: CurrentCaller) -> S:
        return service(db_session, caller.team_id)

    return Provide(provide, sync_to_thread=False)
