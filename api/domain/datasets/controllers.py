"""Dataset routes: POST (the file is the body), GET, DELETE /v1/datasets."""

from __future__ import annotations

import hashlib
from typing import Annotated, Any

from litestar import Controller, Request, Response, delete, get, post
from litestar.di import NamedDependency
from litestar.params import QueryParameter

from api.auth import AppSettings, team_service
from api.domain.audit.services import AuditTrail
from api.domain.datasets.schemas import DatasetRead
from api.domain.datasets.services import DatasetService, TooLarge
from api.openapi import problem_responses
from api.schemas import Limit, Offset, Page, PathId
from api.uploads import file_body, mib, read_capped
from infercost.datasets.models import DatasetFormat
from infercost.errors import InfercostError

#: Content types of an upload, and the format each means when `format` is not given.
CONTENT_FORMATS = {
    "application/x-ndjson": "jsonl",
    "application/jsonl": "jsonl",
    "application/x-jsonlines": "jsonl",
    "application/json": "sharegpt",
}


UploadOperation = file_body(
    "the dataset file: JSONL (one prompt or chat item a line) or ShareGPT",
    CONTENT_FORMATS,
)


class UnsupportedType(InfercostError):
    """A body whose content type says nothing about its format."""

    status_code = 415
    title = "Unsupported media type"


class DatasetController(Controller):
    """POST, GET /v1/datasets; GET, DELETE /v1/datasets/{id}."""

    path = "/v1/datasets"
    tags = ["datasets"]
    dependencies = {"datasets": team_service(DatasetService)}

    # The size limit is this server's setting, enforced while reading (read_capped).
    @post(
        "/",
        status_code=201,
        summary="Upload a dataset",
        request_max_body_size=None,
        operation_class=UploadOperation,
        responses=problem_responses(413, 415),
    )
    async def upload_dataset(
        self,
        *,
        request: Request[Any, Any, Any],
        datasets: NamedDependency[DatasetService],
        settings: AppSettings,
        audit: NamedDependency[AuditTrail],
        name: Annotated[
            str | None,
            QueryParameter(description="a name to show (default: from the hash)", max_length=200),
        ] = None,
        fmt: Annotated[
            DatasetFormat | None,
            QueryParameter(
                name="format",
                description="jsonl (prompt or messages per line) or sharegpt (conversations); "
                "default from Content-Type: application/json is sharegpt, "
                "application/x-ndjson or application/jsonl is jsonl",
            ),
        ] = None,
    ) -> Response[DatasetRead]:
        """The body is the file. JSONL: one `{"prompt": "...", "max_tokens"?: n}` or
        `{"messages": [{"role", "content"}, ...], "max_tokens"?: n}` a line. ShareGPT: a JSON
        array (or JSONL) of `{"conversations": [{"from": "human"|"gpt"|"system", "value"}]}`.
        201 with the new dataset; 200 with the existing one when your team already uploaded
        these exact bytes; 413 over INFERCOST_MAX_DATASET_BYTES; 422 naming the bad line."""
        content_type = request.headers.get("content-type", "").split(";")[0].strip().lower()
        resolved = fmt or CONTENT_FORMATS.get(content_type)
        if resolved is None:
            raise UnsupportedType(
                f"cannot tell the dataset's format from Content-Type '{content_type or 'none'}': "
                "send application/x-ndjson (JSONL) or application/json (ShareGPT), "
                "or add ?format=jsonl or ?format=sharegpt"
            )
        cap = settings.max_dataset_bytes
        refusal = TooLarge(
            f"the dataset is over this server's limit of {mib(cap)} ({cap} bytes, "
            "INFERCOST_MAX_DATASET_BYTES): split it or ask an admin to raise the limit"
        )
        data = await read_capped(request, cap, refusal)
        sha256 = hashlib.sha256(data).hexdigest()
        dataset, created = await datasets.upload(
            data, sha256, name=name, fmt=resolved, max_datasets=settings.max_datasets
        )
        if created:
            await audit.record(
                "dataset.create",
                "dataset",
                dataset.id,
                f"uploaded dataset '{dataset.name}'",
                {"name": dataset.name, "sha256": sha256},
            )
        return Response(dataset, status_code=201 if created else 200)

    @get("/", summary="List datasets")
    async def list_datasets(
        self, datasets: NamedDependency[DatasetService], limit: Limit = 50, offset: Offset = 0
    ) -> Page[DatasetRead]:
        """Your team's datasets, newest first."""
        items, total = await datasets.page(limit, offset)
        return Page(items=items, total=total, limit=limit, offset=offset)

    @get("/{dataset_id:uuid}", summary="Read a dataset")
    async def get_dataset(
        self, datasets: NamedDependency[DatasetService], dataset_id: PathId
    ) -> DatasetRead:
        """One dataset's description and content hash."""
        return await datasets.read(dataset_id)

    @delete("/{dataset_id:uuid}", summary="Delete a dataset")
    async def delete_dataset(
        self,
        datasets: NamedDependency[DatasetService],
        audit: NamedDependency[AuditTrail],
        dataset_id: PathId,
    ) -> None:
        """Remove a dataset (204). One that jobs used is kept for them but hidden: it is no
        longer listed and new jobs cannot name it."""
        dataset = await datasets.get(dataset_id)
        await datasets.delete(dataset_id)
        await audit.record(
            "dataset.delete", "dataset", dataset_id, f"deleted dataset '{dataset.name}'"
        )
