"""Queries about request logs: storing one with COPY, reading its read back, its series per
interval, and a window of its requests in time order (what a replay sends)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import owned_by, readable, unscoped
from infercost.traffic.models import REQUEST_COLUMNS, Traffic, TrafficRequest
from infercost.traffic.parse import Row


@dataclass(frozen=True, slots=True)
class Bin:
    """One interval of a log's series: its index (start = index x interval) and what it
    holds."""

    index: int
    requests: int
    input_tokens: int
    output_tokens: int


@dataclass(frozen=True, slots=True)
class WindowRequest:
    """One request of a replay window: seconds after t_0, lengths and what shapes it."""

    seq: int
    at_s: float
    input_tokens: int
    output_tokens: int
    model: str | None
    session_id: str | None
    prefix_blocks: list[int] | None


class TrafficRepository:
    """Request logs of one team (reads scoped by team_id) and their requests. Callers
    commit."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, values: dict[str, Any]) -> Traffic:
        """Insert a log's row (its read filled in later by `finish`), in the caller's
        transaction, so its requests can refer to it."""
        traffic = Traffic(id=uuid.uuid4(), **values)
        self.session.add(traffic)
        await self.session.flush()
        return traffic

    async def copy_rows(self, traffic_id: uuid.UUID, rows: Sequence[Row]) -> None:
        """Write requests with COPY (rows as the parser gives them)."""
        if not rows:
            return
        connection = await self.session.connection()
        raw = await connection.get_raw_connection()
        driver = raw.driver_connection
        assert driver is not None
        await driver.copy_records_to_table(
            TrafficRequest.__tablename__,
            records=[(traffic_id, *row) for row in rows],
            columns=REQUEST_COLUMNS,
        )

    async def shift(self, traffic_id: uuid.UUID, shift_us: int) -> None:
        """Add `shift_us` to every request's time (a file out of order: t_0 came later)."""
        if shift_us:
            await self.session.execute(
                update(TrafficRequest)
                .where(TrafficRequest.traffic_id == traffic_id)
                .values(at_us=TrafficRequest.at_us + shift_us)
            )

    async def finish(self, traffic: Traffic, values: dict[str, Any]) -> Traffic:
        """Store the log's read (and its final name)."""
        for key, value in values.items():
            setattr(traffic, key, value)
        await self.session.flush()
        return traffic

    async def get(self, team_id: uuid.UUID, traffic_id: uuid.UUID) -> Traffic | None:
        """The team's log."""
        return await self.session.scalar(readable(Traffic, team_id).where(Traffic.id == traffic_id))

    async def by_name(self, team_id: uuid.UUID, name: str) -> Traffic | None:
        """The team's log called `name`."""
        return await self.session.scalar(readable(Traffic, team_id).where(Traffic.name == name))

    async def page(
        self, team_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[Traffic], int]:
        """One page of the team's logs, newest first, and how many there are."""
        total = await self.session.scalar(select(func.count()).where(owned_by(Traffic, team_id)))
        rows = await self.session.scalars(
            readable(Traffic, team_id)
            .order_by(Traffic.created_at.desc(), Traffic.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows), int(total or 0)

    async def delete(self, traffic_id: uuid.UUID) -> None:
        """Remove a log and its requests."""
        await self.session.execute(delete(Traffic).where(Traffic.id == traffic_id))

    async def series(self, traffic_id: uuid.UUID, interval_s: int) -> list[Bin]:
        """Requests and tokens per interval of `interval_s` seconds aligned to t_0 (bins
        with no request are left out)."""
        index = (TrafficRequest.at_us // (interval_s * 1_000_000)).label("bin")
        rows = await self.session.execute(
            select(
                index,
                func.count(),
                func.sum(TrafficRequest.input_tokens),
                func.sum(TrafficRequest.output_tokens),
            )
            .where(TrafficRequest.traffic_id == traffic_id)
            .group_by(index)
            .order_by(index)
        )
        return [Bin(int(b), int(n), int(i or 0), int(o or 0)) for b, n, i, o in rows]

    async def window_count(self, traffic_id: uuid.UUID, start_s: float, duration_s: float) -> int:
        """How many requests [start_s, start_s + duration_s) after t_0 holds (see `window`)."""
        start = round(start_s * 1e6)
        end = round((start_s + duration_s) * 1e6)
        count = await self.session.scalar(
            select(func.count()).where(
                TrafficRequest.traffic_id == traffic_id,
                TrafficRequest.at_us >= start,
                TrafficRequest.at_us < end,
            )
        )
        return int(count or 0)

    async def get_any(self, traffic_id: uuid.UUID) -> Traffic | None:
        """A log whatever its team: what a worker replays for the job that names it (the API
        checked the team when the job was submitted)."""
        query = select(Traffic).where(Traffic.id == traffic_id)
        return await self.session.scalar(
            unscoped(query, "a worker replays the log its job names, whatever the team")
        )

    async def window(
        self, traffic_id: uuid.UUID, start_s: float, duration_s: float
    ) -> list[WindowRequest]:
        """The requests of [start_s, start_s + duration_s) after t_0, in time order (file
        order among requests at the same time): what a replay of that window sends. The
        caller has checked the log is the team's (requests carry no team of their own)."""
        start = round(start_s * 1e6)
        end = round((start_s + duration_s) * 1e6)
        rows = await self.session.execute(
            select(
                TrafficRequest.seq,
                TrafficRequest.at_us,
                TrafficRequest.input_tokens,
                TrafficRequest.output_tokens,
                TrafficRequest.model,
                TrafficRequest.session_id,
                TrafficRequest.prefix_blocks,
            )
            .where(
                TrafficRequest.traffic_id == traffic_id,
                TrafficRequest.at_us >= start,
                TrafficRequest.at_us < end,
            )
            .order_by(TrafficRequest.at_us, TrafficRequest.seq)
        )
        return [
            WindowRequest(seq, at / 1e6, n_in, n_out, model, session, blocks)
            for seq, at, n_in, n_out, model, session, blocks in rows
        ]
