"""GET /v1/status: parameters checked here, rows from infercost.status, sorted, and shaped
as JSON, CSV or the HTML board."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from api.csv import csv_cell, csv_text
from api.domain.status.schemas import (
    LatestRun,
    RollingFigure,
    StatusAvailability,
    StatusBoard,
    StatusEndpoint,
    StatusRow,
    Verdict,
)
from infercost.errors import InvalidInput
from infercost.status import repository
from infercost.status.figures import FIGURES, TREND_BUCKETS, WINDOWS

#: Sort keys besides the figures (a figure sorts by its rolling median).
SORT_KEYS = (
    "endpoint",
    "model",
    "level",
    "runs",
    "latest_at",
    "jobs_share",
    "requests_share",
    "last_verdict",
)
DEFAULT_SORT = "endpoint"


def parse_sort(text: str | None) -> list[tuple[str, bool]]:
    """`sort=-ttft_p50_ms,endpoint`: (key, descending) pairs; a figure name sorts by its
    rolling median, `<figure>_p95` / `<figure>_latest` by those."""
    keys: list[tuple[str, bool]] = []
    for raw in (k.strip() for k in (text or DEFAULT_SORT).split(",")):
        if not raw:
            continue
        name = raw.lstrip("-+")
        base = name.removesuffix("_p95").removesuffix("_latest") if name not in FIGURES else name
        if name not in SORT_KEYS and base not in FIGURES:
            raise InvalidInput(
                "sort",
                f"cannot sort by '{name}'; sort by a figure ({', '.join(FIGURES)}, optionally "
                f"with _p95 or _latest) or by {', '.join(SORT_KEYS)}, '-' for descending",
            )
        keys.append((name, raw.startswith("-")))
    return keys


_PLAIN_KEYS: dict[str, Any] = {
    "endpoint": lambda r: r.endpoint.name.lower(),
    "model": lambda r: r.endpoint.model.lower(),
    "level": lambda r: r.level,
    "runs": lambda r: r.runs,
    "latest_at": lambda r: None if r.latest is None else r.latest.finished_at,
    "jobs_share": lambda r: r.availability.jobs_share,
    "requests_share": lambda r: r.availability.requests_share,
    "last_verdict": lambda r: None if r.last_verdict is None else r.last_verdict.verdict,
}


def _sort_value(row: StatusRow, key: str) -> Any:
    if key in _PLAIN_KEYS:
        return _PLAIN_KEYS[key](row)
    for suffix, attribute in (("_p95", "p95"), ("_latest", "latest")):
        if key not in FIGURES and key.endswith(suffix):
            return getattr(row.figures[key.removesuffix(suffix)], attribute)
    return row.figures[key].median


def sort_rows(rows: list[StatusRow], keys: Sequence[tuple[str, bool]]) -> list[StatusRow]:
    """Rows sorted by `keys`, nulls last whichever the direction, then by endpoint,
    workload and level so the order is the same every time."""
    out = sorted(
        rows,
        key=lambda r: (
            r.endpoint.name.lower(),
            str(r.endpoint.id),
            r.workload_fingerprint or "",
            r.mode or "",
            -1.0 if r.level is None else r.level,
        ),
    )
    # Stable sorts, least significant key first.
    for key, descending in reversed(keys):
        present = [r for r in out if _sort_value(r, key) is not None]
        missing = [r for r in out if _sort_value(r, key) is None]
        present.sort(key=lambda r: _sort_value(r, key), reverse=descending)
        out = present + missing
    return out


def _row(row: repository.StatusRow) -> StatusRow:
    f = row.figures
    a = f.availability
    return StatusRow(
        endpoint=StatusEndpoint(
            id=row.endpoint_id,
            name=row.endpoint_name,
            model=row.model,
            engine=row.engine,
            hardware=row.hardware,
            gpu_count=row.gpu_count,
        ),
        workload_fingerprint=row.workload_fingerprint,
        mode=row.mode,
        level=row.level,
        scheduled=row.scheduled,
        next_run_at=row.next_run_at,
        note=row.note,
        runs=f.runs,
        runs_counted=f.runs_counted,
        latest=None
        if f.latest_run_id is None or f.latest_job_id is None or f.latest_at is None
        else LatestRun(
            run_id=f.latest_run_id,
            job_id=f.latest_job_id,
            finished_at=f.latest_at,
            report_url=f"/v1/jobs/{f.latest_job_id}/report",
        ),
        last_verdict=None
        if f.last_verdict is None or f.last_verdict_run_id is None
        else Verdict(verdict=f.last_verdict, run_id=f.last_verdict_run_id),
        availability=StatusAvailability(
            jobs_succeeded=a.jobs_succeeded,
            jobs_finished=a.jobs_finished,
            jobs_share=a.jobs_share,
            requests_total=a.requests_total,
            requests_failed=a.requests_failed,
            requests_share=a.requests_share,
        ),
        figures={
            name: RollingFigure(latest=r.latest, median=r.median, p95=r.p95, trend=r.trend)
            for name, r in f.figures.items()
        },
    )


class StatusService:
    """The board for one team."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id

    async def board(
        self, window: str, *, all_endpoints: bool, sort: str | None, now: datetime | None = None
    ) -> StatusBoard:
        """Rows of watched deployments (every endpoint with runs when `all_endpoints`), and
        a row for each watched endpoint without a run in the window."""
        if window not in WINDOWS:
            raise InvalidInput("window", f"'{window}' is not one of {', '.join(WINDOWS)}")
        keys = parse_sort(sort)
        until = now or datetime.now(UTC)
        since = until - WINDOWS[window]
        watched = await repository.scheduled_endpoints(self.session, self.team_id)
        found = await repository.status_rows(
            self.session, self.team_id, since, until, watched=watched, everything=all_endpoints
        )
        rows = sort_rows([_row(r) for r in found], keys)
        return StatusBoard(
            window=window,
            since=since,
            until=until,
            bucket_seconds=WINDOWS[window].total_seconds() / TREND_BUCKETS,
            sort=[("-" if d else "") + k for k, d in keys],
            total=len(rows),
            deployments=len({r.endpoint.id for r in rows}),
            rows=rows,
        )


#: CSV columns: the row's keys, then latest, median and p95 of each figure.
CSV_HEADER = [
    "endpoint_id",
    "endpoint",
    "model",
    "engine",
    "hardware",
    "gpu_count",
    "workload_fingerprint",
    "mode",
    "level",
    "scheduled",
    "next_run_at",
    "note",
    "runs",
    "runs_counted",
    "latest_run_id",
    "latest_job_id",
    "latest_finished_at",
    "last_verdict",
    "jobs_succeeded",
    "jobs_finished",
    "jobs_share",
    "requests_total",
    "requests_failed",
    "requests_share",
    *(f"{name}_{stat}" for name in FIGURES for stat in ("latest", "median", "p95")),
]


def status_csv(board: StatusBoard) -> str:
    """The board as CSV, one line per row; trends are left to JSON and HTML."""
    lines = []
    for r in board.rows:
        a = r.availability
        cells: list[object] = [
            r.endpoint.id,
            r.endpoint.name,
            r.endpoint.model,
            r.endpoint.engine,
            r.endpoint.hardware,
            r.endpoint.gpu_count,
            r.workload_fingerprint,
            r.mode,
            r.level,
            r.scheduled,
            r.next_run_at,
            r.note,
            r.runs,
            r.runs_counted,
            None if r.latest is None else r.latest.run_id,
            None if r.latest is None else r.latest.job_id,
            None if r.latest is None else r.latest.finished_at,
            None if r.last_verdict is None else r.last_verdict.verdict,
            a.jobs_succeeded,
            a.jobs_finished,
            a.jobs_share,
            a.requests_total,
            a.requests_failed,
            a.requests_share,
        ]
        for name in FIGURES:
            f = r.figures[name]
            cells += [f.latest, f.median, f.p95]
        lines.append([csv_cell(c) for c in cells])
    return csv_text(CSV_HEADER, lines)
