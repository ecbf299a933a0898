"""The audit log's read shape."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import msgspec


class AuditEventRead(msgspec.Struct):
    """One change: `action` (`<kind>.<verb>`, e.g. `price.withdraw`) on `target_type`
    `target_id`, by `actor` (the credential: `key ic_ab12cd34`, `browser, key ic_...`,
    `sso <subject>`, `admin token`) and `key_id` (the API key used, when one was), at `at`;
    `summary` says it in a sentence, `detail` holds the fields that matter (never a secret)."""

    id: uuid.UUID
    at: datetime
    actor: str
    key_id: uuid.UUID | None
    action: str
    target_type: str
    target_id: uuid.UUID | None
    summary: str
    detail: dict[str, Any]
