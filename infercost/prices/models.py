"""The price book: what one GPU-hour of some hardware costs at a provider, and since when."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal, get_args

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, Text, text
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey

PricingModel = Literal["on-demand", "spot", "reserved"]
PRICING_MODELS: tuple[str, ...] = get_args(PricingModel)
#: The pricing model of an endpoint that names none.
DEFAULT_PRICING_MODEL: PricingModel = "on-demand"


class Price(UUIDPrimaryKey, CreatedAt, Base):
    """One entry of a team's price book; an entry holds from `effective_from` until a later
    entry for the same provider, hardware and pricing model takes over (prices have history)."""

    __tablename__ = "prices"
    __table_args__ = (
        CheckConstraint(f"pricing_model IN {PRICING_MODELS}", name="pricing_model"),
        CheckConstraint("usd_per_gpu_hour > 0", name="usd_per_gpu_hour_positive"),
        # Serves "the price in effect at T": equality on the first four columns, then the
        # latest effective_from <= T by a backward scan. Unique among the entries not
        # withdrawn, since two starting at the same moment would make that price ambiguous
        # (a withdrawn entry leaves its moment free for the corrected one).
        Index(
            "uq_prices_in_effect",
            "team_id",
            "provider",
            "hardware_id",
            "pricing_model",
            "effective_from",
            unique=True,
            postgresql_where=text("withdrawn_at IS NULL"),
        ),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    provider: Mapped[str] = mapped_column(String(100))
    hardware_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("hardware.id"))
    pricing_model: Mapped[str] = mapped_column(String(16))
    usd_per_gpu_hour: Mapped[float]
    effective_from: Mapped[datetime]
    # Withdrawn (DELETE /v1/prices/{id}): kept for the record, never used to price again.
    withdrawn_at: Mapped[datetime | None]
    # Why the figure looked wrong when it was entered (far from what the book held for the
    # hardware), said again by every estimate priced from it.
    warning: Mapped[str | None] = mapped_column(Text)
