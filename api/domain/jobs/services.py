"""Submitting, reading and cancelling jobs; reading runs and their raw samples."""

from __future__ import annotations

import secrets
import uuid
from collections.abc import AsyncIterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import partial
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from api.csv import csv_cell, stream_csv
from api.db import after_commit
from api.domain.datasets.services import workload_dataset
from api.domain.estimates.evidence import (
    capacity_block,
    model_facts,
    replica_hardware,
    run_physics,
)
from api.domain.jobs.eta import queue_estimate
from api.domain.jobs.schemas import (
    JobCreate,
    JobListItem,
    JobRead,
    JobSubmitted,
    PlanWarning,
    Progress,
)
from api.domain.jobs.twins import Plain, PlainTwins
from api.domain.runs.schemas import (
    CSV_COLUMNS,
    Cost,
    Efficiency,
    RunSummary,
    Sample,
    SamplePage,
    Sweep,
)
from api.domain.traffic.services import trace_plan
from api.queue import TaskQueue
from api.rows import from_row
from api.schemas import aware
from infercost.datasets.repository import DatasetRepository
from infercost.endpoints.preflight import refuse_if_failed
from infercost.endpoints.pricing import HourlyPrice, hourly_price, rfc3339
from infercost.endpoints.repository import EndpointRepository
from infercost.errors import Conflict, Gone, InvalidInput, NotFound
from infercost.figures.cost import hosted_run_cost, per_million, run_cost
from infercost.figures.metrics import distribution
from infercost.hardware.repository import HardwareRepository
from infercost.jobs.foresight import foreseen_inadequacy
from infercost.jobs.models import Job, RequestSample, Run
from infercost.jobs.plan import Plan, read_load, resolve_plan
from infercost.jobs.repository import JobRepository
from infercost.jobs.rules import (
    ServerLimits,
    check_features_for_api,
    check_features_for_engine,
    check_for_embeddings,
    check_plan,
    grammar_bound,
)
from infercost.planning.presets import get_preset
from infercost.planning.roofline import Hardware, ModelFacts
from infercost.webhooks.outbox import record_job_finished
from infercost.workload.fingerprint import job_fingerprint


@dataclass(frozen=True, slots=True)
class Repricing:
    """How a read prices its runs: at `price_at` from the price book, at an explicit
    `usd_per_hour`, or (neither) with the snapshot stored when each run was measured."""

    price_at: datetime | None = None
    usd_per_hour: float | None = None

    def __post_init__(self) -> None:
        if self.price_at is not None and self.usd_per_hour is not None:
            raise InvalidInput(
                "price_at",
                "give price_at (the price book at that time) or usd_per_hour (an explicit "
                "price), not both",
            )
        aware("price_at", self.price_at)


def stored_price(run: Run) -> HourlyPrice:
    """The price snapshot the worker stored as the run started; never changed afterwards."""
    if run.usd_per_million_input_tokens is not None:
        per_token = (run.usd_per_million_input_tokens, run.usd_per_million_output_tokens or 0.0)
        return HourlyPrice(None, "run", run.started_at, per_token=per_token)
    priced_at = run.started_at if run.usd_per_hour is not None else None
    return HourlyPrice(run.usd_per_hour, "run", priced_at, run.price_note)


#: The distributions of a run summary, kept by name in runs.stats.
_DISTRIBUTIONS = (
    "ttft_ms",
    "ttfo_ms",
    "ttfr_ms",
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "queue_delay_ms",
    "per_user_tokens_per_s",
)


def _model_figures(
    blocks: list[dict[str, Any]] | None, usd_per_hour: float | None
) -> list[dict[str, Any]] | None:
    """A run's per-model figures (workload.models), each with its part of the cost: the
    run's USD per hour split by the tokens each model used."""
    if not blocks:
        return None
    figures = []
    for block in blocks:
        share = block.get("token_share")
        hourly = None if usd_per_hour is None or share is None else usd_per_hour * share
        out, inp = block.get("output_tokens_per_s"), block.get("input_tokens_per_s")
        total = None if out is None or inp is None else out + inp
        cost = {
            "usd_per_hour": hourly,
            "per_million_output_tokens_usd": per_million(hourly, out),
            "per_million_total_tokens_usd": per_million(hourly, total),
        }
        figures.append({**block, "cost": cost})
    return figures


def _structured(block: dict[str, Any] | None, plain: Plain | None) -> dict[str, Any] | None:
    """The run's structured block with its plain twin (or why none) where one was sought."""
    if not block:
        return None
    if plain is None:
        return block
    return {**block, "plain": plain.twin, "plain_reason": plain.reason}


def run_summary(
    run: Run,
    price: HourlyPrice | None = None,
    physics: Efficiency | None = None,
    plain: Plain | None = None,
) -> RunSummary:
    """The run summary (docs/jobs.md) of a stored run, priced at `price` (default: the run's
    stored snapshot), with its roofline efficiency when known and, for a structured run, its
    plain twin as `plain` found it (api/domain/jobs/twins.py). The run is only read."""
    stats: dict[str, Any] = run.stats or {}
    empty = distribution([])
    price = price or stored_price(run)
    if price.per_token is not None:
        cost = hosted_run_cost(
            *price.per_token,
            input_tokens_per_s=run.input_tokens_per_s,
            output_tokens_per_s=run.output_tokens_per_s,
            total_tokens_per_s=run.total_tokens_per_s,
            requests_per_s=run.requests_per_s,
            goodput_output_tokens_per_s=run.goodput_output_tokens_per_s,
            answer_tokens_per_s=run.answer_tokens_per_s,
        )
    else:
        cost = run_cost(
            price.usd_per_hour,
            output_tokens_per_s=run.output_tokens_per_s,
            total_tokens_per_s=run.total_tokens_per_s,
            requests_per_s=run.requests_per_s,
            goodput_output_tokens_per_s=run.goodput_output_tokens_per_s,
            reason=price.note,
            input_tokens_per_s=run.input_tokens_per_s,
            answer_tokens_per_s=run.answer_tokens_per_s,
        )
    # The run's columns of the same name (its figures, and the JSONB blocks that become
    # their structs) are converted by msgspec; given here is only what the row keeps under
    # other names or inside `stats`, and the blocks an empty object leaves out.
    return from_row(
        run,
        RunSummary,
        requests={
            "total": run.requests_total,
            "succeeded": run.requests_succeeded,
            "failed": run.requests_failed,
            "errors": stats.get("errors") or {},
        },
        **{name: stats.get(name) or empty for name in _DISTRIBUTIONS},
        client=stats.get("client") or None,
        telemetry=run.telemetry or {},
        cost=msgspec.structs.replace(
            msgspec.convert(cost, Cost, from_attributes=True),
            priced_at=price.priced_at,
            price_source=price.source,
        ),
        efficiency=physics,
        prompt_tokenizer=stats.get("prompt_tokenizer") or None,
        server_timings=run.server_timings or None,
        cache=run.cache or None,
        adequacy=run.adequacy or None,
        concurrency_cap=run.concurrency_cap or None,
        reasoning=run.reasoning or None,
        models=_model_figures(run.models, cost.usd_per_hour),
        tools=run.tools or None,
        structured=_structured(run.structured, plain),
        image=run.image or None,
        replay=run.replay or None,
        not_measured=stats.get("not_measured") or None,
        live=run.live or None,
    )


def pruned_note(run: Run) -> str:
    """What a read of a pruned run's samples says instead of them."""
    assert run.samples_pruned_at is not None
    return (
        f"the raw samples of run {run.id} were deleted at {rfc3339(run.samples_pruned_at)} by "
        "the server's retention (INFERCOST_SAMPLE_RETENTION_DAYS); its figures stay at "
        f"GET /v1/runs/{run.id}"
    )


@dataclass(frozen=True, slots=True)
class PlannedJob:
    """A job checked and resolved by JobService.plan: its plan and the other values its row
    stores. `seed_given`: whether the job named its seed (else the plan holds one drawn for
    it, which a schedule's template leaves out)."""

    endpoint_id: uuid.UUID
    plan: Plan
    seed_given: bool
    dataset_id: uuid.UUID | None
    workload_fingerprint: str
    progress_total: int
    #: Adequacy reasons the plan decides before it runs (infercost/jobs/foresight.py).
    warnings: list[PlanWarning]


def _progress(job: Job) -> Progress:
    return Progress(done=job.progress_done, total=job.progress_total)


def job_list_item(job: Job) -> JobListItem:
    """A job without its runs."""
    return from_row(job, JobListItem, progress=_progress(job))


def sample_read(sample: RequestSample) -> Sample:
    """The response shape of one stored request."""
    return msgspec.convert(sample, Sample, from_attributes=True)


def _replayed(stored: Any, sent: Any, seed_given: bool) -> bool:
    """Whether a field of a job replayed under its Idempotency-Key differs from what was
    stored; the seed drawn for a job that named none is not part of what was sent."""
    if not seed_given and isinstance(stored, dict) and "seed" in stored:
        stored = {k: v for k, v in stored.items() if k != "seed"}
        sent = {k: v for k, v in sent.items() if k != "seed"}
    return bool(stored != sent)


class JobService:
    """Job rules for one team: valid plans, known endpoints, enqueue after commit."""

    def __init__(
        self, session: AsyncSession, team_id: uuid.UUID, queue: TaskQueue, limits: ServerLimits
    ) -> None:
        self.session = session
        self.jobs = JobRepository(session)
        self.endpoints = EndpointRepository(session)
        self.team_id = team_id
        self.queue = queue
        self.limits = limits

    async def plan(
        self, data: JobCreate, *, preflight: bool = True, field_prefix: str = ""
    ) -> PlannedJob:
        """Check a job and resolve its plan once (infercost/jobs/plan.py): the preset and every
        default, the plan's rules and this server's caps (infercost/jobs/rules.py), the
        endpoint (its last preflight check too, with `preflight`) and the rules that depend on
        it, the dataset. A job that names no seed gets a fresh one: each job (or scheduled
        slot) draws its own. `field_prefix` goes before field names in errors ("job." inside
        a schedule)."""
        plan = resolve_plan(
            msgspec.to_builtins(data.workload),
            msgspec.to_builtins(data.load),
            None if data.slo is None else msgspec.to_builtins(data.slo),
            preset=None if data.workload.preset is None else get_preset(data.workload.preset),
            max_concurrency=self.limits.max_concurrency,
            seed=secrets.randbits(32),
        )
        traffic = None
        if plan.load.mode == "trace" and plan.load.traffic_id is not None:
            plan, traffic = await trace_plan(
                self.session,
                self.team_id,
                plan,
                requests_given=data.load.requests_per_level is not None,
                prefix=field_prefix,
            )
        check_plan(plan, self.limits)
        endpoint = await self.endpoints.get(self.team_id, data.endpoint_id)
        if endpoint is None:
            raise InvalidInput(
                f"{field_prefix}endpoint_id",
                f"no endpoint {data.endpoint_id} in your team: GET /v1/endpoints",
            )
        if endpoint.external:
            raise InvalidInput(
                f"{field_prefix}endpoint_id",
                f"endpoint '{endpoint.name}' holds results imported from another tool "
                "(POST /v1/imports) and has no server to send requests to: register the "
                "deployment itself with POST /v1/endpoints and benchmark that",
            )
        if preflight:
            refuse_if_failed(endpoint.id, endpoint.name, endpoint.check, endpoint.checked_at)
        if endpoint.api == "openai-embeddings":
            check_for_embeddings(plan)
        check_features_for_api(plan, endpoint.api)
        dataset = (
            None
            if traffic is not None
            else await workload_dataset(self.session, self.team_id, plan.workload, endpoint.api)
        )
        by_items: list[str] = []
        if dataset is not None and grammar_bound(endpoint.engine, plan):
            fields = await DatasetRepository(self.session).items_asking(
                self.team_id, dataset.id, ("response_format", "tools")
            )
            by_items = ["structured" if f == "response_format" else f for f in fields]
        check_features_for_engine(plan, endpoint.engine, by_items)
        encoded = plan.encode()
        return PlannedJob(
            endpoint_id=data.endpoint_id,
            plan=plan,
            seed_given=data.workload.seed is not None,
            dataset_id=None if dataset is None else dataset.id,
            # The seed never enters it; what else does is infercost/workload/fingerprint.py's.
            workload_fingerprint=job_fingerprint(
                encoded["workload"],
                api=endpoint.api,
                dataset_sha256=None if dataset is None else dataset.content_sha256,
                trace_sha256=None if traffic is None else traffic.content_sha256,
                load=encoded["load"],
            ),
            progress_total=plan.load.size().planned,
            warnings=[
                PlanWarning(code=f.code, levels=list(f.levels), detail=f.detail)
                for f in foreseen_inadequacy(plan.load, scraped=bool(endpoint.metrics_urls))
            ],
        )

    async def submit(
        self, data: JobCreate, idempotency_key: str | None
    ) -> tuple[Job, bool, list[PlanWarning]]:
        """Store a queued job and enqueue it once committed; the bool says whether it is new,
        the list what its plan already decides about its evidence. With `strict`, such a plan
        is refused instead (422)."""
        planned = await self.plan(data, preflight=not data.force)
        if data.strict and planned.warnings:
            reasons = "; ".join(f"{w.code}: {w.detail}" for w in planned.warnings)
            raise InvalidInput(
                "load",
                f"this plan cannot give adequate evidence (strict: true refuses it): {reasons}",
            )
        # Stored with its seed (drawn for it when it named none: identical prompts would let
        # the engine's prefix cache answer a rerun, README "Prompt caches"), so the job can
        # be repeated.
        plan = {"endpoint_id": planned.endpoint_id, **planned.plan.encode()}
        job, created = await self.jobs.add_job(
            {
                **plan,
                "team_id": self.team_id,
                "status": "queued",
                "idempotency_key": idempotency_key,
                "dataset_id": planned.dataset_id,
                "workload_fingerprint": planned.workload_fingerprint,
                "progress_total": planned.progress_total,
            }
        )
        if created:
            # The task's outbox row commits with the job (api/queue.py): a broker that is
            # down, or loses the message, delays the job but never strands it.
            self.queue.stage_job(self.session, job.id)
            after_commit(self.session, partial(self.queue.enqueue_job, job.id))
        elif any(
            _replayed(getattr(job, name), value, planned.seed_given) for name, value in plan.items()
        ):
            raise Conflict(
                f"Idempotency-Key '{idempotency_key}' was already used for job {job.id} with a "
                "different body: send a new key to submit a different job"
            )
        return job, created, planned.warnings

    async def submitted(self, job: Job, warnings: list[PlanWarning]) -> JobSubmitted:
        """The 202 body: the job as read, with its plan's warnings."""
        read = await self.read(job)
        return JobSubmitted(**msgspec.structs.asdict(read), warnings=warnings)

    async def get(self, job_id: uuid.UUID) -> Job:
        """The team's job, or 404."""
        job = await self.jobs.get_job(self.team_id, job_id)
        if job is None:
            raise NotFound(f"no job {job_id}: GET /v1/jobs lists yours")
        return job

    async def read(self, job: Job, pricing: Repricing | None = None) -> JobRead:
        """The job with its runs, priced as `pricing` asks (default: as measured), and its
        capacity at the SLO over the levels measured so far."""
        runs = await self.jobs.runs_of_jobs(self.team_id, [job.id])
        summaries = await self.summaries(runs, pricing)
        by_id = {s.id: s for s in summaries}
        load = read_load(job.load)
        sweep = load is not None and load.mode == "sweep"
        capacity = (
            capacity_block(
                runs, job.slo, lambda run_id: by_id[run_id].cost.usd_per_hour, sweep=sweep
            )
            if runs
            else None
        )
        return JobRead(
            **msgspec.structs.asdict(job_list_item(job)),
            workload=job.workload,
            slo=job.slo,
            runs=summaries,
            capacity_at_slo=capacity,
            workload_fingerprint=job.workload_fingerprint,
            sweep=msgspec.convert(job.sweep, Sweep) if job.sweep else None,
            queue=await queue_estimate(self.jobs, job, datetime.now(UTC)),
            imported=job.imported,
        )

    async def _physics(self, endpoint_id: uuid.UUID) -> tuple[ModelFacts, Hardware] | None:
        """The model facts and replica hardware of a run's endpoint, when both are known."""
        # A run's endpoint is its team's (and stays, soft-deleted, for its history).
        endpoint = await self.endpoints.get_kept(self.team_id, endpoint_id)
        facts = None if endpoint is None else model_facts(endpoint)
        if endpoint is None or facts is None or endpoint.hardware_id is None:
            return None
        row = await HardwareRepository(self.session).get(self.team_id, endpoint.hardware_id)
        if row is None:
            return None
        return facts, replica_hardware(row, endpoint.precision, endpoint.gpu_count)

    async def summaries(
        self, runs: Sequence[Run], pricing: Repricing | None = None
    ) -> list[RunSummary]:
        """Run summaries priced as `pricing` asks; the stored runs are not changed."""
        physics: dict[uuid.UUID, tuple[ModelFacts, Hardware] | None] = {}
        for endpoint_id in {r.endpoint_id for r in runs}:
            physics[endpoint_id] = await self._physics(endpoint_id)
        # All of the runs' plain twins in a few queries, not a few per run.
        plain = await PlainTwins(self.session, self.team_id).of(runs)

        def summary(run: Run, price: HourlyPrice | None) -> RunSummary:
            known = physics[run.endpoint_id]
            efficiency = run_physics(run, *known) if known else None
            return run_summary(run, price, efficiency, plain.get(run.id))

        if pricing is None or (pricing.price_at is None and pricing.usd_per_hour is None):
            return [summary(r, None) for r in runs]
        if pricing.usd_per_hour is not None:
            explicit = HourlyPrice(pricing.usd_per_hour, "explicit", None)
            return [summary(r, explicit) for r in runs]
        assert pricing.price_at is not None
        by_endpoint: dict[uuid.UUID, HourlyPrice] = {}
        for run in runs:
            if run.endpoint_id not in by_endpoint:
                endpoint = await self.endpoints.get_kept(self.team_id, run.endpoint_id)
                if endpoint is None:
                    raise NotFound(f"the endpoint of run {run.id} no longer exists")
                by_endpoint[run.endpoint_id] = await hourly_price(
                    self.session, endpoint, pricing.price_at
                )
        return [summary(r, by_endpoint[r.endpoint_id]) for r in runs]

    async def page(self, limit: int, offset: int, status: str | None) -> tuple[list[Job], int]:
        """A page of the team's jobs."""
        return await self.jobs.page_jobs(self.team_id, limit=limit, offset=offset, status=status)

    async def cancel(self, job_id: uuid.UUID) -> Job:
        """Stop a queued or running job; finished jobs cannot be cancelled."""
        job = await self.get(job_id)
        cancelled = await self.jobs.cancel(self.team_id, job_id)
        if cancelled is None:
            raise Conflict(f"job {job_id} is already {job.status}")
        # Announced with the cancel itself: the worker only sees the job stop and finishes
        # nothing (JobRepository.finish finds it no longer running).
        await record_job_finished(self.session, cancelled.id)
        return cancelled

    async def delete(self, job_id: uuid.UUID) -> Job:
        """Remove an ended job with its runs and raw samples; a queued or running one is
        refused (409), since a worker may still be writing to it. Returns the job as it was."""
        job = await self.get(job_id)
        if not await self.jobs.delete_finished(self.team_id, job_id):
            raise Conflict(
                f"job {job_id} is {job.status}: cancel it first (POST /v1/jobs/{job_id}/cancel, "
                f"or `infercost jobs cancel {job_id}`), then delete it"
            )
        return job

    async def runs(self, job_id: uuid.UUID, pricing: Repricing | None = None) -> list[RunSummary]:
        """Summaries of the job's runs, in level order, priced as `pricing` asks."""
        await self.get(job_id)
        return await self.summaries(await self.jobs.runs_of_jobs(self.team_id, [job_id]), pricing)

    async def summary(self, run_id: uuid.UUID, pricing: Repricing | None = None) -> RunSummary:
        """One run's summary, priced as `pricing` asks, or 404."""
        return (await self.summaries([await self.run(run_id)], pricing))[0]

    async def run(self, run_id: uuid.UUID) -> Run:
        """The team's run, or 404."""
        run = await self.jobs.get_run(self.team_id, run_id)
        if run is None:
            raise NotFound(f"no run {run_id}")
        return run

    async def run_with_samples(self, run_id: uuid.UUID) -> Run:
        """The team's run, or 404; 410 when retention deleted its raw samples."""
        run = await self.run(run_id)
        if run.samples_pruned_at is not None:
            raise Gone(pruned_note(run))
        return run

    async def samples(
        self, run_id: uuid.UUID, *, after: int, limit: int, warmup: bool | None
    ) -> SamplePage:
        """One page of a run's raw samples; none, and a note saying why, once retention
        deleted them."""
        run = await self.run(run_id)
        if run.samples_pruned_at is not None:
            return SamplePage(
                items=[],
                next_after=None,
                samples_pruned_at=run.samples_pruned_at,
                note=pruned_note(run),
            )
        rows = await self.jobs.samples_page(run_id, after_seq=after, limit=limit, warmup=warmup)
        return SamplePage(
            items=[sample_read(s) for s in rows],
            next_after=rows[-1].seq if len(rows) == limit else None,
        )


async def samples_csv(
    sessionmaker: async_sessionmaker[AsyncSession], run_id: uuid.UUID, warmup: bool | None
) -> AsyncIterator[str]:
    """A run's samples as CSV text, streamed in batches over a session of its own.

    The response outlives the request's session, so the export opens its own; the caller
    checks the team's access first.
    """
    async with sessionmaker() as session:
        rows = (
            [csv_cell(getattr(sample, c)) for c in CSV_COLUMNS]
            async for sample in JobRepository(session).stream_samples(run_id, warmup=warmup)
        )
        async for chunk in stream_csv(CSV_COLUMNS, rows, batch=1000):
            yield chunk
