"""An httpx transport with one keep-alive HTTP/1.1 connection per load-generator slot.

httpcore's connection pool scans every connection it holds, with a readability check (a
system call) on each idle one, whenever it assigns a request. With one shared pool of N
keep-alive connections that is O(N) system calls per request, and at 64 closed-loop users
it made the worker spend 33 ms of CPU per request and queue requests for seconds
(bench/loadgen.py, 2026-12-02). So each slot (a closed-loop user, or an open-loop in-flight
position) owns exactly one connection, and assigning a request costs the same at 1 user as
at 1024. Requests without a slot share one ordinary httpx pool.

A slot's connection is `_SlotConnection`: an asyncio protocol that parses responses with
httptools (C) and hands the body on as the bytes of each socket read, instead of httpcore
over anyio and h11 (pure Python, a stack of context managers and a parse per HTTP chunk).
bench/loadgen.py measured that stack as most of the worker's CPU per streamed token
(2026-12-02). httpx stays the API: requests, responses, errors and the `trace` extension
(t_send is stamped at `http11.send_request_headers.started`, as with httpcore) are httpx's.
A slot whose next request goes to another origin (the next job's endpoint) closes its
connection and opens one there; a connection the server closed is reopened on next use.

Servers close kept-alive connections when they like: llama.cpp's server closes each one just
after a streamed response although it answered `Keep-Alive`, so the slot's next request can
be written onto a connection whose close has not been read yet. A request written to a
reused connection that then ends (closed, reset, or the write fails) before any byte of a
response came back is therefore sent again, once, on a fresh connection (docs/figures.md); the
`trace` event fires again, so t_send is the re-send's. A failure on a fresh connection, or
after a response byte, is the server's and surfaces. A response that says `Connection:
close` (or HTTP/1.0 without keep-alive) never leaves its connection for the next request.

Each socket read is stamped (perf_counter_ns) in the protocol's data callback, before the
bytes are parsed, and the body is handed on as (stamp, bytes) pairs (`READS`): the SSE parser
(workers/loadgen/stream.py) stamps each event with the time of the read that completed it, so
however many reads the event loop queues before the reading coroutine wakes, no timestamp
moves to the wake. The parser's lateness is recorded as read lag, and re-sends are counted,
in the client's ClientHealth (workers/loadgen/health.py). Requests through the shared pool
or a proxy are stamped as the coroutine reads them, as before.

The worker pins each level to an address the outbound policy checked (workers/runner.py,
infercost.net.outbound.pinned): URLs then name the address and the Host header the endpoint's
name, so a slot connects to the address and TLS still sends and verifies the name
(`server_name`).

The load generator's streamed requests skip httpx altogether on a slot
(`LoadClient.direct_head`, `SlotTransport.direct`, workers/loadgen/stream.py): the request's
bytes are the target's head, made once per target (`RequestHead`), plus its body, written
straight to the slot's connection, and the response is read off the connection. httpx's
request and response objects, its URL parsing, header merging, cookie jar and event hooks
cost more per request than the whole stream's events did (bench/loadgen.py) and change no
figure. Everything else (tokenize calls, warming connections, answers that are not
streamed, embeddings) goes through httpx as before.

`load_client()` honours HTTP_PROXY, HTTPS_PROXY, ALL_PROXY and NO_PROXY with httpx's rules
(infercost/net/proxy.py): a request a proxy applies to goes through an ordinary httpx proxy
transport (a pool shared by all slots, so proxied requests lose the one-connection-per-slot
property); the rest go to the slots.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any
from urllib.parse import urlsplit

import httptools
import httpx

from infercost.net.proxy import ProxyRules
from infercost.net.tls import tls_context
from workers.loadgen.health import ClientHealth

#: Request extension naming the slot whose connection a request should use.
SLOT = "infercost_slot"
#: Response extension of a slot's response: its body as stamped reads (`SlotBody.next_reads`).
READS = "infercost_reads"

#: Unread response bytes above which a connection stops reading from its socket.
_HIGH_WATER = 1 << 20
#: Seconds a new connection may take (the load client's connect timeout).
CONNECT_TIMEOUT_S = 10.0


class _SlotConnection(asyncio.Protocol):
    """One HTTP/1.1 connection, one request at a time, parsed by httptools."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.parser = httptools.HttpResponseParser(self)
        self.closed = True
        self.paused = False
        self.error: BaseException | None = None
        self.waiter: asyncio.Future[None] | None = None
        # (scheme, address or host, port, TLS server name): a connection serves one origin.
        self.origin: tuple[str, str, int, str] = ("", "", 0, "")
        self.headers: list[tuple[bytes, bytes]] = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        # Any byte since the current request was written: one without can be sent again.
        self.received = False
        self.body: list[bytes] = []
        # Beside `body`, piece by piece: the perf_counter_ns of the read that brought it.
        self.stamps: list[int] = []
        self.read_ns = 0
        self.buffered = 0
        self.reason = b""

    # -- asyncio.Protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.Transport)
        self.transport = transport
        self.closed = False

    def data_received(self, data: bytes) -> None:
        # First of all: the read's own time, which every body piece it carries keeps.
        self.read_ns = perf_counter_ns()
        self.received = True
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(httpx.RemoteProtocolError(f"malformed HTTP response: {exc}"))
            return
        if self.buffered > _HIGH_WATER and self.transport is not None and not self.paused:
            self.paused = True
            self.transport.pause_reading()
        self._wake()

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        if self.complete:
            return
        if not self.headers_done:
            self.error = httpx.RemoteProtocolError(
                "Server disconnected without sending a response."
            )
        elif self._until_close() and exc is None:
            # A body without length ends with the connection: a clean close ends it, a
            # reset (exc) breaks it.
            self.complete = True
        else:
            self.error = httpx.RemoteProtocolError(
                "peer closed connection without sending complete message body"
            )
        self._wake()

    # -- httptools callbacks

    def on_status(self, status: bytes) -> None:
        self.reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((name, value))

    def on_headers_complete(self) -> None:
        self.headers_done = True

    def on_body(self, body: bytes) -> None:
        self.body.append(body)
        self.stamps.append(self.read_ns)
        self.buffered += len(body)

    def on_message_complete(self) -> None:
        self.complete = True
        self.keep_alive = self.parser.should_keep_alive()

    # -- used by the transport and the response stream

    def _until_close(self) -> bool:
        names = {name.lower() for name, _ in self.headers}
        return b"content-length" not in names and b"transfer-encoding" not in names

    def _fail(self, error: BaseException) -> None:
        self.error = error
        if self.transport is not None:
            self.transport.close()
        self._wake()

    def _wake(self) -> None:
        waiter = self.waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    async def wait(self, limit_s: float | None) -> None:
        """Until something arrives (or the connection ends); ReadTimeout after limit_s."""
        self.waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            if limit_s is None:
                await waiter
            else:
                try:
                    async with asyncio.timeout(limit_s):
                        await waiter
                except TimeoutError:
                    raise httpx.ReadTimeout(f"no data within {limit_s:g} s") from None
        finally:
            self.waiter = None

    def reset(self) -> None:
        """Ready for the next request on this connection (the parser carries on: HTTP/1.1
        responses follow one another on a keep-alive connection)."""
        self.headers = []
        self.headers_done = False
        self.complete = False
        self.keep_alive = False
        self.received = False
        self.body = []
        self.stamps = []
        self.buffered = 0
        self.reason = b""
        self.error = None

    def take(self) -> bytes:
        """Every body byte received and not yet handed on, as one piece."""
        body = self.body
        data = body[0] if len(body) == 1 else b"".join(body)
        self.body = []
        self.stamps = []
        self._drained()
        return data

    def take_reads(self) -> tuple[list[int], list[bytes]]:
        """Every body piece received and not yet handed on, with its read's stamp."""
        stamps, body = self.stamps, self.body
        self.stamps, self.body = [], []
        self._drained()
        return stamps, body

    def _drained(self) -> None:
        self.buffered = 0
        if self.paused and self.transport is not None:
            self.paused = False
            self.transport.resume_reading()


class SlotBody(httpx.AsyncByteStream):
    """The response body: whatever each read brought, until the message is complete. Read it
    as bytes (httpx's iterators), or as stamped reads with `next_reads` (READS)."""

    def __init__(self, slot: _SlotTransport, conn: _SlotConnection, timeout: float | None) -> None:
        self._slot = slot
        self._conn = conn
        self._timeout = timeout
        self._done = False
        self._read_lag = slot.health.read_lag

    async def next_reads(self) -> tuple[list[int], list[bytes]] | None:
        """The body pieces that arrived since the last call, each with the perf_counter_ns of
        the read that brought it (waiting for one if none did); None once the body is whole.
        How old the oldest of them is now is recorded as read lag."""
        conn = self._conn
        while True:
            if conn.body:
                stamps, pieces = conn.take_reads()
                self._read_lag.record(perf_counter_ns() - stamps[0])
                return stamps, pieces
            if conn.complete:
                self._done = True
                return None
            if conn.error is not None:
                raise conn.error
            await conn.wait(self._timeout)

    async def __aiter__(self) -> AsyncIterator[bytes]:
        conn = self._conn
        while True:
            if conn.body:
                yield conn.take()
                continue
            if conn.complete:
                self._done = True
                return
            if conn.error is not None:
                raise conn.error
            await conn.wait(self._timeout)

    async def aclose(self) -> None:
        # A body read to its end leaves a reusable connection; anything else closes it.
        self._slot.release(self._conn, reusable=self._done and self._conn.complete)


async def read_whole(response: httpx.Response) -> tuple[bytes, int, int]:
    """A whole (non-streamed) body with the perf_counter_ns of its first and last reads: on a
    slot's connection, the stamps of the reads that brought them; elsewhere (the shared pool,
    a proxy, a compressed body) both are when httpx has it all."""
    reads = response.extensions.get(READS)
    if isinstance(reads, SlotBody) and "content-encoding" not in response.headers:
        pieces: list[bytes] = []
        first = last = 0
        while (batch := await reads.next_reads()) is not None:
            stamps, got = batch
            first = first or stamps[0]
            last = stamps[-1]
            pieces.extend(got)
        if pieces:
            return b"".join(pieces), first, last
        now = perf_counter_ns()
        return b"", now, now
    body = await response.aread()
    now = perf_counter_ns()
    return body, now, now


class _SlotTransport:
    """The single connection of one slot, opened on first use and after any failure."""

    def __init__(self, ssl_context: ssl.SSLContext, health: ClientHealth) -> None:
        self._ssl = ssl_context
        self._conn: _SlotConnection | None = None
        self.busy = False
        self.health = health

    async def _connect(
        self, origin: tuple[str, str, int, str], limit_s: float | None
    ) -> _SlotConnection:
        scheme, host, port, server_name = origin
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(limit_s):
                _, conn = await loop.create_connection(
                    _SlotConnection,
                    host,
                    port,
                    ssl=self._ssl if scheme == "https" else None,
                    server_hostname=server_name if scheme == "https" else None,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"no connection within {limit_s:g} s") from None
        except OSError as exc:
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        conn.origin = origin
        return conn

    async def handle(self, request: httpx.Request) -> httpx.Response:
        """Send on the slot's connection; the slot is busy until the response body closes."""
        self.busy = True
        try:
            return await self._handle(request)
        except BaseException:
            self.busy = False
            raise

    async def _handle(self, request: httpx.Request) -> httpx.Response:
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        read_timeout = timeouts.get("read")
        # Read once: a re-send writes the same bytes.
        payload = await _request_bytes(request)
        url = request.url
        port = url.port or (443 if url.scheme == "https" else 80)
        origin = (url.scheme, url.host, port, server_name(request))
        trace: Callable[[str, dict[str, Any]], Awaitable[None]] | None = request.extensions.get(
            "trace"
        )

        async def announce() -> None:
            # t_send (docs/figures.md) is stamped here, as it is with httpcore; a re-send stamps
            # it again.
            if trace is not None:
                await trace("http11.send_request_headers.started", {"request": request})

        conn = await self._open(origin, payload, timeouts.get("connect"), read_timeout, announce)
        body = SlotBody(self, conn, read_timeout)
        return httpx.Response(
            conn.parser.get_status_code(),
            headers=conn.headers,
            stream=body,
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": conn.reason, READS: body},
        )

    async def open(
        self,
        origin: tuple[str, str, int, str],
        payload: bytes,
        connect_timeout: float | None,
        read_timeout: float | None,
        stamp: Callable[[], None],
    ) -> _SlotConnection:
        """Write `payload` on the slot's connection to `origin` (opened or reopened as
        needed; `stamp` runs just before each write) and wait for the response head. The
        slot is busy until `release`."""
        self.busy = True
        try:
            return await self._open(origin, payload, connect_timeout, read_timeout, stamp)
        except BaseException:
            self.busy = False
            raise

    async def _open(
        self,
        origin: tuple[str, str, int, str],
        payload: bytes,
        connect_timeout: float | None,
        read_timeout: float | None,
        announce: Callable[[], Awaitable[None] | None],
    ) -> _SlotConnection:
        conn = self._conn
        if conn is not None and (conn.origin != origin or conn.closed):
            # The slot moved to another server (the next job's endpoint), or the server
            # closed the connection while it was idle: a new connection.
            self._drop(conn)
            conn = None
        if conn is None:
            conn = self._conn = await self._connect(origin, connect_timeout)
            await self._exchange(conn, payload, read_timeout, announce)
            return conn
        try:
            await self._exchange(conn, payload, read_timeout, announce)
            return conn
        except (httpx.RemoteProtocolError, httpx.WriteError):
            # The connection ended under the request (closed, reset, or closing when it was
            # written). With a response byte received, that is the server's failure.
            if conn.received:
                raise
        # Without one, the server had closed this kept-alive connection before the request
        # reached it (the close was still unread when it was written): not the server's
        # error. The request goes again on a fresh connection, once; a failure there surfaces.
        self.health.resent += 1
        conn = self._conn = await self._connect(origin, connect_timeout)
        await self._exchange(conn, payload, read_timeout, announce)
        return conn

    async def _exchange(
        self,
        conn: _SlotConnection,
        payload: bytes,
        read_timeout: float | None,
        announce: Callable[[], Awaitable[None] | None],
    ) -> None:
        """Write the request in one piece (announced first: t_send) and wait for the response
        head; on failure the connection is closed (and `conn.received` tells whether any
        byte of an answer had come)."""
        conn.reset()
        try:
            pending = announce()
            if pending is not None:
                await pending
            transport = conn.transport
            if transport is None or conn.closed or transport.is_closing():
                conn.closed = True
                raise httpx.WriteError("the connection closed before the request was written")
            transport.write(payload)
            while not conn.headers_done:
                if conn.error is not None:
                    raise conn.error
                await conn.wait(read_timeout)
        except BaseException:
            self._drop(conn)
            raise

    def release(self, conn: _SlotConnection, *, reusable: bool) -> None:
        """After a response: keep the connection for the next request, or close it. Only a
        response read to its end that allows keep-alive (httptools' should_keep_alive: no
        `Connection: close`, not HTTP/1.0 without keep-alive, a length or chunked body) on a
        connection the server has not closed is kept."""
        self.busy = False
        if reusable and conn.keep_alive and not conn.closed:
            return
        self._drop(conn)

    def _drop(self, conn: _SlotConnection) -> None:
        """Close the connection; the slot's next request opens a new one."""
        if conn.transport is not None:
            conn.transport.close()
        conn.closed = True
        if self._conn is conn:
            self._conn = None

    def close(self) -> None:
        self.busy = False
        if self._conn is not None:
            self._drop(self._conn)


def server_name(request: httpx.Request) -> str:
    """The name TLS sends and checks the certificate against: the `sni_hostname` extension,
    else the Host header's name (a request pinned to an address by infercost.net.outbound.pinned
    keeps the endpoint's name there), else the URL's host."""
    named = request.extensions.get("sni_hostname")
    if named:
        return str(named)
    host: str = request.headers.get("host", "")
    if host.startswith("["):  # an IPv6 literal, with or without a port
        return host[1:].partition("]")[0]
    if host:
        return host.rsplit(":", 1)[0]
    return str(request.url.host)


async def _request_bytes(request: httpx.Request) -> bytes:
    """The whole request as written on the wire: head, then the body (chunked if the
    request says so)."""
    lines = [b"%s %s HTTP/1.1\r\n" % (request.method.encode(), request.url.raw_path)]
    lines.extend(b"%s: %s\r\n" % (name, value) for name, value in request.headers.raw)
    lines.append(b"\r\n")
    chunked = request.headers.get("transfer-encoding", "").lower() == "chunked"
    assert isinstance(request.stream, httpx.AsyncByteStream)
    async for part in request.stream:
        lines.append(b"%x\r\n%s\r\n" % (len(part), part) if chunked and part else part)
    if chunked:
        lines.append(b"0\r\n\r\n")
    return b"".join(lines)


class SlotTransport(httpx.AsyncBaseTransport):
    """Routes each request to its slot's own connection, made on first use."""

    def __init__(
        self,
        *,
        shared_limit: int,
        verify: ssl.SSLContext | None = None,
        health: ClientHealth | None = None,
    ) -> None:
        self.ssl = verify or tls_context()
        self.health = health if health is not None else ClientHealth()
        self._slots: dict[int, _SlotTransport] = {}
        self._shared = httpx.AsyncHTTPTransport(
            verify=self.ssl,
            limits=httpx.Limits(
                max_connections=shared_limit, max_keepalive_connections=shared_limit
            ),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send on the slot's connection (opening it if needed), or on the shared pool."""
        slot = request.extensions.get(SLOT)
        if "sni_hostname" not in request.extensions and request.url.scheme == "https":
            # A request pinned to a checked address (the URL names the address, the Host
            # header the server): httpcore takes the TLS name from this extension.
            request.extensions["sni_hostname"] = server_name(request)
        if slot is None:
            return await self._shared.handle_async_request(request)
        transport = self._slots.get(slot)
        if transport is None:
            transport = self._slots[slot] = _SlotTransport(self.ssl, self.health)
        elif transport.busy:
            # A slot is one user, one request at a time; a caller that overlaps two gets
            # the shared pool for the second rather than a corrupted connection.
            return await self._shared.handle_async_request(request)
        return await transport.handle(request)

    def direct(self, slot: int) -> _SlotTransport | None:
        """Slot `slot`'s connection for a request written straight to it, or None when the
        slot already has a request in flight (the caller then goes through httpx, which
        gives that one the shared pool)."""
        transport = self._slots.get(slot)
        if transport is None:
            transport = self._slots[slot] = _SlotTransport(self.ssl, self.health)
        elif transport.busy:
            return None
        return transport

    async def aclose(self) -> None:
        """Close every connection."""
        for transport in self._slots.values():
            transport.close()
        await self._shared.aclose()
        self._slots.clear()


@dataclass(frozen=True, slots=True)
class RequestHead:
    """A target's requests as written on a slot's connection: where (scheme, address, port,
    TLS name) and the head up to its Content-Length, the same for every request to it."""

    origin: tuple[str, str, int, str]
    head: bytes

    def payload(self, body: bytes) -> bytes:
        """The whole request for a JSON `body`."""
        return b"%sContent-Length: %d\r\n\r\n%s" % (self.head, len(body), body)


def request_head(
    url: str, default_headers: Mapping[str, str], headers: Mapping[str, str]
) -> RequestHead:
    """A POST to `url` with the client's `default_headers` and then the request's own
    `headers` (a name in both takes the request's value; a `Host` header names the server a
    request pinned to an address is for, and TLS sends and checks that name)."""
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    address = parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    merged: dict[str, tuple[str, str]] = {}
    for name, value in (*default_headers.items(), *headers.items()):
        merged[name.lower()] = (name, value)
    host = merged.pop("host", ("Host", parts.netloc.rpartition("@")[2]))[1]
    merged.pop("content-length", None)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    lines = [f"POST {target} HTTP/1.1", f"Host: {host}"]
    lines.extend(f"{name}: {value}" for name, value in merged.values())
    if host.startswith("["):  # an IPv6 literal, with or without a port
        tls_name = host[1:].partition("]")[0]
    else:
        tls_name = host.rsplit(":", 1)[0] if host.count(":") == 1 else host
    return RequestHead((scheme, address, port, tls_name), ("\r\n".join(lines) + "\r\n").encode())


class LoadClient(httpx.AsyncClient):
    """The worker's httpx client; the load generator also writes a streamed request straight
    to a slot's connection (`direct_head`, `slots.direct`) when no proxy applies to its URL."""

    def __init__(self, slots: SlotTransport, proxies: ProxyRules, **kwargs: Any) -> None:
        super().__init__(transport=slots, **kwargs)
        self.slots = slots
        self.proxies = proxies
        self._heads: dict[tuple[str, tuple[tuple[str, str], ...]], RequestHead | None] = {}

    def direct_head(self, url: str, headers: Mapping[str, str]) -> RequestHead | None:
        """The head of requests to `url` with `headers` written straight to a slot, or None
        when a proxy applies to the URL (they go through httpx); made once per target."""
        key = (url, tuple(headers.items()))
        try:
            return self._heads[key]
        except KeyError:
            pass
        if len(self._heads) > 64:  # one per level's pinned target: old levels' go
            self._heads.clear()
        made = (
            None
            if self.proxies.proxy_for(url) is not None
            else request_head(url, self.headers, headers)
        )
        self._heads[key] = made
        return made


def load_client(
    max_concurrency: int, *, trust_env: bool = True, health: ClientHealth | None = None
) -> LoadClient:
    """The worker's HTTP client: per-slot connections, no redirects, per-request timeouts.

    `health` receives the slots' read lag and re-send count (the worker's Runtime.health).

    With `trust_env`, the *_PROXY variables are read once, here (infercost/net/proxy.py): a
    URL a proxy applies to goes through that proxy (an httpx pool, no slots); NO_PROXY
    hosts and everything else go to the slots.
    """
    slots = SlotTransport(shared_limit=max_concurrency, health=health)
    limits = httpx.Limits(
        max_connections=max_concurrency, max_keepalive_connections=max_concurrency
    )
    proxies = ProxyRules.from_environment() if trust_env else ProxyRules()
    mounts: dict[str, httpx.AsyncBaseTransport | None] = {
        # None: NO_PROXY matched, the client's own transport (the slots) serves it.
        pattern: None
        if proxy is None
        else httpx.AsyncHTTPTransport(verify=slots.ssl, limits=limits, proxy=proxy)
        for pattern, proxy in proxies.mounts
    }
    return LoadClient(
        slots,
        proxies,
        mounts=mounts,
        trust_env=False,
        timeout=httpx.Timeout(connect=CONNECT_TIMEOUT_S, read=None, write=30.0, pool=None),
        follow_redirects=False,
    )
