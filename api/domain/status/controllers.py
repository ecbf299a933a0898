"""GET /v1/status (JSON, CSV with Accept: text/csv, HTML with Accept: text/html) and
GET /v1/status/page (always HTML, for a browser's address bar or a portal's iframe)."""

from __future__ import annotations

from typing import Annotated

import msgspec
from litestar import Controller, MediaType, Request, get
from litestar.datastructures import State
from litestar.di import NamedDependency
from litestar.openapi.datastructures import ResponseSpec
from litestar.params import QueryParameter
from litestar.response.base import ASGIResponse

from api.auth import AppSettings, CurrentCaller, team_service
from api.csv import csv_attachment, wants_csv
from api.domain.status.page import render_board
from api.domain.status.schemas import StatusBoard
from api.domain.status.services import SORT_KEYS, StatusService, status_csv
from api.pages import links_for, page_headers
from infercost.reports.links import PageLinks, ThisPage
from infercost.settings import Settings
from infercost.status.figures import DEFAULT_WINDOW, FIGURES, WINDOWS

Window = Annotated[
    str,
    QueryParameter(description=f"how far back the rolling figures reach: {', '.join(WINDOWS)}"),
]
All = Annotated[
    bool,
    QueryParameter(
        description="every endpoint with runs in the window, not only those with a schedule"
    ),
]
Sort = Annotated[
    str | None,
    QueryParameter(
        description="comma-separated keys, '-' for descending, nulls last: a figure (its "
        f"rolling median; add _p95 or _latest), or {', '.join(SORT_KEYS)}"
    ),
]


def board_page(
    board: StatusBoard, all_endpoints: bool, links: PageLinks, settings: Settings
) -> ASGIResponse:
    """The page, with the reports' headers that forbid every external load."""
    return ASGIResponse(
        body=render_board(board, all_endpoints=all_endpoints, links=links).encode(),
        media_type=MediaType.HTML,
        headers=page_headers(settings),
    )


class StatusController(Controller):
    """The status board of watched deployments."""

    path = "/v1/status"
    tags = ["status"]
    dependencies = {"status": team_service(StatusService)}

    @get(
        "/",
        summary="Rolling figures per watched deployment (JSON, CSV or HTML)",
        description=(
            "One row per endpoint, workload fingerprint and load level with succeeded runs in "
            "the window: the latest run, rolling median and p95 of "
            f"{', '.join(FIGURES)} over adequate, not client-bound runs, a trend per figure, "
            "availability and the last regression verdict; a watched endpoint without a "
            "succeeded run in the window has one row with null figures, a `note` and its "
            "`next_run_at`. Figures are exact over the window's runs, read from summaries the "
            "database keeps as runs are stored. `Accept: text/csv` for CSV, "
            "`Accept: text/html` for the board (also at /v1/status/page)."
        ),
        responses={
            200: ResponseSpec(
                data_container=StatusBoard,
                generate_examples=False,
                description="The board (JSON), or its rows as CSV, or the HTML page",
            )
        },
    )
    async def status_board(
        self,
        *,
        request: Request[object, object, State],
        status: NamedDependency[StatusService],
        caller: CurrentCaller,
        settings: AppSettings,
        window: Window = DEFAULT_WINDOW,
        all: All = False,
        sort: Sort = None,
    ) -> ASGIResponse:
        """JSON, CSV or HTML by the Accept header."""
        board = await status.board(window, all_endpoints=all, sort=sort)
        if wants_csv(request):
            return csv_attachment(
                status_csv(board), "status.csv", {"X-Total-Count": str(board.total)}
            )
        if "text/html" in request.headers.get("accept", ""):
            links = links_for(
                request,
                settings,
                team=caller.team_name,
                session_id=caller.session_id,
                this_page=ThisPage("status", window=window, all_endpoints=all),
            )
            return board_page(board, all, links, settings)
        return ASGIResponse(body=msgspec.json.encode(board), media_type=MediaType.JSON)

    @get(
        "/page",
        summary="The status board as a self-contained HTML page",
        media_type=MediaType.HTML,
        description="No script, nothing external; sortable through plain links (?sort=).",
    )
    async def status_page(
        self,
        *,
        request: Request[object, object, State],
        status: NamedDependency[StatusService],
        caller: CurrentCaller,
        settings: AppSettings,
        window: Window = DEFAULT_WINDOW,
        all: All = False,
        sort: Sort = None,
    ) -> ASGIResponse:
        """The board, HTML."""
        board = await status.board(window, all_endpoints=all, sort=sort)
        links = links_for(
            request,
            settings,
            team=caller.team_name,
            session_id=caller.session_id,
            this_page=ThisPage("status", window=window, all_endpoints=all),
        )
        return board_page(board, all, links, settings)
