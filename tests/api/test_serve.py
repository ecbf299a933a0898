"""`infercost api` as clients meet it over the network."""

from __future__ import annotations

import asyncio

import httpx
import pytest

from tests.conftest import Api

pytestmark = pytest.mark.integration


async def _health(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> bytes:
    """GET /health on an open connection; the response's status line."""
    writer.write(b"GET /health HTTP/1.1\r\nHost: infercost\r\n\r\n")
    await writer.drain()
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    length = next(
        int(line.split(b":", 1)[1]) for line in lines if line.lower().startswith(b"content-length:")
    )
    await reader.readexactly(length)  # uvicorn sends a length
    return head.split(b"\r\n", 1)[0]


async def test_an_idle_connection_outlives_the_clients_keep_alive(api_server: Api) -> None:
    """A connection idle for longer than httpx keeps one (its default keep-alive expiry) still
    answers. Were the server to close first, a client reusing the connection near that moment
    would send its request as the server hung up ("Server disconnected without sending a
    response"): the client must be the side that lets an idle connection go."""
    client_expiry = httpx.Limits().keepalive_expiry
    assert client_expiry is not None
    url = httpx.URL(api_server.url)
    reader, writer = await asyncio.open_connection(url.host, url.port)
    try:
        assert await _health(reader, writer) == b"HTTP/1.1 200 OK"
        await asyncio.sleep(client_expiry + 1.0)
        # The same socket: a closed one ends in IncompleteReadError here.
        assert await _health(reader, writer) == b"HTTP/1.1 200 OK"
    finally:
        writer.close()
