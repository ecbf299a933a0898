"""Share links and browser sessions. Neither table holds a token: a share link's token is
signed with the server's secret keys (infercost.access.tokens), a session's is stored as its
SHA-256."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import Boolean, CheckConstraint, ForeignKey, Index, LargeBinary, String, false
from sqlalchemy.dialects.postgresql import ARRAY, UUID
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey

#: What a share link opens: one job's report, the comparison page of a set of jobs, or the
#: team's status board.
SHARE_PAGES = ("report", "comparison", "status")


class Share(UUIDPrimaryKey, CreatedAt, Base):
    """A read-only link to exactly one page of a team: valid until `expires_at`, or until
    revoked (`revoked_at`; the row stays, so the list says who shared what)."""

    __tablename__ = "shares"
    __table_args__ = (
        CheckConstraint(f"page IN {SHARE_PAGES}", name="page"),
        CheckConstraint(
            "(page = 'report' AND cardinality(job_ids) = 1)"
            " OR (page = 'comparison' AND cardinality(job_ids) BETWEEN 2 AND 8)"
            " OR (page = 'status' AND cardinality(job_ids) = 0)",
            name="job_ids",
        ),
        Index("ix_shares_team_created", "team_id", "created_at"),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    page: Mapped[str] = mapped_column(String(16))
    # The jobs the page shows, in the order given (none for the status board).
    job_ids: Mapped[list[uuid.UUID]] = mapped_column(ARRAY(UUID(as_uuid=True)))
    # The status board's window and whether it lists every endpoint with runs.
    window: Mapped[str | None] = mapped_column(String(8))
    all_endpoints: Mapped[bool] = mapped_column(Boolean, default=False, server_default=false())
    label: Mapped[str | None] = mapped_column(String(200))
    # Who made it: the API key's prefix, or the single sign-on subject.
    created_by: Mapped[str] = mapped_column(String(200))
    expires_at: Mapped[datetime]
    revoked_at: Mapped[datetime | None]


class BrowserSession(UUIDPrimaryKey, CreatedAt, Base):
    """A browser signed in with a team key: its cookie's SHA-256, the key it was opened with
    (revoking the key ends the session), until `expires_at` or sign-out (`ended_at`)."""

    __tablename__ = "browser_sessions"

    team_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("teams.id", ondelete="CASCADE"), index=True
    )
    key_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("api_keys.id", ondelete="CASCADE"), index=True
    )
    token_hash: Mapped[bytes] = mapped_column(LargeBinary(32), unique=True)
    expires_at: Mapped[datetime]
    ended_at: Mapped[datetime | None]
