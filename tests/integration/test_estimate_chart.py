"""`infercost estimate --traffic NAME --chart FILE`: the log's demand over time with each
deployment's fixed and autoscaled fleets, as a self-contained page, drawn in headless
Chromium. The log and the evidence are tests/integration/test_traffic_cli.py's (docs/figures.md's
worked example): needed 2, 2, 3, 2 replicas; fixed USD 288.00 a day, autoscaled USD 212.21."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import asyncpg
import pytest
from click.testing import CliRunner

from cli import main
from tests.conftest import ADEQUATE, Api, TeamClient, insert_finished_job
from tests.integration.test_reports import _DRAWN, _chromium_or_skip
from tests.integration.test_traffic_cli import MINUTES, MODEL, SLO
from tests.traffic_files import infercost_csv

pytestmark = pytest.mark.integration


async def drawn_in_chromium(path: Path) -> list[dict[str, Any]]:
    """What headless Chromium drew of the page's charts, failing on any error or request
    beyond the file itself."""
    from playwright.async_api import async_playwright

    errors: list[str] = []
    requests: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(_chromium_or_skip()), args=["--no-sandbox"]
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            await page.goto(path.as_uri(), wait_until="load")
            drawn: list[dict[str, Any]] = await page.evaluate(_DRAWN)
        finally:
            await browser.close()
    assert errors == [] and requests == [path.as_uri()], (errors, requests)
    return drawn


async def test_the_estimate_draws_the_fleets_over_the_log(
    api_server: Api, team: TeamClient, db: asyncpg.Connection, tmp_path: Path
) -> None:
    endpoint = await team.create_endpoint(model=MODEL, usd_per_hour=4.0, name="one-rps")
    await insert_finished_job(
        db, team.team_id, endpoint["id"],
        [(1, 0.5, 50.0, ADEQUATE, False), (2, 1.0, 100.0, ADEQUATE, False),
         (4, 2.0, 140.0, ADEQUATE, False)],
        slo=SLO, input_tokens=500, output_tokens=100,
    )  # fmt: skip
    times: list[float] = []
    for minute, count in enumerate(MINUTES[:-1]):
        times += [minute * 60 + 59.0 * k / count for k in range(count)]
    log = tmp_path / "peak.csv"
    log.write_bytes(infercost_csv([*times, 1140.0], [(500, 100)] * (len(times) + 1)))
    env = {"INFERCOST_URL": api_server.url, "INFERCOST_TOKEN": team.key}

    def cli(*args: str) -> Any:
        return CliRunner().invoke(main, list(args), env=env)

    imported = await asyncio.to_thread(
        cli, "traffic", "import", str(log), "--format", "infercost", "--name", "shop-peak"
    )
    assert imported.exit_code == 0, imported.output
    page = tmp_path / "fleets.html"
    answer = await asyncio.to_thread(
        cli, "estimate", "--model", MODEL, "--traffic", "shop-peak", "--slo-ttft-p95", "100",
        "--chart", str(page),
    )  # fmt: skip
    assert answer.exit_code == 0, answer.output
    assert f"saved {page}" in answer.output
    html = page.read_text()
    assert (
        "one-rps: fixed USD 288.00 a day, autoscaled USD 212.21 a day (300 s behind demand)" in html
    )
    # Capacity 1 request/s a replica: the y axis says so.
    assert "a replica: 1 at the SLO" in html
    [chart] = await drawn_in_chromium(page)
    assert chart["name"] == "fleets" and not chart["noData"], chart
    marks = {s["id"]: s["marks"] for s in chart["series"]}
    assert set(marks) == {
        "series-fleets-demand", "series-fleets-autoscaled", "series-fleets-fixed"
    }  # fmt: skip
    assert all(n > 0 for n in marks.values()), marks

    flat = await asyncio.to_thread(
        cli, "estimate", "--model", MODEL, "--rps", "2", "--chart", str(page)
    )
    assert flat.exit_code == 2 and "give --traffic" in flat.output
