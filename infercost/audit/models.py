"""One row per change a team's credentials made (or the admin made for the team)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ForeignKey, Index, String, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, UUIDPrimaryKey, utcnow


class AuditEvent(UUIDPrimaryKey, Base):
    """A change: `action` ("price.withdraw") on `target_type` `target_id`, by `actor` (the
    credential: "key ic_ab12cd34", "sso alice", "admin token") with the key it used, when, and
    a sentence and the fields that matter. Written in the transaction of the change itself, so
    a change that rolled back leaves no event and none is lost."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_team_at", "team_id", "at", "id"),)

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    at: Mapped[datetime] = mapped_column(default=utcnow, server_default=func.now())
    actor: Mapped[str] = mapped_column(String(200))
    # The API key behind the change (a signed-in browser's key too); null for the admin
    # token and single sign-on. No foreign key: the record outlives a revoked key's row.
    key_id: Mapped[uuid.UUID | None]
    action: Mapped[str] = mapped_column(String(64))
    target_type: Mapped[str] = mapped_column(String(32))
    target_id: Mapped[uuid.UUID | None]
    summary: Mapped[str] = mapped_column(Text)
    detail: Mapped[dict[str, Any]] = mapped_column(JSONB)
