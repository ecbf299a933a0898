"""What `submit --watch` shows for a job as read from the API: levels, live and final figures."""

from __future__ import annotations

import io
from datetime import UTC, datetime
from typing import Any

from rich.console import Console

from cli.watch import LevelView, LineDisplay, level_views, queue_text, summary_table


def run(level: float, status: str, **extra: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "mode": "concurrency",
        "level": level,
        "status": status,
        "requests": {"total": 50, "succeeded": 49, "failed": 1, "errors": {}},
        "ttft_ms": {"p50": 51.25, "p95": 60.0},
        "tpot_ms": {"p50": 10.04},
        "output_tokens_per_s": 812.5,
        "requests_per_s": 12.5,
        "slo_passed": True,
        "cost": {"per_million_output_tokens_usd": 1.2},
        "live": None,
    }
    body.update(extra)
    return body


LIVE = {
    "done": 7,
    "planned": 54,
    "errors": 0,
    "elapsed_s": 1.5,
    "ttft_ms_p50": 50.5,
    "output_tokens_per_s": 90.0,
}


def job(status: str, runs: list[dict[str, Any]], levels: list[float]) -> dict[str, Any]:
    return {
        "id": "0f0e",
        "status": status,
        "load": {"mode": "concurrency", "levels": levels},
        "runs": runs,
    }


def test_views_follow_runs_then_planned_levels() -> None:
    views = level_views(
        job("running", [run(1, "succeeded"), run(8, "running", live=LIVE)], [1, 8, 32])
    )
    assert views == [
        LevelView(0, "1 user", "succeeded", 50, 50, 1, 51.25, 812.5),
        LevelView(1, "8 users", "running", 7, 54, 0, 50.5, 90.0),
        LevelView(2, "32 users", "planned"),
    ]
    assert views[1].line() == (
        "level 2 (8 users): 7/54 requests, 0 errors, TTFT p50 50.5 ms, 90.0 output tok/s"
    )
    assert views[0].line() == (
        "level 1 (1 user): succeeded, 50 measured requests (1 failed), "
        "TTFT p50 51.2 ms, 812.5 output tok/s"
    )


def test_a_running_run_without_live_figures_yet_shows_unknowns() -> None:
    (view,) = level_views(job("running", [run(4, "running")], [4]))
    assert (view.done, view.planned, view.ttft_ms_p50) == (0, None, None)
    assert view.line() == "level 1 (4 users): 0/? requests, 0 errors, TTFT p50 -, -"


def test_a_sharded_level_shows_its_count_and_unknown_errors() -> None:
    # A sharded level's live block: the shards' counts only, errors and figures null.
    live = {**LIVE, "errors": None, "ttft_ms_p50": None, "output_tokens_per_s": None}
    (view,) = level_views(job("running", [run(8, "running", live=live)], [8]))
    assert (view.done, view.planned, view.failed) == (7, 54, None)
    assert view.line() == "level 1 (8 users): 7/54 requests, ? errors, TTFT p50 -, -"


def test_levels_a_stopped_job_never_ran_are_left_out() -> None:
    views = level_views(job("cancelled", [run(1, "cancelled")], [1, 8]))
    assert [v.status for v in views] == ["cancelled"]


def test_sweep_levels_appear_as_they_are_chosen() -> None:
    sweep_job = {
        "id": "1",
        "status": "running",
        "load": {"mode": "sweep"},
        "sweep": {
            "planned_levels": 3,
            "levels": [{"mode": "concurrency", "level": 1}, {"mode": "concurrency", "level": 64}],
        },
        "runs": [run(1, "succeeded")],
    }
    labels = [(v.label, v.status) for v in level_views(sweep_job)]
    assert labels == [
        ("1 user", "succeeded"),
        ("64 users", "planned"),
        ("chosen by the sweep", "planned"),
    ]


def test_lines_are_printed_on_changes_and_throttled_while_running() -> None:
    out = io.StringIO()
    now = [0.0]
    display = LineDisplay(Console(file=out, width=200), every_s=2.0, clock=lambda: now[0])
    polls = [
        (0.0, job("queued", [], [1])),
        (0.3, job("running", [run(1, "running")], [1])),  # no live figures yet
        (0.5, job("running", [run(1, "running", live={**LIVE, "done": 1})], [1])),  # first
        (1.0, job("running", [run(1, "running", live={**LIVE, "done": 2})], [1])),  # too soon
        (2.6, job("running", [run(1, "running", live={**LIVE, "done": 5})], [1])),
        (3.0, job("succeeded", [run(1, "succeeded")], [1])),
    ]
    for at, state in polls:
        now[0] = at
        display.update(state)
    assert out.getvalue().splitlines() == [
        "job 0f0e: queued",
        "job 0f0e: running",
        "level 1 (1 user): started",
        "level 1 (1 user): 1/54 requests, 0 errors, TTFT p50 50.5 ms, 90.0 output tok/s",
        "level 1 (1 user): 5/54 requests, 0 errors, TTFT p50 50.5 ms, 90.0 output tok/s",
        "level 1 (1 user): succeeded, 50 measured requests (1 failed), "
        "TTFT p50 51.2 ms, 812.5 output tok/s",
    ]


def test_summary_table_has_a_row_per_level_with_its_figures() -> None:
    out = io.StringIO()
    Console(file=out, width=200).print(
        summary_table(job("succeeded", [run(1, "succeeded"), run(8, "succeeded")], [1, 8]))
    )
    rows = [line for line in out.getvalue().splitlines() if "user" in line]
    assert len(rows) == 2
    for cell in ("succeeded", "51.2", "60.0", "10.04", "812.5", "12.50", "1.20", "pass"):
        assert cell in rows[1]


def test_queue_text_says_place_and_times() -> None:
    now = datetime(2026, 12, 3, 14, 0, tzinfo=UTC)
    queued = {
        "queue": {
            "position": 2,
            "jobs_running": 1,
            "estimated_start_at": "2026-12-03T14:03:00Z",
            "estimated_end_at": "2026-12-03T16:30:00Z",
            "basis": "1 queued ahead, 1 running",
        }
    }
    assert queue_text(queued, now) == (
        "queued, number 2 in line, starts about 14:03 UTC (in 3 min), "
        "ends about 16:30 UTC (in 2.5 h)"
    )
    running = {"queue": {**queued["queue"], "position": None}}
    assert queue_text(running, now) == "running, ends about 16:30 UTC (in 2.5 h)"
    unknown = {
        "queue": {
            **queued["queue"],
            "position": 1,
            "estimated_start_at": None,
            "estimated_end_at": None,
            "basis": "no estimate: reasons",
        }
    }
    assert queue_text(unknown, now) == "queued, next in line; no estimate: reasons"
    assert queue_text({"queue": None}, now) is None
