"""The status board (GET /v1/status/page) opened in headless Chromium with the API's own
headers (its CSP included), in a 1280 px window: one row per watched deployment, workload and
level with drawn sparklines, nothing fetched but the page, user text escaped, sort links that
reorder the rows and links to each job's report (absolute, so a saved copy works); a watched
endpoint without a run says so. It reads as the other pages do: deployments counted as
deployments, levels as "1 user", short dates on one line, no word broken, no sideways
scrolling. Screenshot: test-artifacts/status.png."""

from __future__ import annotations

import json
import math
import uuid
from datetime import timedelta
from typing import Any

import asyncpg
import pytest

from tests.api.test_status import run
from tests.conftest import ARTIFACTS, Api, TeamClient
from tests.integration.test_reports import _chromium_or_skip

pytestmark = pytest.mark.integration

# Inside the page: each row's endpoint, its sparklines' drawn lines and the header links.
_BOARD = r"""
() => ({
  rows: [...document.querySelectorAll('#board tbody tr')].map(tr => ({
    name: tr.querySelector('td strong').textContent,
    level: tr.querySelector('.level')?.textContent ?? null,
    sparks: [...tr.querySelectorAll('.spark svg')].map(svg => {
      const box = svg.getBoundingClientRect();
      const lines = [...svg.querySelectorAll('polyline')].filter(p => {
        const r = p.getBoundingClientRect();
        return r.width > 0;
      });
      return {width: box.width, height: box.height, lines: lines.length};
    }),
    report: tr.querySelector('td:last-child a')?.getAttribute('href') ?? null,
    verdict: tr.querySelector('.badge').textContent,
    latest: tr.querySelector('td:last-child').textContent,
  })),
  sortTtft: [...document.querySelectorAll('thead a')]
    .find(a => a.textContent.startsWith('TTFT')).getAttribute('href'),
  summary: document.querySelector('p.sub').textContent.replace(/\s+/g, ' '),
  levels: [...document.querySelectorAll('#board .level')].map(e => e.textContent),
  // Times that wrap onto a second line (each is one <time> element).
  wrappedTimes: [...document.querySelectorAll('#board time')]
    .filter(t => new Set([...t.getClientRects()].map(r => Math.round(r.top))).size > 1)
    .map(t => t.textContent),
  // Words laid out on more than one line: each run of letters and digits of every text in
  // the table, measured with a Range (a break after - . / _ : is between words).
  brokenWords: (() => {
    const broken = [];
    const walker = document.createTreeWalker(document.querySelector('#board'),
                                             NodeFilter.SHOW_TEXT);
    for (let node = walker.nextNode(); node; node = walker.nextNode()) {
      for (const m of node.textContent.matchAll(/[^\s\-./_:()]+/g)) {
        const range = document.createRange();
        range.setStart(node, m.index);
        range.setEnd(node, m.index + m[0].length);
        const tops = new Set([...range.getClientRects()].map(r => Math.round(r.top)));
        if (tops.size > 1) broken.push(m[0]);
      }
    }
    return broken;
  })(),
  scripts: document.querySelectorAll('script').length,
  width: document.documentElement.scrollWidth,
  tableFits: (() => { const w = document.querySelector('.table-wrap');
                      return w.scrollWidth <= w.clientWidth; })(),
})
"""


async def test_status_board_in_headless_chromium(
    api_server: Api, team: TeamClient, db: asyncpg.Connection
) -> None:
    _chromium_or_skip()
    from playwright.async_api import async_playwright

    names = ["llama-70b.h200x8", "mistral-7b.lab", "qwen-7b.l4"]
    # The second endpoint's model is user text that would be a script if not escaped.
    models = ["llama-3.1-70b", "<script>alert(1)</script>", "qwen2.5-7b"]
    endpoints = [
        await team.create_endpoint(name=name, model=model, gpu_count=gpus)
        for name, model, gpus in zip(names, models, (8, 1, 1), strict=True)
    ]
    jobs: dict[str, str] = {}
    for index, endpoint in enumerate(endpoints):
        schedule = await db.fetchval(
            "INSERT INTO schedules (id, team_id, endpoint_id, template, interval_s, timezone,"
            " created_at) VALUES (gen_random_uuid(), $1, $2, '{}', 10800, 'UTC', now())"
            " RETURNING id",
            uuid.UUID(team.team_id),
            uuid.UUID(endpoint["id"]),
        )
        # Every 3 h for 72 h (8 a day), TTFT drifting up and down around its own level.
        for k in range(24):
            base = (index + 1) * 120.0
            job, _ = await run(
                db,
                team,
                endpoint,
                ago=timedelta(hours=3 * k + 1),
                ttft=base * (1 + 0.25 * math.sin(k / 3)),
                goodput=800.0 - 10 * k,
                schedule=schedule,
                change_verdict="regression" if (index, k) == (0, 0) else None,
                stats=json.dumps({"per_user_tokens_per_s": {"p50": 90.0 - k - 20 * index}}),
            )
            if k == 0:
                jobs[endpoint["name"]] = job
    # The first deployment is also measured at 4 users: a second row, the same deployment.
    for k in range(3):
        await run(db, team, endpoints[0], ago=timedelta(hours=3 * k + 2), ttft=150.0, level=4.0)

    # A fourth watched endpoint, its schedule just created: no run yet, a row that says so.
    # Created through the API, so its job template is one a scheduler can run: it falls due
    # within 3 h, and any tick of this database may handle it (the schedule tests tick at
    # 2030; a template of {} there stopped their ticks with a KeyError).
    fresh = await team.create_endpoint(name="zephyr-7b.new", model="zephyr-7b")
    job_template = {
        "endpoint_id": fresh["id"],
        "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
        "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 3},
    }
    created = await team.http.post(
        "/v1/schedules", json={"job": job_template, "when": {"interval_s": 10800}}
    )
    assert created.status_code == 201, created.text

    errors: list[str] = []
    requests: list[str] = []
    async with async_playwright() as playwright:
        browser = await playwright.chromium.launch(
            executable_path=str(_chromium_or_skip()), args=["--no-sandbox"]
        )
        try:
            page = await browser.new_page(viewport={"width": 1280, "height": 900})
            await page.set_extra_http_headers({"Authorization": f"Bearer {team.key}"})
            page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
            page.on("pageerror", lambda e: errors.append(str(e)))
            page.on("request", lambda r: requests.append(r.url))
            path = "/v1/status/page?window=72h&sort=endpoint"
            response = await page.goto(api_server.url + path, wait_until="load")
            assert response is not None and response.status == 200
            assert "default-src 'none'" in response.headers["content-security-policy"]
            board: dict[str, Any] = await page.evaluate(_BOARD)
            ARTIFACTS.mkdir(exist_ok=True)
            await page.screenshot(path=str(ARTIFACTS / "status.png"), full_page=True)
            # The sort link is a plain link: following it reorders by TTFT, worst first
            # on the second click.
            await page.goto(board["sortTtft"], wait_until="load")
            by_ttft: dict[str, Any] = await page.evaluate(_BOARD)
        finally:
            await browser.close()

    assert errors == [], errors
    # The pages themselves and nothing else: no font, style, script or image was fetched.
    assert all("/v1/status/page" in url for url in requests), requests
    assert board["scripts"] == 0  # the model named <script> is text, not a script
    assert sorted(r["name"] for r in board["rows"]) == sorted([*names, names[0], "zephyr-7b.new"])
    # Four deployments (one of them on two rows), counted as deployments, levels in words.
    assert "4 deployments watched by a schedule, 5 rows" in board["summary"], board["summary"]
    assert sorted(board["levels"]) == ["1 user", "1 user", "1 user", "4 users"]
    assert board["wrappedTimes"] == [] and board["brokenWords"] == [], board
    waiting = next(r for r in board["rows"] if r["name"] == "zephyr-7b.new")
    # No charts and no report link for it: the reason, and when its first run is due.
    assert waiting["verdict"] == "no run yet" and waiting["sparks"] == [], waiting
    assert waiting["report"] is None and "next" in waiting["latest"], waiting
    for row in (
        r for r in board["rows"] if r["name"] != "zephyr-7b.new" and r["level"] != "4 users"
    ):
        # Five figures, each a sparkline with one unbroken drawn line over 24 slices.
        assert len(row["sparks"]) == 5, row
        for spark in row["sparks"]:
            assert spark["width"] > 80 and spark["height"] > 20, row
        assert all(s["lines"] == 1 for s in row["sparks"]), row
        # Absolute: it opens from a saved copy too (through sign-in without a session).
        assert row["report"] == f"{api_server.url}/v1/jobs/{jobs[row['name']]}/report"
    verdicts = {r["name"]: r["verdict"] for r in board["rows"] if r["level"] != "4 users"}
    assert verdicts[names[0]] == "regression" and verdicts[names[2]] == "none"
    # Medians: 120, 240 and 360 ms times the same drift, so TTFT order is the creation order.
    assert "sort=ttft_p50_ms" in board["sortTtft"]
    # (The row without figures sorts last, nulls last whichever the direction; the first
    # deployment's 4-user row, at 150 ms, between the first two.)
    order = [names[0], names[0], names[1], names[2], "zephyr-7b.new"]
    assert [r["name"] for r in by_ttft["rows"]] == order
    # Every column in view at 1280 px: the table fits the window, nothing scrolled away.
    assert board["width"] <= 1280
    assert board["tableFits"], board
