"""The report's charts as self-contained SVG, drawn with matplotlib's object-oriented API.

Only `matplotlib.figure.Figure` is used, never pyplot: pyplot keeps global figure state and
is not safe in the API's worker threads, while a Figure saved to a buffer is. Text stays
text (svg.fonttype "none") so a chart is small, selectable and needs no font file; every
reference inside an SVG is a fragment (`#id`), so nothing is ever loaded from elsewhere.

Each data series is drawn as one Line2D whose gid is `series-<chart>-<key>`, so the SVG
has one `<g id="series-...">` per series and one `<use>` mark per point: tests and portals
can find and count what was drawn. A chart without data draws a "No data: why" panel.

Readable at a glance: load ticks sit at the measured levels, rounded as a person says them
(12.9, not 12.9427); before saving, tick labels that would touch are thinned (their extents
measured with the renderer, so the font size and the axis length decide), point labels that
would collide are left out, and a series hidden under another is drawn as hollow rings and
named in the legend.
"""

from __future__ import annotations

import io
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Any, Literal

import matplotlib
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.path import Path
from matplotlib.text import Annotation
from matplotlib.ticker import FixedLocator, FuncFormatter, LogLocator, NullFormatter
from matplotlib.transforms import Bbox

from infercost.reports.data import (
    Deployment,
    FleetSeries,
    Histogram,
    LevelFigures,
    SloLimit,
    level_label,
)
from infercost.reports.numbers import distinct, rounded

# Text as <text> elements, not glyph paths: a third of the size and no font data to embed.
# Read at save time; set once here because this module is the only matplotlib user.
matplotlib.rcParams["svg.fonttype"] = "none"

#: Every chart of a job report, in page order; also the names of /v1/jobs/{id}/charts/*.svg.
CHART_NAMES = (
    "throughput",
    "latency",
    "latency-vs-throughput",
    "ttft-distribution",
    "cost",
    "gpu-utilization",
)
#: The charts of a comparison page (per-deployment series overlaid).
COMPARISON_CHARTS = ("throughput", "latency", "latency-vs-throughput", "cost")

# Okabe-Ito: distinguishable with the common colour-vision deficiencies.
PALETTE = ("#0072B2", "#D55E00", "#009E73", "#CC79A7", "#E69F00", "#56B4E9", "#000000", "#999999")
_METRIC_COLOURS = {"ttft_ms": "#0072B2", "tpot_ms": "#D55E00", "itl_ms": "#CC79A7"}
_METRIC_COLOURS["e2e_ms"] = "#009E73"
_METRIC_NAMES = {"ttft_ms": "TTFT", "tpot_ms": "TPOT", "itl_ms": "ITL", "e2e_ms": "E2E"}
#: Marks per deployment on comparison charts, so lines stay apart without colour too.
_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_SIZE = (7.2, 4.2)
#: Space kept between two tick labels, as a share of their font size (a browser's font
#: may be a little wider than the one matplotlib measured with).
_TICK_GAP_EM = 0.8
#: Two marks closer than this (points on the figure) are drawn one over the other.
_COINCIDE_PT = 3.0
_INK = "#222222"
_GRID = "#dddddd"


@dataclass(frozen=True, slots=True)
class _Series:
    """One line of points; `key` makes its gid, `notes` label its points."""

    key: str
    label: str
    points: list[tuple[float, float]]
    colour: str
    linestyle: str = "-"
    marker: str = "o"
    notes: list[str] | None = None


def plain(text: str) -> str:
    """User text as matplotlib shows it literally: `$` would otherwise start mathtext."""
    return text.replace("$", r"\$")


def _figure() -> tuple[Figure, Axes]:
    fig = Figure(figsize=_SIZE, layout="constrained")
    ax = fig.add_subplot()
    ax.grid(True, which="major", color=_GRID, linewidth=0.8)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.tick_params(labelsize=9, colors=_INK)
    return fig, ax


def _svg(fig: Figure, title: str) -> str:
    """The figure as an SVG document (UTF-8 text) with a <title> and no other metadata,
    decluttered first: no two tick labels or point labels overlap."""
    _declutter(fig)
    buffer = io.BytesIO()
    fig.savefig(
        buffer,
        format="svg",
        metadata={"Title": title, "Date": None, "Creator": None, "Format": None, "Type": None},
    )
    return buffer.getvalue().decode("utf-8")


def no_data(chart: str, title: str, why: str) -> str:
    """A panel that says why a chart has nothing to draw, instead of an empty axis; its
    text is grouped under the gid `no-data-<chart>`."""
    fig = Figure(figsize=(_SIZE[0], 1.6), layout="constrained")
    ax = fig.add_subplot()
    ax.set_axis_off()
    ax.set_title(title, fontsize=12, color=_INK, loc="left")
    ax.text(
        0.5,
        0.45,
        textwrap.fill(plain(f"No data: {why}"), 80),
        ha="center",
        va="center",
        fontsize=10,
        color="#555555",
        gid=f"no-data-{chart}",
        bbox={"boxstyle": "round,pad=0.6", "facecolor": "#f4f4f4", "edgecolor": "#cccccc"},
    )
    return _svg(fig, title)


def _number(value: float, _pos: object = None) -> str:
    """Tick text: plain digits rounded to three significant figures (1, 8, 32, 0.5, 1,200,
    12.9), never 10^x."""
    return rounded(value)


def _wide(values: Sequence[float], ratio: float = 10.0) -> bool:
    """Whether positive values span enough that a log scale reads better."""
    return bool(values) and min(values) > 0 and max(values) / min(values) >= ratio


def _log_ticks(axis: Any, values: Sequence[float]) -> None:
    """Labelled ticks at 1, 2 and 5 per decade when values span under three decades (one
    label per decade leaves a short log axis with one or two numbers), else per decade."""
    few = max(values) / min(values) < 1000
    axis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0) if few else (1.0,)))
    axis.set_minor_formatter(NullFormatter())
    axis.set_major_formatter(FuncFormatter(_number))


def _scale_x(ax: Axes, xs: Sequence[float], ticks_at_values: bool) -> None:
    """Log x when loads span 8x or more; ticks at the levels themselves when few, each
    rounded with the fewest figures that keep neighbouring levels apart (_declutter later
    thins the labels that would still touch)."""
    levels = sorted(set(xs))
    if _wide(levels, 8.0):
        ax.set_xscale("log")
        _log_ticks(ax.xaxis, levels)
    if ticks_at_values and 0 < len(levels) <= 24:
        texts = distinct(levels)
        ax.xaxis.set_major_locator(FixedLocator(levels))
        ax.xaxis.set_minor_locator(FixedLocator([]))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _pos: texts.get(v) or rounded(v)))
        return
    ax.xaxis.set_major_formatter(FuncFormatter(_number))


def _scale_y(ax: Axes, ys: Sequence[float], ratio: float = 10.0) -> bool:
    """Log y when values span `ratio` or more (latency and cost often do); else from 0."""
    if _wide(ys, ratio):
        ax.set_yscale("log")
        _log_ticks(ax.yaxis, ys)
        return True
    ax.set_ylim(bottom=0, top=max(ys) * 1.12 if ys and max(ys) > 0 else 1)
    ax.yaxis.set_major_formatter(FuncFormatter(_number))
    return False


def _draw(ax: Axes, chart: str, series: _Series) -> Line2D:
    """One series as a line with a mark per point, grouped under its gid."""
    points = sorted(series.points)
    (line,) = ax.plot(
        [x for x, _ in points],
        [y for _, y in points],
        linestyle=series.linestyle,
        marker=series.marker,
        markersize=5,
        linewidth=1.8,
        color=series.colour,
        label=plain(series.label),
        gid=f"series-{chart}-{series.key}",
    )
    if series.notes:
        for i, ((x, y), note) in enumerate(zip(series.points, series.notes, strict=True)):
            ax.annotate(
                plain(note),
                (x, y),
                textcoords="offset points",
                xytext=(4, 5),
                fontsize=7,
                color=series.colour,
                gid=f"note-{chart}-{series.key}-{i}",
            )
    return line


def _separate(lines: Sequence[tuple[Axes, Line2D]]) -> None:
    """Make a series that lies on an earlier one visible: its marks become hollow rings
    around the earlier marks, its line dashed, and when every mark coincides the legend
    says so ("same as ...") instead of showing one line where two are.

    Compared on the figure (points), so series on twin axes count too."""
    drawn: list[tuple[Axes, Line2D, Any]] = []
    for ax, line in lines:
        ax.get_xlim(), ax.get_ylim()  # settles autoscaled limits before transforming
        # Points from the figure's corner, so the distance does not depend on the dpi.
        xy = ax.transData.transform(line.get_xydata()) * 72.0 / ax.figure.dpi
        for other_ax, other, other_xy in drawn:
            hits = sum(
                1
                for px, py in xy
                if any(math.hypot(px - ox, py - oy) < _COINCIDE_PT for ox, oy in other_xy)
            )
            if hits == 0:
                continue
            line.set_markerfacecolor("none")
            line.set_markersize(10)
            line.set_markeredgewidth(1.6)
            line.set_zorder(other.get_zorder() + 0.1)
            if line.get_linestyle() == other.get_linestyle():
                line.set_linestyle((0, (5, 3)))
            label = str(line.get_label())
            if hits == len(xy) and not label.startswith("_"):
                same = "same as" if other_ax is ax else "on the line of"
                line.set_label(f"{label} ({same} {other.get_label()})")
            break
        drawn.append((ax, line, xy))


def _declutter(fig: Figure) -> None:
    """Thin tick labels that would overlap and drop point labels that would collide, with
    extents measured by the renderer after layout. Repeated, since thinning can change
    the layout (constrained layout may then resize the axes)."""
    # Agg measures text with the same font files the SVG writer lays it out with.
    canvas = FigureCanvasAgg(fig)
    for _ in range(3):
        fig.draw_without_rendering()
        renderer = canvas.get_renderer()  # type: ignore[no-untyped-call]
        changed = False
        for ax in fig.axes:
            for axis in (ax.xaxis, ax.yaxis):
                changed |= _thin_ticks(axis, renderer)
        if not changed:
            break
    _drop_colliding_notes(fig, canvas.get_renderer())  # type: ignore[no-untyped-call]


def _padded(box: Bbox, em: float) -> Bbox:
    return Bbox.from_extents(box.x0 - em / 2, box.y0 - em / 2, box.x1 + em / 2, box.y1 + em / 2)


def _thin_ticks(axis: Any, renderer: Any) -> bool:
    """Keep the tick labels of `axis` that fit: the first, then each one clear of the last
    kept, and the last (dropping what it would touch). Thinned level ticks stay as short
    unlabelled marks. Returns whether anything was thinned."""
    labels: list[tuple[float, Bbox]] = []
    horizontal = axis.axis_name == "x"
    for text in axis.get_majorticklabels():
        if not text.get_visible() or not text.get_text():
            continue
        value = text.get_position()[0 if horizontal else 1]
        em = text.get_fontsize() * axis.figure.dpi / 72.0
        labels.append((value, _padded(text.get_window_extent(renderer), _TICK_GAP_EM * em)))
    if len(labels) < 2:
        return False
    labels.sort(key=lambda pair: pair[1].x0 if horizontal else pair[1].y0)
    kept = [labels[0]]
    for pair in labels[1:]:
        if not pair[1].overlaps(kept[-1][1]):
            kept.append(pair)
    if kept[-1] is not labels[-1]:
        while len(kept) > 1 and kept[-1][1].overlaps(labels[-1][1]):
            kept.pop()
        kept.append(labels[-1])
    if len(kept) == len(labels):
        return False
    values = sorted(value for value, _ in kept)
    dropped = sorted(value for value, _ in labels if value not in values)
    formatter = axis.get_major_formatter()
    axis.set_major_locator(FixedLocator(values))
    axis.set_major_formatter(formatter)
    if isinstance(axis.get_minor_locator(), FixedLocator):
        axis.set_minor_locator(FixedLocator(dropped))
    return True


#: Where a point label may sit, tried in turn (offset in points, alignment): above right,
#: below right, above left, below left of its mark.
_NOTE_PLACES: tuple[tuple[tuple[float, float], Literal["left", "right"]], ...] = (
    ((4, 5), "left"),
    ((4, -12), "left"),
    ((-4, 5), "right"),
    ((-4, -12), "right"),
)


def _drop_colliding_notes(fig: Figure, renderer: Any) -> None:
    """Point labels only where they fit: each tries the places beside its mark and keeps the
    first that is inside the axes and clear of the legend, every line and mark, and every
    label kept before it (in drawing order); a label with no such place is left out."""
    for ax in fig.axes:
        frame = ax.get_window_extent(renderer)
        legend = ax.get_legend()
        taken: list[Bbox] = []
        if legend is not None:
            taken.append(legend.get_window_extent(renderer))
        paths = []
        for line in ax.get_lines():
            xy = line.get_transform().transform(line.get_xydata())
            paths.append(Path(xy))
            radius = line.get_markersize() * fig.dpi / 72.0 / 2
            taken += [
                Bbox.from_extents(x - radius, y - radius, x + radius, y + radius) for x, y in xy
            ]
        for child in list(ax.get_children()):
            if not isinstance(child, Annotation) or not child.get_visible():
                continue
            for offset, align in _NOTE_PLACES:
                child.set_position(offset)
                child.set_horizontalalignment(align)
                box = child.get_window_extent(renderer)
                inside = frame.x0 <= box.x0 and box.x1 <= frame.x1
                inside = inside and frame.y0 <= box.y0 and box.y1 <= frame.y1
                clear = not any(box.overlaps(other) for other in taken)
                if (
                    inside
                    and clear
                    and not any(p.intersects_bbox(box, filled=False) for p in paths)
                ):
                    taken.append(box)
                    break
            else:
                child.remove()


def _finish(fig: Figure, ax: Axes, title: str, xlabel: str, ylabel: str) -> str:
    ax.set_title(title, fontsize=12, color=_INK, loc="left")
    ax.set_xlabel(xlabel, fontsize=10, color=_INK)
    ax.set_ylabel(ylabel, fontsize=10, color=_INK)
    _legend(ax, ax.get_legend_handles_labels()[0])
    return _svg(fig, title)


def _legend(ax: Axes, handles: Sequence[Any]) -> None:
    """A legend inside the plot when short; beside it when it would cover the data."""
    if not handles:
        return
    if len(handles) > 4:
        ax.legend(
            handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), frameon=False
        )
    else:
        ax.legend(handles=handles, fontsize=8, framealpha=0.9, loc="best")


def _points(
    runs: Sequence[LevelFigures],
    x: Callable[[LevelFigures], float | None],
    y: Callable[[LevelFigures], float | None],
) -> list[tuple[float, float]]:
    """(x, y) of the runs where both are known and finite."""
    found = []
    for run in runs:
        xv, yv = x(run), y(run)
        if xv is not None and yv is not None and math.isfinite(xv) and math.isfinite(yv):
            found.append((float(xv), float(yv)))
    return found


def load_axis(
    deployments: Sequence[Deployment],
) -> tuple[str, Callable[[LevelFigures], float | None]]:
    """The x axis of the load charts: the level when every run shares one mode (users,
    requests/s, or requests sent at once), otherwise (a sweep mixes users and request
    rates) the measured requests/s."""
    modes = {r.mode for d in deployments for r in d.runs}
    if modes == {"concurrency"}:
        return "concurrency (users in flight)", lambda r: r.level
    if modes == {"rate"}:
        return "offered load (requests/s)", lambda r: r.level
    if modes == {"burst"}:
        return "burst (requests sent at once)", lambda r: r.level
    return "measured load (requests/s; levels mix users and rates)", lambda r: r.requests_per_s


def _colour(index: int) -> str:
    return PALETTE[index % len(PALETTE)]


def _render(
    chart: str,
    title: str,
    series: list[_Series],
    *,
    xlabel: str,
    ylabel: str,
    why_empty: str,
    ticks_at_values: bool = True,
    y_log_ratio: float = 10.0,
    decorate: Callable[[Axes], None] | None = None,
) -> str:
    """Draw non-empty series on one axis, or the no-data panel when none has a point."""
    series = [s for s in series if s.points]
    if not series:
        return no_data(chart, title, why_empty)
    fig, ax = _figure()
    lines = [_draw(ax, chart, s) for s in series]
    _scale_x(ax, [x for s in series for x, _ in s.points], ticks_at_values)
    _scale_y(ax, [y for s in series for _, y in s.points], y_log_ratio)
    if decorate is not None:
        decorate(ax)
    _separate([(ax, line) for line in lines])
    return _finish(fig, ax, title, xlabel, ylabel)


def throughput_chart(deployments: Sequence[Deployment]) -> str:
    """Output tokens/s against load: rising, then flat where the deployment saturates. One
    deployment also shows requests/s on a second axis."""
    title = "Throughput against load"
    xlabel, x = load_axis(deployments)
    why = "no run has finished a measured level yet"
    if len(deployments) != 1:
        series = [
            _Series(
                f"output-{i}",
                d.label,
                _points(d.runs, x, lambda r: r.output_tokens_per_s),
                _colour(i),
                marker=_MARKERS[i % len(_MARKERS)],
            )
            for i, d in enumerate(deployments)
        ]
        return _render(
            "throughput",
            title,
            series,
            xlabel=xlabel,
            ylabel="output tokens/s",
            why_empty=why,
            # Linear, so saturation reads as the curve flattening.
            y_log_ratio=math.inf,
        )
    runs = deployments[0].runs
    tokens = _points(runs, x, lambda r: r.output_tokens_per_s)
    requests = _points(runs, x, lambda r: r.requests_per_s)
    if not tokens and not requests:
        return no_data("throughput", title, why)
    fig, ax = _figure()
    drawn: list[tuple[Axes, Line2D]] = []
    if tokens:
        drawn.append(
            (ax, _draw(ax, "throughput", _Series("output", "output tokens/s", tokens, PALETTE[0])))
        )
        _scale_y(ax, [y for _, y in tokens], math.inf)
    if requests:
        right = ax.twinx()
        right.spines["top"].set_visible(False)
        right.tick_params(labelsize=9, colors=_INK)
        rps = _Series("requests", "requests/s (right axis)", requests, PALETTE[1], "--", "s")
        drawn.append((right, _draw(right, "throughput", rps)))
        _scale_y(right, [y for _, y in requests], math.inf)
        right.set_ylabel("requests/s", fontsize=10, color=_INK)
    _scale_x(ax, [p[0] for p in tokens + requests], True)
    # Requests/s is tokens/s over a fixed output length, so the two lines often coincide.
    _separate(drawn)
    _legend(ax, [line for _, line in drawn])
    ax.set_title(title, fontsize=12, color=_INK, loc="left")
    ax.set_xlabel(xlabel, fontsize=10, color=_INK)
    ax.set_ylabel("output tokens/s", fontsize=10, color=_INK)
    return _svg(fig, title)


def _latency_getter(metric: str, stat: str) -> Callable[[LevelFigures], float | None]:
    name = f"{metric.removesuffix('_ms')}_{stat}_ms"
    return lambda r: getattr(r, name, None)


def latency_chart(deployments: Sequence[Deployment], slo: Sequence[SloLimit] = ()) -> str:
    """Latency percentiles against load, in ms on a log scale when they span 10x, with the
    SLO's limits as dotted lines. One deployment shows TTFT, TPOT and E2E at p50 and p95;
    several show TTFT p95 (solid) and TPOT p95 (dashed) per deployment."""
    title = "Latency against load"
    xlabel, x = load_axis(deployments)
    series: list[_Series] = []
    if len(deployments) == 1:
        runs = deployments[0].runs
        for metric in ("ttft_ms", "tpot_ms", "e2e_ms"):
            for stat, style in (("p50", "-"), ("p95", "--")):
                name = _METRIC_NAMES[metric]
                series.append(
                    _Series(
                        f"{name.lower()}-{stat}",
                        f"{name} {stat}",
                        _points(runs, x, _latency_getter(metric, stat)),
                        _METRIC_COLOURS[metric],
                        style,
                    )
                )
    else:
        for i, d in enumerate(deployments):
            for metric, style, marker in (("ttft_ms", "-", "o"), ("tpot_ms", "--", "s")):
                name = _METRIC_NAMES[metric]
                series.append(
                    _Series(
                        f"{name.lower()}-p95-{i}",
                        f"{d.label}: {name} p95",
                        _points(d.runs, x, _latency_getter(metric, "p95")),
                        _colour(i),
                        style,
                        marker,
                    )
                )

    def limits(ax: Axes) -> None:
        for limit in slo:
            colour = _METRIC_COLOURS.get(limit.metric, _INK)
            ax.axhline(
                limit.limit_ms,
                color=colour,
                linestyle=":",
                linewidth=1.2,
                label=f"SLO {_METRIC_NAMES.get(limit.metric, limit.metric)} "
                f"{limit.stat} {_number(limit.limit_ms)} ms",
                gid=f"slo-{limit.metric}-{limit.stat}",
            )

    return _render(
        "latency",
        title,
        series,
        xlabel=xlabel,
        ylabel="latency (ms)",
        why_empty="no run has latency figures yet",
        decorate=limits,
    )


def latency_throughput_chart(deployments: Sequence[Deployment]) -> str:
    """TTFT p95 and TPOT p95 against output tokens/s: the price in latency of each step
    up in throughput. Points are labelled with their load level."""
    title = "Latency against throughput"
    series: list[_Series] = []
    single = len(deployments) == 1
    # A sweep mixes users and request rates: then each label says which it is.
    mixed = len({r.mode for d in deployments for r in d.runs}) > 1

    def note(run: LevelFigures) -> str:
        return level_label(run.level, run.mode) if mixed else rounded(run.level)

    for i, d in enumerate(deployments):
        for metric, style, marker in (("ttft_ms", "-", "o"), ("tpot_ms", "--", "s")):
            get = _latency_getter(metric, "p95")
            runs = [r for r in d.runs if r.output_tokens_per_s is not None and get(r) is not None]
            name = _METRIC_NAMES[metric]
            series.append(
                _Series(
                    f"{name.lower()}-p95" + ("" if single else f"-{i}"),
                    f"{name} p95" if single else f"{d.label}: {name} p95",
                    _points(runs, lambda r: r.output_tokens_per_s, get),
                    _METRIC_COLOURS[metric] if single else _colour(i),
                    style,
                    marker,
                    notes=[note(r) for r in runs] if single else None,
                )
            )
    return _render(
        "latency-vs-throughput",
        title,
        series,
        xlabel="output tokens/s (labels: load level)" if single else "output tokens/s",
        ylabel="latency p95 (ms)",
        why_empty="no run has both throughput and latency",
        ticks_at_values=False,
    )


def ttft_distribution_chart(histograms: Sequence[Histogram]) -> str:
    """Share of each level's requests per TTFT bin (log-spaced bins, log x): how the tail
    of time to first token grows with load. Marks sit on the bins that hold requests."""
    title = "Time to first token: distribution per load level"
    drawn = [h for h in histograms if sum(h.counts) > 0]
    if not drawn:
        return no_data(
            "ttft-distribution", title, "no measured request succeeded with a first token"
        )
    cmap = matplotlib.colormaps["viridis"]
    fig, ax = _figure()
    for i, h in enumerate(drawn):
        total = sum(h.counts)
        centres = [math.sqrt(a * b) if a > 0 else (a + b) / 2 for a, b in pairwise(h.edges)]
        shares = [100.0 * c / total for c in h.counts]
        colour = cmap(0.9 * i / max(1, len(drawn) - 1))
        ax.plot(
            centres,
            shares,
            drawstyle="steps-mid",
            marker="o",
            markersize=3,
            markevery=[j for j, c in enumerate(h.counts) if c > 0],
            linewidth=1.5,
            color=colour,
            label=plain(h.label),
            gid=f"series-ttft-distribution-{i}",
        )
    edges = [e for h in drawn for e in h.edges]
    if _wide([e for e in edges if e > 0], 4.0) and min(edges) > 0:
        ax.set_xscale("log")
        _log_ticks(ax.xaxis, edges)
    else:
        ax.xaxis.set_major_formatter(FuncFormatter(_number))
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(_number))
    return _finish(fig, ax, title, "TTFT (ms)", "share of the level's requests (%)")


def _no_price_reason(deployments: Sequence[Deployment]) -> str:
    notes = [r.cost_note for d in deployments for r in d.runs if r.cost_note]
    if notes:
        return notes[0]
    return "no price is known: set usd_per_hour on the endpoint or add a price for its hardware"


def cost_chart(deployments: Sequence[Deployment]) -> str:
    """USD per million output tokens against load (log y when it spans 10x): cost falls as
    batching fills the GPU. One deployment also shows the cost counting only requests that
    met the SLO (goodput)."""
    title = "Cost per million output tokens against load"
    xlabel, x = load_axis(deployments)
    series: list[_Series] = []
    for i, d in enumerate(deployments):
        single = len(deployments) == 1
        series.append(
            _Series(
                "all" if single else f"all-{i}",
                "all output" if single else d.label,
                _points(d.runs, x, lambda r: r.cost_per_million_output_usd),
                PALETTE[0] if single else _colour(i),
                marker=_MARKERS[i % len(_MARKERS)],
            )
        )
        if single:
            series.append(
                _Series(
                    "at-slo",
                    "output of requests that met the SLO",
                    _points(d.runs, x, lambda r: r.cost_at_slo_per_million_output_usd),
                    PALETTE[1],
                    "--",
                    "s",
                )
            )
    return _render(
        "cost",
        title,
        series,
        xlabel=xlabel,
        ylabel="USD per million output tokens",
        why_empty=_no_price_reason(deployments),
    )


def _no_gpu_reason(deployments: Sequence[Deployment]) -> str:
    if not any(d.has_metrics_urls for d in deployments):
        return (
            "the endpoint has no metrics_urls, so no GPU telemetry was scraped; add its DCGM "
            "exporter's /metrics URL to the endpoint"
        )
    errors = [e for d in deployments for r in d.runs for e in r.telemetry_errors]
    if errors:
        return f"the metrics URLs published no GPU utilisation; first scrape error: {errors[0]}"
    return "the metrics URLs published no GPU utilisation (DCGM_FI_DEV_GPU_UTIL)"


def gpu_chart(deployments: Sequence[Deployment]) -> str:
    """GPU utilisation (DCGM) against load, in percent: mean and p95 over the measured window,
    and SM activity when the exporter publishes it (utilisation alone overstates how busy
    the GPU is: it counts any kernel running)."""
    title = "GPU utilisation against load"
    xlabel, x = load_axis(deployments)
    series: list[_Series] = []
    for i, d in enumerate(deployments):
        tag = "" if len(deployments) == 1 else f"-{i}"
        name = "" if len(deployments) == 1 else f"{d.label}: "
        colour = _colour(i)

        def pct(
            get: Callable[[LevelFigures], float | None],
        ) -> Callable[[LevelFigures], float | None]:
            return lambda r: None if (v := get(r)) is None else 100.0 * v

        series += [
            _Series(
                f"util-mean{tag}",
                f"{name}utilisation, mean",
                _points(d.runs, x, pct(lambda r: r.gpu_util_mean)),
                colour,
            ),
            _Series(
                f"util-p95{tag}",
                f"{name}utilisation, p95",
                _points(d.runs, x, pct(lambda r: r.gpu_util_p95)),
                colour,
                "--",
                "s",
            ),
            _Series(
                f"sm-active{tag}",
                f"{name}SM active, mean",
                _points(d.runs, x, pct(lambda r: r.sm_active_mean)),
                colour,
                ":",
                "^",
            ),
        ]

    def to_100(ax: Axes) -> None:
        ax.set_ylim(0, 105)

    return _render(
        "gpu-utilization",
        title,
        series,
        xlabel=xlabel,
        ylabel="GPU utilisation (%)",
        why_empty=_no_gpu_reason(deployments),
        y_log_ratio=math.inf,
        decorate=to_100,
    )


#: A trace replay's report adds this chart before the others.
FLEET_CHART = "fleets"


def fleet_chart(fleets: FleetSeries) -> str:
    """A trace's demand over time (requests/s of each interval's busiest minute) with the
    capacity of the fixed fleet (sized for the peak interval) and of the autoscaled one
    (following demand a lag behind) drawn over it, each replica carrying its capacity at
    the SLO; the part of the trace the job replayed is shaded."""
    chart = FLEET_CHART
    title = "Demand over the trace and the fleets that serve it"
    if fleets.why_empty is not None or not fleets.starts_s:
        return no_data(chart, title, fleets.why_empty or "the trace has no interval")
    fig, ax = _figure()
    minutes = [s / 60.0 for s in fleets.starts_s]
    end = (fleets.starts_s[-1] + fleets.interval_s) / 60.0
    xs = [*minutes, end]
    capacity = fleets.capacity_rps

    def steps(values: Sequence[float]) -> list[float]:
        return [*values, values[-1]]

    ax.plot(
        xs,
        steps(list(fleets.demand_rps)),
        drawstyle="steps-post",
        marker="o",
        markersize=4,
        linewidth=1.8,
        color=PALETTE[0],
        label="demand (busiest minute)",
        gid=f"series-{chart}-demand",
    )
    ax.plot(
        xs,
        steps([n * capacity for n in fleets.autoscaled]),
        drawstyle="steps-post",
        marker="s",
        markersize=4,
        linewidth=1.8,
        color=PALETTE[2],
        label=f"autoscaled fleet ({min(fleets.autoscaled)}-{max(fleets.autoscaled)} replicas)",
        gid=f"series-{chart}-autoscaled",
    )
    ax.plot(
        [xs[0], xs[-1]],
        [fleets.fixed * capacity] * 2,
        linestyle="--",
        marker="^",
        markersize=4,
        linewidth=1.8,
        color=PALETTE[1],
        label=f"fixed fleet ({fleets.fixed} replicas)",
        gid=f"series-{chart}-fixed",
    )
    if fleets.window is not None:
        start, stop = fleets.window
        ax.axvspan(
            start / 60.0,
            stop / 60.0,
            color="#eeeeee",
            zorder=0,
            label="replayed",
            gid=f"window-{chart}",
        )
    ax.set_ylim(bottom=0)
    ax.yaxis.set_major_formatter(FuncFormatter(_number))
    return _finish(
        fig,
        ax,
        title,
        "minutes after the trace's first request",
        f"requests/s (a replica: {rounded(capacity)} at the SLO)",
    )


def job_chart(
    name: str,
    deployment: Deployment,
    slo: Sequence[SloLimit] = (),
    histograms: Sequence[Histogram] = (),
) -> str:
    """One chart of a job report by its name (one of CHART_NAMES)."""
    one = [deployment]
    drawers: dict[str, Callable[[], str]] = {
        "throughput": lambda: throughput_chart(one),
        "latency": lambda: latency_chart(one, slo),
        "latency-vs-throughput": lambda: latency_throughput_chart(one),
        "ttft-distribution": lambda: ttft_distribution_chart(histograms),
        "cost": lambda: cost_chart(one),
        "gpu-utilization": lambda: gpu_chart(one),
    }
    return drawers[name]()


def comparison_chart(name: str, deployments: Sequence[Deployment]) -> str:
    """One chart of a comparison page (one of COMPARISON_CHARTS), a series per deployment."""
    drawers: dict[str, Callable[[], str]] = {
        "throughput": lambda: throughput_chart(deployments),
        "latency": lambda: latency_chart(deployments),
        "latency-vs-throughput": lambda: latency_throughput_chart(deployments),
        "cost": lambda: cost_chart(deployments),
    }
    return drawers[name]()


_ID = re.compile(r'\bid="([^"]+)"')
_REF = re.compile(r'(url\(#|href="#)([^)"]+)')
_KEPT_IDS = ("series-", "slo-", "no-data-", "note-", "window-")


def inline(svg: str, prefix: str) -> str:
    """An SVG document as an element to place in HTML, beside other charts: without its
    XML declaration and DOCTYPE, and with matplotlib's generic ids (figure_1, axes_1, ...)
    and every reference to them prefixed, so ids stay unique on the page. Series ids are
    kept, since they already name their chart."""
    body = svg[svg.index("<svg") :]

    def rename(name: str) -> str:
        return name if name.startswith(_KEPT_IDS) else f"{prefix}-{name}"

    body = _ID.sub(lambda m: f'id="{rename(m.group(1))}"', body)
    return _REF.sub(lambda m: m.group(1) + rename(m.group(2)), body)
