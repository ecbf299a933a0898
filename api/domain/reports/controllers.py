"""GET /v1/jobs/{id}/report (HTML), GET /v1/jobs/{id}/charts/{name}.svg, GET
/v1/reports/compare (HTML): pages that load nothing from anywhere, enforced by their
Content-Security-Policy, so they are safe to open offline or frame in a portal."""

from __future__ import annotations

import uuid
from typing import Annotated

import anyio
import anyio.to_thread
from litestar import Controller, MediaType, Response, get
from litestar.datastructures import State
from litestar.di import NamedDependency, Provide
from litestar.params import FromPath, QueryParameter

from api.auth import AppSettings, CurrentCaller
from api.db import DbSession
from api.domain.jobs.controllers import provide_job_service
from api.domain.reports.services import MAX_COMPARED, ReportService, chart_name
from api.openapi import problem_responses
from api.schemas import PathId
from infercost.reports.charts import CHART_NAMES, job_chart
from infercost.reports.render import (
    CONTENT_SECURITY_POLICY,
    render_comparison,
    render_job_report,
)

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


def _page(body: str, media_type: str) -> Response[str]:
    """A rendered page or chart with headers that forbid every external load."""
    return Response(
        body,
        media_type=media_type,
        headers={
            "Content-Security-Policy": CONTENT_SECURITY_POLICY,
            "X-Content-Type-Options": "nosniff",
            # A running job's report changes with each finished level.
            "Cache-Control": "private, no-cache",
        },
    )


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
        self, reports: NamedDependency[ReportService], job_id: PathId
    ) -> Response[str]:
        """The report of one of your jobs; a running job shows the levels finished so far."""
        report = await reports.job_report(job_id)
        # Drawing is CPU work (tens of ms a chart): off the event loop.
        html = await anyio.to_thread.run_sync(render_job_report, report, limiter=_DRAWING)
        return _page(html, MediaType.HTML)

    @get(
        "/jobs/{job_id:uuid}/charts/{file_name:str}",
        summary="One chart of a job's report as SVG",
        media_type=SVG,
        description=f"`file_name` is one of: {', '.join(f'{n}.svg' for n in CHART_NAMES)}. "
        "A chart without data says why instead of showing an empty axis.",
    )
    async def job_chart(
        self, reports: NamedDependency[ReportService], job_id: PathId, file_name: FromPath[str]
    ) -> Response[str]:
        """A chart for a portal to embed (standalone SVG, nothing external)."""
        name = chart_name(file_name)
        report = await reports.job_report(job_id, histograms=name == "ttft-distribution")
        svg = await anyio.to_thread.run_sync(
            job_chart, name, report.deployment, report.slo, report.histograms, limiter=_DRAWING
        )
        return _page(svg, SVG)

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
        reports: NamedDependency[ReportService],
        job_id: Annotated[
            list[uuid.UUID], QueryParameter(description="a job to compare; repeat for each")
        ],
    ) -> Response[str]:
        """The comparison page."""
        report = await reports.comparison(job_id)
        html = await anyio.to_thread.run_sync(render_comparison, report, limiter=_DRAWING)
        return _page(html, MediaType.HTML)
