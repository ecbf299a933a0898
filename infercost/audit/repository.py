"""Writing and reading the audit log; every read is scoped to one team."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import Select, func, insert, select
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.audit.models import AuditEvent
from infercost.db.scope import readable


class AuditRepository:
    """The audit log. Callers commit (an event goes with the change it records)."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, values: dict[str, Any]) -> None:
        """Record one event."""
        await self.session.execute(insert(AuditEvent).values(id=uuid.uuid4(), **values))

    async def page(
        self,
        team_id: uuid.UUID,
        *,
        limit: int,
        offset: int,
        action: str | None = None,
        target_id: uuid.UUID | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
    ) -> tuple[list[AuditEvent], int]:
        """The team's events, newest first, and how many match. `action` is a whole action
        ("price.withdraw") or the part before its dot ("price")."""
        query: Select[Any] = readable(AuditEvent, team_id)
        if action is not None:
            query = query.where(
                AuditEvent.action == action
                if "." in action
                else AuditEvent.action.startswith(action + ".", autoescape=True)
            )
        if target_id is not None:
            query = query.where(AuditEvent.target_id == target_id)
        if since is not None:
            query = query.where(AuditEvent.at >= since)
        if until is not None:
            query = query.where(AuditEvent.at < until)
        total = await self.session.scalar(select(func.count()).select_from(query.subquery()))
        rows = await self.session.scalars(
            query.order_by(AuditEvent.at.desc(), AuditEvent.id.desc()).limit(limit).offset(offset)
        )
        return list(rows), int(total or 0)
