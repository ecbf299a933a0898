"""The report page marks inadequate levels (a badge in the table, a banner naming each with
its reasons) and its capacity line says it rests on adequate levels, with its interval."""

from __future__ import annotations

import re
import uuid
from datetime import UTC, datetime

from api.domain.reports.services import capacity_text
from api.domain.runs.schemas import AdequacyReason, CapacityAtSlo, SkippedLevel
from infercost.reports.data import Deployment, JobReport, LevelFigures
from infercost.reports.render import render_job_report

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)


def page(runs: tuple[LevelFigures, ...], capacity: str | None = None) -> str:
    deployment = Deployment(
        label="llama",
        job_id="5f1c0000-0000-0000-0000-000000000002",
        endpoint_name="llama",
        model="llama-8b",
        engine="vllm",
        hardware="H200-SXM",
        gpu_count=1,
        status="succeeded",
        runs=runs,
    )
    report = JobReport(
        deployment=deployment,
        workload="input 256 tokens; output 64 tokens",
        load_plan="closed loop at 1, 64 users",
        slo=(),
        created_at=NOW,
        generated_at=NOW,
        capacity=capacity,
    )
    return render_job_report(report)


def text(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def test_inadequate_levels_are_marked_and_named() -> None:
    fine = LevelFigures(level=1.0, mode="concurrency", status="succeeded")
    thin = LevelFigures(
        level=64.0, mode="concurrency", status="succeeded", inadequate=("few_requests", "short")
    )
    html = page((fine, thin))
    banner = html[html.index("<strong>Inadequate levels:</strong>") :]
    banner = text(banner[: banner.index("</div>")])
    assert "Inadequate levels: 64 users (few_requests, short)." in banner
    assert "1 user" not in banner
    # One badge, on the 64-user row only.
    assert html.count(">inadequate</span>") == 1
    row = html[html.index('<td class="l">64 users') :]
    assert ">inadequate</span>" in row[: row.index("</tr>")]
    # A job whose levels are all adequate shows neither.
    clean = page((fine,))
    assert "Inadequate levels" not in clean and ">inadequate</span>" not in clean


def test_capacity_line_states_its_interval_and_what_it_left_out() -> None:
    skipped = SkippedLevel(
        run_id=uuid.uuid4(),
        level=8,
        mode="concurrency",
        reasons=[AdequacyReason("client_bound", "queue delay p99 above 10 ms")],
    )
    capacity = CapacityAtSlo(
        requests_per_s=12.0,
        output_tokens_per_s=1200.0,
        lower_bound=False,
        requests_per_s_low=8.0,
        requests_per_s_high=16.0,
        skipped=[skipped],
    )
    line = capacity_text(capacity)
    assert line == (
        "12.0 requests/s (1,200 output tokens/s), between 8.00 and 16.0 requests/s (the bracketing "
        "levels); from adequate levels only (1 left out as inadequate or client-bound)"
    )
    assert line in text(page((), capacity=line))
    none_left = CapacityAtSlo(reason="no adequate finished level met the SLO", skipped=[skipped])
    assert capacity_text(none_left) == "no adequate finished level met the SLO"
