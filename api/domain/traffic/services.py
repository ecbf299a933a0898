"""Request log rules for one team: stream an import into Postgres with COPY, in the
request's one transaction (a bad row leaves nothing behind), one log per name."""

from __future__ import annotations

import asyncio
import hashlib
import math
import uuid
from collections.abc import AsyncIterator
from datetime import timedelta
from typing import Any

import msgspec
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.traffic.schemas import (
    ModelShare,
    TokenLengths,
    TrafficLog,
    TrafficPoint,
    TrafficSeries,
)
from api.uploads import mib
from infercost.errors import Conflict, InfercostError, InvalidInput, NotFound
from infercost.jobs.plan import Plan, WindowPlan
from infercost.teams.caps import check_room
from infercost.traffic.models import Traffic
from infercost.traffic.parse import Decoder, Row, TooLarge, TrafficError, TrafficReader
from infercost.traffic.repository import TrafficRepository
from infercost.traffic.stats import TrafficSummary

#: Body bytes gathered before they are parsed (off the event loop), and parsed rows
#: gathered before one COPY writes them.
PARSE_CHUNK = 1 << 20
COPY_ROWS = 50_000
#: Intervals a series may have, and the ones a read picks from when none is asked for
#: (the shortest that gives at most AUTO_POINTS points).
MAX_POINTS = 10_000
AUTO_POINTS = 1440
AUTO_INTERVALS_S = (60, 300, 900, 3600, 21_600, 86_400)


class TrafficTooLarge(InfercostError):
    """A log over the configured size limit."""

    status_code = 413
    title = "Payload too large"


class BadRow(InfercostError):
    """A row of a log that cannot be read, named by line and column."""

    status_code = 422
    title = "Invalid input"

    def __init__(self, error: TrafficError) -> None:
        super().__init__(
            f"{error.where}: {error.problem}; fix it and import the file again "
            "(nothing was stored)",
            errors=[
                {
                    "field": "body",
                    "line": error.line,
                    "column": error.column,
                    "message": error.problem,
                }
            ],
        )


class _Same(Exception):
    """The log is already stored under its name (raised to undo the import's savepoint)."""

    def __init__(self, existing: Traffic) -> None:
        self.existing = existing


def too_large(cap: int) -> TrafficTooLarge:
    """The 413 for a log over `cap` bytes."""
    return TrafficTooLarge(
        f"the log is over this server's limit of {mib(cap)} ({cap} bytes of text, "
        "INFERCOST_MAX_TRAFFIC_BYTES): import a shorter window of it, or ask an admin to "
        "raise the limit"
    )


def to_read(traffic: Traffic, series: TrafficSeries | None = None) -> TrafficLog:
    """The response shape of a log."""
    counts = traffic.minute_counts or [0]
    peak_minute = max(range(len(counts)), key=lambda m: (counts[m], -m))
    total = traffic.requests or 1
    end_at = (
        None
        if traffic.start_at is None
        else traffic.start_at + timedelta(seconds=traffic.duration_s)
    )
    mean = traffic.mean_requests_per_s
    return TrafficLog(
        id=traffic.id,
        name=traffic.name,
        format=traffic.format,
        content_sha256=traffic.content_sha256,
        size_bytes=traffic.size_bytes,
        requests=traffic.requests,
        start_at=traffic.start_at,
        end_at=end_at,
        duration_s=traffic.duration_s,
        mean_requests_per_s=mean,
        peak_1m_requests_per_s=traffic.peak_1m_requests_per_s,
        peak_5m_requests_per_s=traffic.peak_5m_requests_per_s,
        peak_minute_start_s=peak_minute * 60.0,
        peak_to_mean=traffic.peak_1m_requests_per_s / mean if mean else None,
        input_tokens=TokenLengths(**traffic.lengths["input_tokens"]),
        output_tokens=TokenLengths(**traffic.lengths["output_tokens"]),
        input_tokens_total=traffic.input_tokens_total,
        output_tokens_total=traffic.output_tokens_total,
        block_tokens=traffic.block_tokens,
        prefix_reuse_share=traffic.prefix_reuse_share,
        sessions=traffic.sessions,
        models=[
            ModelShare(m["model"], int(m["requests"]), int(m["requests"]) / total)
            for m in traffic.models
        ],
        in_order=traffic.in_order,
        created_at=traffic.created_at,
        series=series,
    )


def _read_values(summary: TrafficSummary) -> dict[str, Any]:
    return {
        "requests": summary.requests,
        "start_at": summary.start_at,
        "duration_s": summary.duration_s,
        "mean_requests_per_s": summary.mean_requests_per_s,
        "peak_1m_requests_per_s": summary.peak_1m_requests_per_s,
        "peak_5m_requests_per_s": summary.peak_5m_requests_per_s,
        "input_tokens_total": summary.input_tokens_total,
        "output_tokens_total": summary.output_tokens_total,
        "block_tokens": summary.block_tokens,
        "prefix_reuse_share": summary.prefix_reuse_share,
        "sessions": summary.sessions,
        "in_order": summary.in_order,
        "minute_counts": summary.minute_counts,
        "lengths": {"input_tokens": summary.input_tokens, "output_tokens": summary.output_tokens},
        "models": summary.models,
    }


class TrafficService:
    """Request logs of one team."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.repo = TrafficRepository(session)
        self.team_id = team_id

    async def import_log(
        self,
        body: AsyncIterator[bytes],
        *,
        name: str | None,
        fmt: str,
        gzip: bool | None,
        max_bytes: int,
        max_logs: int,
    ) -> tuple[TrafficLog, bool]:
        """Read a log as it streams in and store it with its read; the bool says whether it
        is new. The same bytes under the same name give back the stored log (200); other
        bytes under a name already taken are a 409."""
        if name is not None:
            existing = await self.repo.by_name(self.team_id, name)
            if existing is not None:
                sha256 = await _digest(body, max_bytes)
                if sha256 == existing.content_sha256:
                    return to_read(existing), False
                raise Conflict(
                    f"your team already has traffic named '{name}' with other content: "
                    f"import this file under another name, or delete that one first "
                    f"(DELETE /v1/traffic/{existing.id})"
                )
        await check_room(
            self.session,
            Traffic,
            self.team_id,
            cap=max_logs,
            variable="INFERCOST_MAX_TRAFFIC_LOGS",
            noun="traffic logs",
            delete="DELETE /v1/traffic/{id}",
        )
        try:
            async with self.session.begin_nested():
                traffic = await self._store(body, name=name, fmt=fmt, gzip=gzip, cap=max_bytes)
        except _Same as same:
            return to_read(same.existing), False
        except IntegrityError:
            # The same name was taken by a concurrent import meanwhile.
            raise Conflict(
                f"your team already has traffic named '{name}': import under another name"
            ) from None
        return to_read(traffic), True

    async def _store(
        self, body: AsyncIterator[bytes], *, name: str | None, fmt: str, gzip: bool | None, cap: int
    ) -> Traffic:
        decoder = Decoder(cap, gzip=gzip)
        reader = TrafficReader(fmt)
        digest = hashlib.sha256()
        traffic = await self.repo.add(
            {
                "team_id": self.team_id,
                "name": name or f"importing-{uuid.uuid4().hex}",
                "format": fmt,
                "content_sha256": "",
                "size_bytes": 0,
                "requests": 0,
                "duration_s": 0.0,
                "peak_1m_requests_per_s": 0.0,
                "peak_5m_requests_per_s": 0.0,
                "input_tokens_total": 0,
                "output_tokens_total": 0,
                "in_order": True,
                "minute_counts": [],
                "lengths": {},
                "models": [],
            }
        )

        def step(data: bytes, last: bool) -> list[Row]:
            lines = decoder.feed(data)
            if last:
                lines += decoder.close()
            return reader.rows(lines)

        size = 0
        buffered: list[bytes] = []
        held = 0
        pending: list[Row] = []
        try:
            async for chunk in body:
                size += len(chunk)
                if size > cap:
                    raise too_large(cap)
                digest.update(chunk)
                buffered.append(chunk)
                held += len(chunk)
                if held >= PARSE_CHUNK:
                    # CPU work off the event loop, so other requests go on meanwhile.
                    pending += await asyncio.to_thread(step, b"".join(buffered), False)
                    buffered, held = [], 0
                    if len(pending) >= COPY_ROWS:
                        await self.repo.copy_rows(traffic.id, pending)
                        pending = []
            pending += await asyncio.to_thread(step, b"".join(buffered), True)
            summary = reader.finish()
        except TrafficError as exc:
            raise BadRow(exc) from None
        except TooLarge:
            raise too_large(cap) from None
        await self.repo.copy_rows(traffic.id, pending)
        await self.repo.shift(traffic.id, summary.shift_us)
        sha256 = digest.hexdigest()
        final_name = name or f"traffic-{sha256[:12]}"
        if name is None:
            existing = await self.repo.by_name(self.team_id, final_name)
            if existing is not None and existing.content_sha256 == sha256:
                raise _Same(existing)
            if existing is not None:
                raise Conflict(
                    f"your team already has traffic named '{final_name}' with other content: "
                    "import this file with ?name="
                )
        return await self.repo.finish(
            traffic,
            {
                "name": final_name,
                "content_sha256": sha256,
                "size_bytes": size,
                **_read_values(summary),
            },
        )

    async def get(self, traffic_id: uuid.UUID) -> Traffic:
        """The team's log, or 404."""
        traffic = await self.repo.get(self.team_id, traffic_id)
        if traffic is None:
            raise NotFound(f"no traffic {traffic_id}: GET /v1/traffic lists yours")
        return traffic

    async def read(self, traffic_id: uuid.UUID, interval_s: int | None) -> TrafficLog:
        """One log's read, with its series per `interval_s` seconds (default: the shortest
        of 1 min, 5 min, 15 min, 1 h, 6 h, 1 day that gives at most 1,440 points)."""
        traffic = await self.get(traffic_id)
        if interval_s is None:
            interval_s = next(
                (i for i in AUTO_INTERVALS_S if traffic.duration_s // i + 1 <= AUTO_POINTS),
                AUTO_INTERVALS_S[-1],
            )
        bins = int(traffic.duration_s // interval_s) + 1
        if bins > MAX_POINTS:
            raise InvalidInput(
                "interval",
                f"{interval_s} s gives {bins:,} points over this log's "
                f"{traffic.duration_s:,.0f} s; ask for at least "
                f"{int(traffic.duration_s // (MAX_POINTS - 1)) + 1} s",
            )
        found = {b.index: b for b in await self.repo.series(traffic.id, interval_s)}
        points = []
        for index in range(bins):
            b = found.get(index)
            n = 0 if b is None else b.requests
            points.append(
                TrafficPoint(
                    start_s=float(index * interval_s),
                    requests=n,
                    requests_per_s=n / interval_s,
                    input_tokens=0 if b is None else b.input_tokens,
                    output_tokens=0 if b is None else b.output_tokens,
                )
            )
        return to_read(traffic, TrafficSeries(interval_s=interval_s, points=points))

    async def page(self, limit: int, offset: int) -> tuple[list[TrafficLog], int]:
        """A page of the team's logs, newest first."""
        rows, total = await self.repo.page(self.team_id, limit=limit, offset=offset)
        return [to_read(t) for t in rows], total

    async def delete(self, traffic_id: uuid.UUID) -> None:
        """Remove a log and its requests."""
        traffic = await self.get(traffic_id)
        await self.repo.delete(traffic.id)


async def _digest(body: AsyncIterator[bytes], cap: int) -> str:
    """The sha256 of a body, read to its end (refused past `cap` bytes)."""
    digest = hashlib.sha256()
    size = 0
    async for chunk in body:
        size += len(chunk)
        if size > cap:
            raise too_large(cap)
        digest.update(chunk)
    return digest.hexdigest()


async def trace_plan(
    session: AsyncSession, team_id: uuid.UUID, plan: Plan, *, requests_given: bool, prefix: str = ""
) -> tuple[Plan, Traffic]:
    """A trace replay's plan with its window resolved (to the trace's end when the job gave
    no duration) and its requests_per_level set to the window's count, and the log it
    replays; InvalidInput names the field when the log is not the team's or the window
    holds no request."""
    load = plan.load
    if requests_given:
        raise InvalidInput(
            f"{prefix}load.requests_per_level",
            "a trace replay sends every request of its window: leave requests_per_level out "
            "(load.window chooses the part of the trace)",
        )
    assert load.traffic_id is not None  # the plan's rules ask for it
    repo = TrafficRepository(session)
    traffic = await repo.get(team_id, load.traffic_id)
    if traffic is None:
        raise InvalidInput(
            f"{prefix}load.traffic_id",
            f"no traffic log {load.traffic_id} in your team: GET /v1/traffic lists yours, "
            "POST /v1/traffic imports one",
        )
    window = load.window
    start = 0.0 if window is None else window.start_s
    # To the trace's end: a whole number of seconds past its last request, which the
    # half-open window must hold.
    duration = (
        window.duration_s
        if window is not None and window.duration_s is not None
        else float(max(1, math.floor(traffic.duration_s - start) + 1))
    )
    count = await repo.window_count(traffic.id, start, duration)
    if count == 0:
        raise InvalidInput(
            f"{prefix}load.window",
            f"no request of traffic '{traffic.name}' falls in [{start:g}, {start + duration:g}) "
            f"s: its requests span 0 to {traffic.duration_s:g} s after its first one; move "
            "the window into that span",
        )
    resolved = msgspec.structs.replace(
        load, window=WindowPlan(start_s=start, duration_s=duration), requests_per_level=count
    )
    return msgspec.structs.replace(plan, load=resolved), traffic
