"""Request and response shapes for the price book (docs/cli-and-api.md, Price)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import msgspec

from infercost.prices.models import PricingModel

Provider = Annotated[str, msgspec.Meta(min_length=1, max_length=100)]
HardwareName = Annotated[str, msgspec.Meta(min_length=1, max_length=64)]
UsdPerGpuHour = Annotated[float, msgspec.Meta(gt=0, le=1_000_000)]
#: RFC 3339 with an offset ("Z" or "+02:00"), so the moment is unambiguous.
Moment = Annotated[datetime, msgspec.Meta(tz=True)]


class PriceCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/prices: USD per GPU-hour of `hardware` at `provider` from `effective_from`
    (default: now) until a later entry for the same provider, hardware and pricing model."""

    provider: Annotated[
        Provider, msgspec.Meta(description="Who sells the GPU-hours", examples=["acme-cloud"])
    ]
    hardware: Annotated[
        HardwareName,
        msgspec.Meta(
            description="The GPU SKU, as named in GET /v1/hardware", examples=["H200-SXM"]
        ),
    ]
    usd_per_gpu_hour: Annotated[
        UsdPerGpuHour,
        msgspec.Meta(description="The price of one GPU for one hour, in USD", examples=[3.5]),
    ]
    pricing_model: Annotated[
        PricingModel,
        msgspec.Meta(description="on-demand, reserved or spot", examples=["on-demand"]),
    ] = "on-demand"
    effective_from: Annotated[
        Moment | None,
        msgspec.Meta(
            description="When the price starts, RFC 3339 with its time zone; absent: now",
            examples=["2026-12-01T00:00:00Z"],
        ),
    ] = None


class PriceRead(msgspec.Struct):
    """A price book entry. `warnings` says when its figure was far (more than 5x, or less
    than a fifth) from what the book held for the hardware when it was added; estimates
    priced from it repeat it. `withdrawn_at`: when DELETE /v1/prices/{id} withdrew it (it
    prices nothing since; runs priced from it keep the price they stored)."""

    id: uuid.UUID
    provider: str
    hardware: str
    hardware_id: uuid.UUID
    pricing_model: str
    usd_per_gpu_hour: float
    effective_from: datetime
    created_at: datetime
    withdrawn_at: datetime | None = None
    warnings: list[str] = []
