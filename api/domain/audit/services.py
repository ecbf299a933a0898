"""Recording changes in the audit log (AuditTrail, one per request) and reading it back."""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.auth import Caller, CurrentCaller
from api.db import DbSession
from api.domain.audit.schemas import AuditEventRead
from api.schemas import aware
from infercost.audit.repository import AuditRepository

#: The actor of changes made with INFERCOST_ADMIN_TOKEN (teams and keys).
ADMIN_ACTOR = "admin token"


class AuditTrail:
    """Writes one event per change, in the request's transaction: the event commits with
    the change or not at all."""

    def __init__(
        self,
        session: AsyncSession,
        team_id: uuid.UUID,
        actor: str,
        key_id: uuid.UUID | None = None,
    ) -> None:
        self.repo = AuditRepository(session)
        self.team_id = team_id
        self.actor = actor
        self.key_id = key_id

    @classmethod
    def of(cls, session: AsyncSession, caller: Caller) -> AuditTrail:
        """The trail of a team's caller (a key, a signed-in browser, single sign-on)."""
        return cls(session, caller.team_id, caller.who or "unknown", caller.key_id)

    async def record(
        self,
        action: str,
        target_type: str,
        target_id: uuid.UUID | None,
        summary: str,
        detail: Mapping[str, Any] | msgspec.Struct | None = None,
        *,
        team_id: uuid.UUID | None = None,
    ) -> None:
        """Record `action` on a target; `detail` is kept as JSON (a struct's fields, None
        ones left out). `team_id` names the team for the admin's changes."""
        if isinstance(detail, msgspec.Struct):
            fields = msgspec.to_builtins(detail)
            detail = {k: v for k, v in fields.items() if v is not None}
        await self.repo.add(
            {
                "team_id": team_id or self.team_id,
                "actor": self.actor,
                "key_id": self.key_id,
                "action": action,
                "target_type": target_type,
                "target_id": target_id,
                "summary": summary,
                "detail": msgspec.to_builtins(dict(detail or {})),
            }
        )


def provide_audit(db_session: DbSession, caller: CurrentCaller) -> AuditTrail:
    """The trail of this request's caller (app-wide dependency `audit`)."""
    return AuditTrail.of(db_session, caller)


class AuditService:
    """Reading one team's audit log."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.repo = AuditRepository(session)
        self.team_id = team_id

    async def page(
        self,
        *,
        limit: int,
        offset: int,
        action: str | None,
        target_id: uuid.UUID | None,
        since: datetime | None,
        until: datetime | None,
    ) -> tuple[list[AuditEventRead], int]:
        """A page of the team's events, newest first."""
        rows, total = await self.repo.page(
            self.team_id,
            limit=limit,
            offset=offset,
            action=action,
            target_id=target_id,
            since=aware("since", since),
            until=aware("until", until),
        )
        return [msgspec.convert(r, AuditEventRead, from_attributes=True) for r in rows], total
