"""The load client's per-slot connections, checked from the server's side of real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
import uvicorn

from workers.loadgen.transport import SLOT, load_client

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def client_port(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    """Answers with the client's source port: one port per TCP connection."""
    if scope["type"] != "http":
        return
    await receive()
    body = str(scope["client"][1]).encode()
    await send({"type": "http.response.start", "status": 200, "headers": []})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture(scope="module")
async def server_url() -> AsyncIterator[str]:
    config = uvicorn.Config(
        client_port, host="127.0.0.1", port=0, lifespan="off", log_level="warning"
    )
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    async with asyncio.timeout(10):
        while not server.started:
            if task.done():
                task.result()
                pytest.fail("uvicorn exited before it started")
            await asyncio.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/"
    finally:
        server.should_exit = True
        await task


async def test_each_slot_keeps_its_own_connection(server_url: str) -> None:
    async with load_client(64) as client:

        async def port(slot: int | None) -> str:
            extensions = {} if slot is None else {SLOT: slot}
            return (await client.get(server_url, extensions=extensions)).text

        first = [await port(slot) for slot in range(4)]
        again = [await port(slot) for slot in range(4)]
        assert len(set(first)) == 4, "slots must not share a connection"
        assert first == again, "a slot must reuse its keep-alive connection"
        # Concurrent requests on different slots still use one connection each.
        concurrent = await asyncio.gather(*(port(slot) for slot in range(4)))
        assert concurrent == first
        # Requests without a slot use the shared pool, apart from every slot's connection.
        shared = await port(None)
        assert shared not in first
        assert await port(None) == shared
