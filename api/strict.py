"""Strict types at the request boundary: a value of another JSON type than the document names
is refused (422), never converted.

Litestar converts a handler's parameters and body with msgspec's lax mode (`strict=False`),
which it needs for query strings (everything there is text) but which also reads `"until=0.5"`
as a Unix time, `"effective_from": 0` as 1970 and `"allow_mismatched_workload": 0` as false.
Two checks run before that conversion, in one place for every route:

- the JSON body is converted once with `strict=True` into the handler's body type
  (`StrictRequest.json`), so a number where a time is due, or 0 for a boolean, is refused
  with msgspec's own message and path, as any other type error is;
- each query value is checked against the text form of its type (`strict_query`): integers
  as digits, numbers as decimal literals, booleans as `true` or `false`, times as RFC 3339.

Litestar's conversion then applies the bounds, enums and defaults as before.
"""

from __future__ import annotations

import datetime as dt
import re
import types
import typing
from functools import cache
from typing import Any, Final
from urllib.parse import parse_qsl

import msgspec
from litestar.enums import ScopeType
from litestar.exceptions import ValidationException
from litestar.handlers import HTTPRouteHandler
from litestar.routes import HTTPRoute
from litestar.types import ASGIApp, Receive, Scope, Send

from api.guards import GuardedRequest

_INTEGER: Final = re.compile(r"-?[0-9]+")
_NUMBER: Final = re.compile(r"-?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?")
_BOOLEANS: Final = ("true", "false")
_TIMES: Final = (dt.datetime, dt.date, dt.time)


def _refused(key: str, message: str) -> ValidationException:
    """The exception Litestar raises for a refused value, so api/errors.py words it alike."""
    return ValidationException(
        detail=f"Validation failed for {key}", extra=[{"message": message, "key": key}]
    )


@cache
def _body_type(handler: HTTPRouteHandler) -> Any:
    """The type a handler's JSON body is converted to, or None (no body, or not a type
    msgspec converts: raw bytes, a DTO)."""
    data = handler.parsed_data_field
    if data is None:
        return None
    try:
        msgspec.inspect.type_info(data.annotation)
    except (TypeError, ValueError):
        return None
    return data.annotation


def _whole_numbers(value: Any) -> Any:
    """`value` with every whole-valued float (100.0) as an int: JSON has one number type, and
    JSON Schema's integer includes 100.0, so a client that writes counts as floats is right."""
    if isinstance(value, float):
        return int(value) if value.is_integer() else value
    if isinstance(value, list):
        return [_whole_numbers(item) for item in value]
    if isinstance(value, dict):
        return {key: _whole_numbers(item) for key, item in value.items()}
    return value


def check_body(handler: HTTPRouteHandler, value: Any) -> None:
    """Refuse a decoded JSON body that only a lax conversion would accept (422): a string for
    a number, a number for a time or a boolean. Whole-valued floats count as integers."""
    annotation = _body_type(handler)
    if annotation is None or value is None:
        return
    try:
        msgspec.convert(_whole_numbers(value), annotation, strict=True, str_keys=True)
    except msgspec.ValidationError as exc:
        raise _refused("data", str(exc)) from None


class StrictRequest(GuardedRequest):
    """A request whose JSON body is checked in strict mode before Litestar converts it."""

    async def json(self) -> Any:
        """The decoded body, refused (422) when a value has another type than its field's."""
        value = await super().json()
        check_body(self.route_handler, value)
        return value


def _scalar_types(annotation: Any) -> tuple[Any, ...]:
    """The types one query value may take: Optional and list unwrapped."""
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _scalar_types(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return tuple(
            t for arg in typing.get_args(annotation) if arg is not type(None)
            for t in _scalar_types(arg)
        )  # fmt: skip
    if origin in (list, tuple, set, frozenset):
        args = typing.get_args(annotation)
        return _scalar_types(args[0]) if args else ()
    return (annotation,)


def query_value_error(annotation: Any, raw: str) -> str | None:
    """Why `raw` is not the text form of `annotation` (a query parameter's type), or None.
    Types other than booleans, numbers and times are left to Litestar's conversion."""
    kinds = _scalar_types(annotation)
    if len(kinds) != 1:
        return None
    kind = kinds[0]
    if kind is bool:
        return None if raw in _BOOLEANS else f"Expected `bool` (true or false), got '{raw}'"
    if kind is int:
        return None if _INTEGER.fullmatch(raw) else f"Expected `int`, got '{raw}'"
    if kind is float:
        return None if _NUMBER.fullmatch(raw) else f"Expected `float`, got '{raw}'"
    if kind in _TIMES:
        try:
            msgspec.convert(raw, kind, strict=True)
        except msgspec.ValidationError as exc:
            return str(exc)
    return None


#: Per route handler: each query parameter's name in the URL and its type.
QueryTypes = dict[object, tuple[tuple[str, Any], ...]]


def query_types(routes: typing.Iterable[Any]) -> QueryTypes:
    """Each handler's query parameters (their URL names and types), from the app's routes."""
    found: QueryTypes = {}
    for route in routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler, kwargs_model in route.route_handler_map.values():
            params = handler.parsed_fn_signature.parameters
            found[handler] = tuple(
                (p.field_alias, params[p.field_name].annotation)
                for p in kwargs_model.expected_query_params
                if p.field_name in params
            )
    return found


def strict_query(app: ASGIApp) -> ASGIApp:
    """Middleware: a query value that is not the text form of its parameter's type answers
    422 naming the parameter (see query_value_error)."""

    async def guard(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == ScopeType.HTTP and scope.get("query_string"):
            litestar = scope["litestar_app"]
            table: QueryTypes | None = litestar.state.get("query_types")
            if table is None:
                table = litestar.state.query_types = query_types(litestar.routes)
            expected = table.get(scope["route_handler"], ())
            if expected:
                types_of = dict(expected)
                text = bytes(scope["query_string"]).decode("latin-1")
                for name, raw in parse_qsl(text, keep_blank_values=True):
                    if name in types_of and (why := query_value_error(types_of[name], raw)):
                        raise _refused(name, why)
        await app(scope, receive, send)

    return guard
