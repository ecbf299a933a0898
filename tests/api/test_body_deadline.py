"""A request's body must arrive within INFERCOST_BODY_TIMEOUT_S of its headers: a client
trickling its body a byte at a time gets 408 problem+json and its connection closed; a body
sent at once is served. On an API of its own with a 1 s deadline."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import AsyncIterator

import httpx
import pytest

from api.app import create_app
from infercost.settings import Settings
from tests.asgi import serve_with_hooks
from tests.conftest import TeamClient

pytestmark = pytest.mark.integration

DEADLINE_S = 1.0


@pytest.fixture
async def strict_api(service_env: dict[str, str]) -> AsyncIterator[str]:
    settings = dataclasses.replace(
        Settings.from_env(service_env),
        body_timeout_s=DEADLINE_S,
        queue=f"test-body-{uuid.uuid4().hex[:8]}",
    )
    app = create_app(settings)
    async with serve_with_hooks(app) as url:
        yield url


def endpoint_body() -> bytes:
    return json.dumps(
        {
            "name": f"slow-{uuid.uuid4().hex[:6]}",
            "base_url": "http://192.0.2.10:8000/v1",
            "model": "sim-model",
            "usd_per_hour": 1.0,
        }
    ).encode()


async def trickle(url: str, key: str, body: bytes, every_s: float) -> tuple[bytes, float, bool]:
    """POST `body` a byte every `every_s` s on a raw connection; what came back, after how
    many seconds, and whether the server closed the connection before the body was sent."""
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    head = (
        f"POST /v1/endpoints HTTP/1.1\r\nHost: {host}\r\nAuthorization: Bearer {key}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    started = time.monotonic()
    writer.write(head.encode())
    await writer.drain()
    answer = bytearray()
    closed_early = False

    async def read_all() -> None:
        with contextlib.suppress(ConnectionResetError):  # what came before the reset stays
            while chunk := await reader.read(65536):
                answer.extend(chunk)

    reading = asyncio.create_task(read_all())
    for byte in body:
        # Once the answer has begun, a byte more would reach a socket the server closes,
        # and its reset can discard the answer before it is read.
        if reading.done() or answer:
            closed_early = True
            break
        try:
            writer.write(bytes([byte]))
            await writer.drain()
        except ConnectionError:
            closed_early = True
            break
        await asyncio.sleep(every_s)
    async with asyncio.timeout(10):
        await reading
    elapsed = time.monotonic() - started
    writer.close()
    return bytes(answer), elapsed, closed_early


async def test_a_trickled_body_gets_408_and_the_connection_closes(
    strict_api: str, team: TeamClient
) -> None:
    body = endpoint_body()
    # At a byte every 0.2 s the body would take far longer than the deadline.
    assert len(body) * 0.2 > 10 * DEADLINE_S
    answer, elapsed, closed_early = await trickle(strict_api, team.key, body, 0.2)
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.startswith(b"HTTP/1.1 408"), answer[:300]
    head, _, payload = rest.partition(b"\r\n\r\n")
    assert b"application/problem+json" in head.lower()
    assert b"connection: close" in head.lower()
    assert "INFERCOST_BODY_TIMEOUT_S" in json.loads(payload)["detail"]
    # Answered and closed before the body was all sent.
    assert closed_early, elapsed
    # Nothing was stored.
    listed = (await team.http.get("/v1/endpoints")).json()
    assert listed["total"] == 0


async def test_a_body_sent_at_once_is_served(strict_api: str, team: TeamClient) -> None:
    async with httpx.AsyncClient(
        base_url=strict_api, headers={"Authorization": f"Bearer {team.key}"}, timeout=30
    ) as http:
        response = await http.post(
            "/v1/endpoints", content=endpoint_body(), headers={"Content-Type": "application/json"}
        )
    assert response.status_code == 201, response.text
