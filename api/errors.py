"""Every error leaves the API as RFC 9457 problem+json, mapped here and nowhere else."""

from __future__ import annotations

import logging
import re
import uuid
from collections.abc import Mapping
from typing import Any

import msgspec
from litestar import Request, Response
from litestar.exceptions import HTTPException, SerializationException, ValidationException
from litestar.status_codes import HTTP_500_INTERNAL_SERVER_ERROR
from litestar.types import ExceptionHandlersMap
from sqlalchemy.exc import (
    DataError,
    DBAPIError,
    IntegrityError,
    InterfaceError,
    OperationalError,
)

from infercost.errors import InfercostError
from infercost.limits import MAX_JSON_DEPTH

log = logging.getLogger("infercost.api")
PROBLEM_JSON = "application/problem+json"
_MSGSPEC_PATH = re.compile(r" - at `\$\.?(?P<path>[^`]*)`$")
_ENUM = re.compile(r"^Invalid enum value '(?P<value>[^']*)'")
_UNKNOWN = re.compile(r"^Object contains unknown field `(?P<name>[^`]*)`")
_PATH_PART = re.compile(r"[^.\[\]]+|\[[^\]]*\]")
_PATH_PARAM = re.compile(r"\{(?P<name>\w+):(?P<type>\w+)\}")
_TITLES = {
    400: "Invalid request",
    404: "Not found",
    405: "Method not allowed",
    408: "Request timeout",
    413: "Request too large",
    429: "Too many requests",
}


def problem(
    request: Request[Any, Any, Any],
    status: int,
    title: str,
    detail: str,
    headers: Mapping[str, str] | None = None,
    **extra: Any,
) -> Response[dict[str, Any]]:
    """A problem+json response (with `headers`, e.g. Retry-After)."""
    body = {"type": "about:blank", "title": title, "status": status, "detail": detail}
    body["instance"] = request.url.path
    body.update(extra)
    all_headers = dict(headers or {})
    if status == 401:
        all_headers["WWW-Authenticate"] = 'Bearer realm="infercost"'
    return Response(body, status_code=status, media_type=PROBLEM_JSON, headers=all_headers or None)


def _unwrap(info: Any) -> Any:
    """The one meaningful type inside Optional[...] / Unset unions and the documentation
    (msgspec.Meta descriptions) around a field's type."""
    if isinstance(info, msgspec.inspect.Metadata):
        return _unwrap(info.type)
    if isinstance(info, msgspec.inspect.UnionType):
        real = [t for t in info.types if not isinstance(t, msgspec.inspect.NoneType)]
        return _unwrap(real[0]) if len(real) == 1 else info
    return info


def _type_at(annotation: Any, path: str) -> Any:
    """The msgspec type found at a validation error's path (`load.levels[0]`, `slo[...]`)."""
    info = _unwrap(msgspec.inspect.type_info(annotation))
    for part in _PATH_PART.findall(path):
        if isinstance(info, msgspec.inspect.StructType) and not part.startswith("["):
            field = next((f for f in info.fields if f.encode_name == part), None)
            info = None if field is None else field.type
        elif isinstance(info, msgspec.inspect.DictType):
            info = info.value_type
        elif isinstance(info, msgspec.inspect.ListType):
            info = info.item_type
        else:
            return None
        info = _unwrap(info)
    return info


def _explain(annotation: Any, field: str, message: str) -> str:
    """Add the allowed values (enums) or field names (unknown fields) to a message."""
    enum = _ENUM.match(message)
    unknown = _UNKNOWN.match(message)
    if not (enum or unknown):
        return message
    info = _type_at(annotation, "" if field == "body" else field)
    if enum and isinstance(info, msgspec.inspect.LiteralType):
        return f"'{enum.group('value')}' is not one of: {', '.join(map(str, info.values))}"
    if unknown and isinstance(info, msgspec.inspect.StructType):
        names = ", ".join(f.encode_name for f in info.fields)
        return f"unknown field '{unknown.group('name')}'; expected one of: {names}"
    return message


#: msgspec's words for a malformed value, and an example of the form it expects.
_FORMS = {
    "Invalid RFC3339 encoded datetime": "an RFC 3339 time with its time zone, e.g. "
    "2026-12-01T00:00:00Z or 2026-12-01T01:00:00+01:00",
    "Invalid RFC3339 encoded date": "an RFC 3339 date, e.g. 2026-12-01",
    "Invalid UUID": "an id (a UUID such as 8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e), as the "
    "list routes return it",
}


def _reworded(field: str, message: str) -> str:
    """msgspec's and Litestar's wording made actionable: the form a value takes, or what
    an absent body means."""
    if message in _FORMS:
        return f"{message}: give {_FORMS[message]}"
    if field == "body" and message in ("'data'", "Expected `object`, got `null`"):
        return "nothing was sent: send a JSON object (the schema is at /schema)"
    return message


def _parameter(request: Request[Any, Any, Any], field: str, message: str) -> tuple[str, str]:
    """A query or path parameter's error under the name a client sends (`format`, not the
    handler's `fmt`), with the allowed values of a Literal."""
    handler = request.route_handler
    signature = getattr(handler, "parsed_fn_signature", None)
    definition = None if signature is None else signature.parameters.get(field)
    if definition is None:
        return field, message
    kwarg = definition.kwarg_definition
    name = getattr(kwarg, "name", None) or field
    enum = _ENUM.match(message)
    candidates = definition.inner_types if definition.is_optional else (definition,)
    literal = next((t for t in candidates if t.is_literal), None)
    values = [] if literal is None else [str(v.annotation) for v in literal.inner_types]
    if enum and values:
        message = f"'{enum.group('value')}' is not one of: {', '.join(values)}"
    return name, message


def _validation_problem(
    request: Request[Any, Any, Any], exc: ValidationException
) -> Response[dict[str, Any]]:
    """A body, query or path value refused by its schema: 422, the same status as the
    checks that need several values together (InvalidInput), with every field named."""
    errors: list[dict[str, Any]] = []
    for item in exc.extra if isinstance(exc.extra, list) else []:
        message = str(item.get("message", "")) if isinstance(item, dict) else str(item)
        field = item.get("key") if isinstance(item, dict) else None
        match = _MSGSPEC_PATH.search(message)
        if match:
            field = match.group("path") or "body"
            message = message[: match.start()]
        # Litestar names the body after the handler's parameter (`data`); users send a body.
        field = "body" if field in (None, "", "data") else field
        data_field = getattr(request.route_handler, "parsed_data_field", None)
        if data_field is not None:
            message = _explain(data_field.annotation, field, message)
        if not match and field != "body":
            field, message = _parameter(request, field, message)
        errors.append({"field": field, "message": _reworded(field, message)})
    detail = "; ".join(f"{e['field']}: {e['message']}" for e in errors) if errors else exc.detail
    return problem(request, 422, "Invalid input", detail, errors=errors)


#: SQLSTATE classes that mean the database cannot serve now (connection lost, out of
#: resources, shutting down, statement cancelled by its timeout): worth a retry, 503.
_UNAVAILABLE_CLASSES = ("08", "53", "57", "58")


def _sqlstate(exc: BaseException) -> str | None:
    """The Postgres SQLSTATE of a driver error, when the server sent one."""
    return getattr(getattr(exc, "orig", None), "sqlstate", None)


def _refused_value(exc: BaseException) -> bool:
    """Whether the database (or the driver, before sending) refused a value of the request:
    SQLSTATE class 22 (a NUL character, a number out of range), or asyncpg's own check of
    a parameter (a ValueError, e.g. an integer beyond int64)."""
    state = _sqlstate(exc)
    if state is not None:
        return state.startswith("22")
    cause = getattr(getattr(exc, "orig", None), "__cause__", None)
    return isinstance(exc, DataError) or isinstance(cause, ValueError)


def _unavailable(exc: BaseException) -> bool:
    """Whether the error says the database is unreachable or cannot serve now, as opposed
    to refusing this request's values or a fault of ours."""
    if isinstance(exc, ConnectionError | OSError | TimeoutError):
        return True
    state = _sqlstate(exc)
    if state is not None:
        return state[:2] in _UNAVAILABLE_CLASSES
    # No SQLSTATE: the driver lost or could not open its connection.
    return isinstance(exc, DBAPIError) and (
        exc.connection_invalidated or isinstance(exc, InterfaceError | OperationalError)
    )


def _database_problem(
    request: Request[Any, Any, Any], exc: Exception
) -> Response[dict[str, Any]] | None:
    """A database error as a problem: a value refused (422), a concurrent change (409), or
    the database unreachable (503); None for anything else (a fault of ours: 500)."""
    if isinstance(exc, IntegrityError):
        # A concurrent change removed or took what this request relied on.
        log.warning("integrity error on %s %s", request.method, request.url.path)
        return problem(
            request,
            409,
            "Conflict",
            "this conflicts with a change made at the same time (something it refers to was "
            "removed or taken): read the current state and retry",
        )
    if _refused_value(exc):
        log.warning("data error on %s %s", request.method, request.url.path)
        return problem(
            request,
            422,
            "Invalid input",
            "the database refused a value in this request (for example a NUL character or a "
            "number out of range): check the values sent",
        )
    if not _unavailable(exc):
        return None
    log.error(
        "dependency unavailable on %s %s: %s", request.method, request.url.path, type(exc).__name__
    )
    return problem(
        request,
        503,
        "Service unavailable",
        "the database is not answering; retry shortly",
        headers={"Retry-After": "5"},
    )


def _is_uuid(text: str) -> bool:
    try:
        uuid.UUID(text)
    except ValueError:
        return False
    return True


def _not_an_id(request: Request[Any, Any, Any]) -> str | None:
    """Why a path that fits a route but for its id (`/v1/jobs/8b58da70`) found nothing: the
    API takes whole ids only (the CLI resolves prefixes before it asks); None for a path no
    route fits."""
    path = request.url.path.rstrip("/")
    for route in request.app.routes:
        params = list(_PATH_PARAM.finditer(route.path))
        if not any(p["type"] == "uuid" for p in params):
            continue
        pattern, at = "", 0
        for param in params:
            pattern += re.escape(route.path[at : param.start()]) + f"(?P<{param['name']}>[^/]+)"
            at = param.end()
        pattern += re.escape(route.path[at:])
        match = re.fullmatch(pattern, path)
        if match is None:
            continue
        for param in params:
            value = match[param["name"]]
            if param["type"] == "uuid" and not _is_uuid(value):
                kind = param["name"].removesuffix("_id")
                listing = route.path[: param.start()].rstrip("/")
                listed = any(
                    r.path.rstrip("/") == listing and "GET" in getattr(r, "methods", ())
                    for r in request.app.routes
                )
                shown = _PATH_PARAM.sub(r"{\g<name>}", listing)
                where = f", as GET {shown} lists them" if listed else ""
                return (
                    f"'{value}' is not a {kind} id: ids in the API are whole UUIDs (36 "
                    f"characters{where}); a prefix is resolved by the CLI, not here"
                )
    return None


def _handle(request: Request[Any, Any, Any], exc: Exception) -> Response[dict[str, Any]]:
    if isinstance(exc, InfercostError):
        return problem(request, exc.status_code, exc.title, exc.detail, **exc.extra)
    if isinstance(exc, ValidationException):
        return _validation_problem(request, exc)
    if isinstance(exc, HTTPException):
        title = _TITLES.get(exc.status_code, "Request failed")
        detail = exc.detail
        if isinstance(exc.__cause__, SerializationException):
            # msgspec's decoder speaks of "input data"; say which input and what is wrong.
            reason = str(exc.__cause__).removeprefix("JSON is malformed: ")
            if reason == "Input data was truncated":
                reason = "it ends before the JSON does (input data was truncated)"
            detail = f"the body is not valid JSON: {reason}"
        if exc.status_code == 404 and detail in ("Not Found", ""):
            detail = _not_an_id(request) or (
                f"no route {request.method} {request.url.path}: see /schema for the API"
            )
        return problem(request, exc.status_code, title, detail, headers=exc.headers)
    if isinstance(exc, RecursionError):
        # Any decoder that still meets nesting deeper than the request guard checks.
        return problem(
            request,
            400,
            "Invalid request",
            f"the JSON is nested too deeply (at most {MAX_JSON_DEPTH} levels of arrays and "
            "objects)",
        )
    if isinstance(exc, DBAPIError | ConnectionError | OSError):
        response = _database_problem(request, exc)
        if response is not None:
            return response
    incident = uuid.uuid4().hex[:12]
    log.exception("unhandled error %s on %s %s", incident, request.method, request.url.path)
    return problem(
        request,
        HTTP_500_INTERNAL_SERVER_ERROR,
        "Internal error",
        f"something went wrong on our side (incident {incident}); the server log has the details",
    )


EXCEPTION_HANDLERS: ExceptionHandlersMap = {Exception: _handle}
