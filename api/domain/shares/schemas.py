"""Request and response shapes of /v1/shares."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

import msgspec

SharePage = Literal["report", "comparison", "status"]


class ShareCreate(msgspec.Struct, forbid_unknown_fields=True):
    """What to share and for how long. `page`: `report` (one job in `job_ids`),
    `comparison` (2 to 8 jobs, shown in that order) or `status` (the team's status board;
    `window` is where it opens, `all` lists every endpoint with runs). The link lives
    `expires_in_s` seconds (default INFERCOST_SHARE_DEFAULT_TTL_S, at most
    INFERCOST_SHARE_MAX_TTL_S) or until `expires_at`."""

    page: SharePage
    job_ids: list[uuid.UUID] = msgspec.field(default_factory=list)
    window: str | None = None
    all: bool = False
    expires_in_s: Annotated[float, msgspec.Meta(gt=0)] | None = None
    expires_at: datetime | None = None
    label: Annotated[str, msgspec.Meta(min_length=1, max_length=200)] | None = None


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
