"""Share links of one team: what they open is checked when they are made (the jobs must be
the team's), and every use reads the row again (expiry, revocation)."""

from __future__ import annotations

import uuid
from datetime import datetime, timedelta
from urllib.parse import urlencode

from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.reports.services import MAX_COMPARED, MIN_COMPARED, ReportService
from api.domain.shares.schemas import ShareCreate, ShareCreated, ShareRead
from infercost.access.models import Share
from infercost.access.repository import ShareRepository
from infercost.access.tokens import share_hint, share_token
from infercost.db.base import utcnow
from infercost.errors import InvalidInput, NotFound
from infercost.settings import Settings
from infercost.status.figures import DEFAULT_WINDOW, WINDOWS

#: Where a share link opens: /shared/<token>.
SHARED_PREFIX = "/shared/"


def share_state(share: Share, now: datetime) -> str:
    """active, expired or revoked."""
    if share.revoked_at is not None:
        return "revoked"
    return "expired" if share.expires_at <= now else "active"


def page_path(share: Share) -> str:
    """The page a share opens, as a signed-in reader reaches it."""
    if share.page == "report":
        return f"/v1/jobs/{share.job_ids[0]}/report"
    if share.page == "comparison":
        return "/v1/reports/compare?" + urlencode([("job_id", str(j)) for j in share.job_ids])
    query = {"window": share.window or DEFAULT_WINDOW, "all": str(share.all_endpoints).lower()}
    return f"/v1/status/page?{urlencode(query)}"


def to_read(share: Share, now: datetime) -> ShareRead:
    """The listing shape of a share."""
    return ShareRead(
        id=share.id,
        page=share.page,  # type: ignore[arg-type]
        job_ids=list(share.job_ids),
        window=share.window,
        all=share.all_endpoints,
        label=share.label,
        created_by=share.created_by,
        created_at=share.created_at,
        expires_at=share.expires_at,
        revoked_at=share.revoked_at,
        state=share_state(share, now),  # type: ignore[arg-type]
        token_hint=share_hint(share.id),
        path=page_path(share),
    )


class ShareService:
    """A team's share links."""

    def __init__(
        self,
        session: AsyncSession,
        team_id: uuid.UUID,
        settings: Settings,
        reports: ReportService,
    ) -> None:
        self.repo = ShareRepository(session)
        self.team_id = team_id
        self.settings = settings
        self.reports = reports

    def _expiry(self, data: ShareCreate, now: datetime) -> datetime:
        longest = self.settings.share_max_ttl_s
        if data.expires_at is not None and data.expires_in_s is not None:
            raise InvalidInput("expires_at", "give expires_at or expires_in_s, not both")
        if data.expires_at is not None:
            if data.expires_at.tzinfo is None:
                raise InvalidInput("expires_at", "give a time zone, e.g. 2026-12-31T00:00:00Z")
            if data.expires_at <= now:
                raise InvalidInput("expires_at", "must be in the future")
            if data.expires_at > now + timedelta(seconds=longest):
                raise InvalidInput(
                    "expires_at",
                    f"a share link lives at most {longest:g} s (INFERCOST_SHARE_MAX_TTL_S)",
                )
            return data.expires_at
        ttl = self.settings.share_default_ttl_s if data.expires_in_s is None else data.expires_in_s
        if ttl > longest:
            raise InvalidInput(
                "expires_in_s",
                f"a share link lives at most {longest:g} s (INFERCOST_SHARE_MAX_TTL_S); "
                f"{ttl:g} asked",
            )
        return now + timedelta(seconds=ttl)

    async def _check_page(self, data: ShareCreate) -> None:
        """Refuse a share of something the team cannot open itself (404), or a page that
        needs other fields."""
        ids = data.job_ids
        if len(set(ids)) != len(ids):
            raise InvalidInput("job_ids", "a job is listed twice; give each job once")
        if data.page == "status":
            if ids:
                raise InvalidInput("job_ids", "the status board shows no chosen jobs: leave it out")
            if data.window is not None and data.window not in WINDOWS:
                raise InvalidInput("window", f"'{data.window}' is not one of {', '.join(WINDOWS)}")
            return
        if data.window is not None or data.all:
            raise InvalidInput("window", "window and all are for the status board only")
        if data.page == "report" and len(ids) != 1:
            raise InvalidInput("job_ids", f"a report shows one job: give one, not {len(ids)}")
        if data.page == "comparison" and not MIN_COMPARED <= len(ids) <= MAX_COMPARED:
            raise InvalidInput(
                "job_ids",
                f"a comparison shows {MIN_COMPARED} to {MAX_COMPARED} jobs, not {len(ids)}",
            )
        for job_id in ids:
            await self.reports.jobs.get(job_id)  # 404 for a job that is not the team's

    async def create(self, data: ShareCreate, created_by: str, base: str) -> ShareCreated:
        """Store a share and return its link (shown this once)."""
        now = utcnow()
        expires_at = self._expiry(data, now)
        await self._check_page(data)
        share = await self.repo.add(
            Share(
                team_id=self.team_id,
                page=data.page,
                job_ids=list(data.job_ids),
                window=(data.window or DEFAULT_WINDOW) if data.page == "status" else None,
                all_endpoints=data.all,
                label=data.label,
                created_by=created_by or "unknown",
                created_at=now,
                expires_at=expires_at,
            )
        )
        token = share_token(self.settings.secret_keys, share.id)
        read = to_read(share, now)
        return ShareCreated(
            **{f: getattr(read, f) for f in read.__struct_fields__},
            url=f"{base}{SHARED_PREFIX}{token}",
            token=token,
        )

    async def page(self, limit: int, offset: int) -> tuple[list[ShareRead], int]:
        """The team's shares, newest first."""
        rows, total = await self.repo.page(self.team_id, limit, offset)
        now = utcnow()
        return [to_read(r, now) for r in rows], total

    async def read(self, share_id: uuid.UUID) -> ShareRead:
        """One share, or 404."""
        share = await self.repo.get(self.team_id, share_id)
        if share is None:
            raise NotFound(f"no share link {share_id} in your team")
        return to_read(share, utcnow())

    async def revoke(self, share_id: uuid.UUID) -> None:
        """Revoke a share: its link stops working at once (404 when it is not the team's)."""
        if not await self.repo.revoke(self.team_id, share_id, utcnow()):
            raise NotFound(f"no share link {share_id} in your team")
