"""Queries about the GPU catalog."""

from __future__ import annotations

import difflib
import uuid

from sqlalchemy import func
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import visible
from infercost.errors import InvalidInput
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

    async def named(self, team_id: uuid.UUID, name: str, field: str = "hardware") -> Hardware:
        """The SKU called `name` (as by_name), or a 422 on `field` that names the nearest
        names in the team's catalog (a typo such as 'H100-SMX' gets 'H100-SXM')."""
        found = await self.by_name(team_id, name)
        if found is not None:
            return found
        raise InvalidInput(
            field, unknown_hardware(name, [hw.name for hw in await self.list(team_id)])
        )


def unknown_hardware(name: str, known: list[str]) -> str:
    """Why `name` is refused: the closest catalog names (compared without case), and how to
    add an entry of one's own."""
    by_lower = {n.lower(): n for n in known}
    close = difflib.get_close_matches(name.lower(), list(by_lower), n=3, cutoff=0.5)
    nearest = f"did you mean {' or '.join(repr(by_lower[c]) for c in close)}? " if close else ""
    return (
        f"unknown hardware '{name}': {nearest}GET /v1/hardware lists the catalog; add your own "
        "(a GPU or a CPU machine) with POST /v1/hardware"
    )
