"""Webhooks end to end: a receiver on loopback gets a job's job.finished payload, signed so
that verify() accepts it; a failing receiver gets retries with backoff, each one in the
delivery log; a delivery whose message was lost is re-sent by the worker's sweep."""

from __future__ import annotations

import asyncio
import itertools
import json
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import asyncpg
import pytest

from infercost.webhooks.signing import verify
from sim.config import SimConfig
from sim.process import SimProcess, start_sim_process
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


@dataclass
class Received:
    """One request the receiver got."""

    headers: dict[str, str]
    body: bytes
    at: float


@dataclass
class Receiver:
    """A webhook receiver on loopback answering each POST with the next scripted status
    (the last one repeats), recording what it got."""

    url: str
    statuses: list[int]
    got: list[Received] = field(default_factory=list)

    async def wait_for(self, count: int, timeout: float = 60.0) -> list[Received]:
        deadline = time.monotonic() + timeout
        while len(self.got) < count:
            if time.monotonic() > deadline:
                pytest.fail(f"the receiver got {len(self.got)} requests, not {count}")
            await asyncio.sleep(0.1)
        return list(self.got)


@contextmanager
def receiver(*statuses: int, hold_s: float = 0.0) -> Iterator[Receiver]:
    """Serve a Receiver on a free loopback port for the block; it holds each answer for
    `hold_s` seconds after reading the request."""
    state = Receiver(url="", statuses=list(statuses) or [200])

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("content-length", "0")))
            index = len(state.got)
            state.got.append(Received(dict(self.headers.items()), body, time.time()))
            code = state.statuses[min(index, len(state.statuses) - 1)]
            time.sleep(hold_s)
            self.send_response(code)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *_: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state.url = f"http://127.0.0.1:{server.server_address[1]}/hooks"
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        server.shutdown()
        server.server_close()


async def create_webhook(team: TeamClient, url: str, events: list[str]) -> dict[str, Any]:
    response = await team.http.post("/v1/webhooks", json={"url": url, "events": events})
    assert response.status_code == 201, response.text
    return dict(response.json())


async def wait_delivery(
    team: TeamClient, webhook_id: str, status: str, timeout: float = 60.0
) -> dict[str, Any]:
    """The webhook's newest delivery once it reaches `status`."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        log = (await team.http.get(f"/v1/webhooks/{webhook_id}/deliveries")).json()
        if log["items"] and log["items"][0]["status"] == status:
            return dict(log["items"][0])
        await asyncio.sleep(0.2)
    pytest.fail(f"no {status} delivery for webhook {webhook_id} after {timeout} s: {log}")


def at(value: str) -> float:
    return datetime.fromisoformat(value).timestamp()


def gaps_s(attempts: list[dict[str, Any]]) -> list[float]:
    """Seconds between consecutive attempts of a delivery."""
    return [at(b["at"]) - at(a["at"]) for a, b in itertools.pairwise(attempts)]


async def test_job_finished_payload_is_signed_and_verifies(
    team: TeamClient, sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(base_url=sim.openai_base_url)
    with receiver(200) as hooks:
        webhook = await create_webhook(team, hooks.url, ["job.finished"])
        unsubscribed = await create_webhook(team, hooks.url, ["regression.detected"])
        job = await team.run_job(
            {
                "endpoint_id": endpoint["id"],
                "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
                "load": {"mode": "concurrency", "levels": [1, 2], "requests_per_level": 3},
            }
        )
        (got,) = await hooks.wait_for(1)
        delivery = await wait_delivery(team, webhook["id"], "delivered")

    # What a receiver checks: the signature over the exact bytes, and the headers.
    signature = got.headers["Infercost-Signature"]
    assert verify(webhook["secret"], signature, got.body)
    assert not verify(unsubscribed["secret"], signature, got.body)
    assert got.headers["Infercost-Event"] == "job.finished"
    assert got.headers["Infercost-Delivery"] == delivery["id"]
    assert got.headers["Content-Type"] == "application/json"

    payload = json.loads(got.body)
    assert payload["id"] == delivery["id"] and payload["event"] == "job.finished"
    data = payload["data"]
    assert data["job"]["id"] == job["id"] and data["job"]["status"] == "succeeded"
    assert data["job"]["error"] is None and data["job"]["endpoint_id"] == endpoint["id"]
    assert at(data["job"]["finished_at"]) == pytest.approx(at(job["finished_at"]), abs=1e-3)
    assert data["job"]["started_at"] is not None
    runs = {r["id"]: r for r in job["runs"]}
    assert [r["level"] for r in data["runs"]] == [1, 2]
    for sent in data["runs"]:
        run = runs[sent["id"]]
        assert sent["status"] == "succeeded" and sent["mode"] == "concurrency"
        assert sent["ttft_p95_ms"] == pytest.approx(run["ttft_ms"]["p95"])
        assert sent["tpot_p95_ms"] == pytest.approx(run["tpot_ms"]["p95"])
        assert sent["output_tokens_per_s"] == pytest.approx(run["output_tokens_per_s"])
        assert sent["cost_per_million_output_tokens_usd"] == pytest.approx(
            run["cost"]["per_million_output_tokens_usd"]
        )
        assert sent["slo_passed"] == run["slo_passed"]

    # The log: one attempt, answered 200; the unsubscribed webhook got nothing.
    assert delivery["attempts"] == 1 and delivery["next_attempt_at"] is None
    assert delivery["delivered_at"] is not None
    assert [a["response_status"] for a in delivery["attempt_log"]] == [200]
    assert delivery["attempt_log"][0]["error"] is None
    log = (await team.http.get(f"/v1/webhooks/{unsubscribed['id']}/deliveries")).json()
    assert log["total"] == 0


async def test_failing_receivers_are_retried_with_backoff(team: TeamClient) -> None:
    # service_env: retries after 1, 2, 4 s; four attempts in all.
    # The recovering receiver holds each answer 0.3 s: every attempt lasts at least that.
    with receiver(500, 503, 200, hold_s=0.3) as flaky, receiver(500) as broken:
        recovers = await create_webhook(team, flaky.url, ["job.finished"])
        never = await create_webhook(team, broken.url, ["job.finished"])
        for webhook in (recovers, never):
            ping = await team.http.post(f"/v1/webhooks/{webhook['id']}/ping")
            assert ping.status_code == 202, ping.text
        delivered = await wait_delivery(team, recovers["id"], "delivered")
        failed = await wait_delivery(team, never["id"], "failed")
        assert len(flaky.got) == 3 and len(broken.got) == 4

    # Each attempt is in the log with the receiver's answer, spaced by the backoff.
    assert delivered["attempts"] == 3
    log = delivered["attempt_log"]
    assert [a["attempt"] for a in log] == [1, 2, 3]
    assert [a["response_status"] for a in log] == [500, 503, 200]
    assert log[0]["error"] == "the receiver answered HTTP 500" and log[2]["error"] is None
    gaps = gaps_s(log)
    assert gaps[0] >= 0.9 and gaps[1] >= 1.9, gaps
    assert all(a["duration_ms"] >= 300 for a in log), log

    assert failed["attempts"] == 4 and failed["next_attempt_at"] is None
    assert failed["delivered_at"] is None
    assert [a["response_status"] for a in failed["attempt_log"]] == [500] * 4
    gaps = gaps_s(failed["attempt_log"])
    assert gaps[0] >= 0.9 and gaps[1] >= 1.9 and gaps[2] >= 3.9, gaps

    # Every retry is the same delivery, the same bytes, freshly signed.
    for hooks, webhook in ((flaky, recovers), (broken, never)):
        assert len({r.headers["Infercost-Delivery"] for r in hooks.got}) == 1
        assert len({r.body for r in hooks.got}) == 1
        assert all(
            verify(webhook["secret"], r.headers["Infercost-Signature"], r.body) for r in hooks.got
        )


async def test_a_delivery_needs_no_message_and_never_waits_for_a_benchmark(
    team: TeamClient, db: asyncpg.Connection
) -> None:
    """The courier finds due deliveries in the outbox itself: one written straight to the
    table (no broker message) is sent, and so is a ping while the only worker process is
    busy with a long level."""
    with receiver(200) as hooks:
        webhook = await create_webhook(team, hooks.url, ["job.finished"])
        delivery_id = uuid.uuid4()
        payload: dict[str, Any] = {"id": str(delivery_id), "event": "ping", "data": {}}
        await db.execute(
            "INSERT INTO webhook_deliveries (id, webhook_id, event, payload, status, attempts,"
            " next_attempt_at, created_at) VALUES ($1, $2, 'ping', $3, 'pending', 0,"
            " now() - interval '10 minutes', now())",
            delivery_id,
            uuid.UUID(webhook["id"]),
            json.dumps(payload),
        )
        (got,) = await hooks.wait_for(1, timeout=15)
        delivery = await wait_delivery(team, webhook["id"], "delivered")
        assert delivery["id"] == str(delivery_id)
        assert got.headers["Infercost-Delivery"] == str(delivery_id)
        assert verify(webhook["secret"], got.headers["Infercost-Signature"], got.body)
        assert [a["response_status"] for a in delivery["attempt_log"]] == [200]

        # A level of about 20 s keeps the worker's only process busy; a ping still arrives.
        slow = start_sim_process(SimConfig(port=0, ttft_ms=2000.0, itl_ms=10.0))
        try:
            endpoint = await team.create_endpoint(base_url=slow.openai_base_url)
            body = {
                "endpoint_id": endpoint["id"],
                "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
                "load": {"mode": "concurrency", "levels": [1], "requests_per_level": 10},
            }
            submitted = await team.submit(body)
            assert submitted.status_code == 202, submitted.text
            job_id = submitted.json()["id"]
            deadline = time.monotonic() + 30
            while (await team.http.get(f"/v1/jobs/{job_id}")).json()["status"] != "running":
                assert time.monotonic() < deadline, "the slow job never started"
                await asyncio.sleep(0.2)
            ping = await team.http.post(f"/v1/webhooks/{webhook['id']}/ping")
            assert ping.status_code == 202, ping.text
            got = await hooks.wait_for(2, timeout=10)
            assert json.loads(got[1].body)["event"] == "ping"
            job = (await team.http.get(f"/v1/jobs/{job_id}")).json()
            assert job["status"] == "running", "the ping waited for the benchmark"
            await team.http.post(f"/v1/jobs/{job_id}/cancel")
        finally:
            slow.stop()
