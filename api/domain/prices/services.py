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
from infercost.errors import Conflict
from infercost.hardware.models import Hardware
from infercost.hardware.repository import HardwareRepository
from infercost.prices.models import Price
from infercost.prices.repository import PriceRepository


def to_read(price: Price, hardware_name: str) -> PriceRead:
    """The response shape of an entry, with its hardware's name."""
    return from_row(price, PriceRead, hardware=hardware_name)


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
        price = await self.repo.add(
            {
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
    ) -> tuple[list[PriceRead], int]:
        """A page of entries matching the filters; with `at`, only those in effect then."""
        hardware_id = (await self._hardware(hardware)).id if hardware is not None else None
        rows, total = await self.repo.page(
            self.team_id,
            limit=limit,
            offset=offset,
            provider=provider,
            hardware_id=hardware_id,
            pricing_model=pricing_model,
            at=aware("at", at),
        )
        return [to_read(price, name) for price, name in rows], total
