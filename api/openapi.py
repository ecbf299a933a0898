"""The OpenAPI document's shared parts: one problem+json schema declared on every route for
the errors that route can really answer, and the interactive docs served from the installed
swagger-ui-bundle package, so `/docs` and `/schema` work on an air-gapped install."""

from __future__ import annotations

import inspect
import uuid
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Final

import msgspec
from litestar import Litestar, MediaType, Request, Router, get
from litestar.enums import ParamType
from litestar.handlers import HTTPRouteHandler
from litestar.openapi import OpenAPIConfig
from litestar.openapi.datastructures import ResponseSpec
from litestar.openapi.plugins import SwaggerRenderPlugin
from litestar.openapi.spec import (
    Components,
    Example,
    OpenAPIType,
    Parameter,
    Schema,
    SecurityScheme,
)
from litestar.routes import HTTPRoute
from litestar.static_files import create_static_files_router
from swagger_ui_bundle import swagger_ui_path

from api.errors import PROBLEM_JSON
from infercost import __version__

#: Where the Swagger UI files of the installed package are served (never a CDN).
DOCS_ASSETS: Final = "/docs/assets"
_ASSET_DIR: Final = Path(str(swagger_ui_path))


class FieldError(msgspec.Struct):
    """One refused field of a request."""

    field: Annotated[
        str,
        msgspec.Meta(
            description="Where: a dotted path into the JSON body (`load.levels[0]`), `body` "
            "for the body as a whole, or the name of a query parameter",
            examples=["load.levels[0]"],
        ),
    ]
    message: Annotated[
        str,
        msgspec.Meta(
            description="What is wrong there and what is allowed",
            examples=["Expected `float` >= 0.001"],
        ),
    ]
    line: Annotated[
        int | None,
        msgspec.Meta(
            description="For an uploaded file (a request log, a dataset): the line of the body "
            "at fault, counting from 1",
            examples=[60002],
        ),
    ] = None
    column: Annotated[
        str | None,
        msgspec.Meta(
            description="For an uploaded file: the column (or JSON key) at fault, where one is",
            examples=["GeneratedTokens"],
        ),
    ] = None


class Problem(msgspec.Struct, kw_only=True):
    """An error as RFC 9457 problem details (`application/problem+json`); `detail` is a
    sentence a person can act on."""

    type: Annotated[
        str,
        msgspec.Meta(
            description="A URI naming the kind of problem; `about:blank` means the status "
            "code says it all",
            examples=["about:blank"],
        ),
    ]
    title: Annotated[
        str,
        msgspec.Meta(
            description="A short summary of the kind of problem, the same for every "
            "occurrence of this status",
            examples=["Invalid input"],
        ),
    ]
    status: Annotated[
        int, msgspec.Meta(description="The HTTP status code of this response", examples=[422])
    ]
    detail: Annotated[
        str,
        msgspec.Meta(
            description="What went wrong in this request and what to do about it",
            examples=["load.levels[0]: Expected `float` >= 0.001"],
        ),
    ]
    instance: Annotated[
        str,
        msgspec.Meta(description="The path of the request that failed", examples=["/v1/jobs"]),
    ]
    errors: (
        Annotated[
            list[FieldError],
            msgspec.Meta(
                description="Each refused field, on 422 answers (and on 400s that name a field)"
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    limit: (
        Annotated[
            int,
            msgspec.Meta(
                description="The server's cap that a 409 ran into (active jobs, webhooks)",
                examples=[8],
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET
    valid_names: (
        Annotated[
            list[str],
            msgspec.Meta(
                description="On a 404 for a name, the names that exist",
                examples=[["latency.svg", "throughput.svg"]],
            ),
        ]
        | msgspec.UnsetType
    ) = msgspec.UNSET


#: What each error status means on this API, and an example body of it.
_ERRORS: Final[dict[int, tuple[str, str, str]]] = {
    400: (
        "The request cannot be read: the body is not valid JSON or nests more than 32 "
        "levels, or the URL holds a NUL character",
        "Invalid request",
        "the body is not valid JSON: object keys must be strings (byte 1)",
    ),
    401: (
        "No API key, or an unknown or revoked one: send `Authorization: Bearer <key>`",
        "Unauthorized",
        "this API key is unknown or revoked: ask an admin for a new key",
    ),
    403: (
        "The credential is valid but may not do this: the admin token on a team's route, "
        "or a team's key on an admin route",
        "Forbidden",
        "the admin token manages teams and keys; use a team's API key here",
    ),
    404: (
        "Nothing by that id or name in your team (another team's resources are never "
        "shown), or nothing the request refers to",
        "Not found",
        "no job 8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e: GET /v1/jobs lists yours",
    ),
    409: (
        "The request clashes with the current state: a name already taken, a job already "
        "finished, a cap on active jobs reached, or a change made at the same time",
        "Conflict",
        "an endpoint named 'vllm-llama8b-h200' already exists in your team",
    ),
    410: (
        "The share link expired or was revoked: its team can make a new one",
        "Gone",
        "This share link was revoked at 2026-12-05 14:03 UTC: ask the team that shared it "
        "for a new one.",
    ),
    413: (
        "The body is over this server's size limit",
        "Request too large",
        "the dataset is over this server's limit of 64 MiB (67108864 bytes, "
        "INFERCOST_MAX_DATASET_BYTES): split it or ask an admin to raise the limit",
    ),
    415: (
        "The body's Content-Type says nothing about its format",
        "Unsupported media type",
        "cannot tell the dataset's format from Content-Type 'text/plain': send "
        "application/x-ndjson (JSONL) or application/json (ShareGPT)",
    ),
    422: (
        "The request was read but its values are refused: a missing or unknown field, a "
        "value of the wrong type or out of range, or values that do not fit together; "
        "`errors` names each field",
        "Invalid input",
        "load.levels[0]: Expected `float` >= 0.001",
    ),
    429: (
        "Over this API key's requests per minute; Retry-After says when to try again",
        "Too many requests",
        "this API key made more than 600 requests this minute "
        "(INFERCOST_RATE_LIMIT_PER_MINUTE): retry in 12 s",
    ),
    503: (
        "The database cannot serve now; retry after Retry-After seconds",
        "Service unavailable",
        "the database is not answering; retry shortly",
    ),
}

#: Signature names that are neither query parameters nor dependencies.
_NOT_PARAMETERS: Final = frozenset(
    {"self", "request", "state", "scope", "headers", "cookies", "query", "body", "data", "socket"}
)
_WRITES: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})


def problem_response(status: int) -> ResponseSpec:
    """The OpenAPI answer of one error status: the shared Problem schema as
    application/problem+json, with what the status means here and an example."""
    description, title, detail = _ERRORS[status]
    example: dict[str, Any] = {
        "type": "about:blank",
        "title": title,
        "status": status,
        "detail": detail,
        "instance": "/v1/jobs",
    }
    if status == 422:
        field, _, message = detail.partition(": ")
        example["errors"] = [{"field": field, "message": message}]
    return ResponseSpec(
        data_container=Problem,
        description=description,
        media_type=PROBLEM_JSON,
        generate_examples=False,
        examples=[Example(summary=title, value=example)],
    )


def problem_responses(*statuses: int) -> dict[int, ResponseSpec]:
    """`responses=` for a route handler: errors beyond the ones every route of its kind
    declares (see `error_statuses`), e.g. a 404 for an id named in the body."""
    return {status: problem_response(status) for status in statuses}


def _dependency_names(handler: HTTPRouteHandler) -> set[str]:
    """Every name the handler needs, its dependencies' own needs included."""
    providers = handler.resolve_dependencies()
    seen: set[str] = set()
    todo = list(handler.parsed_fn_signature.parameters)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in providers:
            todo.extend(inspect.signature(providers[name].dependency).parameters)
    return seen


def error_statuses(route: HTTPRoute, handler: HTTPRouteHandler) -> set[int]:
    """The error statuses a route can answer, from what it takes.

    Every route: 400 (a NUL character in the URL). Routes behind a key: 401, 403, 429 and
    503 (the key is looked up in the database). An id (UUID) in the path: 404. A JSON body: 400
    (not JSON), 413 and 422. Query parameters: 422. Writes: 409 (a name taken, a state
    that moved on, a concurrent change) and 422 (a value the database refuses).
    """
    statuses = {400}
    names = _dependency_names(handler)
    if names & {"caller", "admin"}:
        statuses |= {401, 403, 429, 503}
    if "db_session" in names:
        statuses.add(503)
    if any(p.type is uuid.UUID for p in route.path_parameters.values()):
        statuses.add(404)
    if handler.parsed_data_field is not None:
        statuses |= {413, 422}
    own = set(handler.parsed_fn_signature.parameters) - _NOT_PARAMETERS
    if own - set(route.path_parameters) - set(handler.resolve_dependencies()):
        statuses.add(422)
    if set(handler.http_methods) & _WRITES:
        statuses |= {409, 422}
    return statuses


def declare_errors(app: Litestar) -> None:
    """Declare on every documented route the problem+json errors it can answer, keeping
    any a route declares itself; Litestar's own 400 (a different shape, never sent by this
    API) is replaced by the shared schema."""
    for route in app.routes:
        if not isinstance(route, HTTPRoute):
            continue
        for handler in route.route_handlers:
            if not handler.include_in_schema:
                continue
            declared = dict(handler.responses or {})
            for status in sorted(error_statuses(route, handler)):
                declared.setdefault(status, problem_response(status))
            handler.responses = declared


def _body_structs(app: Litestar) -> list[msgspec.inspect.StructType]:
    """Every Struct a JSON body can hold (each class once)."""
    found: dict[type, msgspec.inspect.StructType] = {}

    def walk(info: Any) -> None:
        if isinstance(info, msgspec.inspect.StructType):
            if info.cls in found:  # a struct that holds itself, or met before
                return
            found[info.cls] = info
            for field in info.fields:
                walk(field.type)
        elif isinstance(info, msgspec.inspect.Metadata):
            walk(info.type)
        elif isinstance(info, msgspec.inspect.UnionType):
            for member in info.types:
                walk(member)
        elif isinstance(info, msgspec.inspect.ListType | msgspec.inspect.SetType):
            walk(info.item_type)
        elif isinstance(info, msgspec.inspect.DictType):
            walk(info.value_type)

    for route in app.routes:
        for handler in getattr(route, "route_handlers", ()):
            data = getattr(handler, "parsed_data_field", None)
            if data is not None:
                try:
                    walk(msgspec.inspect.type_info(data.annotation))
                except TypeError:  # not a msgspec type (a DTO, raw bytes): nothing to mark
                    continue
    return list(found.values())


def _request_structs(app: Litestar) -> dict[str, bool]:
    """Every Struct a JSON body can hold, by class name: whether it refuses unknown fields
    (False when two structs of one name disagree)."""
    found: dict[str, bool] = {}
    for info in _body_structs(app):
        name = info.cls.__name__
        found[name] = found.get(name, True) and info.forbid_unknown_fields
    return found


def refuse_unknown_fields(app: Litestar) -> None:
    """Mark request bodies that refuse unknown fields (msgspec's forbid_unknown_fields) with
    `additionalProperties: false`, which Litestar's schema leaves out, so a generated client
    knows a typo is an error. Builds the document once; Litestar keeps it."""
    forbidding = {name for name, forbids in _request_structs(app).items() if forbids}
    components = app.openapi_schema.components
    for schema in (components.schemas or {}).values() if components else ():
        if schema.title in forbidding and schema.additional_properties is None:
            schema.additional_properties = False


def unique_titles(app: Litestar) -> None:
    """Give schemas whose class names clash (two `Series`) their component's name as title:
    client generators name their classes after titles, and refuse duplicates."""
    components = app.openapi_schema.components
    schemas = (components.schemas or {}) if components else {}
    titles = Counter(schema.title for schema in schemas.values())
    for name, schema in schemas.items():
        if titles[schema.title] > 1:
            schema.title = name


#: No text in a URL may hold NUL (api/guards.py refuses it with 400): said on every text
#: parameter that has no pattern, enum or format of its own.
NO_NUL: Final = "^[^\\u0000]*$"


def _choices() -> dict[tuple[str, str], dict[str, Any]]:
    """Parameters whose values the route checks by hand against a fixed set (or count): the
    document names it, so a client (and a generated request) knows what is valid. (Imported
    here: the domains import this module for their error answers.)"""
    from api.domain.history.services import MODES
    from api.domain.reports.services import MAX_COMPARED, MIN_COMPARED
    from infercost.planning.presets import PRESETS
    from infercost.status.figures import WINDOWS

    return {
        ("/v1/status", "window"): {"enum": list(WINDOWS)},
        ("/v1/status/page", "window"): {"enum": list(WINDOWS)},
        ("/v1/endpoints/{endpoint_id}/history", "mode"): {"enum": list(MODES)},
        ("/v1/endpoints/{endpoint_id}/history", "limit"): {"minimum": 1, "maximum": 1000},
        ("/v1/comparisons", "preset"): {"enum": sorted(PRESETS)},
        ("/v1/presets/{name}", "name"): {"enum": sorted(PRESETS)},
        ("/v1/reports/compare", "job_id"): {"min_items": MIN_COMPARED, "max_items": MAX_COMPARED},
    }


#: Litestar's parameter bounds (QueryParameter(ge=...)) by JSON Schema keyword.
_BOUNDS: Final = {
    "ge": "minimum",
    "le": "maximum",
    "gt": "exclusive_minimum",
    "lt": "exclusive_maximum",
    "min_length": "min_length",
    "max_length": "max_length",
    "min_items": "min_items",
    "max_items": "max_items",
    "pattern": "pattern",
}


def _branches(schema: Schema) -> list[Schema]:
    """The schema and every non-null member of its oneOf/anyOf, and their array items."""
    found = [schema]
    for member in [*(schema.one_of or []), *(schema.any_of or [])]:
        if isinstance(member, Schema) and member.type != OpenAPIType.NULL:
            found.extend(_branches(member))
    if isinstance(schema.items, Schema):
        found.extend(_branches(schema.items))
    return found


def _set_missing(schema: Schema, keyword: str, value: Any) -> None:
    """Set `keyword` on the branch of `schema` it applies to, unless already set."""
    textual = keyword in ("enum", "pattern", "min_length", "max_length")
    listy = keyword in ("min_items", "max_items")
    for branch in _branches(schema):
        kind = branch.type
        if listy and kind != OpenAPIType.ARRAY:
            continue
        if textual and kind != OpenAPIType.STRING:
            continue
        if not (listy or textual) and kind not in (OpenAPIType.INTEGER, OpenAPIType.NUMBER):
            continue
        if getattr(branch, keyword) is None:
            setattr(branch, keyword, value)


def _kwarg(handler: HTTPRouteHandler | None, name: str) -> Any:
    """The Litestar parameter definition (bounds) of the parameter `name` in the URL."""
    if handler is None:
        return None
    for field_name, field in handler.parsed_fn_signature.parameters.items():
        alias = getattr(field.kwarg_definition, "query", None)
        if (alias or field_name) == name:
            return field.kwarg_definition
    return None


def _describe(schema: Schema, kwarg: Any, choices: dict[str, Any]) -> None:
    """Fill in one parameter's schema (see describe_parameters)."""
    for name, keyword in _BOUNDS.items():
        value = getattr(kwarg, name, None)
        if value is not None:
            _set_missing(schema, keyword, value)
    for keyword, value in choices.items():
        _set_missing(schema, keyword, value)
    for branch in _branches(schema):
        if branch.type == OpenAPIType.STRING and not (
            branch.enum or branch.pattern or branch.format
        ):
            branch.pattern = NO_NUL


def describe_parameters(app: Litestar) -> None:
    """State in the document what the routes check on their parameters: the bounds Litestar
    leaves out of an optional parameter's schema, the fixed choices some routes check by
    hand, and that no text in a URL may hold NUL."""
    handlers: dict[tuple[str, str], HTTPRouteHandler] = {}
    for route in app.routes:
        if isinstance(route, HTTPRoute):
            for verb, (handler, _) in route.route_handler_map.items():
                handlers[(route.path_format, str(verb).lower())] = handler
    choices = _choices()
    for path, item in (app.openapi_schema.paths or {}).items():
        for method in ("get", "put", "post", "delete", "patch"):
            operation = getattr(item, method, None)
            for parameter in operation.parameters or [] if operation else []:
                if (
                    isinstance(parameter, Parameter)
                    and isinstance(parameter.schema, Schema)
                    and parameter.param_in in (ParamType.QUERY, ParamType.PATH)
                ):
                    _describe(
                        parameter.schema,
                        _kwarg(handlers.get((path, method)), parameter.name),
                        choices.get((path, parameter.name), {}),
                    )


#: msgspec's JSON Schema bound keywords, by the name of the Schema attribute that holds them.
_BOUND_KEYWORDS: Final = {
    "minimum": "minimum",
    "maximum": "maximum",
    "exclusiveMinimum": "exclusive_minimum",
    "exclusiveMaximum": "exclusive_maximum",
    "minLength": "min_length",
    "maxLength": "max_length",
    "pattern": "pattern",
    "minItems": "min_items",
    "maxItems": "max_items",
    "minProperties": "min_properties",
    "maxProperties": "max_properties",
    "multipleOf": "multiple_of",
}


def _merge_bounds(schema: Schema, exact: dict[str, Any]) -> None:
    """Copy the bounds of msgspec's schema of a value (`exact`) onto Litestar's (`schema`),
    branch by branch of the same type, where Litestar left them out."""
    members = [m for m in exact.get("anyOf", exact.get("oneOf", [exact])) if isinstance(m, dict)]
    for member in members:
        kind = member.get("type")
        if kind is None or kind == "null":
            continue
        for branch in _branches(schema):
            if not isinstance(branch.type, OpenAPIType) or branch.type.value != kind:
                continue
            for keyword, attribute in _BOUND_KEYWORDS.items():
                if keyword in member and getattr(branch, attribute) is None:
                    setattr(branch, attribute, member[keyword])
            items = member.get("items")
            if kind == "array" and isinstance(items, dict) and isinstance(branch.items, Schema):
                _merge_bounds(branch.items, items)
            break


def body_bounds(app: Litestar) -> None:
    """State on every request body the bounds its msgspec types check. Litestar leaves out
    a bound on an optional field (`Annotated[float, Meta(gt=0)] | None` is documented as a
    bare number), so a client could send what the API refuses: each field's schema gets
    the bounds msgspec's own JSON Schema of it has."""
    by_name: dict[str, list[type]] = {}
    for info in _body_structs(app):
        by_name.setdefault(info.cls.__name__, []).append(info.cls)
    components = app.openapi_schema.components
    schemas = (components.schemas or {}) if components else {}
    for name, classes in by_name.items():
        matching = [s for s in schemas.values() if s.title == name]
        if len(classes) != 1 or len(matching) != 1:
            continue  # two structs of one name: leave them as Litestar wrote them
        (_, exact) = msgspec.json.schema_components(classes)
        for field, field_schema in (exact.get(name, {}).get("properties") or {}).items():
            target = (matching[0].properties or {}).get(field)
            if isinstance(target, Schema):
                _merge_bounds(target, field_schema)


def document(app: Litestar) -> None:
    """Finish the app's OpenAPI document: error answers on every route, strict bodies,
    what each parameter accepts, one title per schema."""
    declare_errors(app)
    refuse_unknown_fields(app)
    body_bounds(app)
    describe_parameters(app)
    unique_titles(app)


def _asset(name: str) -> str:
    return f"{DOCS_ASSETS}/{name}"


#: Swagger UI, its script, style sheet and icon loaded from this server.
SWAGGER = SwaggerRenderPlugin(
    js_url=_asset("swagger-ui-bundle.js"),
    css_url=_asset("swagger-ui.css"),
    standalone_preset_js_url=_asset("swagger-ui-standalone-preset.js"),
    favicon=f"<link rel='icon' type='image/png' href='{_asset('favicon-32x32.png')}'>",
    path="/swagger",
)


@get("/docs", media_type=MediaType.HTML, include_in_schema=False, sync_to_thread=False)
def docs(request: Request[Any, Any, Any]) -> bytes:
    """The interactive docs (the same page as /schema), under the name people try first."""
    return SWAGGER.render(request, request.app.openapi_schema.to_schema())


def docs_handlers() -> Iterable[HTTPRouteHandler | Router]:
    """The /docs page and the Swagger UI files it loads, read from the installed package."""
    return [
        docs,
        create_static_files_router(
            path=DOCS_ASSETS, directories=[_ASSET_DIR], include_in_schema=False
        ),
    ]


def openapi_config() -> OpenAPIConfig:
    """The document at /schema/openapi.json, with Swagger UI at /schema and /docs."""
    return OpenAPIConfig(
        title="infercost",
        version=__version__,
        description="Benchmark LLM inference endpoints; time to first token, throughput, "
        "and cost per million tokens. Every error is RFC 9457 problem+json.",
        path="/schema",
        render_plugins=[SWAGGER],
        components=Components(
            security_schemes={
                "BearerAuth": SecurityScheme(
                    type="http", scheme="bearer", description="team API key"
                )
            }
        ),
        security=[{"BearerAuth": []}],
    )
