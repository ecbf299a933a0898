"""ORM rows into API structs by msgspec, not field by field."""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec

T = TypeVar("T")


class _With:
    """A row's attributes, with some given or renamed for the struct it becomes."""

    __slots__ = ("_fields", "_row")

    def __init__(self, row: Any, fields: dict[str, Any]) -> None:
        self._row = row
        self._fields = fields

    def __getattr__(self, name: str) -> Any:
        fields = object.__getattribute__(self, "_fields")
        if name in fields:
            return fields[name]
        return getattr(object.__getattribute__(self, "_row"), name)


def from_row(row: Any, type_: type[T], /, **fields: Any) -> T:
    """`type_` made by msgspec (from_attributes) from `row`'s attributes of the same names,
    `fields` given or renamed (a name the row lacks, or a value worked out from it)."""
    source = _With(row, fields) if fields else row
    return msgspec.convert(source, type_, from_attributes=True)
