"""What every HTML page of the API shares: its headers (nothing loaded from anywhere, framed
only by the origins INFERCOST_FRAME_ANCESTORS lists), where its links point, the cookies of
signed-in browsers, and the way a browser without credentials is sent to sign in."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlencode, urlsplit

from litestar import Request, Response
from litestar.datastructures import MutableScopeHeaders, State
from litestar.enums import ScopeType
from litestar.types import ASGIApp, Message, Receive, Scope, Send

from infercost.access.tokens import session_csrf
from infercost.reports.links import PageLinks, ThisPage
from infercost.reports.render import CONTENT_SECURITY_POLICY
from infercost.settings import Settings


def session_cookie(settings: Settings) -> str:
    """The session cookie's name: __Host- prefixed when Secure, so no other host of the
    domain (and no plain-http page) can set or shadow it."""
    return "__Host-infercost_session" if settings.session_cookie_secure else "infercost_session"


def csrf_cookie(settings: Settings) -> str:
    """The sign-in form's CSRF cookie (double submit: the form carries the same value)."""
    return "__Host-infercost_csrf" if settings.session_cookie_secure else "infercost_csrf"


def frame_ancestors(settings: Settings) -> str:
    """The CSP frame-ancestors source list: the allowed origins, or 'none'."""
    return " ".join(settings.frame_ancestors) or "'none'"


def page_headers(settings: Settings, *, cache: str = "private, no-cache") -> dict[str, str]:
    """Headers of an HTML page or chart: no external load, framing only by the allowed
    origins (X-Frame-Options DENY besides when none is), and no Referer, which may carry a
    share link, to any other site."""
    ancestors = frame_ancestors(settings)
    headers = {
        "Content-Security-Policy": f"{CONTENT_SECURITY_POLICY}; frame-ancestors {ancestors}",
        "X-Content-Type-Options": "nosniff",
        "Referrer-Policy": "same-origin",
        "Cache-Control": cache,
    }
    if ancestors == "'none'":
        headers["X-Frame-Options"] = "DENY"
    return headers


def deny_framing(app: ASGIApp) -> ASGIApp:
    """Middleware: a response that sets no Content-Security-Policy of its own (JSON,
    problem+json, the API docs) may not be framed by anyone."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != ScopeType.HTTP:
            await app(scope, receive, send)
            return

        async def sending(message: Message) -> None:
            if message["type"] == "http.response.start":
                headers = MutableScopeHeaders.from_message(message)
                if "content-security-policy" not in headers:
                    headers["Content-Security-Policy"] = "frame-ancestors 'none'"
                    headers["X-Frame-Options"] = "DENY"
            await send(message)

        await app(scope, receive, sending)

    return guard


def base_url(request: Request[Any, Any, State], settings: Settings) -> str:
    """Where people reach the service: INFERCOST_PUBLIC_URL, else the address of this
    request (scheme, host and port as the browser sent them)."""
    if settings.public_url:
        return settings.public_url
    return str(request.base_url).rstrip("/")


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.netloc}"


def same_origin(request: Request[Any, Any, State], settings: Settings) -> bool:
    """False when the browser says the form came from another origin. (A browser sends
    Origin with every POST; a client that sends none is not a browser, and CSRF needs one.)"""
    origin = request.headers.get("origin")
    if origin is None:
        return True
    own = {_origin(str(request.base_url))}
    if settings.public_url:
        own.add(_origin(settings.public_url))
    return origin in own


def wants_html(request: Request[Any, Any, State]) -> bool:
    """Whether the client is a browser asking for a page (Accept names text/html)."""
    return "text/html" in request.headers.get("accept", "")


class SignInRequired(Exception):
    """A browser asked for a page without credentials: send it to sign in, then back."""

    def __init__(self, next_path: str) -> None:
        super().__init__(next_path)
        self.next_path = next_path


def sign_in_redirect(request: Request[Any, Any, State], exc: SignInRequired) -> Response[str]:
    """303 to the sign-in page, which comes back to the page asked for."""
    settings: Settings = request.app.state.settings
    location = f"{base_url(request, settings)}/signin?{urlencode({'next': exc.next_path})}"
    return Response(
        "", status_code=303, headers={"Location": location, "Cache-Control": "no-store"}
    )


def safe_next(value: str | None) -> str:
    """A path on this service to go to after sign-in (never another site); the status
    board when none is given or the one given leads elsewhere."""
    if (
        not value
        or not value.startswith("/")
        or value.startswith("//")
        or "\\" in value
        or any(ord(c) < 0x20 for c in value)
    ):
        return "/v1/status/page"
    return value


def links_for(
    request: Request[Any, Any, State],
    settings: Settings,
    *,
    team: str | None = None,
    session_id: Any = None,
    this_page: ThisPage | None = None,
) -> PageLinks:
    """The links of a page opened with a key, a token or a session (then with its forms:
    sign out, and share `this_page`)."""
    return PageLinks(
        base=base_url(request, settings),
        team=team if session_id is not None else None,
        session_csrf=None if session_id is None else session_csrf(settings.secret_keys, session_id),
        this_page=this_page if session_id is not None else None,
    )
