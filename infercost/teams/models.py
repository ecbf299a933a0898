"""Teams and their API keys."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ForeignKey, LargeBinary, String
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey


class Team(UUIDPrimaryKey, CreatedAt, Base):
    """A tenant: every owned row carries its id."""

    __tablename__ = "teams"

    name: Mapped[str] = mapped_column(String(100), unique=True)


class ApiKey(UUIDPrimaryKey, CreatedAt, Base):
    """A bearer key: shown once, stored as a keyed hash, found by its readable prefix."""

    __tablename__ = "api_keys"

    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )
    name: Mapped[str] = mapped_column(String(100))
    prefix: Mapped[str] = mapped_column(String(32), unique=True)
    key_hash: Mapped[bytes] = mapped_column(LargeBinary(32))
    last_used_at: Mapped[datetime | None]
    revoked_at: Mapped[datetime | None]
