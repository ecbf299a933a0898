"""Queries about the price book."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, select, update
from sqlalchemy.dialects.postgresql import distinct_on, insert
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.db.scope import owned_by, readable
from infercost.hardware.models import Hardware
from infercost.prices.models import Price


def in_effect_at(query: Select[Any], at: datetime) -> Select[Any]:
    """`query` over prices narrowed to the entry in effect at `at` (the latest
    effective_from <= at, withdrawn entries left out) for each provider, hardware and
    pricing model."""
    return (
        query.where(Price.effective_from <= at, Price.withdrawn_at.is_(None))
        .ext(distinct_on(Price.provider, Price.hardware_id, Price.pricing_model))
        .order_by(
            Price.provider,
            Price.hardware_id,
            Price.pricing_model,
            Price.effective_from.desc(),
        )
    )


class PriceRepository:
    """Price entries of one team; every read is scoped by team_id. Callers commit."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, values: dict[str, Any]) -> Price | None:
        """Insert an entry; None when the team already has one for the same provider,
        hardware and pricing model starting at the same moment."""
        created = await self.session.scalar(
            insert(Price)
            .values(**{"id": uuid.uuid4(), **values})
            .on_conflict_do_nothing(
                index_elements=[
                    Price.team_id,
                    Price.provider,
                    Price.hardware_id,
                    Price.pricing_model,
                    Price.effective_from,
                ],
                index_where=Price.withdrawn_at.is_(None),
            )
            .returning(Price.id)
        )
        if created is None:
            return None
        price: Price | None = await self.session.scalar(
            readable(Price, values["team_id"]).where(Price.id == created)
        )
        return price

    async def in_effect(
        self,
        team_id: uuid.UUID,
        *,
        provider: str,
        hardware_id: uuid.UUID,
        pricing_model: str,
        at: datetime,
    ) -> Price | None:
        """The entry in effect at `at`: the latest effective_from <= at not withdrawn
        (uq_prices_in_effect)."""
        return await self.session.scalar(
            readable(Price, team_id)
            .where(
                Price.provider == provider,
                Price.hardware_id == hardware_id,
                Price.pricing_model == pricing_model,
                Price.effective_from <= at,
                Price.withdrawn_at.is_(None),
            )
            .order_by(Price.effective_from.desc())
            .limit(1)
        )

    async def page(
        self,
        team_id: uuid.UUID,
        *,
        limit: int,
        offset: int,
        provider: str | None = None,
        hardware_id: uuid.UUID | None = None,
        pricing_model: str | None = None,
        at: datetime | None = None,
        withdrawn: bool = False,
    ) -> tuple[list[tuple[Price, str]], int]:
        """One page of the team's entries with their hardware's name, and how many match.

        With `at`, only the entry in effect at that time for each provider, hardware and
        pricing model; without it, the whole history, newest first within each. Withdrawn
        entries only with `withdrawn` (and never as the entry in effect).
        """
        ids: Select[Any] = readable(Price, team_id, Price.id)
        if not withdrawn:
            ids = ids.where(Price.withdrawn_at.is_(None))
        if provider is not None:
            ids = ids.where(Price.provider == provider)
        if hardware_id is not None:
            ids = ids.where(Price.hardware_id == hardware_id)
        if pricing_model is not None:
            ids = ids.where(Price.pricing_model == pricing_model)
        if at is not None:
            ids = in_effect_at(ids, at)
        matching = ids.subquery()
        total = await self.session.scalar(select(func.count()).select_from(matching))
        rows = await self.session.execute(
            select(Price, Hardware.name)
            .join(Hardware, Hardware.id == Price.hardware_id)
            .where(Price.id.in_(select(matching.c.id)))
            .order_by(
                Price.provider,
                Hardware.name,
                Price.pricing_model,
                Price.effective_from.desc(),
                Price.id,
            )
            .limit(limit)
            .offset(offset)
        )
        return [(price, name) for price, name in rows], int(total or 0)

    async def get(self, team_id: uuid.UUID, price_id: uuid.UUID) -> tuple[Price, str] | None:
        """One of the team's entries (withdrawn or not) with its hardware's name."""
        row = (
            await self.session.execute(
                readable(Price, team_id, Price, Hardware.name)
                .join(Hardware, Hardware.id == Price.hardware_id)
                .where(Price.id == price_id)
            )
        ).first()
        return None if row is None else (row[0], row[1])

    async def withdraw(self, team_id: uuid.UUID, price_id: uuid.UUID) -> bool:
        """Mark an entry withdrawn; False when it already was (or is not the team's)."""
        withdrawn = await self.session.scalar(
            update(Price)
            .where(Price.id == price_id, owned_by(Price, team_id), Price.withdrawn_at.is_(None))
            .values(withdrawn_at=utcnow())
            .returning(Price.id)
        )
        return withdrawn is not None

    async def reference(
        self, team_id: uuid.UUID, hardware_id: uuid.UUID
    ) -> tuple[float, int] | None:
        """The median USD per GPU-hour of the team's entries for a hardware (withdrawn ones
        left out) and how many there are; None when the book holds none."""
        row = (
            await self.session.execute(
                readable(
                    Price,
                    team_id,
                    func.percentile_cont(0.5).within_group(Price.usd_per_gpu_hour),
                    func.count(),
                ).where(Price.hardware_id == hardware_id, Price.withdrawn_at.is_(None))
            )
        ).one()
        median, count = row
        return None if not count else (float(median), int(count))
