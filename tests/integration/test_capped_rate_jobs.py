"""A cap on a rate level's requests in flight (load.max_concurrency) and bursts (load.mode
"burst"), end to end: API, worker and a simulator that records what it serves, held against
that record (tests/truth.py): no more in flight than the cap, and each request sent as soon
as the cap let it."""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sim.config import SimConfig
from sim.process import SimProcess
from tests.conftest import TeamClient, inflight_at_sends
from tests.truth import (
    ServerSaysOtherwise,
    base_url_for,
    hold,
    lateness_ms,
    read_record,
    recording_sim,
)

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


@pytest.fixture
def slow_sim() -> Iterator[SimProcess]:
    """200 ms to the first token, then 20 ms a token: 16 tokens take 0.5 s a request. It
    records when each request arrived and ended, and the most it served at once."""
    with recording_sim(SimConfig(port=0, ttft_ms=200.0, itl_ms=20.0, model="sim-model")) as proc:
        yield proc


async def running_peak(sim: SimProcess) -> int:
    """The most requests the simulator served at once since it started (its own count)."""
    async with httpx.AsyncClient(base_url=sim.base_url) as http:
        return int((await http.get("/stats")).json()["running_peak"])


def job(endpoint_id: str, **load: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
        "load": load,
    }


@pytest.mark.server_truth
@pytest.mark.parametrize("late_step_s", [0.0, 0.01], ids=["on-time", "late-client"])
async def test_capped_rate_level_waits_for_slots(
    team: TeamClient, slow_sim: SimProcess, late_step_s: float
) -> None:
    # 20 requests/s offered, at most 4 in flight, 0.5 s a request: the server carries 8/s,
    # so from the fifth request on each waits for a slot. By hand, request i goes out at
    # 0.5 * (i // 4) + 0.05 * (i % 4): the last of 44 (due at 2.15 s) at 5.15 s, after
    # waiting 3.0 s (plus the client's and server's overheads of 10 rounds).
    # The late-client case reaches the simulator through a LateLink that holds the n-th
    # request back n x 10 ms: the client's samples say each went as soon as its slot was
    # free, the server says not.
    async with base_url_for(slow_sim, late_step_s) as base_url:
        endpoint = await team.create_endpoint(base_url=base_url)
        body = job(
            endpoint["id"],
            mode="rate",
            levels=[20],
            arrival="constant",
            requests_per_level=40,
            warmup_requests=4,
            max_concurrency=4,
        )
        response = await team.submit(body)
        assert response.status_code == 202, response.text
        assert response.json()["load"]["max_concurrency"] == 4
        final = await team.wait_job(response.json()["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]
    [run] = final["runs"]
    assert (run["mode"], run["level"]) == ("rate", 20)
    assert run["requests"]["succeeded"] == 40

    # The server never served more than the cap at once, and did reach it.
    assert await running_peak(slow_sim) == 4
    rows = await team.samples(run["id"])
    assert inflight_at_sends(rows) <= 4

    # Each wait is in the request's queue delay, and recorded as such.
    for r in rows:
        assert r["cap_wait_ms"] is not None
        assert 0 <= r["cap_wait_ms"] <= (r["t_send"] - r["t_sched"]) * 1000 + 1e-6
    # The CSV carries the same waits (an empty cell only where there was no cap).
    csv_text = (
        await team.http.get(f"/v1/runs/{run['id']}/requests", headers={"Accept": "text/csv"})
    ).text
    table = list(csv.DictReader(io.StringIO(csv_text)))
    assert [float(t["cap_wait_ms"]) for t in table] == pytest.approx(
        [r["cap_wait_ms"] for r in rows]
    )
    last = rows[-1]
    assert last["t_sched"] - rows[0]["t_sched"] == pytest.approx(2.15, abs=1e-6)
    # The server's 0.5 s a request over 10 rounds sets the last wait's floor.
    assert last["cap_wait_ms"] >= 2900, last
    assert run["queue_delay_ms"]["max"] >= 2900
    # Each request reached the server as soon as the cap let it: at its due time, or when
    # the server ended the request whose slot it took, by the server's own record; so the
    # waits do not add up past what the server took.
    record = await read_record(slow_sim)
    late = lateness_ms(rows, record, cap=4)
    assert min(late.values()) >= 0, late  # none went before a slot was free
    if late_step_s:
        with pytest.raises(ServerSaysOtherwise):
            hold(late, record, "a 20/s level capped at 4 in flight through a late link")
    else:
        hold(late, record, "a 20/s level capped at 4 in flight")

    # The run says the cap was reached and how often requests waited.
    cap = run["concurrency_cap"]
    assert cap["max_concurrency"] == 4
    assert cap["reached"] is True
    assert cap["inflight_max"] == 4
    waited = [r for r in rows if not r["warmup"] and r["cap_wait_ms"] > 0]
    assert cap["waited"] == len(waited) >= 36
    assert cap["waited_share"] == pytest.approx(len(waited) / 40)
    assert cap["wait_ms"]["max"] == pytest.approx(max(r["cap_wait_ms"] for r in waited))

    # The waits were the plan's, not the client being late: they are left out of its own
    # lateness, the pace the slots allowed was kept, and client health judges the client on
    # the rest only. (On an idle machine that rest is well under 10 ms and the run is not
    # client-bound; on a loaded one the event loop itself may lag, and then it says so.)
    client = run["client"]
    assert client["queue_delay_p99_ms"] > 2000
    # The client's own lateness is each send's delay less its wait for a slot, as the
    # samples show, and none of the seconds of waiting are in it.
    own = sorted(
        (r["t_send"] - r["t_sched"]) * 1000 - r["cap_wait_ms"] for r in rows if not r["warmup"]
    )
    assert own[0] - 0.01 <= client["send_late_p99_ms"] <= own[-1] + 0.01, client
    assert client["send_late_p99_ms"] < client["queue_delay_p99_ms"] - 1000, client
    assert client["rate_held"] is True, client
    late = any(
        (client[k] or 0) > 10 for k in ("send_late_p99_ms", "read_lag_p99_ms", "loop_lag_p99_ms")
    )
    assert run["client_bound"] is late, client
    codes = {r["code"] for r in run["adequacy"]["reasons"]}
    assert ("client_bound" in codes) is late, run["adequacy"]
    assert "rate_not_held" not in codes, run["adequacy"]


async def test_burst_sends_every_request_at_once(team: TeamClient, slow_sim: SimProcess) -> None:
    endpoint = await team.create_endpoint(base_url=slow_sim.openai_base_url)
    body = job(endpoint["id"], mode="burst", levels=[30])
    body["slo"] = {"ttft_ms": {"p95": 5000}}
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    submitted = response.json()
    assert submitted["progress"] == {"done": 0, "total": 30}
    assert submitted["load"]["requests_per_level"] is None
    final = await team.wait_job(submitted["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]

    # The simulator had all 30 in hand at once.
    assert await running_peak(slow_sim) == 30
    [run] = final["runs"]
    assert (run["mode"], run["level"]) == ("burst", 30)
    assert run["requests"]["succeeded"] == 30
    assert run["concurrency_cap"] is None
    rows = await team.samples(run["id"])
    assert {r["t_sched"] for r in rows} == {rows[0]["t_sched"]}
    assert inflight_at_sends(rows) == 30
    # Each lasted about 0.5 s, so they overlapped: far more than one in flight on average.
    assert run["mean_concurrency"] > 20

    # A burst is no sustained rate: capacity at the SLO does not rest on it.
    capacity = final["capacity_at_slo"]
    assert capacity["requests_per_s"] is None, capacity
    assert [s["run_id"] for s in capacity["skipped"]] == [run["id"]]
    assert "burst" in {r["code"] for r in capacity["skipped"][0]["reasons"]}

    # The report names the level as a burst.
    report = await team.http.get(f"/v1/jobs/{final['id']}/report")
    assert report.status_code == 200
    assert "30 at once" in report.text
    assert "requests sent at once" in report.text


@pytest.mark.server_truth
async def test_capped_burst_queues_from_the_start(team: TeamClient, slow_sim: SimProcess) -> None:
    # vLLM's --request-rate inf with --max-concurrency: 12 due at once, 3 in flight.
    endpoint = await team.create_endpoint(base_url=slow_sim.openai_base_url)
    body = job(endpoint["id"], mode="burst", levels=[12], max_concurrency=3)
    response = await team.submit(body)
    assert response.status_code == 202, response.text
    final = await team.wait_job(response.json()["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]
    assert await running_peak(slow_sim) == 3
    [run] = final["runs"]
    cap = run["concurrency_cap"]
    assert (cap["max_concurrency"], cap["reached"], cap["waited"]) == (3, True, 9)
    # Four rounds of at least 0.5 s each on the server: the last three waited three.
    assert cap["wait_ms"]["max"] >= 1500, cap
    # And no longer than the server made them: each went as soon as a slot was free, by
    # the server's own record of when the request before it in that slot ended.
    record = await read_record(slow_sim)
    late = lateness_ms(await team.samples(run["id"]), record, cap=3)
    assert min(late.values()) >= 0, late
    hold(late, record, "a burst of 12 capped at 3 in flight")


@pytest.mark.parametrize(
    ("load", "names"),
    [
        ({"mode": "rate", "levels": [5], "max_concurrency": 0}, ["load.max_concurrency", ">= 1"]),
        (
            {"mode": "concurrency", "levels": [4], "max_concurrency": 2},
            ["load.max_concurrency", "users", "mode 'rate'"],
        ),
        (
            {"mode": "rate", "levels": [5], "max_concurrency": 2, "shards": 2},
            ["load.max_concurrency", "shards"],
        ),
        (
            {"mode": "rate", "levels": [5], "max_concurrency": 100_000},
            ["load.max_concurrency", "limit", "INFERCOST_MAX_CONCURRENCY"],
        ),
        ({"mode": "burst", "levels": [50], "duration_s": 10}, ["load.duration_s", "at once"]),
        (
            {"mode": "burst", "levels": [50], "requests_per_level": 10},
            ["load.requests_per_level", "load.levels"],
        ),
        ({"mode": "burst", "levels": [50], "warmup_requests": 4}, ["load.warmup_requests"]),
        ({"mode": "burst", "levels": [2.5]}, ["load.levels", "whole number"]),
        ({"mode": "burst", "levels": [50], "arrival": "poisson"}, ["load.arrival"]),
        ({"mode": "burst", "levels": [5000]}, ["load.levels", "max_concurrency"]),
        ({"mode": "burst"}, ["load.levels", "requests sent at once"]),
    ],
)
async def test_invalid_caps_and_bursts(
    team: TeamClient, load: dict[str, Any], names: list[str]
) -> None:
    endpoint = await team.create_endpoint()
    response = await team.submit(job(endpoint["id"], **load))
    assert response.status_code == 422, response.text
    assert response.headers["content-type"].startswith("application/problem+json")
    detail = response.json()["detail"]
    for name in names:
        assert name in detail, detail
    assert (await team.http.get("/v1/jobs")).json()["total"] == 0, "an invalid job was stored"
