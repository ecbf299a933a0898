"""Request and response shapes for teams and API keys."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

import msgspec

Name = Annotated[str, msgspec.Meta(min_length=1, max_length=100, pattern=r"^[A-Za-z0-9][\w.\- ]*$")]


class TeamCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/teams."""

    name: Annotated[
        Name, msgspec.Meta(description="The team's name, unique", examples=["search-infra"])
    ]


class TeamRead(msgspec.Struct):
    """A team."""

    id: uuid.UUID
    name: str
    created_at: datetime


class KeyCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/teams/{id}/keys."""

    name: Annotated[
        Name,
        msgspec.Meta(
            description="A label for the key, to tell keys apart when revoking", examples=["ci"]
        ),
    ] = "default"


class KeyRead(msgspec.Struct):
    """A key as listed: never the secret itself."""

    id: uuid.UUID
    team_id: uuid.UUID
    name: str
    prefix: str
    created_at: datetime
    revoked_at: datetime | None = None


class KeyCreated(msgspec.Struct):
    """A key as created: `key` is the bearer token and is shown only this once."""

    id: uuid.UUID
    team_id: uuid.UUID
    name: str
    prefix: str
    key: str
    created_at: datetime
