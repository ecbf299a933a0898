"""Open-loop (rate) jobs end to end: the schedule is kept whatever the server does, by the
simulator's own record of when each request arrived (tests/truth.py: the bound, and what a
loaded machine's run reports), and a client made late on purpose fails that check; the
figures say what the samples show; duration levels; the load plan's validation."""

from __future__ import annotations

import asyncio
import itertools
import time
import uuid
from collections.abc import Iterator
from typing import Any

import asyncpg
import pytest

from sim.config import SimConfig
from sim.process import SimProcess
from tests.conftest import TeamClient
from tests.truth import (
    ServerSaysOtherwise,
    base_url_for,
    hold,
    lateness_ms,
    read_record,
    recording_sim,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


def rate_job(endpoint_id: str, **load: Any) -> dict[str, Any]:
    plan: dict[str, Any] = {"mode": "rate", "levels": [20], "warmup_requests": 0}
    plan.update(load)
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
        "load": plan,
    }


@pytest.fixture
def witness() -> Iterator[SimProcess]:
    """The session's simulator (50 ms to the first token, then 10 ms a token), one of its own
    that records when each request arrived: the witness of the schedule (tests/truth.py)."""
    with recording_sim(SimConfig(port=0, ttft_ms=50.0, itl_ms=10.0, model="sim-model")) as proc:
        yield proc


@pytest.mark.server_truth
@pytest.mark.parametrize("late_step_s", [0.0, 0.01], ids=["on-time", "late-client"])
async def test_constant_rate_keeps_its_schedule(
    team: TeamClient, witness: SimProcess, db: asyncpg.Connection, late_step_s: float
) -> None:
    # The simulator: 50 ms to the first token, then 10 ms per token; 16 tokens -> each
    # request lasts about 200 ms, so at 20 requests/s about four are in flight.
    # Four warm-up requests open the connections (the first request through a fresh HTTP
    # client is tens of ms late: connection and first-use costs), as a user would do.
    # The late-client case reaches the simulator through a LateLink that holds the n-th
    # request back n x 10 ms: its samples and figures say it kept time, the server says not.
    async with base_url_for(witness, late_step_s) as base_url:
        endpoint = await team.create_endpoint(base_url=base_url)
        body = rate_job(
            endpoint["id"], arrival="constant", requests_per_level=60, warmup_requests=4
        )
        response = await team.submit(body)
        assert response.status_code == 202, response.text
        assert response.json()["progress"] == {"done": 0, "total": 64}
        final = await team.wait_job(response.json()["id"], timeout=60)
    assert final["status"] == "succeeded", final["error"]
    assert final["progress"] == {"done": 64, "total": 64}
    assert final["load"]["levels"] == [20]
    assert final["load"]["arrival"] == "constant"

    [run] = final["runs"]
    assert run["mode"] == "rate"
    assert run["level"] == 20
    assert run["requests"] == {"total": 60, "succeeded": 60, "failed": 0, "errors": {}}

    # t_sched is the schedule itself: 1/20 s apart to the microsecond (exact by construction;
    # a time taken when the dispatcher woke would be off by tens of microseconds or more).
    rows = await team.samples(run["id"])
    assert [s["seq"] for s in rows] == list(range(64))
    assert [s["warmup"] for s in rows] == [True] * 4 + [False] * 60
    sched = [s["t_sched"] for s in rows if not s["warmup"]]
    gaps = [b - a for a, b in itertools.pairwise(sched)]
    assert all(abs(g - 0.05) < 1e-6 for g in gaps), gaps
    assert all(s["t_send"] >= s["t_sched"] for s in rows)

    # The figures say what the stored samples show (a client's honesty about itself, not
    # whether it kept time: that is the simulator's say, below).
    measured = [s for s in rows if not s["warmup"]]
    sends = [s["t_send"] for s in measured]
    sent_per_s = 59 / (max(sends) - min(sends))  # 60 sends, 59 gaps
    client = run["client"]
    assert client["send_rate"] == pytest.approx(sent_per_s, rel=1e-3), client
    # Held when at least 95% of the schedule's own rate, 20/s.
    assert client["rate_held"] is (sent_per_s >= 0.95 * 20), client
    assert client["concurrency_held"] is None
    delays_ms = sorted((s["t_send"] - s["t_sched"]) * 1000 for s in measured)
    assert delays_ms[-2] - 0.01 <= run["queue_delay_ms"]["p99"] <= delays_ms[-1] + 0.01
    # 60 successes over the measured window, first send to last end.
    ends = [s["t_send"] + s["e2e_ms"] / 1000 for s in measured]
    assert run["requests_per_s"] == pytest.approx(60 / (max(ends) - min(sends)), rel=1e-3)
    # Requests overlapped: an open loop does not wait for the previous one to end.
    assert run["mean_concurrency"] > 1
    assert client["inflight_mean"] > 1

    stored = await db.fetchval(
        "SELECT count(*) FROM request_samples WHERE run_id = $1", uuid.UUID(run["id"])
    )
    assert stored == 64

    # The schedule was kept: each request reached the simulator when the schedule said,
    # by the simulator's own record of its arrival (tests/truth.py has the bound and what a
    # loaded machine makes of it).
    record = await read_record(witness)
    late = lateness_ms(rows, record)
    assert len(late) == 60
    if late_step_s:
        with pytest.raises(ServerSaysOtherwise):
            hold(late, record, "a 20/s level through a late link")
    else:
        hold(late, record, "a 20/s level")


async def test_poisson_level_of_fixed_duration(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = rate_job(endpoint["id"], levels=[10], arrival="poisson", duration_s=3)
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    # Before it runs, the plan counts the expected rate x duration.
    assert response.json()["progress"] == {"done": 0, "total": 30}
    final = await team.wait_job(response.json()["id"], timeout=60)
    assert final["status"] == "succeeded", final["error"]

    [run] = final["runs"]
    sent = run["requests"]["total"]
    # Poisson(30) sends: 12..50 covers it with a false failure about once in 10^4 runs.
    assert 12 <= sent <= 50, sent
    assert run["requests"]["succeeded"] == sent
    assert final["progress"] == {"done": sent, "total": sent}
    rows = await team.samples(run["id"])
    assert len(rows) == sent
    sched = [s["t_sched"] for s in rows]
    assert sched == sorted(sched)
    assert sched[-1] - sched[0] < 3.0
    # Random gaps, not a constant spacing.
    gaps = {round(b - a, 4) for a, b in itertools.pairwise(sched)}
    assert len(gaps) > sent // 2


async def test_concurrency_level_of_fixed_duration(team: TeamClient, sim: SimProcess) -> None:
    # Two users for 1 s, each request ~130 ms (8 tokens): about 2 x 1 / 0.13 = 15 requests.
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    body = rate_job(endpoint["id"], mode="concurrency", levels=[2], duration_s=1)
    body["workload"]["output_tokens"] = {"mean": 8}
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    # A concurrency level of fixed duration counts its requests only as they finish.
    assert response.json()["progress"] == {"done": 0, "total": 0}
    final = await team.wait_job(response.json()["id"], timeout=60)
    assert final["status"] == "succeeded", final["error"]
    [run] = final["runs"]
    sent = run["requests"]["total"]
    assert 6 <= sent <= 20, sent
    assert final["progress"] == {"done": sent, "total": sent}
    assert run["client"]["concurrency_held"] is not None
    assert run["client"]["rate_held"] is None
    # No request started after the duration: each user takes its next request only while
    # less than 1 s has passed (t_sched, when its slot freed; its t_send follows by the
    # client's own lateness, which a loaded machine stretches past the second).
    rows = await team.samples(run["id"])
    assert max(s["t_sched"] for s in rows) - min(s["t_sched"] for s in rows) < 1.0


async def test_cancel_keeps_what_a_rate_level_measured(team: TeamClient, sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    job = (await team.submit(rate_job(endpoint["id"], levels=[10], requests_per_level=1000))).json()
    deadline = time.monotonic() + 30
    while (await team.http.get(f"/v1/jobs/{job['id']}")).json()["progress"]["done"] < 3:
        assert time.monotonic() < deadline, "the job never started"
        await asyncio.sleep(0.2)
    assert (await team.http.post(f"/v1/jobs/{job['id']}/cancel")).status_code == 200
    deadline = time.monotonic() + 15
    while True:
        state = (await team.http.get(f"/v1/jobs/{job['id']}")).json()
        if state["runs"] and state["runs"][0]["status"] == "cancelled":
            break
        assert time.monotonic() < deadline, f"run not closed after cancel: {state}"
        await asyncio.sleep(0.3)
    run = state["runs"][0]
    assert 3 <= run["requests"]["total"] < 1000
    assert run["requests"]["failed"] == 0, (
        "requests in flight at the cancel are dropped, not failed"
    )
    assert len(await team.samples(run["id"])) == run["requests"]["total"]


@pytest.mark.parametrize(
    ("changes", "status", "names"),
    [
        ({"arrival": "uniform"}, 422, ["load.arrival", "constant", "poisson", "gamma"]),
        ({"duration_s": 3, "requests_per_level": 10}, 422, ["duration_s", "requests_per_level"]),
        ({"mode": "concurrency", "levels": [2.5]}, 422, ["load.levels", "whole number"]),
        ({"levels": [0]}, 422, ["load.levels[0]", ">= 0.001"]),
        ({"burstiness": 0.5}, 422, ["load.burstiness", "gamma"]),
        ({"burstiness": 0}, 422, ["load.burstiness", "> 0"]),
        ({"duration_s": 1, "warmup_requests": 50}, 422, ["load.warmup_requests"]),
    ],
)
async def test_invalid_rate_plans(
    team: TeamClient, changes: dict[str, Any], status: int, names: list[str]
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(rate_job(endpoint["id"], **changes))
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    detail = response.json()["detail"]
    for name in names:
        assert name in detail, detail
    assert (await team.http.get("/v1/jobs")).json()["total"] == 0, "an invalid job was stored"


async def test_fractional_rates_are_accepted(team: TeamClient) -> None:
    endpoint = await team.create_endpoint()
    body = rate_job(endpoint["id"], levels=[0.5, 2.5], arrival="gamma", burstiness=0.25)
    body["load"]["requests_per_level"] = 4
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["load"]["levels"] == [0.5, 2.5]
    assert job["progress"]["total"] == 8
    await team.http.post(f"/v1/jobs/{job['id']}/cancel")
