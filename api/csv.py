"""CSV answers shared by the routes that serve `Accept: text/csv`: cell formatting, a
streamed body, and the attachment response. Every cell is neutralised against formula
injection here, so no export can forget it."""

from __future__ import annotations

import csv
import io
from collections.abc import AsyncIterable, AsyncIterator, Iterable, Mapping
from datetime import datetime

from litestar import Request
from litestar.datastructures import State
from litestar.response.base import ASGIResponse
from litestar.response.streaming import ASGIStreamingResponse

# Litestar adds "; charset=utf-8" to every text/ type itself.
CSV_MEDIA_TYPE = "text/csv"
#: What a spreadsheet reads as the start of a formula (or, tab and CR, of a cell it shifts).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def neutralised(value: object) -> object:
    """`value`, with a text that a spreadsheet would run as a formula (`=cmd|' /C calc'!A0`)
    prefixed with a single quote so it shows as text; numbers, negative ones included, and
    texts that read as numbers (-0.5) stay as they are."""
    if isinstance(value, str) and value.startswith(_FORMULA_START) and not _is_number(value):
        return "'" + value
    return value


class _SafeWriter:
    """A csv writer whose every cell is neutralised first: no export can carry a formula."""

    def __init__(self, buffer: io.StringIO) -> None:
        self._writer = csv.writer(buffer, lineterminator="\n")

    def writerow(self, row: Iterable[object]) -> None:
        self._writer.writerow([neutralised(v) for v in row])

    def writerows(self, rows: Iterable[Iterable[object]]) -> None:
        for row in rows:
            self.writerow(row)


def csv_cell(value: object) -> object:
    """One cell: None empty, booleans lowercase, datetimes RFC 3339 (Z for UTC), the rest
    as the csv module writes it."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, datetime):
        return value.isoformat().replace("+00:00", "Z")
    return value


def csv_text(header: Iterable[str], rows: Iterable[Iterable[object]]) -> str:
    """A whole table as CSV text (rows already formatted)."""
    buffer = io.StringIO()
    writer = _SafeWriter(buffer)
    writer.writerow(header)
    writer.writerows(rows)
    return buffer.getvalue()


async def stream_csv(
    header: Iterable[str], rows: AsyncIterable[Iterable[object]], *, batch: int
) -> AsyncIterator[str]:
    """A table as CSV text, `batch` rows a chunk (rows already formatted)."""
    buffer = io.StringIO()
    writer = _SafeWriter(buffer)
    writer.writerow(header)
    count = 0
    async for row in rows:
        writer.writerow(row)
        count += 1
        if count % batch == 0:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()


def wants_csv(request: Request[object, object, State]) -> bool:
    """Whether the request asks for CSV (`Accept: text/csv`)."""
    return "text/csv" in request.headers.get("accept", "")


def csv_attachment(
    body: str | AsyncIterator[str], filename: str, headers: Mapping[str, str] | None = None
) -> ASGIResponse:
    """CSV as a download named `filename`: sent whole (text) or streamed (an iterator).

    Routes that answer JSON or CSV return an ASGI response, which Litestar sends as built.
    """
    all_headers = {"Content-Disposition": f'attachment; filename="{filename}"', **(headers or {})}
    if isinstance(body, str):
        return ASGIResponse(body=body.encode(), media_type=CSV_MEDIA_TYPE, headers=all_headers)
    return ASGIStreamingResponse(iterator=body, media_type=CSV_MEDIA_TYPE, headers=all_headers)
