"""Per-team caps on what a team keeps: endpoints, datasets, schedules, traffic logs, and the
tags an endpoint carries. Each cap is a setting with a default (infercost/settings.py); a
request past one is refused with 422 naming the variable that raises it, and what to delete.

Counts are taken under an advisory lock per team and kind, held until the transaction ends,
so two creations at once cannot both slip under a cap.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from sqlalchemy import func, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.scope import owned_by, unscoped
from infercost.errors import InvalidInput


async def count_locked(session: AsyncSession, model: Any, team_id: uuid.UUID) -> int:
    """Take the team's lock for `model`'s rows (until this transaction ends) and count the
    team's live ones (soft-deleted rows, where the table keeps them, not counted)."""
    lock = text("SELECT pg_advisory_xact_lock(hashtextextended(:key, 0))")
    await session.execute(
        unscoped(lock, "an advisory lock named after the team: it reads no table"),
        {"key": f"infercost.caps.{model.__tablename__}:{team_id}"},
    )
    query = select(func.count()).select_from(model).where(owned_by(model, team_id))
    if hasattr(model, "deleted_at"):
        query = query.where(model.deleted_at.is_(None))
    return int(await session.scalar(query) or 0)


async def check_room(
    session: AsyncSession,
    model: Any,
    team_id: uuid.UUID,
    *,
    cap: int,
    variable: str,
    noun: str,
    delete: str,
) -> None:
    """422 when the team already keeps `cap` live rows of `model` (a new one would pass it);
    the detail names `variable` and how to make room (`delete`, a route)."""
    held = await count_locked(session, model, team_id)
    if held >= cap:
        raise InvalidInput(
            noun,
            f"your team keeps {held} {noun}, this server's limit ({variable}={cap}): delete one "
            f"first ({delete}) or ask an admin to raise the limit",
        )


def check_tags(tags: Mapping[str, str], *, max_tags: int, max_chars: int) -> None:
    """422 when an endpoint's tags are too many (INFERCOST_MAX_TAGS) or one of their names or
    values too long (INFERCOST_MAX_TAG_CHARS)."""
    if len(tags) > max_tags:
        raise InvalidInput(
            "tags",
            f"{len(tags)} tags is over this server's limit of {max_tags} per endpoint "
            "(INFERCOST_MAX_TAGS): keep fewer",
        )
    for name, value in tags.items():
        longest = max(len(name), len(value))
        if longest > max_chars:
            raise InvalidInput(
                "tags",
                f"the tag '{name[:40]}' has a name or value of {longest} characters, over this "
                f"server's limit of {max_chars} (INFERCOST_MAX_TAG_CHARS): shorten it",
            )
