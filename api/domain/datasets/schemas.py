"""Response shapes for datasets (uploads are the file itself, not JSON)."""

from __future__ import annotations

import uuid
from datetime import datetime

import msgspec


class DatasetRead(msgspec.Struct):
    """An uploaded dataset: what it holds and the sha256 of its bytes.

    `items` counts prompts and conversations kept; `chat_items` of them are chat messages
    (the rest completion prompts); `max_tokens_items` give their own max_tokens;
    `max_turns` is the most user turns in one item; `skipped` ShareGPT conversations had
    no human turn.
    """

    id: uuid.UUID
    name: str
    format: str
    content_sha256: str
    size_bytes: int
    items: int
    chat_items: int
    max_tokens_items: int
    max_turns: int
    skipped: int
    created_at: datetime
