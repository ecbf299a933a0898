"""Reports end to end: two real jobs (a GPU-like simulator with DCGM metrics, and the fixed
simulator without any) run by the worker; their report, charts and comparison fetched over
HTTP, then opened in headless Chromium with the API's own headers (its CSP included) to
check that the charts are drawn with data, that nothing else is fetched and that the
console stays clean. A sweep (seven levels it chose itself, closely spaced rates) and a rate
job at rates like 12.9427 req/s are opened too, to check what a reader sees: no two tick
labels overlap on screen, and the compare page's table fits a 1280 px window with its cost
column in view. Screenshots go to test-artifacts/report.png, compare.png,
sweep-report.png and rate-report.png.

Chromium is Debian's (/usr/bin/chromium, or INFERCOST_CHROMIUM). Without it the browser
test is skipped, unless INFERCOST_REQUIRE_CHROMIUM=1 (set by .ci/run) makes it fail.
"""

from __future__ import annotations

import os
import time
import uuid
import xml.etree.ElementTree as ET
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import asyncpg
import httpx
import pytest

from infercost.jobs.deployments import DEPLOYMENT_OF_ENDPOINT_SQL
from infercost.reports.charts import CHART_NAMES, COMPARISON_CHARTS
from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import ARTIFACTS, Api, TeamClient, insert_finished_run

pytestmark = pytest.mark.integration

CHROMIUM = Path(os.environ.get("INFERCOST_CHROMIUM", "/usr/bin/chromium"))
LEVELS = [1, 4, 8]
WORKLOAD = {"input_tokens": {"mean": 64}, "output_tokens": {"mean": 16}}


#: Open-loop rates with six significant figures, as a user may paste them.
RATES = [10.4518, 12.9427, 15.3316, 17.8843]


@dataclass
class Jobs:
    """Finished jobs of one team: `gpu` on the GPU simulator, `plain` on the fixed one, and
    on the GPU simulator a `sweep` (levels of its own choosing) and a `rate` job."""

    team: TeamClient
    gpu: dict[str, Any]
    plain: dict[str, Any]
    sweep: dict[str, Any]
    rate: dict[str, Any]


@pytest.fixture(scope="module")
def gpu_sim() -> Iterator[SimProcess]:
    """An 8B model on a modelled H200, publishing vLLM and DCGM metrics."""
    config = SimConfig(port=0, mode="gpu", gpu="H200-SXM", params_b=8, model="m8b", max_batch=64)
    with sim_process(config) as sim:
        yield sim


async def _run(
    team: TeamClient, endpoint: dict[str, Any], load: dict[str, Any] | None = None
) -> dict[str, Any]:
    plan = {
        "mode": "concurrency",
        "levels": LEVELS,
        "requests_per_level": 16,
        "warmup_requests": 2,
        "telemetry_interval_s": 0.25,
    }
    response = await team.submit(
        {
            "endpoint_id": endpoint["id"],
            "workload": WORKLOAD,
            "load": load or plan,
            "slo": {"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}},
        }
    )
    assert response.status_code == 202, response.text
    job = await team.wait_job(response.json()["id"], timeout=300)
    # A sweep on a loaded box may stop on client-bound levels; its report is still drawn.
    assert job["status"] == "succeeded" or job.get("sweep"), job["error"]
    return job


@pytest.fixture(scope="module")
async def jobs(
    api_server: Api, worker: object, gpu_sim: SimProcess, sim: SimProcess
) -> AsyncIterator[Jobs]:
    """Run once for the module: the jobs take seconds, and every test only reads them."""
    admin = {"Authorization": f"Bearer {api_server.admin_token}"}
    async with httpx.AsyncClient(base_url=api_server.url, headers=admin, timeout=30) as http:
        team = (
            await http.post("/v1/teams", json={"name": f"reports-{uuid.uuid4().hex[:8]}"})
        ).json()
        key = (await http.post(f"/v1/teams/{team['id']}/keys", json={"name": "reports"})).json()
    headers = {"Authorization": f"Bearer {key['key']}"}
    async with httpx.AsyncClient(base_url=api_server.url, headers=headers, timeout=30) as http:
        client = TeamClient(http=http, team_id=team["id"], key=key["key"])
        gpu_endpoint = await client.create_endpoint(
            name="vllm-h200-sim",
            base_url=gpu_sim.openai_base_url,
            model="m8b",
            engine="vllm",
            hardware="H200-SXM",
            usd_per_hour=3.5,
            metrics_urls=[gpu_sim.base_url + "/metrics"],
        )
        plain_endpoint = await client.create_endpoint(
            name="fixed-sim", base_url=sim.openai_base_url, usd_per_hour=2.0
        )
        gpu = await _run(client, gpu_endpoint)
        plain = await _run(client, plain_endpoint)
        sweep = await _run(
            client,
            gpu_endpoint,
            {"mode": "sweep", "rate_levels": 5, "max_concurrency": 16, "duration_s": 5.0},
        )
        rate = await _run(
            client,
            gpu_endpoint,
            {"mode": "rate", "levels": RATES, "requests_per_level": 16, "warmup_requests": 2},
        )
        yield Jobs(client, gpu, plain, sweep, rate)


def _svg_series(svg: str, chart: str) -> dict[str, int]:
    root = ET.fromstring(svg.encode())
    ns = "{http://www.w3.org/2000/svg}"
    return {
        g.get("id", ""): len(g.findall(f".//{ns}use"))
        for g in root.iter(f"{ns}g")
        if g.get("id", "").startswith(f"series-{chart}-")
    }


async def test_report_charts_and_comparison_over_http(jobs: Jobs, db: asyncpg.Connection) -> None:
    http = jobs.team.http
    gpu_id, plain_id = jobs.gpu["id"], jobs.plain["id"]

    started = time.perf_counter()
    response = await http.get(f"/v1/jobs/{gpu_id}/report")
    print(f"report of {len(LEVELS)} levels served in {time.perf_counter() - started:.2f} s")
    assert response.status_code == 200, response.text
    assert response.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in response.headers["content-security-policy"]
    html = response.text
    assert "<script" not in html.lower()
    assert "vllm-h200-sim" in html and "m8b" in html and "H200-SXM" in html
    assert "closed loop at 1, 4, 8 users" in html and "TTFT p95 \u2264 500 ms" in html
    assert html.count("<svg") == len(CHART_NAMES)
    assert "No data:" not in html  # GPU telemetry and a price: every chart has data

    # Every chart on its own, as a portal embeds it.
    for name in CHART_NAMES:
        chart = await http.get(f"/v1/jobs/{gpu_id}/charts/{name}.svg")
        assert chart.status_code == 200, (name, chart.text)
        assert chart.headers["content-type"].startswith("image/svg+xml")
        found = _svg_series(chart.text, name)
        assert found, name
        if name == "ttft-distribution":
            # Binned in SQL over the measured, successful samples: one series per level.
            assert len(found) == len(LEVELS)
            assert all(n > 0 for n in found.values())
        else:
            assert max(found.values()) == len(LEVELS), (name, found)

    missing = await http.get(f"/v1/jobs/{gpu_id}/charts/pie.svg")
    assert missing.status_code == 404
    assert missing.headers["content-type"].startswith("application/problem+json")
    assert "throughput.svg" in missing.json()["detail"]
    assert missing.json()["valid_names"] == [f"{n}.svg" for n in CHART_NAMES]

    # No GPU telemetry on the fixed simulator: the chart says why instead of an empty axis.
    gpu_chart = await http.get(f"/v1/jobs/{plain_id}/charts/gpu-utilization.svg")
    assert _svg_series(gpu_chart.text, "gpu-utilization") == {}
    assert "No data:" in gpu_chart.text and "metrics_urls" in gpu_chart.text
    plain = (await http.get(f"/v1/jobs/{plain_id}/report")).text
    assert "fixed-sim" in plain and plain.count("No data:") == 1

    compare = await http.get("/v1/reports/compare", params={"job_id": [gpu_id, plain_id]})
    assert compare.status_code == 200, compare.text
    assert "default-src 'none'" in compare.headers["content-security-policy"]
    assert compare.text.count("<svg") == len(COMPARISON_CHARTS)
    assert "Not like for like" not in compare.text  # the same workload on both

    # A job with another workload fingerprint: the comparison warns.
    assert jobs.gpu["runs"][0]["workload_fingerprint"] != "ffffffffffffffff"
    other_job, _ = await insert_finished_run(
        db,
        jobs.team.team_id,
        jobs.gpu["endpoint_id"],
        output_tokens_per_s=500.0,
        workload_fingerprint="ffffffffffffffff",
    )
    mixed = await http.get("/v1/reports/compare", params={"job_id": [gpu_id, other_job]})
    assert mixed.status_code == 200, mixed.text
    assert "Not like for like" in mixed.text and "ffffffffffffffff" in mixed.text

    schema = (await http.get("/schema/openapi.json")).json()
    assert {
        "/v1/jobs/{job_id}/report",
        "/v1/jobs/{job_id}/charts/{file_name}",
        "/v1/reports/compare",
    } <= set(schema["paths"])

    for bad in ([gpu_id], [gpu_id, gpu_id]):
        refused = await http.get("/v1/reports/compare", params={"job_id": bad})
        assert refused.status_code == 422, refused.text
        assert refused.json()["errors"][0]["field"] == "job_id"


async def test_reports_are_team_scoped(jobs: Jobs, new_team: Any) -> None:
    """Another team's key gets 404 for the report, a chart and a comparison, and no name."""
    other: TeamClient = await new_team()
    gpu_id, plain_id = jobs.gpu["id"], jobs.plain["id"]
    for path in (f"/v1/jobs/{gpu_id}/report", f"/v1/jobs/{gpu_id}/charts/latency.svg"):
        response = await other.http.get(path)
        assert response.status_code == 404, (path, response.text)
        assert "vllm-h200-sim" not in response.text
    response = await other.http.get("/v1/reports/compare", params={"job_id": [gpu_id, plain_id]})
    assert response.status_code == 404


async def test_reports_show_the_deployment_measured_not_the_endpoint_now(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    """A report (and a comparison card) describes what the runs measured: re-sizing or
    upgrading the endpoint afterwards changes nothing there but its newer jobs."""
    endpoint = await team.create_endpoint(
        name="resized-later", model="m8b", engine="vllm", engine_version="0.6"
    )
    # As the worker does: the run records the endpoint's engine_version when it starts.
    before, _ = await insert_finished_run(
        db, team.team_id, endpoint["id"], engine_version="0.6", output_tokens_per_s=100.0
    )
    patched = await team.http.patch(
        f"/v1/endpoints/{endpoint['id']}", json={"gpu_count": 2, "engine_version": "0.7"}
    )
    assert patched.status_code == 200, patched.text

    html = (await team.http.get(f"/v1/jobs/{before}/report")).text
    assert "resized-later" in html  # the endpoint's name is still the endpoint's
    assert "<dd>vllm 0.6</dd>" in html and "0.7" not in html
    assert "H200-SXM &times; 1 GPU</dd>" in html
    assert "changed during this job" not in html and "current settings" not in html

    # A job measured after the change; side by side, each card shows its own deployment.
    after, _ = await insert_finished_run(
        db, team.team_id, endpoint["id"], engine_version="0.7", output_tokens_per_s=150.0
    )
    compare = await team.http.get("/v1/reports/compare", params={"job_id": [before, after]})
    assert compare.status_code == 200, compare.text
    assert compare.text.count("<dd>vllm 0.6</dd>") == 1
    assert compare.text.count("<dd>vllm 0.7</dd>") == 1
    assert "H200-SXM &times; 1</dd>" in compare.text and "H200-SXM &times; 2</dd>" in compare.text

    # The endpoint changed mid-job: a second level of the first job, measured on 2 GPUs.
    await db.execute(
        "INSERT INTO runs (id, team_id, job_id, endpoint_id, level_index, created_at,"
        " deployment_id, engine_version, level, mode, status, requests_total,"
        " requests_succeeded, requests_failed)"
        " VALUES (gen_random_uuid(), $1, $2, $3, 1, now(), $4, '0.7', 4, 'concurrency',"
        " 'succeeded', 0, 0, 0)",
        uuid.UUID(team.team_id),
        uuid.UUID(before),
        uuid.UUID(endpoint["id"]),
        await db.fetchval(DEPLOYMENT_OF_ENDPOINT_SQL, uuid.UUID(endpoint["id"])),
    )
    mixed = (await team.http.get(f"/v1/jobs/{before}/report")).text
    assert "The endpoint changed during this job" in mixed
    assert "m8b, vllm 0.6 on H200-SXM \u00d7 1 GPU: 1 user" in mixed
    assert "m8b, vllm 0.7 on H200-SXM \u00d7 2 GPUs: 4 users" in mixed
    assert "<dd>vllm 0.6</dd>" in mixed  # the facts are the first level's

    # No level yet: the endpoint as it is now, and said so.
    empty = await db.fetchval(
        "INSERT INTO jobs (id, team_id, endpoint_id, status, workload, load, progress_done,"
        " progress_total, created_at, finished_at, error)"
        " VALUES (gen_random_uuid(), $1, $2, 'failed', '{}', '{\"mode\": \"concurrency\"}',"
        " 0, 0, now(), now(), 'stopped before its first level') RETURNING id",
        uuid.UUID(team.team_id),
        uuid.UUID(endpoint["id"]),
    )
    unmeasured = await team.http.get(f"/v1/jobs/{empty}/report")
    assert unmeasured.status_code == 200, unmeasured.text
    assert "hardware are the endpoint's current settings" in unmeasured.text
    assert "<dd>vllm 0.7</dd>" in unmeasured.text
    assert "H200-SXM &times; 2 GPUs</dd>" in unmeasured.text


def _chromium_or_skip() -> Path:
    if CHROMIUM.exists():
        return CHROMIUM
    reason = f"Chromium is not installed at {CHROMIUM} (Debian: apt-get install chromium)"
    if os.environ.get("INFERCOST_REQUIRE_CHROMIUM") == "1":
        pytest.fail(reason + "; INFERCOST_REQUIRE_CHROMIUM=1 says it must be")
    pytest.skip(reason)


# Inside the page: each chart's figure, its series groups, and how many of their marks
# have a real size on screen (a mark drawn at zero size or off the chart does not count).
_DRAWN = """
() => [...document.querySelectorAll('figure.chart')].map(fig => {
  const svg = fig.querySelector('svg');
  const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
  const series = [...fig.querySelectorAll('g[id^="series-"]')].map(g => {
    const marks = [...g.querySelectorAll('use, path')].filter(m => {
      const r = m.getBoundingClientRect();
      return r.width > 0 || r.height > 0;
    });
    return {id: g.id, marks: marks.length};
  });
  return {name: fig.dataset.chart, width: box.width, height: box.height, series,
          noData: !!fig.querySelector('g[id^="no-data-"]')};
})
"""


# What a reader sees: tick labels whose boxes overlap on screen (per axes and axis, as the
# browser laid the text out), and where each table's last (cost) heading sits in its box.
_LAYOUT = """
() => {
  const overlaps = [];
  for (const fig of document.querySelectorAll('figure.chart')) {
    for (const axes of fig.querySelectorAll('g[id*="axes_"]')) {
      for (const axis of ['x', 'y']) {
        const boxes = [...axes.querySelectorAll(`g[id*="${axis}tick_"] text`)]
          .map(t => [t.textContent, t.getBoundingClientRect()]);
        boxes.forEach(([ta, a], i) => boxes.slice(i + 1).forEach(([tb, b]) => {
          if (a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom)
            overlaps.push(`${fig.dataset.chart} ${axis}: ${ta} / ${tb}`);
        }));
      }
    }
  }
  const tables = [...document.querySelectorAll('.table-wrap')].map(w => {
    const box = w.getBoundingClientRect();
    const last = w.querySelector('thead th:last-child');
    const cost = last.getBoundingClientRect();
    return {left: box.left, right: box.right, costLeft: cost.left, costRight: cost.right,
            heading: last.textContent.trim()};
  });
  return {overlaps, tables, pageWidth: document.documentElement.scrollWidth};
}
"""


async def _open(
    api: Api, key: str, path: str, screenshot: Path, layout: list[dict[str, Any]] | None = None
) -> list[dict[str, Any]]:
    """Load `path` from the API in headless Chromium, as a user with the key would; fail on
    any console error, page error, failed or extra request. Returns what _DRAWN found, and
    appends what _LAYOUT found to `layout` when given."""
    from playwright.async_api import ConsoleMessage, async_playwright

    errors: list[str] = []
    requests: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(_chromium_or_skip()), args=["--no-sandbox"]
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.set_extra_http_headers({"Authorization": f"Bearer {key}"})

            def console(message: ConsoleMessage) -> None:
                if message.type == "error":
                    errors.append(f"console error: {message.text}")

            page.on("console", console)
            page.on("pageerror", lambda e: errors.append(f"page error: {e}"))
            page.on("requestfailed", lambda r: errors.append(f"request failed: {r.url}"))
            page.on("request", lambda r: requests.append(r.url))
            started = time.perf_counter()
            response = await page.goto(api.url + path, wait_until="load")
            assert response is not None and response.status == 200
            drawn: list[dict[str, Any]] = await page.evaluate(_DRAWN)
            if layout is not None:
                layout.append(await page.evaluate(_LAYOUT))
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(screenshot), full_page=True)
            print(f"{path}: loaded and drawn in {time.perf_counter() - started:.2f} s")
        finally:
            await browser.close()
    assert errors == [], errors
    # The page itself and nothing else: no font, style, script or image was fetched.
    assert requests == [api.url + path], requests
    return drawn


async def test_report_and_comparison_render_in_headless_chromium(
    jobs: Jobs, api_server: Api
) -> None:
    _chromium_or_skip()
    gpu_id, plain_id = jobs.gpu["id"], jobs.plain["id"]

    drawn = await _open(api_server, jobs.team.key, f"/v1/jobs/{gpu_id}/report",
                        ARTIFACTS / "report.png")  # fmt: skip
    assert [c["name"] for c in drawn] == list(CHART_NAMES)
    for chart in drawn:
        assert chart["width"] > 300 and chart["height"] > 150, chart
        assert not chart["noData"], chart
        assert chart["series"] and all(s["marks"] > 0 for s in chart["series"]), chart
    by_name = {c["name"]: c for c in drawn}
    assert len(by_name["ttft-distribution"]["series"]) == len(LEVELS)

    query = f"/v1/reports/compare?job_id={gpu_id}&job_id={plain_id}"
    drawn = await _open(api_server, jobs.team.key, query, ARTIFACTS / "compare.png")
    assert [c["name"] for c in drawn] == list(COMPARISON_CHARTS)
    for chart in drawn:
        ids = {s["id"] for s in chart["series"]}
        # One series per deployment (two per deployment on the latency charts), all drawn.
        assert len(ids) == (4 if chart["name"].startswith("latency") else 2), chart
        assert all(s["marks"] > 0 for s in chart["series"]), chart
    assert (ARTIFACTS / "report.png").stat().st_size > 10_000
    assert (ARTIFACTS / "compare.png").stat().st_size > 10_000


async def test_sweep_rate_gpu_and_compare_pages_read_cleanly_at_1280_px(
    jobs: Jobs, api_server: Api
) -> None:
    """A sweep (levels it chose: rates with six significant figures, closely spaced), a rate
    job at 12.9427 req/s and friends, the GPU job and a comparison, in a 1280 px window: no
    two tick labels overlap on screen, levels read rounded, and every table (the
    comparison's widest) fits its box with the cost column in view."""
    _chromium_or_skip()
    pages = {
        "sweep-report.png": f"/v1/jobs/{jobs.sweep['id']}/report",
        "rate-report.png": f"/v1/jobs/{jobs.rate['id']}/report",
        "gpu-report.png": f"/v1/jobs/{jobs.gpu['id']}/report",
        "compare-1280.png": (
            f"/v1/reports/compare?job_id={jobs.gpu['id']}&job_id={jobs.rate['id']}"
            f"&job_id={jobs.sweep['id']}"
        ),
    }
    layout: list[dict[str, Any]] = []
    for name, path in pages.items():
        drawn = await _open(api_server, jobs.team.key, path, ARTIFACTS / name, layout)
        assert drawn and all(c["width"] > 300 for c in drawn), (name, drawn)
    for name, found in zip(pages, layout, strict=True):
        assert found["overlaps"] == [], (name, found["overlaps"])
        assert found["pageWidth"] <= 1280, (name, found)
        assert found["tables"], name
        for table in found["tables"]:
            assert table["left"] - 1 <= table["costLeft"] < table["costRight"] <= table["right"] + 1
            assert table["heading"].startswith(("Cost", "Output")), table

    rate = (await jobs.team.http.get(pages["rate-report.png"])).text
    assert '<td class="l">12.9 req/s</td>' in rate and "12.9427 req/s" not in rate
    sweep_levels = [run["level"] for run in jobs.sweep["runs"] if run["mode"] == "rate"]
    assert sweep_levels, jobs.sweep["runs"]
