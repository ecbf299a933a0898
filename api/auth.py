"""Authentication: team API keys (or tokens from the single sign-on issuer) as bearer tokens
for everything, a signed-in browser's session cookie for reads, the admin token for teams
and keys. A browser asking for a page without any is sent to sign in."""

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
from api.pages import SignInRequired, session_cookie, wants_html
from infercost.access.oidc import IssuerUnavailable, OidcVerifier, TokenRejected, looks_like_jwt
from infercost.access.oidc import team_names as claimed_teams
from infercost.access.repository import BrowserSessionRepository, LiveSession
from infercost.access.tokens import session_hash
from infercost.db.base import utcnow
from infercost.errors import Forbidden, InfercostError, Unauthorized
from infercost.security import KEY_SCHEME, key_prefix, same_token, verify_api_key
from infercost.settings import Settings
from infercost.teams.models import ApiKey, Team
from infercost.teams.repository import TeamRepository

S = TypeVar("S")


@dataclass(frozen=True, slots=True)
class Caller:
    """The team on whose behalf a request acts; every query is scoped by its id. `who` names
    the credential (an API key's prefix, a single sign-on subject); `session_id` and
    `team_name` are set for a signed-in browser."""

    team_id: uuid.UUID
    who: str = ""
    session_id: uuid.UUID | None = None
    team_name: str | None = None
    # The API key behind the request (a signed-in browser's too), for the audit log.
    key_id: uuid.UUID | None = None


class IssuerDown(InfercostError):
    """The single sign-on issuer's keys cannot be fetched now."""

    status_code = 503
    title = "Service unavailable"


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


async def live_key(db_session: AsyncSession, settings: Settings, token: str) -> ApiKey | None:
    """The unrevoked team key `token` is, else None."""
    prefix = key_prefix(token)
    key = await TeamRepository(db_session).live_key_by_prefix(prefix) if prefix else None
    if key is None or not verify_api_key(settings.secret_keys, token, key.key_hash):
        return None
    return key


async def _single_sign_on(
    db_session: AsyncSession, settings: Settings, verifier: OidcVerifier, token: str
) -> Caller:
    """The team an issuer's token names in its team claim (by name or id)."""
    try:
        claims = await verifier.claims(token)
    except TokenRejected as exc:
        raise Unauthorized(exc.detail) from None
    except IssuerUnavailable as exc:
        raise IssuerDown(exc.detail + "; retry shortly") from None
    claim = settings.oidc_team_claim
    names = claimed_teams(claims, claim)
    if not names:
        raise Forbidden(
            f"the token carries no '{claim}' claim naming a team (INFERCOST_OIDC_TEAM_CLAIM): "
            "ask your identity provider to add it"
        )
    teams = TeamRepository(db_session)
    found: dict[uuid.UUID, Team] = {}
    for name in names:
        team = await teams.get_by_name(name)
        if team is None and _is_uuid(name):
            team = await teams.get(uuid.UUID(name))
        if team is not None:
            found[team.id] = team
    if len(found) != 1:
        problem = "no team here has that name or id" if not found else "it names several teams"
        raise Forbidden(
            f"the token's '{claim}' claim names {', '.join(repr(n) for n in names)}, and "
            f"{problem}: ask for a token naming one team (an admin creates teams with "
            "POST /v1/teams)"
        )
    team = next(iter(found.values()))
    return Caller(team_id=team.id, who=f"sso {claims.get('sub') or 'unknown subject'}"[:200])


def session_caller(found: LiveSession) -> Caller:
    """The caller a signed-in browser is: its team, by the key it signed in with."""
    return Caller(
        team_id=found.session.team_id,
        who=f"browser, key {KEY_SCHEME}_{found.key_prefix}",
        session_id=found.session.id,
        team_name=found.team_name,
        key_id=found.session.key_id,
    )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


async def provide_caller(
    request: Request[object, object, State], db_session: DbSession, settings: AppSettings
) -> Caller:
    """Resolve the bearer key (or single sign-on token) to its team, or a signed-in
    browser's session on reads; else 401, or for a browser asking for a page, sign-in."""
    if "authorization" not in request.headers:
        cookie = request.cookies.get(session_cookie(settings))
        if cookie and request.method in ("GET", "HEAD"):
            found = await BrowserSessionRepository(db_session).live(session_hash(cookie), utcnow())
            if found is not None:
                return session_caller(found)
        if request.method in ("GET", "HEAD") and wants_html(request):
            query = request.url.query
            raise SignInRequired(request.url.path + (f"?{query}" if query else ""))
        raise Unauthorized(
            "send your API key as `Authorization: Bearer <key>` (in a browser, sign in at /signin)"
        )
    token = _bearer(request)
    verifier: OidcVerifier | None = request.app.state.get("oidc")
    if key_prefix(token) is None and looks_like_jwt(token):
        if verifier is None:
            raise Unauthorized(
                "this bearer token is a JWT, but single sign-on is not configured here "
                "(INFERCOST_OIDC_ISSUER): use a team API key"
            )
        return await _single_sign_on(db_session, settings, verifier, token)
    key = await live_key(db_session, settings, token)
    if key is None:
        if same_token(token, settings.admin_token):
            raise Forbidden("the admin token manages teams and keys; use a team's API key here")
        raise Unauthorized("this API key is unknown or revoked: ask an admin for a new key")
    return Caller(team_id=key.team_id, who=f"key {KEY_SCHEME}_{key.prefix}", key_id=key.id)


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
