"""A cap on a rate level's requests in flight (load.max_concurrency) and bursts (load.mode
"burst"), end to end: API, worker and a simulator that counts what it serves at once."""

from __future__ import annotations

import asyncio
import contextlib
import csv
import heapq
import io
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from sim.config import SimConfig
from sim.process import SimProcess, start_sim_process
from tests.conftest import TeamClient, inflight_at_sends

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]

#: How soon after the cap lets a request go it must be sent (a loaded machine's event loop
#: can be late by tens of milliseconds; a request that waited a round too long is 0.5 s late).
PROMPT_S = 0.25


@pytest.fixture
def slow_sim() -> Iterator[SimProcess]:
    """200 ms to the first token, then 20 ms a token: 16 tokens take 0.5 s a request."""
    proc = start_sim_process(SimConfig(port=0, ttft_ms=200.0, itl_ms=20.0, model="sim-model"))
    try:
        yield proc
    finally:
        proc.stop()


class RunningGauge:
    """What the simulator itself says it serves at once: its vllm:num_requests_running
    gauge, read every few milliseconds while a job runs (`peak`: the most seen)."""

    def __init__(self, sim: SimProcess) -> None:
        self.url = sim.metrics_url
        self.peak = 0
        self.reads = 0
        self._task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        async with httpx.AsyncClient() as http:
            while True:
                text = (await http.get(self.url)).text
                for line in text.splitlines():
                    if line.startswith("vllm:num_requests_running"):
                        self.peak = max(self.peak, int(float(line.rsplit(" ", 1)[1])))
                self.reads += 1
                await asyncio.sleep(0.005)

    async def __aenter__(self) -> RunningGauge:
        self._task = asyncio.create_task(self._poll())
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._task is not None
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


def job(endpoint_id: str, **load: Any) -> dict[str, Any]:
    return {
        "endpoint_id": endpoint_id,
        "workload": {"input_tokens": {"mean": 32}, "output_tokens": {"mean": 16}},
        "load": load,
    }


def capped_sends(rows: list[dict[str, Any]], cap: int) -> list[float]:
    """When each request could go out at the earliest under the cap, from the samples alone:
    at its due time (t_sched) if fewer than `cap` earlier requests are still in flight then,
    else when the first of them ends (t_send + e2e, as stored)."""
    ends: list[float] = []  # a heap of the in-flight requests' ends
    earliest: list[float] = []
    for r in sorted(rows, key=lambda r: r["seq"]):
        while ends and ends[0] <= r["t_sched"]:
            heapq.heappop(ends)
        at = r["t_sched"] if len(ends) < cap else max(r["t_sched"], heapq.heappop(ends))
        earliest.append(at)
        heapq.heappush(ends, r["t_send"] + r["e2e_ms"] / 1000.0)
    return earliest


async def test_capped_rate_level_waits_for_slots(team: TeamClient, slow_sim: SimProcess) -> None:
    # 20 requests/s offered, at most 4 in flight, 0.5 s a request: the server carries 8/s,
    # so from the fifth request on each waits for a slot. By hand, request i goes out at
    # 0.5 * (i // 4) + 0.05 * (i % 4): the last of 44 (due at 2.15 s) at 5.15 s, after
    # waiting 3.0 s (plus the client's and server's overheads of 10 rounds).
    endpoint = await team.create_endpoint(base_url=slow_sim.openai_base_url)
    body = job(
        endpoint["id"],
        mode="rate",
        levels=[20],
        arrival="constant",
        requests_per_level=40,
        warmup_requests=4,
        max_concurrency=4,
    )
    async with RunningGauge(slow_sim) as gauge:
        response = await team.submit(body)
        assert response.status_code == 202, response.text
        assert response.json()["load"]["max_concurrency"] == 4
        final = await team.wait_job(response.json()["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]
    [run] = final["runs"]
    assert (run["mode"], run["level"]) == ("rate", 20)
    assert run["requests"]["succeeded"] == 40

    # The server never served more than the cap at once, and did reach it.
    assert gauge.reads > 100
    assert gauge.peak == 4
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
    # The server's 0.5 s a request over 10 rounds sets the last wait's floor; each request
    # went out when the cap first let it (its slot's previous request ended), give or take
    # the client's own promptness, so the waits do not add up past what the server took.
    assert last["cap_wait_ms"] >= 2900, last
    for r, at in zip(sorted(rows, key=lambda r: r["seq"]), capped_sends(rows, 4), strict=True):
        assert at - 1e-3 <= r["t_send"] <= at + PROMPT_S, (r, at)
    assert run["queue_delay_ms"]["max"] >= 2900

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
    async with RunningGauge(slow_sim) as gauge:
        final = await team.wait_job(submitted["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]

    # The simulator had all 30 in hand at once.
    assert gauge.peak == 30
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


async def test_capped_burst_queues_from_the_start(team: TeamClient, slow_sim: SimProcess) -> None:
    # vLLM's --request-rate inf with --max-concurrency: 12 due at once, 3 in flight.
    endpoint = await team.create_endpoint(base_url=slow_sim.openai_base_url)
    body = job(endpoint["id"], mode="burst", levels=[12], max_concurrency=3)
    async with RunningGauge(slow_sim) as gauge:
        response = await team.submit(body)
        assert response.status_code == 202, response.text
        final = await team.wait_job(response.json()["id"], timeout=90)
    assert final["status"] == "succeeded", final["error"]
    assert gauge.peak == 3
    [run] = final["runs"]
    cap = run["concurrency_cap"]
    assert (cap["max_concurrency"], cap["reached"], cap["waited"]) == (3, True, 9)
    # Four rounds of 0.5 s: the last three waited about 1.5 s.
    assert 1400 <= cap["wait_ms"]["max"] <= 2000, cap


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
