"""The GPU catalog."""

from __future__ import annotations

import uuid

from sqlalchemy import CheckConstraint, ForeignKey, Index, String, text
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey


class Hardware(UUIDPrimaryKey, CreatedAt, Base):
    """A GPU SKU (or a CPU machine a team serves from) with its specs; team_id is null for
    the seeded public catalog. An endpoint's `gpu_count` counts these units: GPUs, or CPU
    machines (sockets priced as one unit)."""

    __tablename__ = "hardware"
    __table_args__ = (
        # Public names are unique; a team may add its own SKUs under names not taken publicly.
        Index(
            "uq_hardware_public_name", "name", unique=True, postgresql_where=text("team_id IS NULL")
        ),
        Index("uq_hardware_team_name", "team_id", "name", unique=True),
        CheckConstraint("kind IN ('gpu', 'cpu')", name="kind"),
    )

    team_id: Mapped[uuid.UUID | None] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(64))
    vendor: Mapped[str] = mapped_column(String(32))
    #: 'gpu' or 'cpu': what one unit of an endpoint's `gpu_count` is.
    kind: Mapped[str] = mapped_column(String(8), server_default="gpu")
    memory_gb: Mapped[float]
    memory_bandwidth_gbps: Mapped[float]
    bf16_tflops: Mapped[float]
    fp8_tflops: Mapped[float | None]
    power_w: Mapped[float]
