"""Queries about share links and browser sessions; callers commit."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

from sqlalchemy import func, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.access.models import BrowserSession, Share
from infercost.db.scope import owned_by, readable, unscoped
from infercost.teams.models import ApiKey, Team


class ShareRepository:
    """A team's share links, and the one unscoped read that resolves a link's token."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, share: Share) -> Share:
        """Insert a share."""
        self.session.add(share)
        await self.session.flush()
        return share

    async def page(self, team_id: uuid.UUID, limit: int, offset: int) -> tuple[list[Share], int]:
        """The team's shares, newest first (revoked and expired ones included), and how many."""
        rows = await self.session.scalars(
            readable(Share, team_id)
            .order_by(Share.created_at.desc(), Share.id)
            .limit(limit)
            .offset(offset)
        )
        total = await self.session.scalar(
            select(func.count()).select_from(Share).where(owned_by(Share, team_id))
        )
        return list(rows), int(total or 0)

    async def get(self, team_id: uuid.UUID, share_id: uuid.UUID) -> Share | None:
        """One of the team's shares."""
        return await self.session.scalar(readable(Share, team_id).where(Share.id == share_id))

    async def revoke(self, team_id: uuid.UUID, share_id: uuid.UUID, at: datetime) -> bool:
        """Mark the share revoked (kept when already revoked); False when the team has none."""
        result = await self.session.execute(
            update(Share)
            .where(Share.id == share_id, owned_by(Share, team_id))
            .values(revoked_at=func.coalesce(Share.revoked_at, at))
        )
        return bool(result.rowcount)  # type: ignore[attr-defined]

    async def by_token_id(self, share_id: uuid.UUID) -> Share | None:
        """The share a signed token names, whatever its team."""
        reason = "share link: the signed token is how a request learns its team"
        return await self.session.scalar(
            unscoped(select(Share).where(Share.id == share_id), reason)
        )


@dataclass(frozen=True, slots=True)
class LiveSession:
    """A signed-in browser's session, its team's name and the prefix of the key it used."""

    session: BrowserSession
    team_name: str
    key_prefix: str


class BrowserSessionRepository:
    """Sessions of browsers signed in with a team key."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, row: BrowserSession) -> BrowserSession:
        """Insert a session."""
        self.session.add(row)
        await self.session.flush()
        return row

    async def live(self, token_hash: bytes, now: datetime) -> LiveSession | None:
        """The session with this cookie, while it is not expired, not signed out, and its
        key not revoked."""
        query = (
            select(BrowserSession, Team.name, ApiKey.prefix)
            .join(ApiKey, ApiKey.id == BrowserSession.key_id)
            .join(Team, Team.id == BrowserSession.team_id)
            .where(
                BrowserSession.token_hash == token_hash,
                BrowserSession.ended_at.is_(None),
                BrowserSession.expires_at > now,
                ApiKey.revoked_at.is_(None),
            )
        )
        reason = "authentication: the session cookie is how a request learns its team"
        row = (await self.session.execute(unscoped(query, reason))).first()
        return None if row is None else LiveSession(row[0], row[1], row[2])

    async def end(self, session_id: uuid.UUID, at: datetime) -> None:
        """Sign a session out."""
        await self.session.execute(
            update(BrowserSession)
            .where(BrowserSession.id == session_id, BrowserSession.ended_at.is_(None))
            .values(ended_at=at)
        )
