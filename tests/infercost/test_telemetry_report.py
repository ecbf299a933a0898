"""The report page's engine telemetry section: the figures per level, the queueing note as a
banner, the server's output rate beside the client's, and a reason when nothing was read."""

from __future__ import annotations

import re
from datetime import UTC, datetime

from infercost.reports.data import Deployment, JobReport, LevelFigures
from infercost.reports.render import render_job_report

NOW = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
QUEUE_NOTE = (
    "requests queued in front of the engine: up to 8 waited for a free slot (mean 3.5, "
    "beside up to 8 running); latency includes that wait, so the engine was saturated at "
    "this load"
)


def level(n: int, **telemetry: object) -> LevelFigures:
    return LevelFigures(
        level=float(n),
        mode="concurrency",
        status="succeeded",
        output_tokens_per_s=10.0 * n,
        **telemetry,  # type: ignore[arg-type]
    )


def page(runs: tuple[LevelFigures, ...], *, has_metrics_urls: bool = True) -> str:
    deployment = Deployment(
        label="llama",
        job_id="5f1c0000-0000-0000-0000-000000000001",
        endpoint_name="llama",
        model="qwen-0.5b",
        engine="llamacpp",
        hardware=None,
        gpu_count=1,
        status="succeeded",
        runs=runs,
        has_metrics_urls=has_metrics_urls,
    )
    report = JobReport(
        deployment=deployment,
        workload="input 64 tokens; output 16 tokens",
        load_plan="closed loop at 1, 16 users",
        slo=(),
        created_at=NOW,
        generated_at=NOW,
    )
    return render_job_report(report)


def section(html: str) -> str:
    start = html.index('<h2 id="telemetry">')
    return html[start : html.index("<h2>Charts</h2>", start)]


def cells(row_label: str, html: str) -> list[str]:
    """The cells of the telemetry table's row for one level, as text."""
    row = re.search(rf"<tr>\s*<td class=\"l\">{row_label}</td>(.*?)</tr>", html, re.S)
    assert row is not None, row_label
    return [c.strip() for c in re.findall(r"<td>(.*?)</td>", row.group(1), re.S)]


def test_engine_figures_per_level_and_the_queue_note() -> None:
    runs = (
        level(1, telemetry_sources=("llamacpp",), requests_running_mean=1.0,
              requests_waiting_mean=0.0, requests_waiting_max=0.0, busy_slots_per_decode=1.0,
              prompt_tokens_cached_share=0.25, server_prompt_tokens_per_s=640.0,
              server_output_tokens_per_s=9.5),
        level(16, telemetry_sources=("llamacpp",), requests_running_mean=8.0,
              requests_waiting_mean=3.5, requests_waiting_max=8.0, busy_slots_per_decode=7.5,
              prompt_tokens_cached_share=0.5, server_prompt_tokens_per_s=1200.0,
              server_output_tokens_per_s=150.0, telemetry_notes=(QUEUE_NOTE,)),
    )  # fmt: skip
    html = section(page(runs))
    # Running, waiting mean / max, busy slots, KV cache, cached share, prompt rate, output
    # server / client (the client's is 10 x users).
    assert cells("1 user", html) == [
        "1.00", "0 / 0", "1.00", "\u2013", "25%", "640", "9.50 / 10.0",
    ]  # fmt: skip
    assert cells("16 users", html) == [
        "8.00", "3.50 / 8.00", "7.50", "\u2013", "50%", "1,200", "150 / 160",
    ]  # fmt: skip
    banners = re.findall(r'<div class="banner warn" role="status">(.*?)</div>', html, re.S)
    assert banners == [f"<strong>16 users:</strong> {QUEUE_NOTE}"]
    assert "(llamacpp)" in html


def test_no_metrics_urls_and_nothing_read_say_why() -> None:
    none = section(page((level(1),), has_metrics_urls=False))
    assert "Not read: the endpoint has no metrics_urls" in none
    assert "<table>" not in none

    failed = section(
        page((level(1, telemetry_errors=("telemetry from http://x/metrics: HTTP 404",)),))
    )
    assert "No engine metrics were read" in failed
    assert "<li>telemetry from http://x/metrics: HTTP 404</li>" in failed
    assert "No data:" not in failed
