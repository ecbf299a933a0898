"""The status board's summaries: per row (endpoint, workload, mode, level) its succeeded runs
of the last SUMMARY_DAYS days, and per endpoint and workload its finished scheduled jobs,
packed for one read. The database keeps them: triggers on runs and jobs rebuild the rows a
statement touched, in its transaction (migration 2026_12_03_1430 status_series), so every
writer (the worker storing a level, the verdicts, a delete, a COPY) keeps them true.

`runs` holds each run, oldest first (finished_at, id), as RUN_FIELDS then FIGURES' values,
big-endian float8s (NaN for null, infinity for a cost where no request met the SLO); `ats`
the same runs' finish times, so the database cuts a window's part out of `runs` (a binary
search, width_bucket) and sends only that. `jobs` holds (created_at, succeeded) pairs."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, Double, ForeignKey, LargeBinary, String
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base

#: How far back the summaries reach: the longest window (30 d) and a day's margin.
SUMMARY_DAYS = 31
#: Each run in status_series.runs: finished_at (epoch s), counted (0/1), requests total and
#: failed, then the figures in infercost.status.figures.FIGURES' order (NaN for null).
RUN_FIELDS = ("at", "counted", "requests_total", "requests_failed")


class StatusSeries(Base):
    """One board row's recent succeeded runs (workload_fingerprint '' for none)."""

    __tablename__ = "status_series"

    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True
    )
    endpoint_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    workload_fingerprint: Mapped[str] = mapped_column(String(16), primary_key=True)
    mode: Mapped[str] = mapped_column(String(16), primary_key=True)
    level: Mapped[float] = mapped_column(Double, primary_key=True)
    # The newest run, the newest counted run and the newest with a verdict.
    newest_at: Mapped[datetime]
    newest_run_id: Mapped[uuid.UUID]
    newest_job_id: Mapped[uuid.UUID]
    counted_at: Mapped[datetime | None]
    counted_run_id: Mapped[uuid.UUID | None]
    counted_job_id: Mapped[uuid.UUID | None]
    verdict: Mapped[str | None] = mapped_column(String(20))
    verdict_at: Mapped[datetime | None]
    verdict_run_id: Mapped[uuid.UUID | None]
    runs: Mapped[bytes] = mapped_column(LargeBinary)
    ats: Mapped[list[datetime]] = mapped_column(ARRAY(DateTime(timezone=True)))


class StatusJobSeries(Base):
    """An endpoint and workload's recent finished scheduled jobs (fingerprint '' for none)."""

    __tablename__ = "status_job_series"

    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), primary_key=True
    )
    endpoint_id: Mapped[uuid.UUID] = mapped_column(primary_key=True)
    workload_fingerprint: Mapped[str] = mapped_column(String(16), primary_key=True)
    newest_at: Mapped[datetime]
    jobs: Mapped[bytes] = mapped_column(LargeBinary)
