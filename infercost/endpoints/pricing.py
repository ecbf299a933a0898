"""The one rule that decides what an endpoint costs per hour (docs/figures.md, Cost).

An explicit `usd_per_hour` on the endpoint wins; otherwise the team's price book entry in
effect at the time asked for, for the endpoint's provider, hardware and pricing model, times
its GPU count; otherwise no price, and a note that says how to add one. The worker uses it
to snapshot a run's price and the API to re-price a stored run at another time.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal, overload

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.endpoints.models import Endpoint
from infercost.hardware.repository import HardwareRepository
from infercost.prices.models import DEFAULT_PRICING_MODEL
from infercost.prices.repository import PriceRepository

#: How a cost block was priced: the endpoint's own figure, the price book, a figure given
#: with the query, or the snapshot stored with the run when it was measured.
PriceSource = Literal["endpoint", "price_book", "explicit", "run"]


@dataclass(frozen=True, slots=True)
class HourlyPrice:
    """What a deployment costs per hour and how that was decided.

    `priced_at` is the time whose price was used (None for an explicit figure); `note` says,
    when `usd_per_hour` is None, what a person can do to get a price.
    """

    usd_per_hour: float | None
    source: PriceSource | None
    priced_at: datetime | None
    note: str | None = None
    # A hosted API's USD per million input and output tokens (then usd_per_hour is None).
    per_token: tuple[float, float] | None = None
    # The price book entry's warning (a figure far from the book's when it was entered).
    warning: str | None = None


@overload
def rfc3339(at: datetime) -> str: ...
@overload
def rfc3339(at: None) -> None: ...
def rfc3339(at: datetime | None) -> str | None:
    """`at` as RFC 3339 in UTC with a Z, the way responses (and webhook payloads) write
    times; None stays None."""
    if at is None:
        return None
    return at.astimezone(UTC).isoformat().replace("+00:00", "Z")


async def hourly_price(session: AsyncSession, endpoint: Endpoint, at: datetime) -> HourlyPrice:
    """The endpoint's USD per hour at `at`: its own usd_per_hour, else its per-token prices (a
    hosted API), else the price book entry in effect then x gpu_count, else None with a note
    naming what is missing."""
    if endpoint.usd_per_hour is not None:
        return HourlyPrice(endpoint.usd_per_hour, "endpoint", at)
    if (
        endpoint.usd_per_million_input_tokens is not None
        and endpoint.usd_per_million_output_tokens is not None
    ):
        per_token = (endpoint.usd_per_million_input_tokens, endpoint.usd_per_million_output_tokens)
        return HourlyPrice(None, "endpoint", at, per_token=per_token)
    if endpoint.provider is None or endpoint.hardware_id is None:
        return HourlyPrice(
            None,
            None,
            None,
            f"endpoint '{endpoint.name}' has no price: set usd_per_hour, or provider and "
            "hardware with a price in /v1/prices",
        )
    pricing_model = endpoint.pricing_model or DEFAULT_PRICING_MODEL
    entry = await PriceRepository(session).in_effect(
        endpoint.team_id,
        provider=endpoint.provider,
        hardware_id=endpoint.hardware_id,
        pricing_model=pricing_model,
        at=at,
    )
    if entry is not None:
        return HourlyPrice(
            entry.usd_per_gpu_hour * endpoint.gpu_count, "price_book", at, warning=entry.warning
        )
    hardware = await HardwareRepository(session).get(endpoint.team_id, endpoint.hardware_id)
    hardware_name = hardware.name if hardware is not None else str(endpoint.hardware_id)
    return HourlyPrice(
        None,
        None,
        None,
        f"no price for {hardware_name} from provider '{endpoint.provider}' ({pricing_model}) "
        f"in effect at {rfc3339(at)}: add one with POST /v1/prices or set usd_per_hour on "
        f"endpoint '{endpoint.name}'",
    )
