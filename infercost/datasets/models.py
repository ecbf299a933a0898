"""Datasets a team uploads (completion prompts, chat messages, ShareGPT conversations)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal, get_args

from sqlalchemy import BigInteger, CheckConstraint, ForeignKey, Index, Integer, String, Text, text
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from infercost.db.base import Base, CreatedAt, UUIDPrimaryKey

DatasetFormat = Literal["jsonl", "sharegpt"]
DATASET_FORMATS: tuple[str, ...] = get_args(DatasetFormat)


class Dataset(UUIDPrimaryKey, CreatedAt, Base):
    """One uploaded file, parsed into items; identified within a team by its content hash.

    A dataset that jobs used is only soft-deleted (`deleted_at`), so those jobs keep what
    they replayed; an unused one is deleted with its items.
    """

    __tablename__ = "datasets"
    __table_args__ = (
        CheckConstraint(f"format IN {DATASET_FORMATS}", name="format"),
        # The same bytes uploaded twice by a team are one dataset (while it is not deleted).
        Index(
            "uq_datasets_team_content",
            "team_id",
            "content_sha256",
            unique=True,
            postgresql_where=text("deleted_at IS NULL"),
        ),
        Index("ix_datasets_team_created", "team_id", "created_at"),
    )

    team_id: Mapped[uuid.UUID] = mapped_column(ForeignKey("teams.id", ondelete="CASCADE"))
    name: Mapped[str] = mapped_column(String(200))
    format: Mapped[str] = mapped_column(String(16))
    # Hex sha256 of the uploaded bytes: what a workload fingerprint names the dataset by.
    content_sha256: Mapped[str] = mapped_column(String(64))
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    item_count: Mapped[int]
    # Items that are chat messages (the rest are completion prompts).
    chat_items: Mapped[int]
    # Items that give their own max_tokens (the rest use the workload's output_tokens).
    max_tokens_items: Mapped[int]
    # The most user turns in one item (1 for prompts; ShareGPT conversations may have more).
    max_turns: Mapped[int] = mapped_column(default=1)
    # ShareGPT conversations left out because they had no human turn.
    skipped_items: Mapped[int] = mapped_column(default=0)
    deleted_at: Mapped[datetime | None]


class DatasetItem(Base):
    """One prompt (completions) or message list (chat, or a whole ShareGPT conversation)."""

    __tablename__ = "dataset_items"
    __table_args__ = (
        CheckConstraint("(prompt IS NULL) <> (messages IS NULL)", name="prompt_or_messages"),
    )

    dataset_id: Mapped[uuid.UUID] = mapped_column(
        ForeignKey("datasets.id", ondelete="CASCADE"), primary_key=True
    )
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    prompt: Mapped[str | None] = mapped_column(Text)
    # [{"role": "system"|"user"|"assistant", "content": "..."}, ...] as uploaded.
    messages: Mapped[list[dict[str, Any]] | None] = mapped_column(JSONB(none_as_null=True))
    max_tokens: Mapped[int | None]
    # Request features of its own (tools, tool_choice, response_format, images), as uploaded:
    # free-form request fields, sent with it; null: none.
    features: Mapped[dict[str, Any] | None] = mapped_column(JSONB(none_as_null=True))
