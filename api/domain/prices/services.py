"""The price book of one team: add entries, list them, find what was in effect when."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.prices.schemas import PriceCreate, PriceRead
from api.rows import from_row
from api.schemas import aware
from infercost.db.base import utcnow
from infercost.endpoints.pricing import rfc3339
from infercost.errors import Conflict, NotFound
from infercost.hardware.models import Hardware
from infercost.hardware.repository import HardwareRepository
from infercost.prices.models import Price
from infercost.prices.repository import PriceRepository
from infercost.prices.sanity import price_warning


def to_read(price: Price, hardware_name: str) -> PriceRead:
    """The response shape of an entry, with its hardware's name and its warning, if any."""
    return from_row(
        price, PriceRead, hardware=hardware_name, warnings=[price.warning] if price.warning else []
    )


class PriceService:
    """Price book rules: known hardware, one entry per moment, everything scoped to the team."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.repo = PriceRepository(session)
        self.hardware = HardwareRepository(session)
        self.team_id = team_id

    async def _hardware(self, name: str) -> Hardware:
        return await self.hardware.named(self.team_id, name)

    async def create(self, data: PriceCreate) -> PriceRead:
        """Add an entry; a second entry for the same provider, hardware, pricing model and
        moment is a conflict (which of the two would be in effect?)."""
        hw = await self._hardware(data.hardware)
        effective_from = data.effective_from or utcnow()
        price_id = uuid.uuid4()
        # Judged against the book before this entry joins it.
        reference = await self.repo.reference(self.team_id, hw.id)
        price = await self.repo.add(
            {
                "id": price_id,
                "warning": price_warning(data.usd_per_gpu_hour, hw.name, reference, price_id),
                "team_id": self.team_id,
                "provider": data.provider,
                "hardware_id": hw.id,
                "pricing_model": data.pricing_model,
                "usd_per_gpu_hour": data.usd_per_gpu_hour,
                "effective_from": effective_from,
            }
        )
        if price is None:
            raise Conflict(
                f"a {data.pricing_model} price for {hw.name} from provider '{data.provider}' "
                f"already starts at {rfc3339(effective_from)}: give another effective_from"
            )
        return to_read(price, hw.name)

    async def page(
        self,
        *,
        limit: int,
        offset: int,
        provider: str | None,
        hardware: str | None,
        pricing_model: str | None,
        at: datetime | None,
        withdrawn: bool = False,
    ) -> tuple[list[PriceRead], int]:
        """A page of entries matching the filters; with `at`, only those in effect then;
        withdrawn ones only when asked for."""
        hardware_id = (await self._hardware(hardware)).id if hardware is not None else None
        rows, total = await self.repo.page(
            self.team_id,
            limit=limit,
            offset=offset,
            provider=provider,
            hardware_id=hardware_id,
            pricing_model=pricing_model,
            at=aware("at", at),
            withdrawn=withdrawn,
        )
        return [to_read(price, name) for price, name in rows], total

    async def get(self, price_id: uuid.UUID, *, withdrawn: bool = False) -> PriceRead:
        """One entry of the team's book, or 404; a withdrawn one only when `withdrawn` asks
        for it (a withdrawn entry is gone from the book, kept for the record)."""
        found = await self.repo.get(self.team_id, price_id)
        if found is None:
            raise NotFound(f"no price {price_id}: GET /v1/prices lists yours")
        read = to_read(*found)
        if read.withdrawn_at is not None and not withdrawn:
            raise NotFound(
                f"price {price_id} was withdrawn at {rfc3339(read.withdrawn_at)}: "
                f"GET /v1/prices/{price_id}?withdrawn=true reads it for the record"
            )
        return read

    async def withdraw(self, price_id: uuid.UUID) -> PriceRead:
        """Withdraw an entry: it stays in the book for the record (GET with
        withdrawn=true) but prices nothing again; the entry before it for the same provider,
        hardware and pricing model is in effect again. Runs priced from it keep the price
        they stored. Withdrawing twice is a 409."""
        await self.get(price_id, withdrawn=True)
        if not await self.repo.withdraw(self.team_id, price_id):
            raise Conflict(f"price {price_id} is already withdrawn")
        return await self.get(price_id, withdrawn=True)
