"""POST, GET /v1/shares; GET, DELETE /v1/shares/{id}: read-only links to one page of a team;
GET /shared/{token}: the page a link opens, in any browser, with no key."""

from __future__ import annotations

from typing import Annotated, Any

import msgspec
from litestar import Controller, MediaType, Request, Response, delete, get, post
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, JSONBody, QueryParameter

from api.auth import AppSettings, Caller, CurrentCaller, session_caller
from api.db import DbSession
from api.domain.audit.services import AuditTrail
from api.domain.reports.controllers import draw, page, provide_report_service
from api.domain.reports.services import ReportService
from api.domain.shares.schemas import ShareCreate, ShareCreated, ShareRead
from api.domain.shares.services import SHARED_PREFIX, ShareService, share_state
from api.domain.signin.pages import render_message, render_shared
from api.domain.status.controllers import Sort
from api.domain.status.page import render_board
from api.domain.status.services import StatusService
from api.errors import problem
from api.openapi import problem_responses
from api.pages import (
    base_url,
    links_for,
    page_headers,
    same_origin,
    session_cookie,
    wants_html,
)
from api.schemas import Limit, Offset, Page, PathId
from infercost.access.repository import BrowserSessionRepository, ShareRepository
from infercost.access.tokens import session_hash, share_id_of, valid_session_csrf
from infercost.db.base import utcnow
from infercost.errors import InvalidInput
from infercost.reports.links import PageLinks
from infercost.reports.render import render_comparison, render_job_report, utc_text
from infercost.settings import Settings


def provide_share_service(
    db_session: DbSession,
    caller: CurrentCaller,
    settings: AppSettings,
    reports: NamedDependency[ReportService],
) -> ShareService:
    """The service for the caller's team."""
    return ShareService(db_session, caller.team_id, settings, reports)


async def _record_share(audit: AuditTrail, made: ShareCreated) -> None:
    """A share link made, in the audit log (never its token)."""
    await audit.record(
        "share.create",
        "share",
        made.id,
        f"made a share link to the {made.page} page, until {made.expires_at.isoformat()}",
        {"page": made.page, "job_ids": made.job_ids, "expires_at": made.expires_at},
    )


class ShareController(Controller):
    """Share links: made, listed and revoked by the team (with its key, SSO token or a
    signed-in browser's reads)."""

    path = "/v1/shares"
    tags = ["shares"]
    dependencies = {
        "reports": Provide(provide_report_service, sync_to_thread=False),
        "shares": Provide(provide_share_service, sync_to_thread=False),
    }

    @post("/", status_code=201, summary="Make a share link", responses=problem_responses(404))
    async def create_share(
        self,
        *,
        request: Request[object, object, State],
        shares: NamedDependency[ShareService],
        caller: CurrentCaller,
        settings: AppSettings,
        audit: NamedDependency[AuditTrail],
        data: JSONBody[ShareCreate],
    ) -> ShareCreated:
        """A signed, read-only link to one page: a job's report, the comparison of 2 to 8
        jobs, or the status board. Anyone with the link opens that page, and nothing else,
        until it expires or is revoked; `url` and `token` are shown this once (the server
        keeps no copy). A job that is not your team's is a 404."""
        made = await shares.create(data, caller.who, base_url(request, settings))
        await _record_share(audit, made)
        return made

    @get("/", summary="List share links")
    async def list_shares(
        self, shares: NamedDependency[ShareService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[ShareRead]:
        """Your team's share links, newest first, with their state (active, expired,
        revoked); never their tokens."""
        items, total = await shares.page(limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{share_id:uuid}", summary="Read a share link")
    async def get_share(self, shares: NamedDependency[ShareService], share_id: PathId) -> ShareRead:
        """One share link (never its token)."""
        return await shares.read(share_id)

    @delete("/{share_id:uuid}", summary="Revoke a share link")
    async def revoke_share(
        self,
        shares: NamedDependency[ShareService],
        audit: NamedDependency[AuditTrail],
        share_id: PathId,
    ) -> None:
        """The link stops working at once (204); the share stays listed as revoked."""
        await shares.revoke(share_id)
        share = await shares.read(share_id)
        await audit.record(
            "share.revoke",
            "share",
            share_id,
            f"revoked a share link to the {share.page} page",
            {"page": share.page, "job_ids": share.job_ids},
        )


Token = FromPath[str]
SharedWindow = Annotated[
    str | None,
    QueryParameter(description="a shared status board: the window (default: the share's)"),
]
SharedAll = Annotated[
    bool | None,
    QueryParameter(description="a shared status board: every endpoint with runs"),
]


class SharedPageController(Controller):
    """The pages share links open."""

    path = SHARED_PREFIX.rstrip("/")
    tags = ["shares"]

    @get(
        "/{token:str}",
        summary="The page a share link opens (HTML)",
        media_type=MediaType.HTML,
        security=[{}],
        responses=problem_responses(404, 410),
        description="No key needed: the token in the path grants this one page (a report, a "
        "comparison or the status board, whose window and sort links keep the token). An "
        "unknown token is a 404; an expired or revoked one a 410.",
    )
    async def shared_page(
        self,
        *,
        request: Request[object, object, State],
        db_session: DbSession,
        settings: AppSettings,
        state: State,
        token: Token,
        window: SharedWindow = None,
        all: SharedAll = None,
        sort: Sort = None,
    ) -> Response[Any]:
        """The shared page, drawn for the team that shared it."""
        now = utcnow()
        base = base_url(request, settings)
        share_id = share_id_of(settings.secret_keys, token)
        share = await ShareRepository(db_session).by_token_id(share_id) if share_id else None
        if share is None:
            return _gone(
                request,
                settings,
                404,
                "Link not found",
                "This share link is not valid: check that it was copied whole, or ask the "
                "team that shared it for a new one.",
            )
        status = share_state(share, now)
        if status != "active":
            when = share.revoked_at if status == "revoked" else share.expires_at
            return _gone(
                request,
                settings,
                410,
                f"Link {status}",
                f"This share link was {status} at {utc_text(when)}: ask the team that shared it "
                "for a new one.",
            )
        links = PageLinks(
            base=base,
            share_path=f"{SHARED_PREFIX}{token}",
            share_kind=share.page,
            share_jobs=tuple(str(j) for j in share.job_ids),
        )
        caller = Caller(team_id=share.team_id, who=f"share {share.id}")
        if share.page == "status":
            board = await StatusService(db_session, share.team_id).board(
                window or share.window or "72h",
                all_endpoints=share.all_endpoints if all is None else all,
                sort=sort,
            )
            every = share.all_endpoints if all is None else all
            html = render_board(board, all_endpoints=every, links=links)
            return page(html, MediaType.HTML, settings)
        reports = provide_report_service(db_session, caller, state, settings)
        if share.page == "report":
            report = await reports.job_report(share.job_ids[0])
            return page(await draw(render_job_report, report, links), MediaType.HTML, settings)
        comparison = await reports.comparison(share.job_ids)
        return page(await draw(render_comparison, comparison, links), MediaType.HTML, settings)


class ShareFormController(Controller):
    """The "Share this page" button of a signed-in browser's pages."""

    path = "/shares"
    tags = ["shares"]
    include_in_schema = False

    @post("/new", status_code=201, media_type=MediaType.HTML, include_in_schema=False)
    async def share_this_page(
        self,
        request: Request[object, object, State],
        db_session: DbSession,
        settings: AppSettings,
        state: State,
    ) -> Response[str]:
        """Make a share of the page the form was on, for the browser's session: the same
        rules as POST /v1/shares, with the session's form token instead of a bearer key."""
        form = await request.form()
        cookie = request.cookies.get(session_cookie(settings))
        found = (
            await BrowserSessionRepository(db_session).live(session_hash(cookie), utcnow())
            if cookie
            else None
        )
        base = base_url(request, settings)
        if (
            found is None
            or not same_origin(request, settings)
            or not valid_session_csrf(
                settings.secret_keys, found.session.id, str(form.get("csrf", ""))
            )
        ):
            html = render_message(
                links=links_for(request, settings),
                heading="Not shared",
                message="This form was sent from another site, or this browser is no longer "
                "signed in: open the page again and use its Share button.",
                tone="bad",
                signin=f"{base}/signin",
                now=utcnow(),
            )
            return Response(
                html,
                status_code=403,
                media_type=MediaType.HTML,
                headers=page_headers(settings, cache="no-store"),
            )
        caller = session_caller(found)
        try:
            data = msgspec.convert(
                {
                    "page": form.get("page"),
                    "job_ids": list(form.getall("job_id", [])),
                    "window": form.get("window") or None,
                    "all": form.get("all") == "true",
                    "expires_in_s": float(str(form.get("expires_in_s") or 604800)),
                },
                ShareCreate,
            )
        except (msgspec.ValidationError, ValueError) as exc:
            raise InvalidInput("form", f"this form cannot make a share: {exc}") from None
        reports = provide_report_service(db_session, caller, state, settings)
        shares = ShareService(db_session, caller.team_id, settings, reports)
        made = await shares.create(data, caller.who, base)
        await _record_share(AuditTrail.of(db_session, caller), made)
        links = links_for(request, settings, team=caller.team_name, session_id=caller.session_id)
        what = {"report": "this report", "comparison": "this comparison"}.get(
            made.page, "the status board"
        )
        html = render_shared(
            links=links,
            url=made.url,
            what=what,
            page_url=base + made.path,
            share_id=str(made.id),
            expires_at=made.expires_at,
            now=utcnow(),
        )
        return Response(
            html,
            status_code=201,
            media_type=MediaType.HTML,
            headers=page_headers(settings, cache="no-store"),
        )


def _gone(
    request: Request[object, object, State],
    settings: Settings,
    status: int,
    heading: str,
    message: str,
) -> Response[Any]:
    """Why a link opens nothing: a page for a browser, problem+json for anyone else."""
    if not wants_html(request):
        title = "Not found" if status == 404 else "Gone"
        return problem(request, status, title, message)
    links = links_for(request, settings)
    html = render_message(
        links=links,
        heading=heading,
        message=message,
        now=utcnow(),
        signin=links.signin("/v1/status/page"),
    )
    return Response(
        html, status_code=status, media_type=MediaType.HTML, headers=page_headers(settings)
    )
