"""Queries about the GPU catalog."""

from __future__ import annotations

import uuid

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import visible
from infercost.hardware.models import Hardware


class HardwareRepository:
    """The public catalog plus each team's own entries."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def list(self, team_id: uuid.UUID) -> list[Hardware]:
        """Every SKU the team can use, by name."""
        rows = await self.session.scalars(visible(Hardware, team_id).order_by(Hardware.name))
        return list(rows)

    async def get(self, team_id: uuid.UUID, hardware_id: uuid.UUID) -> Hardware | None:
        """One SKU the team can see."""
        return await self.session.scalar(
            visible(Hardware, team_id).where(Hardware.id == hardware_id)
        )

    async def by_name(self, team_id: uuid.UUID, name: str) -> Hardware | None:
        """The SKU called exactly `name`, in any case; the team's own entry wins over the
        public one. Equality, not ILIKE: `%` and `_` in a name are characters, not wildcards."""
        rows = await self.session.scalars(
            visible(Hardware, team_id)
            .where(func.lower(Hardware.name) == name.lower())
            .order_by(Hardware.team_id.is_(None))
        )
        return rows.first()

    async def add(self, hardware: Hardware) -> Hardware:
        """Insert a team's SKU."""
        self.session.add(hardware)
        await self.session.flush()
        return hardware
