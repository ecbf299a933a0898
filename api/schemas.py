"""Shapes shared by every domain: pages of items, and time windows of query strings."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Generic, TypeVar

import msgspec
from litestar.params import FromPath, QueryParameter

from infercost.errors import InvalidInput

T = TypeVar("T")

#: The most items one page of a list holds (`limit`), and the most it may skip (`offset`).
MAX_PAGE = 500
MAX_OFFSET = 2**31 - 1
# QueryParameter, not msgspec.Meta: Litestar enforces only its own bounds on parameters,
# and an unchecked limit=-1 or offset=2**70 reached the database.
Limit = Annotated[
    int, QueryParameter(ge=1, le=MAX_PAGE, description=f"items per page, 1 to {MAX_PAGE}")
]
Offset = Annotated[
    int, QueryParameter(ge=0, le=MAX_OFFSET, description=f"items to skip, 0 to {MAX_OFFSET}")
]
#: A resource id in the route's path (`/{job_id:uuid}` and the like).
PathId = FromPath[uuid.UUID]
#: A window's query parameters over the time runs finished (checked by time_window).
Since = Annotated[
    datetime | None, QueryParameter(description="RFC 3339: runs finished at or after this time")
]
Until = Annotated[
    datetime | None, QueryParameter(description="RFC 3339: runs finished before this")
]


class Page(msgspec.Struct, Generic[T]):
    """One page of a list, with the total number of items that match."""

    items: list[T]
    total: int
    limit: int
    offset: int


def aware(field: str, moment: datetime | None) -> datetime | None:
    """`moment` if it names its time zone; a naive time would be read differently by
    different servers, so it is refused with the form to use."""
    if moment is not None and moment.tzinfo is None:
        raise InvalidInput(
            field, "give a time zone, e.g. 2026-12-01T00:00:00Z or 2026-12-01T01:00:00+01:00"
        )
    return moment


def time_window(since: datetime | None, until: datetime | None) -> None:
    """Check a `since`/`until` window: both name their time zone, `since` before `until`
    (422 on the field at fault)."""
    aware("since", since)
    aware("until", until)
    if since is not None and until is not None and since >= until:
        raise InvalidInput("until", "must be later than since")
