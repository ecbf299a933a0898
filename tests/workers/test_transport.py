"""The load client's per-slot connections, checked from the server's side of real sockets."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest

from tests.asgi import Receive, Send, serve_in_loop
from tests.workers.test_stream import (
    ReplayApp,
    fixture_bytes,
    sse_events,
    truncated_stream_server,
)
from workers.loadgen.stream import RawRequest, Target, request_body, send
from workers.loadgen.transport import SLOT, load_client


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


# --- a slot's own connection, through send() as the load generator uses it ------------------


async def slot_fetch(
    client: httpx.AsyncClient, base_url: str, slot: int = 0, timeout_s: float = 5.0
) -> RawRequest:
    target = Target.for_endpoint(base_url, "openai-chat", "m", None, timeout_s)
    body = request_body(target, "hello there", 8, stream=True, ignore_eos=True, temperature=None)
    rec = RawRequest(seq=0, warmup=False, t_sched=time.perf_counter_ns(), n_in_local=10)
    await send(client, target, body, rec, stream=True, slot=slot)
    return rec


@pytest.fixture(scope="module")
async def replay_url() -> AsyncIterator[str]:
    async with serve_in_loop(ReplayApp()) as url:
        yield url


async def test_slot_connection_reads_a_captured_stream_like_httpcore(replay_url: str) -> None:
    async with load_client(8) as client:
        first = await slot_fetch(client, f"{replay_url}/chat-stream-usage-sse/v1")
        again = await slot_fetch(client, f"{replay_url}/chat-stream-usage-sse/v1")
    async with httpx.AsyncClient() as plain:
        target = Target.for_endpoint(
            f"{replay_url}/chat-stream-usage-sse/v1", "openai-chat", "m", None, 5.0
        )
        body = request_body(target, "hi", 8, stream=True, ignore_eos=True, temperature=None)
        reference = RawRequest(seq=0, warmup=False, t_sched=time.perf_counter_ns(), n_in_local=10)
        await send(plain, target, body, reference, stream=True)
    for rec in (first, again):
        assert rec.error_class is None, rec.error
        assert rec.status == 200
        assert len(rec.chunk_ns) == len(reference.chunk_ns) == 8
        assert (rec.n_out, rec.n_in, rec.count_source) == (8, 18, "usage")
        assert rec.t_first_byte is not None
        assert rec.t_sched <= rec.t_send <= rec.t_first_byte < rec.chunk_ns[0]
        assert rec.t_end is not None
        assert rec.t_end >= rec.chunk_ns[-1]


async def test_slot_connection_keeps_status_and_message(replay_url: str) -> None:
    async with load_client(8) as client:
        rec = await slot_fetch(client, f"{replay_url}/error-400/v1")
        ok = await slot_fetch(client, f"{replay_url}/chat-stream-usage-sse/v1")
    assert rec.error_class == "http_4xx"
    assert rec.status == 400
    assert rec.error is not None
    assert rec.error.startswith("HTTP 400: ")
    # the connection (or a new one) still serves the slot's next request
    assert ok.error_class is None, ok.error


async def test_slot_timeout_closes_the_connection_and_the_slot_serves_again(
    replay_url: str,
) -> None:
    async with load_client(8) as client:
        stalled = await slot_fetch(client, f"{replay_url}/stall/v1", timeout_s=0.3)
        ok = await slot_fetch(client, f"{replay_url}/chat-stream-usage-sse/v1")
    assert stalled.error_class == "timeout"
    assert len(stalled.chunk_ns) == 0
    assert ok.error_class is None, ok.error
    assert len(ok.chunk_ns) == 8


async def test_t_send_is_stamped_just_before_the_request_is_written() -> None:
    """The `trace` event httpcore names http11.send_request_headers.started fires once, after
    the connection is up and before the server sees the first byte of the request."""
    seen: dict[str, int] = {}

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        seen["accepted"] = time.perf_counter_ns()
        await reader.readuntil(b"\r\n\r\n")
        seen["received"] = time.perf_counter_ns()
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    events: list[tuple[str, int]] = []

    async def trace(event: str, _info: object) -> None:
        events.append((event, time.perf_counter_ns()))

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with load_client(4) as client:
            response = await client.get(
                f"http://127.0.0.1:{port}/", extensions={SLOT: 0, "trace": trace}
            )
    finally:
        server.close()
        await server.wait_closed()
    assert response.text == "ok"
    assert [name for name, _ in events] == ["http11.send_request_headers.started"]
    assert events[0][1] <= seen["received"]


async def test_slot_reconnects_after_the_server_closes_its_connection() -> None:
    ports: list[int] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        ports.append(writer.get_extra_info("peername")[1])
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 2\r\nconnection: close\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        async with load_client(4) as client:
            for _ in range(3):
                response = await client.get(f"http://127.0.0.1:{port}/", extensions={SLOT: 0})
                assert response.text == "ok"
    finally:
        server.close()
        await server.wait_closed()
    assert len(set(ports)) == 3  # `connection: close` honoured, a new connection each time


async def test_a_slot_follows_its_request_to_another_server() -> None:
    """A worker runs one job after another against different endpoints with the same slot
    numbers: each request must reach its own URL's server, never the slot's previous one."""

    def answering(name: bytes) -> Any:
        async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            with contextlib.suppress(asyncio.IncompleteReadError, ConnectionError):
                while await reader.readuntil(b"\r\n\r\n"):
                    writer.write(b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\n\r\n" + name)
                    await writer.drain()

        return handle

    servers = [await asyncio.start_server(answering(n), "127.0.0.1", 0) for n in (b"a", b"b")]
    urls = [f"http://127.0.0.1:{s.sockets[0].getsockname()[1]}/" for s in servers]
    try:
        async with load_client(4) as client:
            answers = [
                (await client.get(url, extensions={SLOT: 0})).text
                for url in (urls[0], urls[1], urls[1], urls[0])
            ]
    finally:
        for server in servers:
            server.close()
            await server.wait_closed()
    assert answers == ["a", "b", "b", "a"]


async def test_slot_connection_refused_is_a_connect_error() -> None:
    probe = await asyncio.start_server(lambda _r, _w: None, "127.0.0.1", 0)
    port = probe.sockets[0].getsockname()[1]
    probe.close()
    await probe.wait_closed()
    async with load_client(4) as client:
        rec = await slot_fetch(client, f"http://127.0.0.1:{port}/v1")
    assert rec.error_class == "connect"
    assert rec.error == f"connection refused at http://127.0.0.1:{port}/v1"


async def test_slot_connection_closed_mid_stream_is_stream_broken() -> None:
    events = sse_events(fixture_bytes("chat-stream-usage.sse"))[:2]  # role, first content
    async with truncated_stream_server(events, 0.005) as url, load_client(4) as client:
        rec = await slot_fetch(client, url)
    assert rec.status == 200
    assert rec.error_class == "stream_broken"
    assert rec.error is not None
    assert "broke" in rec.error
    assert len(rec.chunk_ns) == 1
