"""The report's charts and pages without a server: every SVG parses, holds the series it
should with one mark per known point, references nothing outside itself, and says why when
it has nothing to draw; pages are escaped, script-free and keep ids unique."""

from __future__ import annotations

import math
import re
import xml.etree.ElementTree as ET
from dataclasses import dataclass, replace
from datetime import UTC, datetime

import pytest
from matplotlib.font_manager import FontProperties
from matplotlib.textpath import TextToPath

from infercost.reports.charts import (
    CHART_NAMES,
    COMPARISON_CHARTS,
    comparison_chart,
    inline,
    job_chart,
)
from infercost.reports.data import (
    ComparisonReport,
    Deployment,
    Histogram,
    JobReport,
    LevelFigures,
    SloLimit,
)
from infercost.reports.render import render_comparison, render_job_report

SVG_NS = "{http://www.w3.org/2000/svg}"
XLINK_HREF = "{http://www.w3.org/1999/xlink}href"
LEVELS = (1, 4, 16, 64)
NOW = datetime(2026, 12, 2, 12, 0, tzinfo=UTC)


def level(
    n: int, *, price: float | None = 3.5, gpu: bool = True, **overrides: object
) -> LevelFigures:
    """A plausible level: throughput saturating at about 1,600 tokens/s, latency rising."""
    tokens = 100 * n / (1 + n / 16)
    figures = LevelFigures(
        level=float(n),
        mode="concurrency",
        status="succeeded",
        ttft_p50_ms=40 + 3 * n,
        ttft_p95_ms=50 + 5 * n,
        tpot_p50_ms=10 + n / 8,
        tpot_p95_ms=12 + n / 6,
        itl_p50_ms=10 + n / 8,
        itl_p95_ms=13 + n / 6,
        e2e_p50_ms=400 + 20 * n,
        e2e_p95_ms=500 + 30 * n,
        output_tokens_per_s=tokens,
        requests_per_s=tokens / 128,
        error_rate=0.0,
        goodput_rps=tokens / 128,
        slo_passed=n < 64,
        client_bound=False,
        usd_per_hour=price,
        cost_per_million_output_usd=None if price is None else price / (tokens * 3600) * 1e6,
        cost_at_slo_per_million_output_usd=None if price is None else price / (tokens * 3000) * 1e6,
        cost_note=None if price is not None else "endpoint 'ep' has no price: set usd_per_hour",
        gpu_util_mean=min(1.0, 0.2 + n / 50) if gpu else None,
        gpu_util_p95=min(1.0, 0.3 + n / 50) if gpu else None,
        sm_active_mean=None,
    )
    return replace(figures, **overrides)


def deployment(label: str = "vllm-h200", **kwargs: object) -> Deployment:
    runs = tuple(level(n, **kwargs) for n in LEVELS)
    return Deployment(
        label=label,
        job_id="5f1c0000-0000-0000-0000-000000000000",
        endpoint_name=label,
        model="llama-8b",
        engine="vllm",
        hardware="H200-SXM",
        gpu_count=1,
        status="succeeded",
        runs=runs,
        workload_fingerprint="3f0c1a2b3c4d5e6f",
        has_metrics_urls=True,
    )


def histograms() -> tuple[Histogram, ...]:
    edges = tuple(20 * 1.15**i for i in range(21))
    return tuple(
        Histogram(
            f"{n} users",
            edges,
            tuple(int(50 * math.exp(-(((i - 3 - n / 8) / 2) ** 2))) for i in range(20)),
        )
        for n in LEVELS
    )


def parse(svg: str) -> ET.Element:
    return ET.fromstring(svg.encode())


def series(root: ET.Element, chart: str) -> dict[str, int]:
    """Each series group of a chart and its number of point marks (<use> elements)."""
    return {
        g.get("id", ""): len(g.findall(f".//{SVG_NS}use"))
        for g in root.iter(f"{SVG_NS}g")
        if g.get("id", "").startswith(f"series-{chart}-")
    }


def assert_self_contained(svg: str) -> None:
    """Nothing in the SVG can make a browser fetch: fragment references only, no script."""
    root = parse(svg)
    for element in root.iter():
        for name, value in element.attrib.items():
            if name.endswith("href"):
                assert value.startswith("#"), (element.tag, name, value)
            for target in re.findall(r"url\(([^)]*)\)", value):
                assert target.startswith("#"), (element.tag, name, value)
        assert not element.tag.endswith(("script", "image", "foreignObject")), element.tag
    for style in root.iter(f"{SVG_NS}style"):
        assert "@import" not in (style.text or "") and "url(" not in (style.text or "")


@pytest.mark.parametrize("name", CHART_NAMES)
def test_each_job_chart_parses_is_self_contained_and_has_its_series(name: str) -> None:
    svg = job_chart(name, deployment(), [SloLimit("ttft_ms", "p95", 200.0)], histograms())
    assert_self_contained(svg)
    root = parse(svg)
    assert root.tag == f"{SVG_NS}svg"
    found = series(root, name)
    assert found, f"{name}: no series drawn"
    assert not any(g.get("id", "").startswith("no-data") for g in root.iter(f"{SVG_NS}g"))
    if name != "ttft-distribution":
        # One mark per level with a known value; sm_active_mean is unknown, so not drawn.
        assert set(found.values()) == {len(LEVELS)}, found


def test_job_series_are_the_expected_figures() -> None:
    one = deployment()
    assert set(series(parse(job_chart("latency", one)), "latency")) == {
        f"series-latency-{m}-{s}" for m in ("ttft", "tpot", "e2e") for s in ("p50", "p95")
    }
    assert set(series(parse(job_chart("throughput", one)), "throughput")) == {
        "series-throughput-output",
        "series-throughput-requests",
    }
    assert set(series(parse(job_chart("cost", one)), "cost")) == {
        "series-cost-all",
        "series-cost-at-slo",
    }
    assert set(series(parse(job_chart("gpu-utilization", one)), "gpu-utilization")) == {
        "series-gpu-utilization-util-mean",
        "series-gpu-utilization-util-p95",
    }


def test_slo_limits_are_drawn_on_the_latency_chart() -> None:
    svg = job_chart(
        "latency", deployment(), [SloLimit("ttft_ms", "p95", 200), SloLimit("tpot_ms", "p95", 50)]
    )
    ids = {g.get("id") for g in parse(svg).iter(f"{SVG_NS}g")}
    assert {"slo-ttft_ms-p95", "slo-tpot_ms-p95"} <= ids
    assert "SLO TTFT p95 200 ms" in svg


def test_ttft_histogram_marks_only_the_bins_that_hold_requests() -> None:
    hists = histograms()
    found = series(
        parse(job_chart("ttft-distribution", deployment(), histograms=hists)), "ttft-distribution"
    )
    assert len(found) == len(LEVELS)
    for i, h in enumerate(hists):
        assert found[f"series-ttft-distribution-{i}"] == sum(1 for c in h.counts if c > 0)


def test_unknown_values_are_left_out_not_drawn_as_zero() -> None:
    d = deployment()
    runs = (replace(d.runs[0], output_tokens_per_s=None), *d.runs[1:])
    found = series(parse(job_chart("throughput", replace(d, runs=runs))), "throughput")
    assert found["series-throughput-output"] == len(LEVELS) - 1
    assert found["series-throughput-requests"] == len(LEVELS)


@pytest.mark.parametrize(
    ("name", "kwargs", "histos", "why"),
    [
        ("cost", {"price": None}, (), "has no price: set usd_per_hour"),
        ("gpu-utilization", {"gpu": False}, (), "published no GPU utilisation"),
        ("ttft-distribution", {}, (), "no measured request succeeded"),
    ],
)
def test_a_chart_without_data_says_why(
    name: str, kwargs: dict[str, object], histos: tuple[Histogram, ...], why: str
) -> None:
    svg = job_chart(name, deployment(**kwargs), histograms=histos)
    assert_self_contained(svg)
    root = parse(svg)
    assert series(root, name) == {}
    assert any(g.get("id") == f"no-data-{name}" for g in root.iter(f"{SVG_NS}g"))
    text = " ".join(t.text or "" for t in root.iter(f"{SVG_NS}text"))
    assert "No data:" in text and why in text, text


def test_no_gpu_panel_names_the_missing_metrics_urls() -> None:
    svg = job_chart("gpu-utilization", replace(deployment(gpu=False), has_metrics_urls=False))
    assert "no metrics_urls" in svg


def test_comparison_charts_draw_one_series_per_deployment() -> None:
    deployments = [deployment("vllm-h200"), deployment("sglang-h100x2"), deployment("tgi-l40s")]
    for name in COMPARISON_CHARTS:
        svg = comparison_chart(name, deployments)
        assert_self_contained(svg)
        found = series(parse(svg), name)
        # Latency charts carry TTFT p95 and TPOT p95 per deployment, the others one line.
        per_deployment = 2 if name.startswith("latency") else 1
        assert len(found) == per_deployment * len(deployments), (name, found)
        assert set(found.values()) == {len(LEVELS)}, (name, found)
        for label in ("vllm-h200", "sglang-h100x2", "tgi-l40s"):
            assert label in svg


def test_mixed_modes_plot_against_measured_requests_per_second() -> None:
    d = deployment()
    runs = (replace(d.runs[0], mode="concurrency"), *(replace(r, mode="rate") for r in d.runs[1:]))
    svg = job_chart("throughput", replace(d, runs=runs))
    assert "measured load (requests/s" in svg


def test_dollar_signs_in_names_are_shown_not_parsed_as_math() -> None:
    svg = comparison_chart("throughput", [deployment("a$b"), deployment("c$d")])
    assert "a$b" in svg and "c$d" in svg


def test_inlined_charts_keep_ids_unique_and_references_resolved() -> None:
    page = "".join(
        inline(job_chart(name, deployment(), histograms=histograms()), f"c-{name}")
        for name in CHART_NAMES
    )
    root = parse(
        f'<div xmlns="http://www.w3.org/2000/svg" xmlns:xlink="http://www.w3.org/1999/xlink">{page}</div>'
    )
    ids = [e.get("id") for e in root.iter() if e.get("id")]
    assert len(ids) == len(set(ids)), [i for i in ids if ids.count(i) > 1][:5]
    known = set(ids)
    for element in root.iter():
        for value in element.attrib.values():
            for ref in re.findall(r"url\(#([^)]*)\)", value):
                assert ref in known, ref
        href = element.get(XLINK_HREF)
        if href:
            assert href[1:] in known, href
    assert "<?xml" not in page and "<!DOCTYPE" not in page


def _report(d: Deployment) -> JobReport:
    return JobReport(
        deployment=d,
        workload="input 512 tokens; output 128 tokens",
        load_plan="closed loop at 1, 4, 16, 64 users",
        slo=(SloLimit("ttft_ms", "p95", 200.0),),
        created_at=NOW,
        generated_at=NOW,
        histograms=histograms(),
    )


def test_job_page_is_one_escaped_self_contained_document() -> None:
    hostile = deployment("<script>alert(1)</script>")
    runs = (replace(hostile.runs[0], client_bound=True), *hostile.runs[1:])
    html = render_job_report(_report(replace(hostile, runs=runs)))
    assert html.startswith("<!DOCTYPE html>")
    assert "<script" not in html.lower()
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
    # No way to load anything: no src, no link, no external href or url().
    assert not re.search(r"\ssrc=|<link|<iframe|@import", html)
    # Links are for the reader to follow, never loaded: only <a> carries an href.
    assert not re.search(r'<(?!a\s)[a-z]+[^>]*\shref="(?!#)', html)
    assert re.findall(r'<a href="([^"#]*)"', html) == ["/docs/figures.md"]
    assert not re.search(r"url\((?!#)", html)
    for name in CHART_NAMES:
        assert f'id="chart-{name}"' in html
    assert html.count("<svg") == len(CHART_NAMES)
    # The client-bound level is flagged in its row and in a banner.
    assert "client-bound" in html and "Client-bound levels:" in html
    assert "Client-bound levels:</strong> 1 user." in html


def test_levels_are_named_by_their_mode() -> None:
    """Closed-loop levels in users (one user, singular), open-loop ones in req/s, in the
    table and in the client-bound banner alike."""
    d = deployment("mixed")
    runs = (
        replace(d.runs[0], client_bound=True),
        replace(d.runs[1], mode="rate", level=2.5, client_bound=True),
        *d.runs[2:],
    )
    html = render_job_report(_report(replace(d, runs=runs)))
    assert '<td class="l">1 user</td>' in html
    assert '<td class="l">2.5 req/s</td>' in html
    assert f'<td class="l">{LEVELS[2]} users</td>' in html
    assert "Client-bound levels:</strong> 1 user, 2.5 req/s." in html
    assert "TTFT p95 \u2264 200 ms" in html


def test_comparison_page_shows_every_deployment_and_its_warnings() -> None:
    a, b = deployment("vllm-h200"), replace(deployment("sglang-h100x2"), job_id="6f1c")
    html = render_comparison(
        ComparisonReport(
            deployments=(a, b),
            workloads={a.job_id: "input 512", b.job_id: "input 2048"},
            generated_at=NOW,
            warnings=("these jobs ran different workloads",),
        )
    )
    assert "<script" not in html.lower()
    assert html.count("<svg") == len(COMPARISON_CHARTS)
    assert "Not like for like:" in html and "these jobs ran different workloads" in html
    assert "input 512" in html and "input 2048" in html
    assert html.count("vllm-h200") >= 1 + len(LEVELS)  # the card and each table row


def test_pages_say_when_the_endpoint_changed_mid_job_or_nothing_was_measured() -> None:
    changed = replace(
        deployment("resized"),
        setups=(
            "llama-8b, vllm 0.6 on H200-SXM \u00d7 1 GPU: 1 user, 4 users",
            "llama-8b, vllm <0.7> on H200-SXM \u00d7 2 GPUs: 16 users, 64 users",
        ),
    )
    page = render_job_report(_report(changed))
    assert "The endpoint changed during this job" in page
    assert "vllm 0.6 on H200-SXM \u00d7 1 GPU: 1 user, 4 users" in page
    assert "vllm &lt;0.7&gt; on H200-SXM \u00d7 2 GPUs" in page  # escaped like any user text
    assert "current settings" not in page
    unchanged = render_job_report(_report(deployment("steady")))
    assert "changed during this job" not in unchanged and "current settings" not in unchanged
    fresh = render_job_report(_report(replace(deployment("new"), runs=(), from_endpoint=True)))
    assert "the endpoint's current settings" in fresh

    html = render_comparison(
        ComparisonReport(
            deployments=(changed, replace(deployment("other"), job_id="6f1c")),
            workloads={changed.job_id: "input 512", "6f1c": "input 512"},
            generated_at=NOW,
        )
    )
    assert "The endpoint changed during this job (resized)" in html
    assert "mid-job: 2 deployments" in html


# --- Readability: what a person reads off the drawn chart -------------------------------

#: A sweep's rate levels as it chose them: seven, closely spaced, with six-figure values.
SWEEP_RATES = (21.0904, 29.0435, 35.8542, 42.1366, 48.0771, 53.3012, 55.9627)


def sweep_deployment(mode: str = "rate") -> Deployment:
    """One synchronous level (1 user) then the rates above, or only the rates (`rate`)."""
    runs = [
        replace(level(4 * (i + 1)), mode="rate", level=r, requests_per_s=r)
        for i, r in enumerate(SWEEP_RATES)
    ]
    if mode == "sweep":
        runs.insert(0, replace(level(1), requests_per_s=0.6))
    return replace(deployment("sweep"), runs=tuple(runs))


@dataclass(frozen=True)
class Label:
    """One text drawn in the SVG, with its box in SVG units (points) measured independently
    of the chart code: DejaVu Sans metrics at the text's own font size and anchor."""

    text: str
    x: float
    y: float
    box: tuple[float, float, float, float]  # x0, y0, x1, y1 (y grows downwards)
    at: float = math.nan  # a tick label's tick mark, along its axis

    def overlaps(self, other: Label) -> bool:
        a, b = self.box, other.box
        return a[0] < b[2] and b[0] < a[2] and a[1] < b[3] and b[1] < a[3]


_TEXT = TextToPath()


def label_of(element: ET.Element) -> Label:
    style = dict(
        part.strip().split(":", 1) for part in (element.get("style") or "").split(";") if part
    )
    size = float(style["font-size"].strip().removesuffix("px"))
    anchor = style.get("text-anchor", " start").strip()
    text = element.text or ""
    width, height, descent = _TEXT.get_text_width_height_descent(
        text, FontProperties(family="DejaVu Sans", size=size), ismath=False
    )
    x, y = float(element.get("x", "0")), float(element.get("y", "0"))
    x0 = {"start": x, "middle": x - width / 2, "end": x - width}[anchor]
    return Label(text, x, y, (x0, y - (height - descent), x0 + width, y + descent))


def tick_labels(root: ET.Element, axis: str) -> list[list[Label]]:
    """The labelled ticks of each axes in the SVG (`axis` "x" or "y"), in drawing order;
    an axes without labels on that axis (a twin's hidden x) is left out."""
    found = []
    for axes in root.iter(f"{SVG_NS}g"):
        if not (axes.get("id") or "").startswith("axes_"):
            continue
        labels = [
            replace(label_of(text), at=float(mark.get(axis, "nan")))
            for tick in axes.iter(f"{SVG_NS}g")
            if re.fullmatch(f"{axis}tick_\\d+", tick.get("id") or "")
            for text in tick.iter(f"{SVG_NS}text")
            for mark in list(tick.iter(f"{SVG_NS}use"))[:1]
        ]
        if labels:
            found.append(labels)
    return found


def tick_marks(root: ET.Element, axis: str) -> list[float]:
    """Positions of every tick mark on the first axes (labelled or not) along `axis`."""
    axes = next(g for g in root.iter(f"{SVG_NS}g") if (g.get("id") or "").startswith("axes_"))
    return [
        float(use.get(axis, "nan"))
        for tick in axes.iter(f"{SVG_NS}g")
        if re.fullmatch(f"{axis}tick_\\d+", tick.get("id") or "")
        for use in tick.iter(f"{SVG_NS}use")
    ]


def marks(root: ET.Element, gid: str) -> list[tuple[float, float]]:
    group = next(g for g in root.iter(f"{SVG_NS}g") if g.get("id") == gid)
    return [
        (float(u.get("x", "nan")), float(u.get("y", "nan"))) for u in group.iter(f"{SVG_NS}use")
    ]


def value_at(position: float, ticks: list[Label], log: bool = False) -> float:
    """Read a value off the axis as a person does: between two labelled ticks, linearly
    (or on a log scale)."""
    coordinate = [(t.at, float(t.text.replace(",", ""))) for t in ticks]
    (p0, v0), (p1, v1) = coordinate[0], coordinate[-1]
    share = (position - p0) / (p1 - p0)
    if log:
        return float(10 ** (math.log10(v0) + share * (math.log10(v1) - math.log10(v0))))
    return v0 + share * (v1 - v0)


def tick_x(ticks: list[Label], text: str) -> float:
    return next(t.at for t in ticks if t.text == text)


@pytest.mark.parametrize("mode", ["rate", "sweep"])
@pytest.mark.parametrize("name", ["throughput", "latency", "cost", "gpu-utilization"])
def test_load_tick_labels_never_overlap_and_read_as_rounded_levels(mode: str, name: str) -> None:
    """Seven closely spaced rates (21.0904, 29.0435, ...): the labels that are drawn are
    rounded (21.1, 29.0), no two boxes touch, and every level still has a tick mark."""
    root = parse(job_chart(name, sweep_deployment(mode), [SloLimit("ttft_ms", "p95", 200.0)]))
    for axis in ("x", "y"):
        for labels in tick_labels(root, axis):
            for i, a in enumerate(labels):
                for b in labels[i + 1 :]:
                    assert not a.overlaps(b), (name, axis, a, b)
    (xlabels,) = tick_labels(root, "x")
    texts = [t.text for t in xlabels]
    assert len(texts) >= 3, texts
    assert set(texts) <= {"0.6", "21.1", "29.0", "35.9", "42.1", "48.1", "53.3", "56.0"}, texts
    assert texts[-1] == "56.0"  # the highest level is always named
    levels = len(SWEEP_RATES) + (mode == "sweep")
    assert len(tick_marks(root, "x")) >= levels


def test_points_sit_at_their_level_and_value_on_the_axes() -> None:
    """Each throughput mark sits over its level's tick and at its tokens/s read off the
    y ticks: 100 n / (1 + n / 16) is 94.1, 320, 800 and 1,280 at 1, 4, 16 and 64 users."""
    root = parse(job_chart("throughput", deployment()))
    (xticks,), (yticks, _right) = tick_labels(root, "x"), tick_labels(root, "y")
    assert [t.text for t in xticks] == ["1", "4", "16", "64"]
    found = marks(root, "series-throughput-output")
    expected = {1: 94.1176, 4: 320.0, 16: 800.0, 64: 1280.0}
    for (x, y), (n, tokens) in zip(found, expected.items(), strict=True):
        assert x == pytest.approx(tick_x(xticks, str(n)), abs=0.01)
        assert value_at(y, yticks) == pytest.approx(tokens, rel=0.005)


def test_latency_and_gpu_marks_read_off_their_axes() -> None:
    """TTFT p95 is 50 + 5 n ms (55, 70, 130, 370 at 1, 4, 16, 64 users) on the latency
    chart's log axis; mean GPU utilisation 0.2 + n / 50 (22, 28, 52 and, capped, 100 %)."""
    root = parse(job_chart("latency", deployment()))
    (xticks,), (yticks,) = tick_labels(root, "x"), tick_labels(root, "y")
    found = marks(root, "series-latency-ttft-p95")
    for (x, y), (n, ttft) in zip(found, {1: 55, 4: 70, 16: 130, 64: 370}.items(), strict=True):
        assert x == pytest.approx(tick_x(xticks, str(n)), abs=0.01)
        assert value_at(y, yticks, log=True) == pytest.approx(ttft, rel=0.005)
    root = parse(job_chart("gpu-utilization", deployment()))
    (yticks,) = tick_labels(root, "y")
    found = marks(root, "series-gpu-utilization-util-mean")
    assert [value_at(y, yticks) for _, y in found] == pytest.approx([22, 28, 52, 100], rel=0.005)


def test_comparison_marks_are_each_deployments_figures() -> None:
    """Two deployments with the same throughput, one at twice the price: its cost marks sit
    at twice the other's ($20.66 against $10.33 a million at 1 user, $1.519 against $0.760
    at 64); on latency against throughput each mark is at its (tokens/s, TTFT p95)."""
    pair = [deployment("alpha"), deployment("beta", price=7.0)]
    root = parse(comparison_chart("cost", pair))
    (yticks,) = tick_labels(root, "y")
    for gid, first, last in (("0", 10.330, 0.7595), ("1", 20.660, 1.519)):
        found = marks(root, f"series-cost-all-{gid}")
        assert value_at(found[0][1], yticks, log=True) == pytest.approx(first, rel=0.005)
        assert value_at(found[-1][1], yticks, log=True) == pytest.approx(last, rel=0.005)
    root = parse(comparison_chart("latency-vs-throughput", pair))
    (xticks,), (yticks,) = tick_labels(root, "x"), tick_labels(root, "y")
    found = marks(root, "series-latency-vs-throughput-ttft-p95-1")
    expected = [(94.1176, 55.0), (320.0, 70.0), (800.0, 130.0), (1280.0, 370.0)]
    for (x, y), (tokens, ttft) in zip(found, expected, strict=True):
        assert value_at(x, xticks, log=True) == pytest.approx(tokens, rel=0.005)
        assert value_at(y, yticks, log=True) == pytest.approx(ttft, rel=0.005)


def test_cost_marks_read_off_the_log_axis() -> None:
    """USD 3.50 an hour over 94.1 and 1,280 tokens/s: $10.33 and $0.760 per million."""
    root = parse(job_chart("cost", deployment()))
    (yticks,) = tick_labels(root, "y")
    found = marks(root, "series-cost-all")
    assert value_at(found[0][1], yticks, log=True) == pytest.approx(10.330, rel=0.005)
    assert value_at(found[-1][1], yticks, log=True) == pytest.approx(0.7595, rel=0.005)


def test_point_labels_fit_without_colliding() -> None:
    """Latency against throughput names each point's level only where the name fits: the
    names drawn are rounded levels, none overlaps another or leaves the chart."""
    root = parse(job_chart("latency-vs-throughput", sweep_deployment("sweep")))
    notes = [
        label_of(text)
        for g in root.iter(f"{SVG_NS}g")
        if (g.get("id") or "").startswith("note-")
        for text in g.iter(f"{SVG_NS}text")
    ]
    assert len(notes) >= 4, [n.text for n in notes]
    allowed = {"1 user"} | {
        f"{r} req/s" for r in ("21.1", "29.0", "35.9", "42.1", "48.1", "53.3", "56.0")
    }
    assert {n.text for n in notes} <= allowed
    for i, a in enumerate(notes):
        for b in notes[i + 1 :]:
            assert not a.overlaps(b), (a, b)


def test_coinciding_series_are_both_visible_and_named() -> None:
    """Two deployments with the same figures: the second is drawn as hollow rings around the
    first's marks, and the legend says it is the same, instead of one line hiding another."""
    svg = comparison_chart("throughput", [deployment("alpha"), deployment("beta")])
    root = parse(svg)
    first, second = (
        marks(root, "series-throughput-output-0"),
        marks(root, "series-throughput-output-1"),
    )
    assert first == second  # the same places: hidden without a distinct drawing
    assert hollow(root, "series-throughput-output-1") and not hollow(
        root, "series-throughput-output-0"
    )
    assert "beta (same as alpha)" in svg
    gamma = deployment("gamma")
    faster = replace(
        gamma,
        runs=tuple(
            replace(r, output_tokens_per_s=2 * (r.output_tokens_per_s or 0)) for r in gamma.runs
        ),
    )
    apart = comparison_chart("throughput", [deployment("alpha"), faster])
    assert "(same as" not in apart
    assert not hollow(parse(apart), "series-throughput-output-1")


def hollow(root: ET.Element, gid: str) -> bool:
    """Whether every mark of the series is an unfilled ring."""
    group = next(g for g in root.iter(f"{SVG_NS}g") if g.get("id") == gid)
    styles = [u.get("style") or "" for u in group.iter(f"{SVG_NS}use")]
    return bool(styles) and all("fill-opacity: 0" in style for style in styles)
