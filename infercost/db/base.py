"""Declarative base with one constraint naming convention, UUID keys and UTC timestamps."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime

from sqlalchemy import DateTime, MetaData, func
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """Timezone-aware now, for values set in Python rather than by the database."""
    return datetime.now(UTC)


class Base(DeclarativeBase):
    """Every table shares this metadata, so every constraint has a predictable name."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)
    type_annotation_map = {datetime: DateTime(timezone=True)}


class UUIDPrimaryKey:
    """A random UUID primary key, generated in Python so it is known before flush."""

    id: Mapped[uuid.UUID] = mapped_column(primary_key=True, default=uuid.uuid4)


class CreatedAt:
    """Creation time, set by the database in UTC."""

    created_at: Mapped[datetime] = mapped_column(default=utcnow, server_default=func.now())
