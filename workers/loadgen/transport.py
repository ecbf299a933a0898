"""An httpx transport with one single-connection pool per load-generator slot.

httpcore's connection pool scans every connection it holds, with a readability check (a
system call) on each idle one, whenever it assigns a request. With one shared pool of N
keep-alive connections that is O(N) system calls per request, and at 64 closed-loop users
it made the worker spend 33 ms of CPU per request and queue requests for seconds
(bench/loadgen.py, 2026-12-02). Here each slot (a closed-loop user, or an open-loop
in-flight position) owns a pool of exactly one connection, so assigning a request costs
the same at 1 user as at 1024. Requests without a slot share one ordinary pool.
"""

from __future__ import annotations

import ssl

import httpx

#: Request extension naming the slot whose connection a request should use.
SLOT = "infercost_slot"


class SlotTransport(httpx.AsyncBaseTransport):
    """Routes each request to its slot's own one-connection transport, made on first use."""

    def __init__(self, *, shared_limit: int, verify: ssl.SSLContext | None = None) -> None:
        self._ssl = verify or ssl.create_default_context()
        self._one = httpx.Limits(max_connections=1, max_keepalive_connections=1)
        self._slots: dict[int, httpx.AsyncHTTPTransport] = {}
        self._shared = httpx.AsyncHTTPTransport(
            verify=self._ssl,
            limits=httpx.Limits(
                max_connections=shared_limit, max_keepalive_connections=shared_limit
            ),
        )

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        """Send on the slot's connection (opening it if needed), or on the shared pool."""
        slot = request.extensions.get(SLOT)
        if slot is None:
            return await self._shared.handle_async_request(request)
        transport = self._slots.get(slot)
        if transport is None:
            transport = self._slots[slot] = httpx.AsyncHTTPTransport(
                verify=self._ssl, limits=self._one
            )
        return await transport.handle_async_request(request)

    async def aclose(self) -> None:
        """Close every connection."""
        for transport in (*self._slots.values(), self._shared):
            await transport.aclose()
        self._slots.clear()


def load_client(max_concurrency: int) -> httpx.AsyncClient:
    """The worker's HTTP client: per-slot connections, no redirects, per-request timeouts."""
    return httpx.AsyncClient(
        transport=SlotTransport(shared_limit=max_concurrency),
        timeout=httpx.Timeout(connect=10.0, read=None, write=30.0, pool=None),
        follow_redirects=False,
    )
