"""The load client's per-slot connections, checked from the server's side of real sockets."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest

from tests.asgi import serve_in_loop
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
    async with serve_in_loop(client_port) as url:
        yield url + "/"


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
