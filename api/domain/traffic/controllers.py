"""Traffic routes: POST (the log is the body), GET, DELETE /v1/traffic."""

from __future__ import annotations

from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from api.auth import AppSettings, team_service
from api.domain.audit.services import AuditTrail
from api.domain.traffic.schemas import TrafficLog
from api.domain.traffic.services import TrafficService, too_large
from api.openapi import problem_responses
from api.schemas import Limit, Offset, Page, PathId
from api.uploads import file_body
from infercost.traffic.models import TrafficFormat

#: What a log may be sent as; the format comes from `format`, not from the content type.
CONTENT_TYPES = (
    "text/csv",
    "application/x-ndjson",
    "application/jsonl",
    "application/gzip",
    "application/octet-stream",
)


ImportOperation = file_body(
    "the request log: CSV or JSON lines as `format` says, plain or gzip "
    "(by its content, or Content-Encoding: gzip)",
    CONTENT_TYPES,
)


class TrafficController(Controller):
    """POST, GET /v1/traffic; GET, DELETE /v1/traffic/{id}."""

    path = "/v1/traffic"
    tags = ["traffic"]
    dependencies = {"traffic": team_service(TrafficService)}

    # The size limit is this server's setting, enforced while the body streams in.
    @post(
        "/",
        status_code=201,
        summary="Import a request log",
        request_max_body_size=None,
        operation_class=ImportOperation,
        responses=problem_responses(409, 413),
    )
    async def import_traffic(
        self,
        *,
        request: Request[Any, Any, Any],
        traffic: NamedDependency[TrafficService],
        settings: AppSettings,
        audit: NamedDependency[AuditTrail],
        fmt: Annotated[
            TrafficFormat,
            QueryParameter(
                name="format",
                description="azure (TIMESTAMP,ContextTokens,GeneratedTokens), mooncake (JSON "
                "lines with timestamp in ms, input_length, output_length, hash_ids), burstgpt "
                "(Timestamp, Model, Request tokens, Response tokens, ...) or infercost (CSV or "
                "JSON lines: timestamp, input_tokens, output_tokens, model?, session_id?, "
                "prefix_hashes?)",
            ),
        ],
        name: Annotated[
            str | None,
            QueryParameter(
                description="a name to show and to plan by, one per log in your team "
                "(default: from the content's hash)",
                min_length=1,
                max_length=200,
            ),
        ] = None,
    ) -> Response[TrafficLog]:
        """The body is the log, streamed: each request is stored with its time after the
        first request, lengths, model, session and prefix blocks, and the read is computed
        once. 201 with the new log; 200 with the stored one when your team already imported
        these bytes under this name; 409 for other bytes under a name taken; 413 over
        INFERCOST_MAX_TRAFFIC_BYTES; 422 naming the first bad line and column, with nothing
        stored."""
        cap = settings.max_traffic_bytes
        announced = request.headers.get("content-length")
        if announced is not None and announced.isdigit() and int(announced) > cap:
            raise too_large(cap)
        encoding = request.headers.get("content-encoding", "").strip().lower()
        read, created = await traffic.import_log(
            request.stream(),
            name=name,
            fmt=fmt,
            gzip=True if encoding in ("gzip", "x-gzip") else None,
            max_bytes=cap,
            max_logs=settings.max_traffic_logs,
        )
        if created:
            await audit.record(
                "traffic.create",
                "traffic",
                read.id,
                f"imported request log '{read.name}' ({fmt})",
                {"name": read.name, "format": fmt},
            )
        return Response(read, status_code=201 if created else 200)

    @get("/", summary="List request logs")
    async def list_traffic(
        self, traffic: NamedDependency[TrafficService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[TrafficLog]:
        """Your team's logs with their reads (no series), newest first."""
        items, total = await traffic.page(limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{traffic_id:uuid}", summary="Read a request log", responses=problem_responses(422))
    async def get_traffic(
        self,
        traffic: NamedDependency[TrafficService],
        traffic_id: PathId,
        interval: Annotated[
            int | None,
            QueryParameter(
                description="seconds per point of `series` (default: the shortest of 60, 300, "
                "900, 3600, 21600, 86400 giving at most 1,440 points)",
                ge=1,
                le=86_400 * 366,
            ),
        ] = None,
    ) -> TrafficLog:
        """One log's read and its `series`: requests and tokens per interval."""
        return await traffic.read(traffic_id, interval)

    @delete("/{traffic_id:uuid}", summary="Delete a request log")
    async def delete_traffic(
        self,
        traffic: NamedDependency[TrafficService],
        audit: NamedDependency[AuditTrail],
        traffic_id: PathId,
    ) -> None:
        """Remove a log and its requests (204)."""
        log = await traffic.get(traffic_id)
        await traffic.delete(traffic_id)
        await audit.record(
            "traffic.delete", "traffic", traffic_id, f"deleted request log '{log.name}'"
        )
