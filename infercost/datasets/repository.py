"""Queries about datasets and their items."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from sqlalchemy import delete, exists, func, insert, select, update
from sqlalchemy.ext.asyncio import AsyncSession

from infercost.datasets.models import Dataset, DatasetItem
from infercost.db.base import utcnow
from infercost.db.scope import owned_by, readable, unscoped
from infercost.jobs.models import Job

#: Items per INSERT statement when storing an upload.
_BATCH = 5000


class DatasetRepository:
    """Datasets of one team (reads scoped by team_id) and their items. Callers commit."""

    def __init__(self, session: AsyncSession) -> None:
        self.session = session

    async def add(self, values: dict[str, Any], items: Sequence[dict[str, Any]]) -> Dataset:
        """Insert a dataset and its items (`seq` numbered here) in the caller's transaction."""
        dataset = Dataset(id=uuid.uuid4(), **values)
        self.session.add(dataset)
        await self.session.flush()
        for start in range(0, len(items), _BATCH):
            rows = [
                {"dataset_id": dataset.id, "seq": start + i, **item}
                for i, item in enumerate(items[start : start + _BATCH])
            ]
            await self.session.execute(insert(DatasetItem), rows)
        return dataset

    async def by_content(self, team_id: uuid.UUID, sha256: str) -> Dataset | None:
        """The team's live dataset with these exact bytes."""
        return await self.session.scalar(
            readable(Dataset, team_id).where(
                Dataset.content_sha256 == sha256, Dataset.deleted_at.is_(None)
            )
        )

    async def get(self, team_id: uuid.UUID, dataset_id: uuid.UUID) -> Dataset | None:
        """The team's live dataset."""
        return await self.session.scalar(
            readable(Dataset, team_id).where(Dataset.id == dataset_id, Dataset.deleted_at.is_(None))
        )

    async def content_hash(self, team_id: uuid.UUID, dataset_id: uuid.UUID) -> str | None:
        """The content hash of the team's dataset, deleted or not: the runs that replayed it
        keep their workload fingerprint, which holds it."""
        found: str | None = await self.session.scalar(
            readable(Dataset, team_id, Dataset.content_sha256).where(Dataset.id == dataset_id)
        )
        return found

    async def items_asking(
        self, team_id: uuid.UUID, dataset_id: uuid.UUID, fields: Sequence[str]
    ) -> list[str]:
        """Which of `fields` (request features: response_format, tools) any item of the
        team's dataset carries of its own."""
        found = []
        owned = readable(Dataset, team_id, Dataset.id).where(Dataset.id == dataset_id)
        for name in fields:
            has = await self.session.scalar(
                select(
                    exists().where(
                        DatasetItem.dataset_id.in_(owned), DatasetItem.features.has_key(name)
                    )
                )
            )
            if has:
                found.append(name)
        return found

    async def get_any(self, dataset_id: uuid.UUID) -> Dataset | None:
        """A dataset by id, deleted or not (the worker replays what a job was given)."""
        return await self.session.scalar(
            unscoped(
                select(Dataset).where(Dataset.id == dataset_id),
                "a worker replays the dataset of the job it was handed",
            )
        )

    async def page(
        self, team_id: uuid.UUID, *, limit: int, offset: int
    ) -> tuple[list[Dataset], int]:
        """One page of the team's live datasets, newest first, and how many there are."""
        live = (owned_by(Dataset, team_id), Dataset.deleted_at.is_(None))
        total = await self.session.scalar(select(func.count()).where(*live))
        rows = await self.session.scalars(
            select(Dataset)
            .where(*live)
            .order_by(Dataset.created_at.desc(), Dataset.id)
            .limit(limit)
            .offset(offset)
        )
        return list(rows), int(total or 0)

    async def used_by_jobs(self, dataset_id: uuid.UUID) -> bool:
        """Whether any job names this dataset (the foreign key's question: whoever's job)."""
        used = select(exists().where(Job.dataset_id == dataset_id))
        reason = "a delete asks whether any row refers to the team's dataset"
        return bool(await self.session.scalar(unscoped(used, reason)))

    async def soft_delete(self, dataset_id: uuid.UUID) -> None:
        """Hide the dataset from the team, keeping its items for the jobs that used it."""
        await self.session.execute(
            update(Dataset).where(Dataset.id == dataset_id).values(deleted_at=utcnow())
        )

    async def delete(self, dataset_id: uuid.UUID) -> None:
        """Remove the dataset and its items."""
        await self.session.execute(delete(Dataset).where(Dataset.id == dataset_id))

    async def items(self, dataset_id: uuid.UUID) -> list[DatasetItem]:
        """Every item of a dataset, in upload order."""
        rows = await self.session.scalars(
            select(DatasetItem)
            .where(DatasetItem.dataset_id == dataset_id)
            .order_by(DatasetItem.seq)
        )
        return list(rows)
