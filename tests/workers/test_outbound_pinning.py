"""The load generator connects only where the outbound policy checked: each level resolves
the endpoint's host once, checks the addresses, and sends to the first one with the
endpoint's own name in Host (and TLS); a base_url that now points at a metadata address
fails the job with the policy's reason, before any request or run."""

from __future__ import annotations

import uuid
from typing import Any

import asyncpg
import httpx
import pytest

from infercost.net.outbound import pinned
from sim.process import SimProcess
from tests.asgi import Receive, Send, serve_in_loop
from tests.conftest import TeamClient
from workers.loadgen.transport import SLOT, load_client, server_name


async def echo_host(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answers with the Host header it was sent and the address it was reached at."""
    if scope["type"] != "http":
        return
    await receive()
    host = dict(scope["headers"]).get(b"host", b"")
    body = host + b" " + scope["server"][0].encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


async def test_a_pinned_request_reaches_the_address_with_the_name_in_host() -> None:
    async with serve_in_loop(echo_host) as url:
        port = httpx.URL(url).port
        # A name that resolves nowhere: only the pinned address can be reached.
        named = f"http://llm.invalid:{port}/v1/models"
        target = pinned(named, "127.0.0.1")
        client = load_client(2)
        try:
            for extensions in ({SLOT: 0}, {}):  # a slot's own connection, the shared pool
                response = await client.get(
                    target.url, headers=target.headers, extensions=extensions
                )
                assert response.text == f"llm.invalid:{port} 127.0.0.1", extensions
        finally:
            await client.aclose()


def test_tls_name_is_the_endpoints_not_the_address() -> None:
    target = pinned("https://gpu.example.com:8443/v1/chat/completions", "10.1.2.3")
    request = httpx.Request("POST", target.url, headers=target.headers)
    assert request.url.host == "10.1.2.3"
    assert server_name(request) == "gpu.example.com"
    v6 = pinned("https://gpu.example.com/v1", "fd12::7")
    assert server_name(httpx.Request("GET", v6.url, headers=v6.headers)) == "gpu.example.com"
    assert server_name(httpx.Request("GET", "https://[fd12::7]:8443/v1")) == "fd12::7"


JOB = {
    "workload": {"input_tokens": {"mean": 16}, "output_tokens": {"mean": 4}},
    "load": {"mode": "concurrency", "levels": [1, 2], "requests_per_level": 4},
}


@pytest.mark.integration
@pytest.mark.usefixtures("worker")
async def test_loopback_allowed_and_metadata_refused_on_the_job(
    team: TeamClient, sim: SimProcess, db: asyncpg.Connection
) -> None:
    # The suite allows loopback (INFERCOST_OUTBOUND_ALLOW=127.0.0.0/8,::1): the job runs.
    allowed = await team.create_endpoint(base_url=sim.openai_base_url)
    job = await team.run_job({"endpoint_id": allowed["id"], **JOB})
    assert job["progress"]["done"] == 8
    # A base_url the API would refuse, written straight to the database (an old row, or a
    # row written before the policy): the worker refuses it itself.
    stored = await team.create_endpoint(base_url=sim.openai_base_url)
    await db.execute(
        "UPDATE endpoints SET base_url = 'http://169.254.169.254/v1' WHERE id = $1",
        uuid.UUID(stored["id"]),
    )
    response = await team.submit({"endpoint_id": stored["id"], **JOB})
    assert response.status_code == 202, response.text
    refused = await team.wait_job(response.json()["id"])
    assert refused["status"] == "failed"
    assert refused["error"].startswith("refused by the outbound policy: "), refused["error"]
    assert "169.254.169.254" in refused["error"] and "base_url" in refused["error"]
    # Refused before any level started: no run, none left running.
    runs = await db.fetchval(
        "SELECT count(*) FROM runs WHERE job_id = $1", uuid.UUID(refused["id"])
    )
    assert runs == 0
