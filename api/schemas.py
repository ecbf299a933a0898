"""Shapes shared by every domain: pages of items."""

from __future__ import annotations

import uuid
from typing import Annotated, Generic, TypeVar

import msgspec
from litestar.params import FromPath

T = TypeVar("T")

Limit = Annotated[int, msgspec.Meta(ge=1, le=500, description="items per page")]
Offset = Annotated[int, msgspec.Meta(ge=0, description="items to skip")]
#: A resource id in the route's path (`/{job_id:uuid}` and the like).
PathId = FromPath[uuid.UUID]


class Page(msgspec.Struct, Generic[T]):
    """One page of a list, with the total number of items that match."""

    items: list[T]
    total: int
    limit: int
    offset: int
