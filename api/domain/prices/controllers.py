"""Price book routes."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from litestar import Controller, delete, get, post
from litestar.di import NamedDependency
from litestar.params import FromQuery, JSONBody, QueryParameter

from api.auth import team_service
from api.domain.audit.services import AuditTrail
from api.domain.prices.schemas import PriceCreate, PriceRead
from api.domain.prices.services import PriceService
from api.schemas import Limit, Offset, Page, PathId
from infercost.prices.models import PricingModel


def _price_detail(price: PriceRead) -> dict[str, object]:
    """What the audit log keeps of an entry: enough to put it back."""
    return {
        "provider": price.provider,
        "hardware": price.hardware,
        "pricing_model": price.pricing_model,
        "usd_per_gpu_hour": price.usd_per_gpu_hour,
        "effective_from": price.effective_from,
        "warnings": price.warnings,
    }


class PriceController(Controller):
    """GET, POST /v1/prices; GET, DELETE /v1/prices/{id}."""

    path = "/v1/prices"
    tags = ["prices"]
    dependencies = {"prices": team_service(PriceService)}

    @post("/", status_code=201, summary="Add a price")
    async def create_price(
        self,
        prices: NamedDependency[PriceService],
        audit: NamedDependency[AuditTrail],
        data: JSONBody[PriceCreate],
    ) -> PriceRead:
        """USD per GPU-hour of some hardware at a provider from `effective_from` (default now).
        Endpoints with that provider and hardware and no usd_per_hour are priced from it. A
        figure more than 5x, or less than a fifth of, what the book holds for the hardware
        (the median of its entries) is accepted with a `warnings` entry."""
        price = await prices.create(data)
        await audit.record(
            "price.create",
            "price",
            price.id,
            f"added a {price.pricing_model} price for {price.hardware} from '{price.provider}': "
            f"USD {price.usd_per_gpu_hour:,.2f} per GPU-hour",
            _price_detail(price),
        )
        return price

    @get("/", summary="List prices")
    async def list_prices(
        self,
        *,
        prices: NamedDependency[PriceService],
        limit: Limit = 50,
        offset: Offset = 0,
        provider: Annotated[str | None, QueryParameter(description="exact provider name")] = None,
        hardware: Annotated[
            str | None, QueryParameter(description="hardware name, any case")
        ] = None,
        pricing_model: FromQuery[PricingModel | None] = None,
        at: Annotated[
            datetime | None,
            QueryParameter(description="RFC 3339; only the entries in effect at that time"),
        ] = None,
        withdrawn: Annotated[
            bool,
            QueryParameter(description="include withdrawn entries (never in effect)"),
        ] = False,
    ) -> Page[PriceRead]:
        """Your team's price book by provider, hardware and pricing model, newest first."""
        items, total = await prices.page(
            limit=limit,
            offset=offset,
            provider=provider,
            hardware=hardware,
            pricing_model=pricing_model,
            at=at,
            withdrawn=withdrawn,
        )
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{price_id:uuid}", summary="Read a price")
    async def get_price(
        self,
        prices: NamedDependency[PriceService],
        price_id: PathId,
        withdrawn: Annotated[
            bool,
            QueryParameter(description="read it even if it was withdrawn (for the record)"),
        ] = False,
    ) -> PriceRead:
        """One entry of your team's book; a withdrawn one is 404 unless `withdrawn=true`."""
        return await prices.get(price_id, withdrawn=withdrawn)

    @delete("/{price_id:uuid}", status_code=200, summary="Withdraw a price")
    async def withdraw_price(
        self,
        prices: NamedDependency[PriceService],
        audit: NamedDependency[AuditTrail],
        price_id: PathId,
    ) -> PriceRead:
        """Withdraw an entry (a typo, a price that never applied): it is kept for the record
        (GET /v1/prices?withdrawn=true, the audit log) but prices nothing again. Runs priced
        from it keep the price they stored; re-pricing (`price_at`) and estimates use the
        entry before it, if any. Answers the entry with `withdrawn_at` set."""
        price = await prices.withdraw(price_id)
        await audit.record(
            "price.withdraw",
            "price",
            price.id,
            f"withdrew the {price.pricing_model} price for {price.hardware} from "
            f"'{price.provider}' (USD {price.usd_per_gpu_hour:,.2f} per GPU-hour)",
            _price_detail(price),
        )
        return price
