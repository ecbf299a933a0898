"""Import rules for one team: a result file of another tool becomes a job marked imported,
under an endpoint marked external, with one run per benchmark of the file; each run's
`source` names the tool and whose definitions its figures follow. All in the request's one
transaction: a file that cannot be read leaves nothing behind."""

from __future__ import annotations

import asyncio
import uuid
from dataclasses import dataclass
from typing import Any

from sqlalchemy.ext.asyncio import AsyncSession

from infercost.db.base import utcnow
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.errors import Conflict, InvalidInput
from infercost.figures.metrics import percentile_columns
from infercost.hardware.repository import HardwareRepository
from infercost.imports.parse import (
    IMPORT_FINGERPRINTS,
    ImportedFile,
    ImportedRun,
    ImportFormat,
    read_result,
)
from infercost.jobs.deployments import deployment_of
from infercost.jobs.models import Run
from infercost.jobs.repository import SAMPLE_COLUMNS, JobRepository

#: Where an external endpoint "listens": nowhere; the scheme says why.
EXTERNAL_BASE_URL = "external://{tool}"


@dataclass(frozen=True, slots=True)
class ImportOptions:
    """What the request says beside the file: the endpoint record's name and the deployment
    facts the file may lack (model, engine, hardware, GPU count) or the price it never has."""

    name: str | None = None
    model: str | None = None
    engine: str | None = None
    hardware: str | None = None
    gpu_count: int = 1
    usd_per_hour: float | None = None


def _sample_rows(run_id: uuid.UUID, run: ImportedRun) -> list[tuple[Any, ...]]:
    """The file's per-request records as request_samples rows (SAMPLE_COLUMNS order)."""
    rows = []
    for seq, s in enumerate(run.samples):
        chunks = s.chunk_times_ms
        tpot = (
            (chunks[-1] - chunks[0]) / (s.n_out - 1)
            if s.error is None and s.n_out >= 2 and len(chunks) >= 2
            else None
        )
        values: dict[str, Any] = dict.fromkeys(SAMPLE_COLUMNS)
        values.update(
            run_id=run_id,
            seq=seq,
            warmup=s.warmup,
            t_sched=s.t_send,
            t_send=s.t_send,
            ttft_ms=s.ttft_ms,
            tpot_ms=tpot,
            e2e_ms=s.e2e_ms,
            n_in=s.n_in,
            n_out=s.n_out,
            count_source="imported",
            status=s.status if s.status is not None else (200 if s.error is None else None),
            error_class=s.error_class,
            error=s.error,
            chunk_times_ms=chunks,
        )
        rows.append(tuple(values[c] for c in SAMPLE_COLUMNS))
    return rows


class ImportService:
    """Reads a file and stores it as runs of a job of an external endpoint of the team."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id
        self.endpoints = EndpointRepository(session)
        self.jobs = JobRepository(session)
        self.hardware = HardwareRepository(session)

    async def _endpoint(self, result: ImportedFile, options: ImportOptions) -> Endpoint:
        """The external endpoint the runs go under: the team's one of this name, or a new
        one described by the request and the file."""
        model = options.model or result.model
        if model is None:
            raise InvalidInput(
                "model",
                f"the {result.tool} file names no model: pass model= with the name the "
                "deployment served",
            )
        name = (options.name or f"{result.tool}: {model}")[:100]
        hardware_id = None
        if options.hardware is not None:
            hw = await self.hardware.by_name(self.team_id, options.hardware)
            if hw is None:
                raise InvalidInput(
                    "hardware",
                    f"unknown hardware '{options.hardware}': GET /v1/hardware lists the catalog",
                )
            hardware_id = hw.id
        existing = await self.endpoints.by_name(self.team_id, name)
        if existing is not None:
            if not existing.external:
                raise Conflict(
                    f"an endpoint named '{name}' is a deployment registered to be benchmarked; "
                    "imported results go under an external endpoint of their own: pass "
                    "another name="
                )
            other_hardware = hardware_id is not None and existing.hardware_id != hardware_id
            if existing.model != model or other_hardware:
                measured = model if existing.model != model else "other hardware"
                raise Conflict(
                    f"endpoint '{name}' holds imported results of {existing.model} on its own "
                    f"hardware, and this file measured {measured}: pass another name= (one "
                    "external endpoint per deployment)"
                )
            return existing
        endpoint = Endpoint(
            team_id=self.team_id,
            name=name,
            base_url=EXTERNAL_BASE_URL.format(tool=result.tool),
            api="openai-chat",
            model=model,
            engine=options.engine or result.engine,
            hardware_id=hardware_id,
            gpu_count=options.gpu_count,
            usd_per_hour=options.usd_per_hour,
            external=True,
            tags={"imported_from": result.tool},
        )
        return await self.endpoints.add(endpoint)

    async def import_file(
        self, fmt: ImportFormat, body: bytes, options: ImportOptions
    ) -> uuid.UUID:
        """Store the file as a job of runs; returns the job's id. 422 (nothing stored) for a
        file that is not what `fmt` says, naming what is wrong."""
        # Parsing is pure CPU over the whole body: keep it off the event loop.
        result = await asyncio.to_thread(read_result, fmt, body)
        endpoint = await self._endpoint(result, options)
        deployment = await deployment_of(self.session, endpoint)
        now = utcnow()
        starts = [r.started_at for r in result.runs if r.started_at is not None]
        ends = [r.finished_at for r in result.runs if r.finished_at is not None]
        total = sum(r.requests_total for r in result.runs)
        job, _ = await self.jobs.add_job(
            {
                "team_id": self.team_id,
                "endpoint_id": endpoint.id,
                "status": "succeeded",
                "workload": {
                    "imported": {
                        "tool": result.tool,
                        "tool_version": result.tool_version,
                        "file": result.kind,
                    }
                },
                "load": {
                    "mode": "imported",
                    "levels": [{"mode": r.mode, "level": r.level} for r in result.runs],
                },
                "slo": None,
                "idempotency_key": None,
                "progress_done": total,
                "progress_total": total,
                "started_at": min(starts) if starts else now,
                "finished_at": max(ends) if ends else now,
                "imported": True,
                "workload_fingerprint": IMPORT_FINGERPRINTS[result.tool],
            }
        )
        price_note = (
            None
            if options.usd_per_hour is not None
            else "imported without a price: import again with usd_per_hour= to cost it"
        )
        for index, imported in enumerate(result.runs):
            stats: dict[str, Any] = dict(imported.stats)
            stats["errors"] = imported.errors
            run = Run(
                team_id=self.team_id,
                job_id=job.id,
                endpoint_id=endpoint.id,
                deployment_id=deployment,
                level_index=index,
                level=imported.level,
                mode=imported.mode,
                status="succeeded",
                started_at=imported.started_at or now,
                finished_at=imported.finished_at or imported.started_at or now,
                usd_per_hour=options.usd_per_hour,
                price_note=price_note,
                requests_total=imported.requests_total,
                requests_succeeded=imported.requests_succeeded,
                requests_failed=imported.requests_failed,
                duration_s=imported.duration_s,
                count_source="imported",
                output_tokens_per_s=imported.output_tokens_per_s,
                input_tokens_per_s=imported.input_tokens_per_s,
                total_tokens_per_s=imported.total_tokens_per_s,
                requests_per_s=imported.requests_per_s,
                error_rate=(
                    imported.requests_failed / imported.requests_total
                    if imported.requests_total
                    else None
                ),
                stats=stats,
                source=result.source(imported),
                source_tool=result.tool,
                workload_fingerprint=IMPORT_FINGERPRINTS[result.tool],
                **percentile_columns(stats),
            )
            await self.jobs.add_run(run)
            await self.jobs.copy_samples(_sample_rows(run.id, imported))
        return job.id
