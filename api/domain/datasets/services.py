"""Dataset rules for one team: parse before storing, one dataset per content, safe deletes."""

from __future__ import annotations

import asyncio
import uuid

from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.datasets.schemas import DatasetRead
from api.rows import from_row
from infercost.datasets.models import Dataset
from infercost.datasets.parse import DatasetError, parse_dataset
from infercost.datasets.repository import DatasetRepository
from infercost.errors import InfercostError, InvalidInput, NotFound
from infercost.jobs.plan import WorkloadPlan
from infercost.teams.caps import check_room


class TooLarge(InfercostError):
    """A body over a configured size limit."""

    status_code = 413
    title = "Payload too large"


def to_read(dataset: Dataset) -> DatasetRead:
    """The response shape of a dataset."""
    return from_row(dataset, DatasetRead, items=dataset.item_count, skipped=dataset.skipped_items)


class DatasetService:
    """Datasets of one team. An upload is parsed whole before anything is stored, and
    stored in the request's one transaction, so a bad line leaves nothing behind."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.repo = DatasetRepository(session)
        self.team_id = team_id

    async def upload(
        self, data: bytes, sha256: str, *, name: str | None, fmt: str, max_datasets: int
    ) -> tuple[DatasetRead, bool]:
        """Store an upload; the same bytes uploaded again return the existing dataset
        (the bool says whether it is new). A new one past the team's cap is a 422."""
        existing = await self.repo.by_content(self.team_id, sha256)
        if existing is not None:
            return to_read(existing), False
        await check_room(
            self.session,
            Dataset,
            self.team_id,
            cap=max_datasets,
            variable="INFERCOST_MAX_DATASETS",
            noun="datasets",
            delete="DELETE /v1/datasets/{id}",
        )
        try:
            # Tens of MiB of JSON: parsed off the event loop so other requests go on.
            parsed = await asyncio.to_thread(parse_dataset, data, fmt)
        except DatasetError as exc:
            raise InvalidInput(exc.where, exc.problem) from None
        items = parsed.items
        values = {
            "team_id": self.team_id,
            "name": name or f"dataset-{sha256[:12]}",
            "format": fmt,
            "content_sha256": sha256,
            "size_bytes": len(data),
            "item_count": len(items),
            "chat_items": sum(1 for i in items if i.messages is not None),
            "max_tokens_items": sum(1 for i in items if i.max_tokens is not None),
            "max_turns": max(i.user_turns for i in items),
            "skipped_items": parsed.skipped,
        }
        rows = [
            {
                "prompt": i.prompt,
                "messages": i.messages,
                "max_tokens": i.max_tokens,
                "features": i.features,
            }
            for i in items
        ]
        try:
            async with self.session.begin_nested():
                dataset = await self.repo.add(values, rows)
        except IntegrityError:
            # The same bytes were stored by a concurrent upload meanwhile.
            raced = await self.repo.by_content(self.team_id, sha256)
            if raced is None:
                raise
            return to_read(raced), False
        return to_read(dataset), True

    async def get(self, dataset_id: uuid.UUID) -> Dataset:
        """The team's dataset, or 404."""
        dataset = await self.repo.get(self.team_id, dataset_id)
        if dataset is None:
            raise NotFound(f"no dataset {dataset_id}: GET /v1/datasets lists yours")
        return dataset

    async def read(self, dataset_id: uuid.UUID) -> DatasetRead:
        """One dataset's description."""
        return to_read(await self.get(dataset_id))

    async def page(self, limit: int, offset: int) -> tuple[list[DatasetRead], int]:
        """A page of the team's datasets, newest first."""
        rows, total = await self.repo.page(self.team_id, limit=limit, offset=offset)
        return [to_read(d) for d in rows], total

    async def delete(self, dataset_id: uuid.UUID) -> None:
        """Remove a dataset. One that jobs used is hidden but kept, so those jobs can still
        run and say what they replayed; new jobs can no longer name it."""
        dataset = await self.get(dataset_id)
        if await self.repo.used_by_jobs(dataset.id):
            await self.repo.soft_delete(dataset.id)
        else:
            await self.repo.delete(dataset.id)


async def workload_dataset(
    session: AsyncSession, team_id: uuid.UUID, workload: WorkloadPlan, endpoint_api: str
) -> Dataset | None:
    """The dataset a job's workload replays (None for synthetic prompts), after checking
    that the workload and the endpoint can use it; InvalidInput says what to change."""
    if workload.sessions is not None and endpoint_api != "openai-chat":
        raise InvalidInput(
            "workload.sessions",
            f"multi-turn sessions send chat messages: they need an openai-chat endpoint; "
            f"this endpoint's api is {endpoint_api}",
        )
    if workload.dataset_id is None:
        if workload.input_tokens is None or workload.output_tokens is None:
            raise InvalidInput(
                "workload",
                "give input_tokens and output_tokens (synthetic prompts) or dataset_id "
                "(prompts from an uploaded dataset: POST /v1/datasets)",
            )
        return None
    dataset = await DatasetRepository(session).get(team_id, workload.dataset_id)
    if dataset is None:
        raise InvalidInput(
            "workload.dataset_id",
            f"no dataset {workload.dataset_id} in your team: GET /v1/datasets lists yours",
        )
    if workload.input_tokens is not None:
        raise InvalidInput(
            "workload.input_tokens",
            "the dataset gives the prompts: leave input_tokens out",
        )
    missing = dataset.item_count - dataset.max_tokens_items
    if missing and workload.output_tokens is None:
        raise InvalidInput(
            "workload.output_tokens",
            f"{missing} of the dataset's {dataset.item_count} items give no max_tokens: "
            "set output_tokens for them",
        )
    if dataset.chat_items and endpoint_api != "openai-chat":
        raise InvalidInput(
            "workload.dataset_id",
            f"the dataset holds {dataset.chat_items} chat items (messages), which need an "
            f"openai-chat endpoint; this endpoint's api is {endpoint_api}",
        )
    return dataset
