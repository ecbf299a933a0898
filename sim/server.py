"""Serve the simulator with uvicorn: blocking for the CLI, or inside a running loop for tests."""

from __future__ import annotations

import asyncio
import math
import select
import selectors
import socket
from types import TracebackType

import uvicorn
from uvicorn.protocols.http.h11_impl import H11Protocol

from sim.app import CLOSE_AFTER_RESPONSE, SimApp
from sim.config import SimConfig

try:
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # httptools not installed: h11 only
    HttpToolsProtocol = None  # type: ignore[assignment,misc]


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket; port 0 picks a free one (read it back from getsockname)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # proto must be IPPROTO_TCP (socket.create_server leaves 0): asyncio only sets
    # TCP_NODELAY on accepted sockets of that proto, and without it Nagle holds each small
    # event until the client's delayed ACK, about 40 ms later.
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.bind((host, port))
        # A large backlog so hundreds of clients connecting at once are not refused.
        sock.listen(2048)
    except BaseException:
        sock.close()
        raise
    return sock


def base_url(host: str, port: int) -> str:
    """`http://host:port`, with brackets around an IPv6 literal."""
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class _Server(uvicorn.Server):
    """uvicorn that first ends the app's in-flight streams, so a stop never waits them out."""

    def __init__(self, config: uvicorn.Config, app: SimApp) -> None:
        super().__init__(config)
        self._sim_app = app

    async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
        """Stop generating, then let uvicorn drain the (now finishing) connections."""
        self._sim_app.close()
        await super().shutdown(sockets=sockets)


class _PunctualSelector(selectors.EpollSelector):
    """epoll that never oversleeps a timer. epoll_wait takes whole milliseconds, and the
    standard selector rounds every wait up, then up again in float arithmetic (a 9 ms wait
    becomes 10 ms), so a lone stream's timers fired 0.5 to 2 ms late. This waits the whole
    milliseconds before the timer, then polls without blocking for the rest: at most 1 ms
    of CPU per idle wake-up, none while the loop is busy."""

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        """Ready keys and their events, waiting at most `timeout` seconds, never longer."""
        if timeout is None:
            wait = -1.0
        elif timeout <= 0:
            wait = 0.0
        else:
            whole_ms = math.floor(timeout * 1e3)
            # (whole - 0.5) ms is rounded up to exactly `whole` ms by epoll.poll.
            wait = (whole_ms - 0.5) / 1e3 if whole_ms >= 1 else 0.0
        epoll: select.epoll = self._selector  # type: ignore[attr-defined]
        fd_to_key: dict[int, selectors.SelectorKey] = self._fd_to_key  # type: ignore[attr-defined]
        try:
            fd_events = epoll.poll(wait, max(len(fd_to_key), 1))
        except InterruptedError:
            return []
        ready: list[tuple[selectors.SelectorKey, int]] = []
        for fd, event in fd_events:
            events = 0
            if event & ~select.EPOLLIN:
                events |= selectors.EVENT_WRITE
            if event & ~select.EPOLLOUT:
                events |= selectors.EVENT_READ
            key = fd_to_key.get(fd)
            if key is not None:
                ready.append((key, events & key.events))
        return ready


def punctual_loop() -> asyncio.AbstractEventLoop:
    """The simulator's event loop: asyncio's own, with timers that fire on time."""
    return asyncio.SelectorEventLoop(_PunctualSelector())


def _close_if_asked(protocol: H11Protocol | HttpToolsProtocol) -> None:
    """Close the connection after a response the app marked (--close-after-response): the
    headers said keep-alive, as llama-server's do, yet the server hangs up, which a client
    reusing the connection must survive. ASGI gives the app no way to do this itself."""
    cycle = protocol.cycle
    if cycle is not None and cycle.scope.get(CLOSE_AFTER_RESPONSE):
        protocol.transport.close()


class _H11Protocol(H11Protocol):
    """uvicorn's h11 protocol, closing after a marked response."""

    def on_response_complete(self) -> None:
        """Close first if marked; uvicorn's own bookkeeping then sees a closing transport."""
        _close_if_asked(self)
        super().on_response_complete()


def _protocol_class() -> type[asyncio.Protocol]:
    """httptools when installed (what uvicorn's "auto" picks), h11 otherwise."""
    if HttpToolsProtocol is None:
        return _H11Protocol

    class _HttpToolsProtocol(HttpToolsProtocol):
        """uvicorn's httptools protocol, closing after a marked response."""

        def on_response_complete(self) -> None:
            """Close first if marked; uvicorn's own bookkeeping then sees a closing transport."""
            _close_if_asked(self)
            super().on_response_complete()

    return _HttpToolsProtocol


def _uvicorn_server(app: SimApp) -> uvicorn.Server:
    config = uvicorn.Config(
        app,
        # The asyncio loop, not uvloop: uvloop's clock and timers have 1 ms resolution, which
        # would quantize the very timings this server exists to reproduce; and with a
        # selector that does not round waits up to the next millisecond (_PunctualSelector).
        loop="sim.server:punctual_loop",
        # httptools (uvicorn[standard]) when installed, which costs less per event; h11
        # otherwise; either one able to close after a response (_close_if_asked).
        http=_protocol_class(),
        lifespan="off",
        access_log=False,
        log_level="warning",
        server_header=False,
        backlog=2048,
        timeout_graceful_shutdown=2,
    )
    return _Server(config, app)


def serve(config: SimConfig) -> None:
    """Run the simulator until SIGINT/SIGTERM, after printing the one startup line."""
    sock = bind_socket(config.host, config.port)
    port = sock.getsockname()[1]
    server = _uvicorn_server(SimApp(config))
    # The socket already listens, so a client that reads this line can connect at once;
    # sim.process parses the port from it.
    print(f"sim listening on {base_url(config.host, port)} ({config.describe()})", flush=True)
    server.run(sockets=[sock])


class SimServer:
    """The simulator inside the current event loop: `async with SimServer(cfg) as sim: ...`.

    For unit tests that want the app's live state (`sim.app.metrics`); client and server
    share one loop, so use sim.process for load or timing-sensitive tests.
    """

    def __init__(self, config: SimConfig | None = None) -> None:
        self.config = config if config is not None else SimConfig(port=0)
        self.app = SimApp(self.config)
        self.port = 0
        self._server: uvicorn.Server | None = None
        self._task: asyncio.Task[None] | None = None

    @property
    def base_url(self) -> str:
        """`http://127.0.0.1:PORT`; append `/v1` for an OpenAI client."""
        return base_url(self.config.host, self.port)

    async def start(self, timeout_s: float = 10.0) -> None:
        """Bind, start serving in a background task and return once uvicorn is up."""
        sock = bind_socket(self.config.host, self.config.port)
        self.port = sock.getsockname()[1]
        self._server = server = _uvicorn_server(self.app)
        self._task = task = asyncio.create_task(server.serve(sockets=[sock]))
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while not server.started:
            if task.done():
                task.result()  # re-raise why it stopped
                raise RuntimeError("simulator stopped during startup")
            if loop.time() > deadline:
                await self.stop()
                raise TimeoutError(f"simulator did not start within {timeout_s} s")
            await asyncio.sleep(0.005)

    async def stop(self) -> None:
        """Ask uvicorn to shut down and wait for it."""
        if self._server is not None and self._task is not None:
            self._server.should_exit = True
            await self._task
        self._server = None
        self._task = None

    async def __aenter__(self) -> SimServer:
        await self.start()
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.stop()
