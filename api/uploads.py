"""Request bodies that are files (datasets, traffic logs, result imports): their OpenAPI
entry, and a body read whole under a size cap."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from litestar import Request
from litestar.openapi.spec import (
    OpenAPIFormat,
    OpenAPIMediaType,
    OpenAPIType,
    Operation,
    RequestBody,
    Schema,
)

_FILE = OpenAPIMediaType(schema=Schema(type=OpenAPIType.STRING, format=OpenAPIFormat.BINARY))


def file_body(description: str, content_types: Iterable[str]) -> type[Operation]:
    """The operation class of a route whose body is a file sent as it is (not JSON of a
    schema), in any of `content_types`."""
    types = tuple(content_types)

    @dataclass
    class FileBodyOperation(Operation):
        def __post_init__(self) -> None:
            self.request_body = RequestBody(
                required=True,
                description=description,
                content=dict.fromkeys(types, _FILE),
            )

    return FileBodyOperation


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
