"""Serve an ASGI app with uvicorn on a free loopback port, inside the test's event loop, and
the plumbing the tests' small ASGI apps share."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import uvicorn

Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]


async def read_body(receive: Receive) -> bytes:
    """The whole request body, however many messages it came in."""
    body = b""
    while True:
        message = await receive()
        chunk: bytes = message.get("body", b"")
        body += chunk
        if not message.get("more_body"):
            return body


async def send_json(send: Send, status: int, payload: Any) -> None:
    """A whole application/json response: `payload` encoded, or sent as it is if bytes."""
    body = payload if isinstance(payload, bytes) else msgspec.json.encode(payload)
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json")],
        }
    )
    await send({"type": "http.response.body", "body": body})


@asynccontextmanager
async def serve_in_loop(app: Any) -> AsyncIterator[str]:
    """Yield `http://127.0.0.1:PORT` while uvicorn serves `app`; stop it on exit."""
    config = uvicorn.Config(
        app, host="127.0.0.1", port=0, lifespan="off", log_level="warning", access_log=False
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
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


@asynccontextmanager
async def serve_with_hooks(app: Any) -> AsyncIterator[str]:
    """`serve_in_loop` for a Litestar app whose startup and shutdown hooks must run in this
    loop, the one uvicorn serves in (the API: its Redis and database pools are made and
    closed where they are used)."""
    for hook in app.on_startup:
        await hook(app)
    try:
        async with serve_in_loop(app) as url:
            yield url
    finally:
        for hook in app.on_shutdown:
            await hook(app)
