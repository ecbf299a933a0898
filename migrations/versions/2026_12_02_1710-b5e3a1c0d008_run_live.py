"""Live figures of a running level, for progress bars.

The worker's heartbeat writes the figures so far of the level it is measuring (requests
done and planned, errors, elapsed time, median TTFT, output tokens/s) into `runs.live`
about twice a second, and clears it when the level ends (its summary takes over).

Revision ID: b5e3a1c0d008
Revises: b5e3a1c0d007
Create Date: 2026-12-02 17:10:00
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op
from sqlalchemy.dialects import postgresql

revision: str = "b5e3a1c0d008"
down_revision: str | None = "b5e3a1c0d007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("live", postgresql.JSONB(astext_type=sa.Text()), nullable=True))


def downgrade() -> None:
    op.drop_column("runs", "live")
