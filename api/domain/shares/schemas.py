"""Request and response shapes of /v1/shares."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

import msgspec

SharePage = Literal["report", "comparison", "status"]
Label = Annotated[str, msgspec.Meta(min_length=1, max_length=200)]
Seconds = Annotated[float, msgspec.Meta(gt=0)]


class ShareCreate(msgspec.Struct, forbid_unknown_fields=True):
    """What to share and for how long. `page`: `report` (one job in `job_ids`),
    `comparison` (2 to 8 jobs, shown in that order) or `status` (the team's status board;
    `window` is where it opens, `all` lists every endpoint with runs). The link lives
    `expires_in_s` seconds (default INFERCOST_SHARE_DEFAULT_TTL_S, at most
    INFERCOST_SHARE_MAX_TTL_S) or until `expires_at`."""

    page: Annotated[
        SharePage,
        msgspec.Meta(
            description="The page the link opens: a job's report, the comparison of 2 to 8 "
            "jobs, or the status board",
            examples=["report"],
        ),
    ]
    job_ids: Annotated[
        list[uuid.UUID],
        msgspec.Meta(
            description="The jobs the page shows: one for a report, 2 to 8 for a comparison "
            "(in this order), none for the status board",
            examples=[["8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e"]],
        ),
    ] = msgspec.field(default_factory=list)
    window: Annotated[
        str | None,
        msgspec.Meta(
            description="The status board's window: 24h, 72h, 7d or 30d (default 72h); the "
            "reader may switch it",
            examples=["7d"],
        ),
    ] = None
    all: Annotated[
        bool,
        msgspec.Meta(
            description="The status board lists every endpoint with runs, not only watched ones",
            examples=[False],
        ),
    ] = False
    expires_in_s: Annotated[
        Seconds | None,
        msgspec.Meta(
            description="How many seconds the link works (default "
            "INFERCOST_SHARE_DEFAULT_TTL_S, 7 days; at most INFERCOST_SHARE_MAX_TTL_S, 90 days)",
            examples=[86400],
        ),
    ] = None
    expires_at: Annotated[
        datetime | None,
        msgspec.Meta(
            description="When the link stops working, instead of expires_in_s (RFC 3339 with "
            "a time zone)",
            examples=["2026-12-31T00:00:00Z"],
        ),
    ] = None
    label: Annotated[
        Label | None,
        msgspec.Meta(
            description="A note to tell links apart in the list", examples=["weekly review"]
        ),
    ] = None


class ShareRead(msgspec.Struct):
    """A share link as listed: never its token (shown once, when made), only its first
    characters (`token_hint`). `state` is active, expired or revoked; `path` the page it
    opens for a signed-in reader."""

    id: uuid.UUID
    page: SharePage
    job_ids: list[uuid.UUID]
    window: str | None
    all: bool
    label: str | None
    created_by: str
    created_at: datetime
    expires_at: datetime
    revoked_at: datetime | None
    state: Literal["active", "expired", "revoked"]
    token_hint: str
    path: str


class ShareCreated(ShareRead):
    """A new share link: `url` opens the page in any browser, with no key, until it expires
    or is revoked; `token` is its last part. Both are shown this once."""

    url: str
    token: str
