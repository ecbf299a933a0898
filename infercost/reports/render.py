"""Report pages as one self-contained HTML document each: inline CSS, inline SVG charts,
no script, no external reference of any kind, so a page works offline, saved to disk, or
in a portal's iframe under a Content-Security-Policy of default-src 'none'."""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from infercost.reports.charts import (
    CHART_NAMES,
    COMPARISON_CHARTS,
    FLEET_CHART,
    PALETTE,
    comparison_chart,
    fleet_chart,
    inline,
    job_chart,
)
from infercost.reports.data import ComparisonReport, JobReport, SloLimit, level_label
from infercost.reports.links import PageLinks
from infercost.reports.numbers import number

#: What a report page may load: nothing but its own inline styles (and data: images); its
#: only form (sign-out) posts to the service itself. Who may frame it is added per response
#: (frame-ancestors, from INFERCOST_FRAME_ANCESTORS).
CONTENT_SECURITY_POLICY = (
    "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "base-uri 'none'; form-action 'self'"
)


@dataclass(frozen=True, slots=True)
class _Chart:
    name: str
    svg: Markup


def _pct(value: float | None) -> str:
    if value is None or not math.isfinite(value):
        return "\u2013"
    return "0%" if value == 0 else f"{100 * value:.3g}%"


def _usd(value: float | None) -> str:
    return "\u2013" if value is None else f"${number(value)}"


def utc_text(value: datetime | None) -> str:
    """A time as pages write it: '2026-12-05 14:03 UTC'."""
    if value is None:
        return "\u2013"
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def _short_when(value: datetime | None) -> str:
    """A time in a narrow cell: 'Dec 5 14:03' (UTC, as the column heading says)."""
    if value is None:
        return "\u2013"
    at = value.astimezone(UTC)
    return f"{at:%b} {at.day} {at:%H:%M}"


_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2e_ms": "E2E"}


def slo_text(limits: Sequence[SloLimit]) -> str:
    """An SLO as a reader says it: 'TTFT p95 <= 500 ms; TPOT p95 <= 50 ms'."""
    if not limits:
        return "none set (SLO columns are empty)"
    return "; ".join(
        f"{_NAMES.get(x.metric, x.metric)} {x.stat} \u2264 {number(x.limit_ms)} ms" for x in limits
    )


@cache
def _environment() -> Environment:
    """Templates from the package, autoescaped (endpoint names and errors are user text);
    built once per process, and safe to share between threads once built."""
    env = Environment(
        loader=PackageLoader("infercost.reports", "templates"),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(
        level_label=level_label,
        num=number,
        pct=_pct,
        usd=_usd,
        when=utc_text,
        short_when=_short_when,
        slo_text=slo_text,
    )
    return env


def _chart(name: str, svg: str) -> _Chart:
    # matplotlib escapes every text it writes into the SVG, so the markup is safe to inline.
    return _Chart(name, Markup(inline(svg, f"c-{name}")))  # noqa: S704


def render_job_report(report: JobReport, links: PageLinks | None = None) -> str:
    """GET /v1/jobs/{id}/report: the header, the table of levels and the six charts."""
    charts = [
        _chart(name, job_chart(name, report.deployment, report.slo, report.histograms))
        for name in CHART_NAMES
    ]
    if report.fleets is not None:
        charts.insert(0, _chart(FLEET_CHART, fleet_chart(report.fleets)))
    template = _environment().get_template("report.html.j2")
    return template.render(
        report=report, charts=charts, generated_at=report.generated_at, links=links or PageLinks()
    )


def render_comparison(report: ComparisonReport, links: PageLinks | None = None) -> str:
    """GET /v1/reports/compare: deployment cards, overlaid charts and one table."""
    charts = [
        _chart(name, comparison_chart(name, report.deployments)) for name in COMPARISON_CHARTS
    ]
    template = _environment().get_template("compare.html.j2")
    return template.render(
        report=report,
        charts=charts,
        colours=PALETTE,
        generated_at=report.generated_at,
        links=links or PageLinks(),
    )
