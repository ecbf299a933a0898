"""The status board as one self-contained HTML page: the reports' base template and
rules (autoescaped text, inline styles, no script, nothing external), sparklines inline."""

from __future__ import annotations

import re
from functools import cache

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup, escape

from api.domain.status.schemas import StatusBoard
from infercost.reports.links import PageLinks
from infercost.reports.numbers import number
from infercost.reports.render import _environment as report_environment
from infercost.status.figures import TREND_BUCKETS, WINDOWS
from infercost.status.sparkline import sparkline

#: The figures the board shows: (name, title, unit).
COLUMNS = (
    ("ttft_p50_ms", "TTFT p50", "ms"),
    ("tpot_p50_ms", "TPOT p50", "ms"),
    ("per_user_tokens_per_s_p50", "Per user", "tokens/s"),
    ("output_tokens_per_s_per_gpu", "Per GPU", "output tokens/s"),
    ("cost_per_million_at_slo_usd", "Cost at SLO", "USD / M output tokens"),
)


_BREAK_AFTER = re.compile(r"([./_:])")


def breakable(text: str) -> Markup:
    """`text` escaped, with a line-break opportunity after each . / _ and : (names such as
    llama-70b.h200x8 or meta-llama/Llama-3.1-8B wrap there, never inside a word)."""
    return Markup(_BREAK_AFTER.sub(r"\1<wbr>", str(escape(text))))  # noqa: S704


@cache
def _environment() -> Environment:
    """The reports' environment (filters, autoescape) with this package's templates first."""
    base = report_environment()
    env = Environment(
        loader=ChoiceLoader(
            [PackageLoader("infercost.status", "templates"), base.loader]  # type: ignore[list-item]
        ),
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters.update(base.filters)
    env.filters["breakable"] = breakable
    return env


def render_board(board: StatusBoard, *, all_endpoints: bool, links: PageLinks) -> str:
    """GET /v1/status as HTML: a row per workload and level of each deployment, sort links
    in the header (absolute, through `links`, so they work from a saved copy too)."""
    current = ",".join(board.sort)

    def link(**changes: str) -> str:
        params = {"window": board.window, "sort": current, "all": str(all_endpoints).lower()}
        params.update(changes)
        return links.board(params)

    def head(key: str, title: str) -> Markup:
        # A second click on the sorted column reverses it; figures start worst-first for
        # latencies and costs, best-first for speeds.
        descending = key in ("runs", "latest_at", "per_user_tokens_per_s_p50") or key.endswith(
            "per_gpu"
        )
        if current == key:
            order = f"-{key}"
        elif current == f"-{key}":
            order = key
        else:
            order = f"-{key}" if descending else key
        if current.lstrip("-") != key:
            return Markup('<a href="{}">{}</a>').format(link(sort=order), title)
        arrow = "\u25bc" if current.startswith("-") else "\u25b2"
        return Markup('<a href="{}" class="on">{}{}</a>').format(link(sort=order), title, arrow)

    def spark(values: list[float | None], title: str) -> Markup:
        # Numbers only go into the SVG; the label is one of COLUMNS' fixed titles.
        return Markup(sparkline(values, label=f"{title} trend"))  # noqa: S704

    def money(value: float | None) -> str:
        return "\u2013" if value is None else f"${number(value)}"

    return (
        _environment()
        .get_template("status.html.j2")
        .render(
            board=board,
            all_endpoints=all_endpoints,
            columns=COLUMNS,
            windows=list(WINDOWS),
            buckets=TREND_BUCKETS,
            link=link,
            head=head,
            spark=spark,
            money=money,
            generated_at=board.until,
            links=links,
            deployments=board.deployments,
        )
    )
