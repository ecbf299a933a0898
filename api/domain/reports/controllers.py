"""GET /v1/jobs/{id}/report (HTML), GET /v1/jobs/{id}/charts/{name}.svg, GET
/v1/reports/compare (HTML): pages that load nothing from anywhere, enforced by their
Content-Security-Policy, so they are safe to open offline or frame in a portal (one of the
origins INFERCOST_FRAME_ANCESTORS lists)."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Annotated, TypeVar

import anyio
import anyio.to_thread
from litestar import Controller, MediaType, Request, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, QueryParameter

from api.auth import AppSettings, Caller, CurrentCaller
from api.db import DbSession
from api.domain.jobs.controllers import provide_job_service
from api.domain.reports.services import MAX_COMPARED, ReportService, chart_name
from api.openapi import problem_responses
from api.pages import links_for, page_headers
from api.schemas import PathId
from infercost.reports.charts import CHART_NAMES, job_chart
from infercost.reports.links import PageLinks, ThisPage
from infercost.reports.render import render_comparison, render_job_report
from infercost.settings import Settings

T = TypeVar("T")

SVG = "image/svg+xml"
#: One drawing at a time per process: matplotlib promises no thread safety even through its
#: object API (shared font caches, rcParams), and a burst of report requests must not take
#: every core from the API's other requests.
_DRAWING = anyio.CapacityLimiter(1)


def provide_report_service(
    db_session: DbSession, caller: CurrentCaller, state: State, settings: AppSettings
) -> ReportService:
    """The service for the caller's team, over its job service (job reads go through the
    job service's rules)."""
    return ReportService(provide_job_service(db_session, caller, state, settings))


async def draw(render: Callable[..., T], *args: object) -> T:
    """Run a page's or chart's drawing (CPU work, tens of ms a chart) off the event loop,
    one drawing at a time per process."""
    return await anyio.to_thread.run_sync(render, *args, limiter=_DRAWING)


def page(body: str, media_type: str, settings: Settings) -> Response[str]:
    """A rendered page or chart with headers that forbid every external load (and framing
    by any origin INFERCOST_FRAME_ANCESTORS does not list). A running job's report changes
    with each finished level, so nothing is cached for long."""
    return Response(body, media_type=media_type, headers=page_headers(settings))


class ReportController(Controller):
    """HTML reports and SVG charts of jobs; comparisons of several jobs."""

    path = "/v1"
    tags = ["reports"]
    dependencies = {"reports": Provide(provide_report_service, sync_to_thread=False)}

    @get(
        "/jobs/{job_id:uuid}/report",
        summary="Self-contained HTML report of a job",
        media_type=MediaType.HTML,
        description="One page, no scripts and no external loads: the deployment, workload, "
        "load plan and SLO, a table of every level's figures, and six charts as inline SVG.",
    )
    async def job_report(
        self,
        request: Request[object, object, State],
        reports: NamedDependency[ReportService],
        caller: CurrentCaller,
        settings: AppSettings,
        job_id: PathId,
    ) -> Response[str]:
        """The report of one of your jobs; a running job shows the levels finished so far."""
        report = await reports.job_report(job_id)
        this = ThisPage("report", (str(job_id),))
        html = await draw(render_job_report, report, _links(request, settings, caller, this))
        return page(html, MediaType.HTML, settings)

    @get(
        "/jobs/{job_id:uuid}/charts/{file_name:str}",
        summary="One chart of a job's report as SVG",
        media_type=SVG,
        description=f"`file_name` is one of: {', '.join(f'{n}.svg' for n in CHART_NAMES)}. "
        "A chart without data says why instead of showing an empty axis.",
    )
    async def job_chart(
        self,
        reports: NamedDependency[ReportService],
        settings: AppSettings,
        job_id: PathId,
        file_name: FromPath[str],
    ) -> Response[str]:
        """A chart for a portal to embed (standalone SVG, nothing external)."""
        name = chart_name(file_name)
        report = await reports.job_report(job_id, histograms=name == "ttft-distribution")
        svg = await draw(job_chart, name, report.deployment, report.slo, report.histograms)
        return page(svg, SVG, settings)

    @get(
        "/reports/compare",
        summary="Several jobs' deployments side by side (HTML)",
        media_type=MediaType.HTML,
        description=f"2 to {MAX_COMPARED} of your jobs (repeat `job_id`): overlaid throughput, "
        "latency, latency-against-throughput and cost charts and one table; a warning when "
        "the jobs' workload fingerprints differ.",
        # 404: a job_id that names none of your jobs.
        responses=problem_responses(404),
    )
    async def compare(
        self,
        request: Request[object, object, State],
        reports: NamedDependency[ReportService],
        caller: CurrentCaller,
        settings: AppSettings,
        job_id: Annotated[
            list[uuid.UUID], QueryParameter(description="a job to compare; repeat for each")
        ],
    ) -> Response[str]:
        """The comparison page."""
        report = await reports.comparison(job_id)
        this = ThisPage("comparison", tuple(str(j) for j in job_id))
        html = await draw(render_comparison, report, _links(request, settings, caller, this))
        return page(html, MediaType.HTML, settings)


def _links(
    request: Request[object, object, State], settings: Settings, caller: Caller, this: ThisPage
) -> PageLinks:
    """The page's links, with its sign-out and share forms for a signed-in browser."""
    return links_for(
        request, settings, team=caller.team_name, session_id=caller.session_id, this_page=this
    )
