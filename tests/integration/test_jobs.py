"""A user's whole path: register the simulator, submit a job, watch it, read the figures."""

from __future__ import annotations

import asyncio
import csv
import io
import time
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from sim.config import SimConfig
from sim.process import SimProcess
from tests.conftest import TeamClient
from tests.truth import judge, most_in_flight, output_tokens_per_s, read_record, recording_sim

#: Output tokens of each request of the ground-truth job (its one-user level runs 54 in a row).
OUT = 32

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


def job_body(endpoint_id: str, **load: Any) -> dict[str, Any]:
    plan = {"mode": "concurrency", "levels": [1], "requests_per_level": 5, "warmup_requests": 0}
    plan.update(load)
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 8}},
        "load": plan,
    }


@pytest.fixture
def witness() -> Iterator[SimProcess]:
    """The session's simulator (50 ms to the first token, then 10 ms a token), one of its own
    that records each request's arrival and writes: the server's side (tests/truth.py)."""
    with recording_sim(SimConfig(port=0, ttft_ms=50.0, itl_ms=10.0, model="sim-model")) as proc:
        yield proc


@pytest.mark.server_truth
async def test_fixed_sim_figures_match_ground_truth(
    team: TeamClient, witness: SimProcess, db: asyncpg.Connection
) -> None:
    sim = witness
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url, usd_per_hour=3.5)
    body = {
        "endpoint_id": endpoint["id"],
        "workload": {"input_tokens": {"mean": 128, "std": 16}, "output_tokens": {"mean": OUT}},
        "load": {
            "mode": "concurrency",
            "levels": [1, 16],
            "requests_per_level": 50,
            "warmup_requests": 4,
        },
        "slo": {"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}},
    }
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["status"] == "queued"
    assert job["progress"] == {"done": 0, "total": 108}

    # Watch it move: running with progress advancing, then succeeded.
    seen: list[tuple[str, int]] = []
    deadline = time.monotonic() + 150
    while time.monotonic() < deadline:
        state = (await team.http.get(f"/v1/jobs/{job['id']}")).json()
        seen.append((state["status"], state["progress"]["done"]))
        if state["status"] not in ("queued", "running"):
            break
        await asyncio.sleep(0.5)
    assert state["status"] == "succeeded", state["error"]
    running = [done for status, done in seen if status == "running"]
    assert len(set(running)) >= 3, f"progress did not advance while running: {seen}"
    assert running == sorted(running)
    assert state["progress"] == {"done": 108, "total": 108}

    # The worker judges the runs just after it stores the job's status: read the job again once
    # it has, so that its runs and each run's own read below show the same `change`.
    await team.judged_runs(state)
    state = (await team.http.get(f"/v1/jobs/{job['id']}")).json()
    runs = state["runs"]
    assert [r["level"] for r in runs] == [1, 16]
    for run in runs:
        assert run["status"] == "succeeded"
        assert run["requests"] == {"total": 50, "succeeded": 50, "failed": 0, "errors": {}}
        # The simulator sends its first token at 50 ms, then one every 10 ms (360 ms in all),
        # never early: no TTFT can be shorter. How much longer depends on the machine, which
        # bench/loadgen.py measures; the per-sample checks below hold on any machine.
        assert run["ttft_ms"]["p50"] >= 50.0, run["ttft_ms"]
        assert run["count_source"] == "usage"
        assert run["prompt_lengths"] == "exact"
        assert run["ttfo_ms"] == run["ttft_ms"]
        assert run["error_rate"] == 0
        assert run["slo_passed"] is True
        assert run["slo_attainment"] == 1.0
        # Cost follows docs/figures.md from the stored throughput.
        cost = run["cost"]
        expected = 3.5 / (run["output_tokens_per_s"] * 3600) * 1e6
        assert cost["usd_per_hour"] == 3.5
        assert cost["per_million_output_tokens_usd"] == pytest.approx(expected, rel=1e-9)
        # At the SLO only the 50 measured requests' 32 tokens each count as useful output
        # (every one met it); output tokens/s also counts warm-up tokens that arrived in the
        # window, so the at-SLO price is at least the plain one.
        useful = 3.5 / (50 * OUT / run["duration_s"] * 3600) * 1e6
        assert cost["at_slo_per_million_output_tokens_usd"] == pytest.approx(useful, rel=1e-9)
        assert cost["at_slo_per_million_output_tokens_usd"] >= cost["per_million_output_tokens_usd"]
        # Every figure of the contract is there.
        for field in ("itl_ms", "e2e_ms", "queue_delay_ms", "per_user_tokens_per_s"):
            assert run[field]["count"] > 0
        for field in (
            "duration_s",
            "output_tokens_per_s",
            "input_tokens_per_s",
            "total_tokens_per_s",
            "requests_per_s",
            "mean_concurrency",
            "goodput_rps",
        ):
            assert run[field] > 0, field
        # The endpoint names no metrics_urls: nothing was scraped, so no figure is claimed
        # (the simulator's own /metrics is not read unless the endpoint names it).
        claimed = {k: v for k, v in run["telemetry"].items() if v not in (None, [], {}, 0)}
        assert claimed == {}, claimed
        assert run["telemetry"].get("samples", 0) == 0

    # Higher concurrency yields more throughput: the simulator served 16 at once at the
    # second level and one at a time at the first, by its own record, and each level's
    # throughput is what the simulator's record says it wrote over the level's window.
    # (The two clocks place the window's edges apart by the request's way there and the
    # answer's way back: a figure off by a share x of the window is off by x times the
    # window's length there, held to tests/truth.py's bound.)
    record = await read_record(sim)
    for level, run in enumerate(runs):
        rows = await team.samples(run["id"])
        assert most_in_flight(rows, record, level) == run["level"]
        served = output_tokens_per_s(rows, record, level)
        off_ms = abs(run["output_tokens_per_s"] / served - 1) * run["duration_s"] * 1000
        what = (
            f"output tokens/s at {run['level']:g} users, {run['output_tokens_per_s']:.1f}, is "
            f"off the simulator's {served:.1f} by what {off_ms:.1f} ms at the window's edges make"
        )
        judge(off_ms, record, what)
    assert runs[1]["output_tokens_per_s"] > runs[0]["output_tokens_per_s"]

    for run in runs:
        # Whatever the noise: one content event per token, none dropped, and each no earlier
        # than the simulator's schedule for it (token i at 50 + 10 i ms after the request
        # arrived, which is after the client sent it), so no event is timed from the wrong
        # origin or credited to the wrong token.
        tpots = []
        for sample in await team.samples(run["id"]):
            times = sample["chunk_times_ms"]
            assert len(times) == OUT, sample
            due = [sim.config.ttft_ms + sim.config.itl_ms * i for i in range(OUT)]
            assert all(t >= d - 1e-6 for t, d in zip(times, due, strict=True)), sample
            tpots.append((times[-1] - times[0]) / (OUT - 1))
        # The run's TPOT median is a median of what its samples show.
        assert min(tpots) - 1e-3 <= run["tpot_ms"]["p50"] <= max(tpots) + 1e-3, run["tpot_ms"]

        rows = await db.fetch(
            "SELECT warmup, n_out, count_source, error_class FROM request_samples WHERE run_id = $1",
            __import__("uuid").UUID(run["id"]),
        )
        measured = [r for r in rows if not r["warmup"]]
        assert len(measured) == 50
        assert len(rows) - len(measured) == 4
        assert {r["n_out"] for r in rows} == {OUT}
        assert {r["count_source"] for r in rows} == {"usage"}
        assert {r["error_class"] for r in rows} == {None}

    # Raw samples as JSON pages and as CSV.
    run_id = runs[0]["id"]
    page = (await team.http.get(f"/v1/runs/{run_id}/requests", params={"limit": 30})).json()
    assert len(page["items"]) == 30 and page["next_after"] == 29
    rest = (await team.http.get(f"/v1/runs/{run_id}/requests", params={"after": 29})).json()
    assert len(rest["items"]) == 24 and rest["next_after"] is None
    first = page["items"][0]
    assert first["warmup"] is True and first["seq"] == 0
    assert len(first["chunk_times_ms"]) == OUT
    assert first["chunk_times_ms"][0] == pytest.approx(first["ttft_ms"])
    assert first["ttfo_ms"] == first["ttft_ms"]

    response = await team.http.get(f"/v1/runs/{run_id}/requests", headers={"Accept": "text/csv"})
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/csv")
    table = list(csv.DictReader(io.StringIO(response.text)))
    assert list(table[0]) == [
        "seq",
        "warmup",
        "t_sched",
        "t_send",
        "ttfb_ms",
        "ttft_ms",
        "e2e_ms",
        "n_in",
        "n_out",
        "count_source",
        "status",
        "error_class",
        "ttfo_ms",
        "n_in_target",
        "prompt_length",
        "cached_tokens",
        "server_source",
        "server_prefill_ms",
        "server_tpot_ms",
        "server_queue_ms",
        "server_n_out",
        "server_n_prefilled",
        "cap_wait_ms",
        "n_reasoning",
        "ttfr_ms",
        "reasoning_source",
        "model",
        "tool_calls",
        "tool_calls_valid",
        "structured_valid",
        "images",
        "image_tokens",
    ]
    assert len(table) == 54
    # a plain job: no request feature says anything (empty cells)
    for name in ("n_reasoning", "ttfr_ms", "model", "tool_calls", "structured_valid", "images"):
        assert {row[name] for row in table} == {""}, name
    # no load.max_concurrency: no request waited for a slot (an empty cell, not 0)
    assert {row["cap_wait_ms"] for row in table} == {""}
    # the default simulator reports no cache and no timings of its own: empty cells
    assert {row["cached_tokens"] for row in table} == {""}
    assert {row["server_source"] for row in table} == {""}
    # no reasoning from the simulator: time to first output is time to first token, and its
    # tokenizer route made every prompt exactly its drawn length
    assert all(row["ttfo_ms"] == row["ttft_ms"] for row in table)
    assert all(row["n_in"] == row["n_in_target"] for row in table)
    assert {row["prompt_length"] for row in table} == {"exact"}
    assert sum(row["warmup"] == "true" for row in table) == 4
    assert {row["n_out"] for row in table} == {str(OUT)}

    single = (await team.http.get(f"/v1/runs/{run_id}")).json()
    assert single == runs[0]


async def test_closed_port_job_fails_with_the_reason(team: TeamClient) -> None:
    endpoint = await team.create_endpoint(base_url="http://127.0.0.1:1/v1")
    job = (await team.submit(job_body(endpoint["id"], levels=[1, 4]))).json()
    final = await team.wait_job(job["id"], timeout=60)
    assert final["status"] == "failed"
    assert (
        final["error"]
        == "level 1: all 5 requests failed: connection refused at http://127.0.0.1:1/v1"
    )
    assert len(final["runs"]) == 1, "a level where every request failed stops the job"
    run = final["runs"][0]
    assert run["requests"] == {"total": 5, "succeeded": 0, "failed": 5, "errors": {"connect": 5}}
    assert run["error_rate"] == 1.0
    assert run["cost"]["per_million_output_tokens_usd"] is None
    assert run["cost"]["reason"]
    samples = (await team.http.get(f"/v1/runs/{run['id']}/requests")).json()["items"]
    assert {s["error_class"] for s in samples} == {"connect"}


async def test_server_errors_are_counted_per_class(team: TeamClient) -> None:
    from sim.config import SimConfig
    from sim.process import start_sim_process

    flaky = start_sim_process(SimConfig(port=0, ttft_ms=5, itl_ms=1, error_rate=0.5, seed=7))
    try:
        endpoint = await team.create_endpoint(base_url=flaky.openai_base_url)
        job = (
            await team.submit(job_body(endpoint["id"], requests_per_level=40, levels=[4]))
        ).json()
        final = await team.wait_job(job["id"], timeout=60)
    finally:
        flaky.stop()
    assert final["status"] == "succeeded"
    run = final["runs"][0]
    failed = run["requests"]["failed"]
    assert 5 <= failed <= 35
    assert run["requests"]["errors"] == {"http_5xx": failed}
    assert run["error_rate"] == pytest.approx(failed / 40)
    assert run["ttft_ms"]["count"] == 40 - failed


async def test_cancel_stops_a_running_job(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = job_body(endpoint["id"], requests_per_level=1000)
    body["workload"]["output_tokens"] = {"mean": 20}
    job = (await team.submit(body)).json()
    deadline = time.monotonic() + 30
    while (await team.http.get(f"/v1/jobs/{job['id']}")).json()["progress"]["done"] < 3:
        assert time.monotonic() < deadline, "the job never started"
        await asyncio.sleep(0.2)
    response = await team.http.post(f"/v1/jobs/{job['id']}/cancel")
    assert response.status_code == 200
    assert response.json()["status"] == "cancelled"

    # The worker notices within a second or so and keeps what it measured.
    deadline = time.monotonic() + 15
    while True:
        state = (await team.http.get(f"/v1/jobs/{job['id']}")).json()
        if state["runs"] and state["runs"][0]["status"] == "cancelled":
            break
        assert time.monotonic() < deadline, f"run not closed after cancel: {state}"
        await asyncio.sleep(0.3)
    assert state["status"] == "cancelled"
    assert 3 <= state["runs"][0]["requests"]["total"] < 1000

    again = await team.http.post(f"/v1/jobs/{job['id']}/cancel")
    assert again.status_code == 409
    assert "already cancelled" in again.json()["detail"]


async def test_idempotency_key_returns_the_same_job(team: TeamClient) -> None:
    endpoint = await team.create_endpoint(base_url="http://127.0.0.1:1/v1")
    body = job_body(endpoint["id"])
    headers = {"Idempotency-Key": "nightly-2026-12-02"}
    first = await team.submit(body, headers=headers)
    second = await team.submit(body, headers=headers)
    assert first.status_code == 202
    assert second.status_code == 200
    assert first.json()["id"] == second.json()["id"]
    # The same key with another body is a mistake, not a retry: say so, create nothing.
    body["load"]["levels"] = [1, 2]
    clash = await team.submit(body, headers=headers)
    assert clash.status_code == 409
    assert first.json()["id"] in clash.json()["detail"]
    listing = (await team.http.get("/v1/jobs")).json()
    assert listing["total"] == 1


async def test_a_job_whose_worker_died_a_second_time_is_failed_with_a_reason(
    team: TeamClient, db: asyncpg.Connection, sessions: async_sessionmaker[AsyncSession]
) -> None:
    # The first death measures the level again (tests/faults/test_faults.py); this job's
    # worker died once before.
    from datetime import timedelta

    from infercost.jobs.repository import JobRepository

    endpoint = await team.create_endpoint(base_url="http://127.0.0.1:1/v1")
    job = (await team.submit(job_body(endpoint["id"]))).json()
    await team.wait_job(job["id"], timeout=60)
    # Make it look like a job whose worker vanished three minutes ago, mid-run.
    await db.execute(
        "UPDATE jobs SET status = 'running', finished_at = NULL, error = NULL, interruptions = 1,"
        " heartbeat_at = now() - interval '3 minutes' WHERE id = $1",
        __import__("uuid").UUID(job["id"]),
    )
    async with sessions() as session:
        repo = JobRepository(session)
        assert await repo.fail_abandoned(timedelta(minutes=5)) == []
        failed = await repo.fail_abandoned(timedelta(minutes=2))
        await session.commit()
    assert [str(j) for j in failed] == [job["id"]]
    state = (await team.http.get(f"/v1/jobs/{job['id']}")).json()
    assert state["status"] == "failed"
    assert "no heartbeat" in state["error"] and "resubmit" in state["error"]
    assert "already measured again once" in state["error"]
    assert state["finished_at"] is not None
