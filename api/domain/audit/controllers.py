"""GET /v1/audit: who changed what in your team, and when."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from litestar import Controller, get
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from api.auth import team_service
from api.domain.audit.schemas import AuditEventRead
from api.domain.audit.services import AuditService
from api.schemas import Limit, Offset, Page


class AuditController(Controller):
    """The team's audit log."""

    path = "/v1/audit"
    tags = ["audit"]
    dependencies = {"audit_log": team_service(AuditService)}

    @get("/", summary="Who changed what, and when")
    async def list_audit(
        self,
        *,
        audit_log: NamedDependency[AuditService],
        limit: Limit = 50,
        offset: Offset = 0,
        action: Annotated[
            str | None,
            QueryParameter(
                description="an action (price.withdraw) or a kind of target (price)",
                max_length=64,
            ),
        ] = None,
        target_id: Annotated[
            uuid.UUID | None, QueryParameter(description="only changes to this id")
        ] = None,
        since: Annotated[
            datetime | None, QueryParameter(description="RFC 3339: changes at or after")
        ] = None,
        until: Annotated[
            datetime | None, QueryParameter(description="RFC 3339: changes before")
        ] = None,
    ) -> Page[AuditEventRead]:
        """Every change to your team's endpoints, prices, jobs, keys, shares, schedules,
        webhooks, datasets, traffic logs and hardware, newest first: who made it (the key or
        sign-on, or the admin token), what, when, and a sentence saying so. Kept as long as
        the team is."""
        items, total = await audit_log.page(
            limit=limit,
            offset=offset,
            action=action,
            target_id=target_id,
            since=since,
            until=until,
        )
        return Page(items=items, total=total, limit=limit, offset=offset)
