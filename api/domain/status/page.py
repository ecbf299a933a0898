"""The status board as one self-contained HTML page: the reports' base template and
rules (autoescaped text, inline styles, no script, nothing external), sparklines inline."""

from __future__ import annotations

from functools import cache
from urllib.parse import urlencode

from jinja2 import ChoiceLoader, Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from api.domain.status.schemas import StatusBoard
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
    return env


def render_board(board: StatusBoard, *, all_endpoints: bool, path: str) -> str:
    """GET /v1/status as HTML: a row per deployment, sort links in the header."""
    current = ",".join(board.sort)

    def link(**changes: str) -> str:
        params = {"window": board.window, "sort": current, "all": str(all_endpoints).lower()}
        params.update(changes)
        return f"{path}?{urlencode(params)}"

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
        )
    )
