"""A team's request log (traffic) and its requests, one row each."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import (
    BigInteger,
    CheckConstraint,
    Double,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey

TrafficFormat = Literal["azure", "mooncake", "burstgpt", "infercost"]
TRAFFIC_FORMATS: tuple[str, ...] = get_args(TrafficFormat)


class Traffic(UUIDPrimaryKey, CreatedAt, Base):
    """One imported request log and its read, computed once at import.

    Times inside a trace are offsets from its first request (t_0). `start_at` is t_0 as a
    wall-clock time when the log gives absolute times (Azure, RFC 3339 or epoch seconds),
    null when it gives only offsets (Mooncake, BurstGPT). `minute_counts[m]` holds the
    requests of minute m = floor(offset / 60 s): the plan's demand is read from it.
    """

    __tablename__ = "traffic"
    __table_args__ = (
        CheckConstraint(f"format IN {TRAFFIC_FORMATS}", name="format"),
        # `infercost estimate --traffic NAME` names a log: one name a team.
        Index("uq_traffic_team_name", "team_id", "name", unique=True),
        Index("ix_traffic_team_created", "team_id", "created_at"),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(16))
    # Hex sha256 of the bytes as sent (compressed, if they were).
    content_sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    requests: Mapped[int] = mapped_column(Integer)
    start_at: Mapped[datetime | None]
    duration_s: Mapped[float] = mapped_column(Double)
    mean_requests_per_s: Mapped[float | None] = mapped_column(Double)
    peak_1m_requests_per_s: Mapped[float] = mapped_column(Double)
    peak_5m_requests_per_s: Mapped[float] = mapped_column(Double)
    input_tokens_total: Mapped[int] = mapped_column(BigInteger)
    output_tokens_total: Mapped[int] = mapped_column(BigInteger)
    # Tokens a prefix block covers (512, as Mooncake's hash_ids), null without blocks.
    block_tokens: Mapped[int | None] = mapped_column(Integer)
    # Prompt tokens in blocks an earlier request already had / all prompt tokens.
    prefix_reuse_share: Mapped[float | None] = mapped_column(Double)
    sessions: Mapped[int | None] = mapped_column(Integer)
    # Whether the file listed its requests in time order (the read is the same either way).
    in_order: Mapped[bool]
    minute_counts: Mapped[list[int]] = mapped_column(ARRAY(Integer))
    # {"input_tokens": {"mean", "p50", "p90", "p99", "max"}, "output_tokens": {...}}
    lengths: Mapped[dict[str, Any]] = mapped_column(JSONB)
    # [{"model": "gpt-4" | null, "requests": n}], most requests first.
    models: Mapped[list[dict[str, Any]]] = mapped_column(JSONB)


class TrafficRequest(Base):
    """One request of a log: when (microseconds after t_0), its lengths, and what a replay
    needs to shape it (model, session, the prefix blocks it shares with others).

    `prefix_blocks` are the log's block hashes renumbered 0, 1, 2, ... in order of first
    appearance within the log: requests that share a block share its number.
    """

    __tablename__ = "traffic_requests"
    __table_args__ = (
        # A replay reads a window of the log in time order.
        Index("ix_traffic_requests_traffic_at", "traffic_id", "at_us"),
    )

    traffic_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("traffic.id", ondelete="CASCADE"), primary_key=True
    )
    # Position in the file (1-based data row), which also orders requests at the same time.
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    at_us: Mapped[int] = mapped_column(BigInteger)
    input_tokens: Mapped[int] = mapped_column(Integer)
    output_tokens: Mapped[int] = mapped_column(Integer)
    model: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    prefix_blocks: Mapped[list[int] | None] = mapped_column(ARRAY(Integer))


#: The columns COPY writes, in the order the parser gives them.
REQUEST_COLUMNS: tuple[str, ...] = (
    "traffic_id",
    "seq",
    "at_us",
    "input_tokens",
    "output_tokens",
    "model",
    "session_id",
    "prefix_blocks",
)
