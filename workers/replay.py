"""Replaying an uploaded dataset: its items loaded once per job, sent in a seeded order."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.datasets.repository import DatasetRepository
from workers.sessions import estimate_tokens

#: How samples mark a prompt taken from a dataset (no length was drawn for it).
DATASET = "dataset"


@dataclass(frozen=True, slots=True)
class ReplayItem:
    """What one request sends: a completion prompt or chat messages, and its max_tokens."""

    prompt: str
    messages: list[dict[str, Any]] | None
    max_tokens: int | None
    local_tokens: int
    # The item's messages as uploaded: what a multi-turn session replays turn by turn.
    conversation: list[dict[str, Any]] | None = None
    # Its own request features (tools, tool_choice, response_format, images); None: none.
    features: dict[str, Any] | None = None


def _first_turn(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A conversation up to and including its first user message (system prompt kept)."""
    for index, message in enumerate(messages):
        if message["role"] == "user":
            return messages[: index + 1]
    return messages


def _item(
    prompt: str | None,
    messages: list[dict[str, Any]] | None,
    max_tokens: int | None,
    sharegpt: bool,
    features: dict[str, Any] | None = None,
) -> ReplayItem:
    conversation = messages
    if messages is not None and sharegpt:
        # A ShareGPT conversation sent alone is its first turn; its recorded answers are
        # the model's to write.
        messages = _first_turn(messages)
    chars = len(prompt) if prompt is not None else sum(len(m["content"]) for m in messages or [])
    return ReplayItem(
        prompt=prompt or "",
        messages=messages,
        max_tokens=max_tokens,
        local_tokens=estimate_tokens(chars),
        conversation=conversation,
        features=features,
    )


class Replay:
    """A dataset's items in the order one level sends them: a permutation drawn from the
    job's seed and the level, cycling. Each level has its own order, so a level does not
    start with the prompts the level before it just put in the engine's prefix cache."""

    def __init__(self, items: list[ReplayItem], seed: int, level_index: int = 0) -> None:
        self.items = items
        self.seed = seed
        rng = np.random.default_rng([seed, level_index, 2])
        self.order: list[int] = rng.permutation(len(items)).tolist()

    def for_level(self, level_index: int) -> Replay:
        """The same items in level `level_index`'s order."""
        return Replay(self.items, self.seed, level_index)

    def __getitem__(self, seq: int) -> ReplayItem:
        return self.items[self.order[seq % len(self.order)]]


async def load_replay(
    sessionmaker: async_sessionmaker[AsyncSession], dataset_id: uuid.UUID, seed: int
) -> Replay:
    """Load a dataset's items (deleted datasets too: a job replays what it was given)."""
    async with sessionmaker() as session:
        repo = DatasetRepository(session)
        dataset = await repo.get_any(dataset_id)
        if dataset is None:
            raise LookupError(f"dataset {dataset_id} no longer exists")
        sharegpt = dataset.format == "sharegpt"
        rows = await repo.items(dataset_id)
        items = [_item(r.prompt, r.messages, r.max_tokens, sharegpt, r.features) for r in rows]
    return Replay(items, seed)
