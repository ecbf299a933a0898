"""An endpoint's history (GET /v1/endpoints/{id}/history): parameters checked here, the
query in infercost.history.repository; and the `change` block every run summary carries."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.history.schemas import Change, History, HistoryPoint, Series
from api.schemas import time_window
from infercost.errors import InvalidInput, NotFound
from infercost.history.repository import (
    HistoryFilter,
    HistoryRepository,
    HistoryRow,
    group_series,
)
from infercost.workload.fingerprint import FINGERPRINT_HEX_DIGITS

#: Points per series when the query does not say, and the most it may ask for.
DEFAULT_LIMIT = 100
MAX_LIMIT = 1000
MODES = ("concurrency", "rate", "burst", "trace")
_FINGERPRINT = re.compile(rf"[0-9a-f]{{{FINGERPRINT_HEX_DIGITS}}}")


def change_read(raw: dict[str, Any] | None) -> Change | None:
    """A run's stored change (runs.change) in its API shape; null when never decided."""
    return None if raw is None else msgspec.convert(raw, Change)


@dataclass(frozen=True, slots=True)
class HistoryQuery:
    """GET /v1/endpoints/{id}/history's parameters, checked on creation (422 with the field
    and what to send instead)."""

    workload_fingerprint: str | None = None
    mode: str | None = None
    level: float | None = None
    since: datetime | None = None
    until: datetime | None = None
    limit: int = DEFAULT_LIMIT
    split_by_model: bool = False
    model: str | None = None

    def __post_init__(self) -> None:
        fingerprint = self.workload_fingerprint
        if fingerprint is not None and not _FINGERPRINT.fullmatch(fingerprint):
            raise InvalidInput(
                "workload_fingerprint",
                f"'{fingerprint}' is not a workload fingerprint ({FINGERPRINT_HEX_DIGITS} "
                "lowercase hex digits, as a run summary's workload_fingerprint shows)",
            )
        if self.mode is not None and self.mode not in MODES:
            raise InvalidInput("mode", f"'{self.mode}' is not one of: {', '.join(MODES)}")
        if self.level is not None and not self.level > 0:
            raise InvalidInput(
                "level", "a load level is a concurrency or a rate above 0, e.g. level=8"
            )
        time_window(self.since, self.until)
        if self.model is not None and not self.split_by_model:
            raise InvalidInput(
                "model",
                "model picks one model's series of runs split by model: add split=model",
            )
        if not 1 <= self.limit <= MAX_LIMIT:
            raise InvalidInput(
                "limit", f"points per series: from 1 to {MAX_LIMIT} (default {DEFAULT_LIMIT})"
            )

    def filter(self) -> HistoryFilter:
        """The repository's filter."""
        return HistoryFilter(
            workload_fingerprint=self.workload_fingerprint,
            mode=self.mode,
            level=self.level,
            since=self.since,
            until=self.until,
            split_by_model=self.split_by_model,
            model=self.model,
        )


def _point(row: HistoryRow) -> HistoryPoint:
    return msgspec.convert({**row.values, "run_id": row.values["id"]}, HistoryPoint)


class HistoryService:
    """History over one team's endpoints."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.repo = HistoryRepository(session)
        self.team_id = team_id

    async def history(self, endpoint_id: uuid.UUID, query: HistoryQuery) -> History:
        """The endpoint's series; 404 when the team has no such endpoint (deleted ones keep
        their history)."""
        if not await self.repo.endpoint_exists(self.team_id, endpoint_id):
            raise NotFound(f"no endpoint {endpoint_id}: GET /v1/endpoints lists yours")
        rows = await self.repo.history(
            self.team_id, endpoint_id, query.filter(), per_series=query.limit
        )
        series: list[Series] = []
        for group in group_series(rows):
            points = [_point(r) for r in group]
            first = group[0].values
            latest = points[-1].change
            series.append(
                Series(
                    workload_fingerprint=first["workload_fingerprint"],
                    mode=first["mode"],
                    level=first["level"],
                    model=first["model"],
                    total=group[0].series_total,
                    latest_verdict=None if latest is None else latest.verdict,
                    points=points,
                )
            )
        flagged = [
            p
            for s in series
            for p in s.points
            if p.change is not None and p.change.verdict == "regression"
        ]
        flagged.sort(key=lambda p: p.finished_at, reverse=True)
        return History(
            endpoint_id=endpoint_id,
            limit=query.limit,
            series=series,
            regressions=[p.run_id for p in flagged],
        )
