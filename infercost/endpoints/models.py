"""Registered deployments that jobs benchmark."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import CheckConstraint, ForeignKey, Index, LargeBinary, String, func, text
from sqlalchemy.dialects.postgresql import ARRAY, JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey, utcnow
from infercost.prices.models import PRICING_MODELS


class Endpoint(UUIDPrimaryKey, CreatedAt, Base):
    """One deployment: where it listens, what it serves, on what hardware, at what price."""

    __tablename__ = "endpoints"
    __table_args__ = (
        Index(
            "uq_endpoints_team_name_live",
            "team_id",
            "name",
            unique=True,
            postgresql_where=text("deleted_at IS NULL"),
        ),
        CheckConstraint(f"pricing_model IN {PRICING_MODELS}", name="pricing_model"),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    base_url: Mapped[str] = mapped_column(String(2048))
    api: Mapped[str] = mapped_column(String(32))
    model: Mapped[str] = mapped_column(String(256))
    engine: Mapped[str | None] = mapped_column(String(64))
    engine_version: Mapped[str | None] = mapped_column(String(64))
    hardware_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("hardware.id"))
    gpu_count: Mapped[int] = mapped_column(default=1)
    usd_per_hour: Mapped[float | None]
    provider: Mapped[str | None] = mapped_column(String(100))
    # With provider and hardware, and no usd_per_hour: which price book entries apply;
    # null means on-demand.
    pricing_model: Mapped[str | None] = mapped_column(String(16))
    # Hosted APIs are priced per token instead of per hour (docs/figures.md, hosted APIs).
    usd_per_million_input_tokens: Mapped[float | None]
    usd_per_million_output_tokens: Mapped[float | None]
    # The model's facts, for the roofline bounds (docs/figures.md, Physical limits).
    params_b: Mapped[float | None]
    precision: Mapped[str | None] = mapped_column(String(16))
    kv_bytes_per_token: Mapped[float | None]
    api_key_encrypted: Mapped[bytes | None] = mapped_column(LargeBinary)
    metrics_urls: Mapped[list[str]] = mapped_column(
        ARRAY(String(2048)), default=list, server_default="{}"
    )
    tags: Mapped[dict[str, Any]] = mapped_column(
        JSONB, default=dict, server_default=text("'{}'::jsonb")
    )
    updated_at: Mapped[datetime] = mapped_column(
        default=utcnow, server_default=func.now(), onupdate=utcnow
    )
    deleted_at: Mapped[datetime | None]
    # The last preflight check (infercost/endpoints/preflight.py) and when it ran; a failed
    # one refuses jobs unless they say "force".
    check: Mapped[dict[str, Any] | None] = mapped_column(JSONB)
    checked_at: Mapped[datetime | None]
    # An endpoint that holds results imported from another tool (POST /v1/imports): what
    # it describes was measured elsewhere, so it is never benchmarked or probed.
    external: Mapped[bool] = mapped_column(default=False, server_default=text("false"))
