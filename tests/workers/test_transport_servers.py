"""The slot transport against servers that close kept-alive connections, answer
`Connection: close`, break off, or sit behind a proxy; checked from the server's side of real
loopback sockets (what it accepted, read and answered), never from the transport's insides."""

from __future__ import annotations

import asyncio
import contextlib
import re
import socket
import socketserver
import struct
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import BinaryIO

import httpx
import pytest

from tests.workers.test_stream import fixture_bytes, sse_events
from workers.loadgen.stream import RawRequest, Target, request_body, send
from workers.loadgen.transport import SLOT, load_client

# A captured llama-server stream: 8 content events, usage 18 in / 8 out.
EVENTS = sse_events(fixture_bytes("chat-stream-usage.sse"))
# llama-server's streamed answer: keep-alive promised, chunked body.
SSE_HEAD = (
    b"HTTP/1.1 200 OK\r\nKeep-Alive: timeout=5, max=100\r\nContent-Type: text/event-stream\r\n"
    b"Transfer-Encoding: chunked\r\n\r\n"
)
SSE_RESPONSE = SSE_HEAD + b"".join(b"%x\r\n%s\r\n" % (len(e), e) for e in EVENTS) + b"0\r\n\r\n"


@dataclass
class Seen:
    """What a test server saw: connections accepted, and per request (connection number,
    position on that connection, perf_counter_ns when its head was read, whether answered)."""

    connections: int = 0
    requests: list[tuple[int, int, int, bool]] = field(default_factory=list)

    def answered(self) -> int:
        return sum(answered for *_, answered in self.requests)

    def dropped(self) -> int:
        return sum(not answered for *_, answered in self.requests)


async def read_request(reader: asyncio.StreamReader) -> bytes | None:
    """One request (head and body) off the connection, None when the client closed it."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except (asyncio.IncompleteReadError, ConnectionError):
        return None
    match = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
    return head + await reader.readexactly(int(match.group(1)) if match else 0)


def reset_close(writer: asyncio.StreamWriter) -> None:
    """Close with a TCP reset instead of a FIN (SO_LINGER 0), as a crashed peer would."""
    sock = writer.get_extra_info("socket")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    writer.transport.abort()


# Answers request number `nth` (from 0) on a connection: True if it answered, False if it
# dropped the connection instead.
Answer = Callable[[asyncio.StreamWriter, int], Awaitable[bool]]


@contextlib.asynccontextmanager
async def raw_server(answer: Answer) -> AsyncIterator[tuple[str, Seen]]:
    """A raw HTTP/1.1 server in the test's event loop; yields its /v1 URL and what it saw."""
    seen = Seen()

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = seen.connections
        seen.connections += 1
        nth = 0
        with contextlib.suppress(ConnectionError):
            while await read_request(reader) is not None:
                received = time.perf_counter_ns()
                answered = await answer(writer, nth)
                seen.requests.append((number, nth, received, answered))
                if not answered or writer.is_closing():
                    break
                nth += 1
        if not writer.is_closing():
            writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        yield f"http://127.0.0.1:{port}/v1", seen
    finally:
        server.close()
        await server.wait_closed()


async def fetch(client: httpx.AsyncClient, url: str, slot: int = 0) -> RawRequest:
    """One streamed chat request through the load generator's own send()."""
    target = Target.for_endpoint(url, "openai-chat", "m", None, 5.0)
    body = request_body(target, "hello there", 8, stream=True, ignore_eos=True, temperature=None)
    rec = RawRequest(seq=0, warmup=False, t_sched=time.perf_counter_ns(), n_in_local=10)
    await send(client, target, body, rec, stream=True, slot=slot)
    return rec


def assert_ok(rec: RawRequest) -> None:
    assert rec.error_class is None, rec.error
    assert (rec.status, rec.n_out, rec.n_in, rec.count_source) == (200, 8, 18, "usage")
    assert len(rec.chunk_ns) == 8


# --- a kept-alive connection the server closed: sent again, once, counted once ----------------


@pytest.mark.parametrize("how", ["close", "reset"])
async def test_a_request_on_a_connection_the_server_dropped_is_sent_again(how: str) -> None:
    """The server answers the first request of each connection and drops any later one
    without a byte of answer: every request after a slot's first lands on a reused
    connection, is dropped, and must succeed on a fresh one, t_send stamped at the re-send."""

    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        if nth > 0:
            if how == "reset":
                reset_close(writer)
            else:
                writer.close()
            return False
        writer.write(SSE_RESPONSE)
        await writer.drain()
        return True

    async with raw_server(answer) as (url, seen), load_client(8) as client:
        one_slot = [await fetch(client, url) for _ in range(50)]
        assert seen.connections == 50
        assert seen.answered() == 50
        assert seen.dropped() == 49  # every request but the first went on a reused connection
        first_drops = len(seen.requests)

        async def user(slot: int) -> list[RawRequest]:
            return [await fetch(client, url, slot) for _ in range(15)]

        by_slot = await asyncio.gather(*(user(slot) for slot in range(1, 5)))

    for rec in one_slot + [rec for recs in by_slot for rec in recs]:
        assert_ok(rec)
    # Four more slots, 15 requests each: 60 answered, 4 x 14 dropped and sent again.
    assert seen.answered() == 110
    assert seen.dropped() == 49 + 56
    assert seen.connections == 110
    # Each answered request came on its own connection; a dropped one on the connection
    # before, and that request's t_send falls between the drop and the answered receipt.
    answered = sorted(r for r in seen.requests[:first_drops] if r[3])
    dropped = sorted(r for r in seen.requests[:first_drops] if not r[3])
    assert [r[1] for r in answered] == [0] * 50
    assert [r[1] for r in dropped] == [1] * 49
    for rec, drop, resend in zip(one_slot[1:], dropped, answered[1:], strict=True):
        assert drop[0] + 1 == resend[0]
        assert drop[2] < rec.t_send <= resend[2]


class _LlamaLike(socketserver.BaseRequestHandler):
    """llama-server's habit, one thread per connection: answer with `Keep-Alive`, then end
    the connection at once. It half-closes and keeps reading, so that a request the client
    wrote before it saw the close is counted, then closes without answering it."""

    server: _LlamaServer

    def handle(self) -> None:
        self.request.settimeout(10.0)  # a hung client must not hang the test's teardown
        with self.server.lock:
            self.server.connections += 1
        reader = self.request.makefile("rb")
        if not _read_request(reader):
            return
        self.request.sendall(SSE_RESPONSE)
        with self.server.lock:
            self.server.answered += 1
        self.request.shutdown(socket.SHUT_WR)
        if _read_request(reader):
            with self.server.lock:
                self.server.dropped += 1


def _read_request(reader: BinaryIO) -> bool:
    """Read one request's head and body; False at the end of the connection."""
    length = 0
    while True:
        line = reader.readline()
        if not line:
            return False
        if line in (b"\r\n", b"\n"):
            break
        name, _, value = line.partition(b":")
        if name.strip().lower() == b"content-length":
            length = int(value)
    reader.read(length)
    return True


class _LlamaServer(socketserver.ThreadingTCPServer):
    block_on_close = True  # server_close() waits for the connection threads

    def __init__(self) -> None:
        super().__init__(("127.0.0.1", 0), _LlamaLike)
        self.lock = threading.Lock()
        self.connections = self.answered = self.dropped = 0


async def settled(
    count: Callable[[], int], expected: int, lock: threading.Lock, timeout: float = 10.0
) -> int:
    """A count kept by server threads, once it reaches `expected` or `timeout` passes."""
    deadline = time.monotonic() + timeout
    while True:
        with lock:
            value = count()
        if value == expected or time.monotonic() > deadline:
            return value
        await asyncio.sleep(0.01)


@contextlib.asynccontextmanager
async def llama_like_server() -> AsyncIterator[tuple[str, _LlamaServer]]:
    """Serve from threads; yield the /v1 URL and the server (its counts)."""
    server = _LlamaServer()
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()

    def stop() -> None:
        server.shutdown()
        server.server_close()
        thread.join()

    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1", server
    finally:
        # From a thread: the event loop must keep running to finish closing the client's
        # sockets, which the connection threads are waiting for.
        await asyncio.to_thread(stop)


async def test_a_server_closing_after_every_response_costs_no_request() -> None:
    """Against a llama-server-like peer in another thread (whether its close or the client's
    next request comes first is a real race): no errors, each request answered once, and
    the client's extra sends (trace events beyond one per request) are exactly the requests
    the server received on connections it had already closed."""
    attempts = 0

    async def trace(event: str, _info: object) -> None:
        nonlocal attempts
        if event == "http11.send_request_headers.started":
            attempts += 1

    async def one(client: httpx.AsyncClient, url: str, slot: int) -> None:
        extensions = {SLOT: slot, "trace": trace}
        async with client.stream(
            "POST", url + "/chat/completions", content=b"{}", extensions=extensions
        ) as response:
            body = await response.aread()
        assert response.status_code == 200
        assert body == b"".join(EVENTS)

    async def user(client: httpx.AsyncClient, url: str, slot: int) -> None:
        for _ in range(20):
            await one(client, url, slot)

    async with llama_like_server() as (url, server), load_client(8) as client:
        for _ in range(60):
            await one(client, url, 0)
        await asyncio.gather(*(user(client, url, slot) for slot in range(1, 5)))
        resent = attempts - (60 + 4 * 20)
        # The server's thread counts a request it dropped only once it has read it, which may
        # be after the client already has its answer from the fresh connection: wait for it.
        dropped = await settled(lambda: server.dropped, resent, server.lock)
        # and through the load generator's send(): each counted once, none failed
        recs = [await fetch(client, url) for _ in range(20)]
    for rec in recs:
        assert_ok(rec)
    assert server.answered == server.connections == 60 + 4 * 20 + 20
    assert resent == dropped


# --- failures that are the server's: they surface, never sent again -------------------------


async def test_a_fresh_connection_closed_without_an_answer_fails_after_one_attempt() -> None:
    async def answer(writer: asyncio.StreamWriter, _nth: int) -> bool:
        writer.close()
        return False

    async with raw_server(answer) as (url, seen), load_client(4) as client:
        rec = await fetch(client, url)
        again = await fetch(client, url)
    for r in (rec, again):
        assert r.error_class == "stream_broken"
        assert r.error is not None
        assert "without sending a response" in r.error
        assert not r.chunk_ns
    # one connection and one request each: no re-send on a connection made for the request
    assert seen.connections == 2
    assert [(c, n, a) for c, n, _, a in seen.requests] == [(0, 0, False), (1, 0, False)]


async def test_a_re_send_that_fails_too_surfaces_and_is_not_sent_a_third_time() -> None:
    """The server answers its very first request only: the second request is dropped on
    the reused connection, sent again on a fresh one, dropped there, and fails."""

    async def answer(writer: asyncio.StreamWriter, _nth: int) -> bool:
        if seen.answered():
            writer.close()
            return False
        writer.write(SSE_RESPONSE)
        await writer.drain()
        return True

    async with raw_server(answer) as (url, seen), load_client(4) as client:
        ok = await fetch(client, url)
        failed = await fetch(client, url)
    assert_ok(ok)
    assert failed.error_class == "stream_broken"
    assert [(c, n, a) for c, n, _, a in seen.requests] == [
        (0, 0, True),
        (0, 1, False),
        (1, 0, False),
    ]


PARTIAL_HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/eve"
PARTIAL_BODY = SSE_HEAD + b"%x\r\n%s\r\n" % (len(EVENTS[1]), EVENTS[1])


@pytest.mark.parametrize("partial", [PARTIAL_HEAD, PARTIAL_BODY], ids=["head", "body"])
async def test_a_partial_answer_on_a_reused_connection_is_not_sent_again(partial: bytes) -> None:
    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        writer.write(SSE_RESPONSE if nth == 0 else partial)
        await writer.drain()
        if nth > 0:
            writer.close()
        return True

    async with raw_server(answer) as (url, seen), load_client(4) as client:
        ok = await fetch(client, url)
        broken = await fetch(client, url)
    assert_ok(ok)
    assert broken.error_class == "stream_broken"
    # the second request went once, on the reused connection, and nothing followed it
    assert [(c, n) for c, n, _, _ in seen.requests] == [(0, 0), (0, 1)]
    assert seen.connections == 1


async def test_a_reused_connection_that_times_out_is_not_sent_again() -> None:
    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        if nth == 0:
            writer.write(SSE_RESPONSE)
            await writer.drain()
        return True  # the second request is read and never answered

    async with raw_server(answer) as (url, seen), load_client(4) as client:
        ok = await fetch(client, url)
        target = Target.for_endpoint(url, "openai-chat", "m", None, 0.3)
        body = request_body(target, "hi", 8, stream=True, ignore_eos=True, temperature=None)
        stalled = RawRequest(seq=1, warmup=False, t_sched=time.perf_counter_ns(), n_in_local=2)
        await send(client, target, body, stalled, stream=True, slot=0)
    assert_ok(ok)
    assert stalled.error_class == "timeout"
    assert [(c, n) for c, n, _, _ in seen.requests] == [(0, 0), (0, 1)]


# --- connections that must not be reused -------------------------------------------------------

KEEP_ALIVE = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@pytest.mark.parametrize(
    ("response", "connections"),
    [
        (b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok", 4),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok", 4),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\nConnection: keep-alive\r\n\r\nok", 1),
        (KEEP_ALIVE, 1),
    ],
    ids=["connection-close", "http10", "http10-keep-alive", "http11"],
)
async def test_a_response_that_ends_keep_alive_leaves_its_connection(
    response: bytes, connections: int
) -> None:
    """The server keeps every connection open whatever it said, so only the client's reading
    of the response decides: one new connection per request for `Connection: close` and
    plain HTTP/1.0, and no request ever written to a connection that said close."""

    async def answer(writer: asyncio.StreamWriter, _nth: int) -> bool:
        writer.write(response)
        await writer.drain()
        return True

    async with raw_server(answer) as (url, seen), load_client(4) as client:
        for _ in range(4):
            answered = await client.get(url, extensions={SLOT: 0})
            assert answered.text == "ok"
    assert seen.connections == connections
    assert len(seen.requests) == 4
    assert all(answered for *_, answered in seen.requests)


async def test_a_connection_the_server_closed_after_the_body_is_not_reused() -> None:
    """A keep-alive answer, then the server closes; once the close has reached the client,
    the next request opens a new connection instead of failing an attempt on the old one."""
    closed = asyncio.Event()
    attempts = 0

    async def trace(event: str, _info: object) -> None:
        nonlocal attempts
        attempts += event == "http11.send_request_headers.started"

    async def answer(writer: asyncio.StreamWriter, _nth: int) -> bool:
        writer.write(KEEP_ALIVE)
        await writer.drain()
        writer.close()
        await writer.wait_closed()
        closed.set()
        return True

    async with raw_server(answer) as (url, seen), load_client(4) as client:
        for _ in range(3):
            closed.clear()
            answered = await client.get(url, extensions={SLOT: 0, "trace": trace})
            assert answered.text == "ok"
            await closed.wait()
            await asyncio.sleep(0.05)  # loop turns for the client to read the close
    assert attempts == 3
    assert seen.connections == 3
    assert len(seen.requests) == 3


# --- proxies from the environment ----------------------------------------------------------

PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@contextlib.asynccontextmanager
async def forwarding_proxy() -> AsyncIterator[tuple[str, list[bytes]]]:
    """A plain-http forwarding proxy on loopback: takes absolute-form requests
    (`POST http://host:port/path HTTP/1.1`), sends each to its origin in origin-form on a
    new connection and relays the answer. Yields its URL and the request lines it saw."""
    lines: list[bytes] = []

    async def handle(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        with contextlib.suppress(ConnectionError):
            while (request := await read_request(reader)) is not None:
                line, rest = request.split(b"\r\n", 1)
                lines.append(line)
                method, url, version = line.split(b" ")
                origin = httpx.URL(url.decode())
                upstream_reader, upstream = await asyncio.open_connection(origin.host, origin.port)
                upstream.write(b"%s %s %s\r\n%s" % (method, origin.raw_path, version, rest))
                head = await upstream_reader.readuntil(b"\r\n\r\n")
                match = re.search(rb"content-length:\s*(\d+)", head, re.IGNORECASE)
                assert match is not None, "the test origin answers with a length"
                writer.write(head + await upstream_reader.readexactly(int(match.group(1))))
                await writer.drain()
                upstream.close()
        writer.close()

    server = await asyncio.start_server(handle, "127.0.0.1", 0)
    try:
        yield f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}", lines
    finally:
        server.close()
        await server.wait_closed()


async def answer_with_the_client_port(writer: asyncio.StreamWriter, _nth: int) -> bool:
    """Answers with the port the request came from: one port per TCP connection."""
    port = str(writer.get_extra_info("peername")[1]).encode()
    writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(port), port))
    await writer.drain()
    return True


@pytest.mark.parametrize("variable", ["http_proxy", "all_proxy", "HTTP_PROXY"])
async def test_a_request_the_proxy_applies_to_goes_through_it(
    variable: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    events: list[str] = []

    async def trace(event: str, _info: object) -> None:
        events.append(event)

    async with (
        raw_server(answer_with_the_client_port) as (url, seen),
        forwarding_proxy() as (
            proxy,
            lines,
        ),
    ):
        monkeypatch.setenv(variable, proxy)
        async with load_client(4) as client:
            response = await client.post(
                url + "/chat/completions",
                content=b'{"model":"m"}',
                extensions={SLOT: 0, "trace": trace},
            )
    assert response.status_code == 200
    assert lines == [f"POST {url}/chat/completions HTTP/1.1".encode()]
    # and the origin answered it, once
    assert len(seen.requests) == 1
    # t_send is still stamped through the proxy transport
    assert "http11.send_request_headers.started" in events


async def test_no_proxy_hosts_use_the_slots(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    async with (
        raw_server(answer_with_the_client_port) as (url, seen),
        forwarding_proxy() as (
            proxy,
            lines,
        ),
    ):
        monkeypatch.setenv("http_proxy", proxy)
        monkeypatch.setenv("no_proxy", "example.org,127.0.0.1")
        async with load_client(4) as client:
            ports = [(await client.get(url, extensions={SLOT: slot})).text for slot in (0, 1, 0, 1)]
    assert lines == []  # the proxy saw nothing
    # straight to the origin, one kept-alive connection per slot
    assert ports[0] == ports[2]
    assert ports[1] == ports[3]
    assert ports[0] != ports[1]
    assert seen.connections == 2
