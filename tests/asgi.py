"""Serve an ASGI app with uvicorn on a free loopback port, inside the test's event loop."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import uvicorn


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
