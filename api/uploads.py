"""Request bodies that are files (datasets, result imports): read whole, under a size cap."""

from __future__ import annotations

from typing import Any

from litestar import Request


def mib(size: int) -> str:
    """A byte count as MiB, for the caps' messages."""
    return f"{size / (1024 * 1024):g} MiB"


async def read_capped(request: Request[Any, Any, Any], cap: int, refusal: Exception) -> bytes:
    """The body, raising `refusal` (a 413) as soon as it exceeds `cap` bytes: an announced
    Content-Length over the cap is refused before anything is read."""
    announced = request.headers.get("content-length")
    if announced is not None and announced.isdigit() and int(announced) > cap:
        raise refusal
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > cap:
            raise refusal
    return bytes(body)
