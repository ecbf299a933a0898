"""The GPU catalog as a team sees it."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.hardware.schemas import HardwareCreate, HardwareRead
from api.rows import from_row
from infercost.errors import Conflict, NotFound
from infercost.hardware.models import Hardware
from infercost.hardware.repository import HardwareRepository


def to_read(hw: Hardware) -> HardwareRead:
    """The response shape of a catalog row."""
    return from_row(hw, HardwareRead, public=hw.team_id is None)


class HardwareService:
    """List, read and add SKUs for one team."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.repo = HardwareRepository(session)
        self.team_id = team_id

    async def list(self) -> list[Hardware]:
        """Public SKUs and the team's own."""
        return await self.repo.list(self.team_id)

    async def get(self, hardware_id: uuid.UUID) -> Hardware:
        """One visible SKU."""
        hw = await self.repo.get(self.team_id, hardware_id)
        if hw is None:
            raise NotFound(f"no hardware {hardware_id}: GET /v1/hardware lists the catalog")
        return hw

    async def create(self, data: HardwareCreate) -> Hardware:
        """Add a SKU under a name not already visible to the team."""
        if await self.repo.by_name(self.team_id, data.name) is not None:
            raise Conflict(f"hardware '{data.name}' already exists in the catalog")
        fields = {f: getattr(data, f) for f in data.__struct_fields__}
        return await self.repo.add(Hardware(team_id=self.team_id, **fields))
