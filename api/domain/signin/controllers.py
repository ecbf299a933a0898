"""Sign-in for people: GET /signin (a form that takes a team key once), POST /signin (sets an
HttpOnly, Secure, SameSite=Lax session cookie), POST /signout. Both forms are CSRF-safe: the
sign-in form by a double-submit cookie the browser sends only to this site (__Host-, SameSite
Strict), the sign-out form by a token bound to the session; and a form posted from another
origin (Origin header) is refused outright."""

from __future__ import annotations

import hmac
import secrets
from datetime import timedelta
from typing import Annotated, Any

import msgspec
from litestar import Controller, MediaType, Request, Response, get, post
from litestar.datastructures import Cookie, State
from litestar.enums import RequestEncodingType
from litestar.params import Body, QueryParameter

from api.auth import AppSettings, live_key
from api.db import DbSession
from api.domain.signin.pages import render_message, render_signin
from api.openapi import problem_responses
from api.pages import (
    base_url,
    csrf_cookie,
    links_for,
    page_headers,
    safe_next,
    same_origin,
    session_cookie,
    wants_html,
)
from infercost.access.models import BrowserSession
from infercost.access.repository import BrowserSessionRepository
from infercost.access.tokens import new_session_token, session_hash, valid_session_csrf
from infercost.db.base import utcnow
from infercost.errors import Forbidden, Unauthorized
from infercost.security import same_token
from infercost.settings import Settings

#: How long the sign-in form's CSRF cookie lives: the time to paste a key.
CSRF_TTL_S = 3600


class SignInForm(msgspec.Struct, forbid_unknown_fields=True):
    """The sign-in form's fields."""

    key: Annotated[
        str,
        msgspec.Meta(description="A team API key", examples=["ic_1a2b3c4d5e6f_..."]),
    ]
    csrf: Annotated[
        str,
        msgspec.Meta(
            description="The form's CSRF token, as the sign-in page wrote it (it must equal "
            "the page's cookie)",
            examples=["0YH3m..."],
        ),
    ]
    next: Annotated[
        str,
        msgspec.Meta(description="The path to open once signed in", examples=["/v1/status/page"]),
    ] = ""


class SignOutForm(msgspec.Struct, forbid_unknown_fields=True):
    """The sign-out form's field."""

    csrf: Annotated[
        str,
        msgspec.Meta(
            description="The sign-out button's token, bound to the session", examples=["Zx9..."]
        ),
    ]


Form = RequestEncodingType.URL_ENCODED
Next = Annotated[
    str | None,
    QueryParameter(description="the page to open after signing in (a path on this service)"),
]


def _cookie(settings: Settings, key: str, value: str, max_age: int, samesite: Any) -> Cookie:
    return Cookie(
        key=key,
        value=value,
        max_age=max_age,
        path="/",
        secure=settings.session_cookie_secure,
        httponly=True,
        samesite=samesite,
    )


def _html(body: str, settings: Settings, status: int = 200, **kwargs: Any) -> Response[str]:
    return Response(
        body,
        status_code=status,
        media_type=MediaType.HTML,
        headers=page_headers(settings, cache="no-store"),
        **kwargs,
    )


class SignInController(Controller):
    """Sign-in and sign-out pages for browsers."""

    path = "/"
    tags = ["sign-in"]
    include_in_schema = True

    @get(
        "/signin",
        summary="The sign-in page (HTML)",
        media_type=MediaType.HTML,
        security=[{}],
        description="A form that takes a team API key once and signs this browser in; a "
        "browser already signed in goes straight on to `next`.",
    )
    async def signin_page(
        self,
        request: Request[object, object, State],
        db_session: DbSession,
        settings: AppSettings,
        next: Next = None,
    ) -> Response[str]:
        """The form, or on to `next` for a signed-in browser."""
        target = safe_next(next)
        cookie = request.cookies.get(session_cookie(settings))
        if cookie and await BrowserSessionRepository(db_session).live(
            session_hash(cookie), utcnow()
        ):
            return Response(
                "",
                status_code=303,
                headers={
                    "Location": base_url(request, settings) + target,
                    "Cache-Control": "no-store",
                },
            )
        return self._form(request, settings, target, None, 200)

    def _form(
        self,
        request: Request[object, object, State],
        settings: Settings,
        target: str,
        error: str | None,
        status: int,
    ) -> Response[str]:
        csrf = request.cookies.get(csrf_cookie(settings)) or secrets.token_urlsafe(32)
        html = render_signin(
            links=links_for(request, settings),
            csrf=csrf,
            next_path=target,
            hours=settings.session_ttl_s / 3600,
            error=error,
            now=utcnow(),
        )
        # SameSite=Strict: the browser sends it with a form posted from this site only.
        cookie = _cookie(settings, csrf_cookie(settings), csrf, CSRF_TTL_S, "strict")
        return _html(html, settings, status, cookies=[cookie])

    def _refused(
        self, request: Request[object, object, State], settings: Settings, message: str
    ) -> Response[str]:
        if not wants_html(request):
            raise Forbidden(message)
        base = base_url(request, settings)
        html = render_message(
            links=links_for(request, settings),
            heading="Not signed in",
            message=message,
            tone="bad",
            signin=f"{base}/signin",
            now=utcnow(),
        )
        return _html(html, settings, 403)

    @post(
        "/signin",
        summary="Sign in with a team API key (form)",
        media_type=MediaType.HTML,
        security=[{}],
        status_code=303,
        responses=problem_responses(401, 403),
        description="Form fields `key`, `csrf` (from the page's form) and `next`. A good key "
        "sets the session cookie and answers 303 to `next`; a wrong one shows the form "
        "again (401); a form sent from another site is refused (403). A browser (Accept: "
        "text/html) gets these answers as pages, anyone else as problem+json.",
    )
    async def signin(
        self,
        request: Request[object, object, State],
        db_session: DbSession,
        settings: AppSettings,
        data: Annotated[SignInForm, Body(media_type=Form)],
    ) -> Response[str]:
        """Check the key, open a session, and go on."""
        target = safe_next(data.next)
        expected = request.cookies.get(csrf_cookie(settings))
        if (
            not same_origin(request, settings)
            or not expected
            or not hmac.compare_digest(expected.encode(), data.csrf.encode())
        ):
            return self._refused(
                request,
                settings,
                "This sign-in form was sent from another site, or it expired: open the "
                "sign-in page again and sign in there.",
            )
        token = data.key.strip()
        key = await live_key(db_session, settings, token) if token else None
        if key is None:
            error = (
                "That is the admin token, which manages teams and keys: sign in with a "
                "team's API key."
                if same_token(token, settings.admin_token)
                else "That key is unknown or revoked: paste a team API key (ic_...) as an "
                "admin gave it, or ask them for a new one."
            )
            if not wants_html(request):
                raise Unauthorized(error)
            return self._form(request, settings, target, error, 401)
        cookie_value, digest = new_session_token()
        now = utcnow()
        ttl = int(settings.session_ttl_s)
        await BrowserSessionRepository(db_session).add(
            BrowserSession(
                team_id=key.team_id,
                key_id=key.id,
                token_hash=digest,
                created_at=now,
                expires_at=now + timedelta(seconds=ttl),
            )
        )
        return Response(
            "",
            status_code=303,
            headers={
                "Location": base_url(request, settings) + target,
                "Cache-Control": "no-store",
            },
            cookies=[
                _cookie(settings, session_cookie(settings), cookie_value, ttl, "lax"),
                _cookie(settings, csrf_cookie(settings), "", 0, "strict"),
            ],
        )

    @post(
        "/signout",
        summary="Sign this browser out (form)",
        media_type=MediaType.HTML,
        security=[{}],
        status_code=303,
        responses=problem_responses(403),
        description="Form field `csrf`, from the sign-out button of a page. Ends the session "
        "and answers 303 to the sign-in page; a form without the session's token is refused "
        "(403: a page for a browser, problem+json for anyone else).",
    )
    async def signout(
        self,
        request: Request[object, object, State],
        db_session: DbSession,
        settings: AppSettings,
        data: Annotated[SignOutForm, Body(media_type=Form)],
    ) -> Response[str]:
        """End the session and clear its cookie."""
        sessions = BrowserSessionRepository(db_session)
        cookie = request.cookies.get(session_cookie(settings))
        found = await sessions.live(session_hash(cookie), utcnow()) if cookie else None
        if found is not None:
            session = found.session
            if not same_origin(request, settings) or not valid_session_csrf(
                settings.secret_keys, session.id, data.csrf
            ):
                return self._refused(
                    request,
                    settings,
                    "This sign-out form was sent from another site: use the Sign out button "
                    "of one of your pages.",
                )
            await sessions.end(session.id, utcnow())
        return Response(
            "",
            status_code=303,
            headers={
                "Location": f"{base_url(request, settings)}/signin",
                "Cache-Control": "no-store",
            },
            cookies=[_cookie(settings, session_cookie(settings), "", 0, "lax")],
        )
