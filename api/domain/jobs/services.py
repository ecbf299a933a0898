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
from api.domain.jobs.schemas import JobCreate, JobListItem, JobRead, Progress
from api.domain.plans.schemas import Lengths, Load, Slo
from api.domain.runs.schemas import (
    CSV_COLUMNS,
    Cost,
    Efficiency,
    RunSummary,
    Sample,
    SamplePage,
    Sweep,
)
from api.queue import TaskQueue
from api.rows import from_row
from api.schemas import aware
from infercost.endpoints.preflight import refuse_if_failed
from infercost.endpoints.pricing import HourlyPrice, hourly_price
from infercost.endpoints.repository import EndpointRepository
from infercost.errors import Conflict, InvalidInput, NotFound
from infercost.figures.cost import hosted_run_cost, run_cost
from infercost.figures.metrics import distribution
from infercost.hardware.repository import HardwareRepository
from infercost.jobs.arrivals import DEFAULT_REQUESTS_PER_LEVEL, Arrival, planned_requests
from infercost.jobs.models import Job, RequestSample, Run
from infercost.jobs.plan import decode_plan
from infercost.jobs.repository import JobRepository
from infercost.jobs.sweep import (
    DEFAULT_MAX_CONCURRENCY,
    DEFAULT_MAX_ERROR_RATE,
    DEFAULT_RATE_LEVELS,
    DEFAULT_SWEEP_DURATION_S,
    sweep_planned_requests,
)
from infercost.planning.presets import get_preset
from infercost.planning.roofline import Hardware, ModelFacts
from infercost.webhooks.outbox import record_job_finished
from infercost.workload.fingerprint import workload_fingerprint

#: The most requests one level may schedule (the bound on requests_per_level, too).
MAX_REQUESTS_PER_LEVEL = 1_000_000


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
    "tpot_ms",
    "itl_ms",
    "e2e_ms",
    "queue_delay_ms",
    "per_user_tokens_per_s",
)


def run_summary(
    run: Run, price: HourlyPrice | None = None, physics: Efficiency | None = None
) -> RunSummary:
    """The CONTRACT.md run summary of a stored run, priced at `price` (default: the run's
    stored snapshot), with its roofline efficiency when known. The run is only read."""
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
        not_measured=stats.get("not_measured") or None,
        live=run.live or None,
    )


@dataclass(frozen=True, slots=True)
class PlannedJob:
    """A job checked and resolved by JobService.plan: the values its row stores. `workload`
    holds seed None when the job named none."""

    endpoint_id: uuid.UUID
    workload: dict[str, Any]
    load: dict[str, Any]
    slo: dict[str, Any] | None
    dataset_id: uuid.UUID | None
    workload_fingerprint: str
    progress_total: int


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


def _check_embeddings(data: JobCreate) -> None:
    """An embeddings endpoint's job: its requests have no tokens out, so an SLO may limit
    e2e_ms only, and a workload of chat sessions has nothing to send (422 otherwise)."""
    if data.slo is not None:
        for name in ("ttft_ms", "tpot_ms", "itl_ms"):
            if getattr(data.slo, name, None) is not None:
                raise InvalidInput(
                    f"slo.{name}",
                    "an openai-embeddings endpoint streams no tokens: limit e2e_ms instead",
                )
    if data.workload.sessions is not None:
        raise InvalidInput(
            "workload.sessions", "an openai-embeddings endpoint takes texts, not chat sessions"
        )


def _arrival(load: Load) -> Arrival:
    """The plan's arrival process: as given, else constant for a sweep (and a burst, whose
    requests are all due at 0), poisson otherwise."""
    return load.arrival or ("constant" if load.mode in ("sweep", "burst") else "poisson")


class JobService:
    """Job rules for one team: valid plans, known endpoints, enqueue after commit."""

    def __init__(
        self, session: AsyncSession, team_id: uuid.UUID, queue: TaskQueue, max_concurrency: int
    ) -> None:
        self.session = session
        self.jobs = JobRepository(session)
        self.endpoints = EndpointRepository(session)
        self.team_id = team_id
        self.queue = queue
        self.max_concurrency = max_concurrency

    def _check(self, data: JobCreate) -> None:
        # Length distributions check themselves as they are decoded (schemas.Lengths).
        self._check_load(data.load)
        if data.workload.sessions is not None and (
            data.load.mode != "concurrency" or data.load.shards > 1
        ):
            # A conversation's next turn waits for its answer: only closed-loop users, all
            # in one process (each shard would replay the same conversations), do that.
            raise InvalidInput(
                "workload.sessions",
                "multi-turn sessions need load.mode 'concurrency' and one shard",
            )
        self._check_prefix(data)

    @staticmethod
    def _check_prefix(data: JobCreate) -> None:
        """A shared prefix belongs to synthetic prompts and must leave room for their own part."""
        prefix, workload = data.workload.prefix, data.workload
        if prefix is None:
            return
        if workload.dataset_id is not None or workload.sessions is not None:
            raise InvalidInput(
                "workload.prefix",
                "shared prefixes apply to synthetic prompts: leave out dataset_id and sessions",
            )
        lengths = workload.input_tokens
        shortest = None if lengths is None else (lengths.min or lengths.mean)
        if shortest is not None and shortest <= prefix.tokens:
            raise InvalidInput(
                "workload.prefix.tokens",
                f"{prefix.tokens} tokens of prefix leave no room in prompts of {shortest:g} "
                "tokens: input_tokens is the whole prompt (prefix included), so make it longer "
                "than the prefix (its min, or its mean when no min is given)",
            )

    def _check_load(self, load: Load) -> None:
        """Rules across load fields that the schema alone cannot state."""
        if load.duration_s is not None and load.requests_per_level is not None:
            raise InvalidInput(
                "load.duration_s",
                "give load.requests_per_level or load.duration_s, not both",
            )
        if load.warmup_s is not None and load.warmup_requests:
            raise InvalidInput(
                "load.warmup_s",
                "give load.warmup_requests (a count) or load.warmup_s (seconds), not both",
            )
        self._check_sweep_fields(load)
        self._check_cap(load)
        levels = load.levels or []
        if load.mode == "burst":
            self._check_burst(load, levels)
            return
        if load.mode == "concurrency":
            fractional = [lvl for lvl in levels if not float(lvl).is_integer()]
            if fractional:
                raise InvalidInput(
                    "load.levels",
                    f"{fractional[0]:g} is not a whole number; a concurrency level is a number "
                    "of users (use mode 'rate' for requests per second)",
                )
            # The limit holds per worker process: shards split a level's users among them.
            too_high = [lvl for lvl in levels if -(-lvl // load.shards) > self.max_concurrency]
            if too_high:
                raise InvalidInput(
                    "load.levels",
                    f"{too_high[0]:g} exceeds this server's limit of {self.max_concurrency} "
                    "concurrent requests (INFERCOST_MAX_CONCURRENCY)"
                    + (f" per shard ({load.shards} shards)" if load.shards > 1 else "")
                    + "; lower the level or raise load.shards",
                )
            return
        if load.burstiness != 1.0 and load.arrival != "gamma":
            raise InvalidInput(
                "load.burstiness",
                f"applies only to arrival 'gamma' (this plan has '{_arrival(load)}'); "
                "set load.arrival to 'gamma' or leave burstiness out",
            )
        if load.duration_s is not None:
            for rate in levels:
                planned = planned_requests({"mode": "rate", "duration_s": load.duration_s}, rate)
                if planned > MAX_REQUESTS_PER_LEVEL:
                    raise InvalidInput(
                        "load.duration_s",
                        f"{load.duration_s:g} s at {rate:g} requests/s is about {planned:,} "
                        f"requests, over the limit of {MAX_REQUESTS_PER_LEVEL:,} per level",
                    )
                if load.warmup_requests >= planned:
                    raise InvalidInput(
                        "load.warmup_requests",
                        f"{load.warmup_requests} warm-up requests fill the whole "
                        f"{load.duration_s:g} s level at {rate:g} requests/s "
                        f"(about {planned} requests); lower it or raise load.duration_s",
                    )

    def _check_cap(self, load: Load) -> None:
        """load.max_concurrency caps a rate or burst level's requests in flight (a sweep's is
        its throughput users): at most this server's limit, held in one process."""
        cap = load.max_concurrency
        if cap is None or load.mode == "sweep":
            return
        if load.mode == "concurrency":
            raise InvalidInput(
                "load.max_concurrency",
                "a concurrency level's users are already its cap on requests in flight: leave "
                "max_concurrency out, or use mode 'rate' (requests/s) with max_concurrency",
            )
        if cap > self.max_concurrency:
            raise InvalidInput(
                "load.max_concurrency",
                f"{cap} exceeds this server's limit of {self.max_concurrency} concurrent "
                "requests (INFERCOST_MAX_CONCURRENCY); lower it",
            )
        if load.shards > 1:
            raise InvalidInput(
                "load.max_concurrency",
                "a cap on requests in flight is kept by one worker process: leave load.shards "
                "out (or 1), or leave max_concurrency out",
            )

    def _check_burst(self, load: Load, levels: list[float]) -> None:
        """A burst level is a count of requests sent at once: whole, within the per-level
        limit, and with nothing that assumes a schedule over time."""
        for name in ("requests_per_level", "duration_s", "warmup_s"):
            if getattr(load, name) is not None:
                raise InvalidInput(
                    f"load.{name}",
                    "a burst level is the number of requests sent at once (load.levels), all "
                    f"due at its start: leave {name} out",
                )
        if load.warmup_requests:
            raise InvalidInput(
                "load.warmup_requests",
                "a burst sends every request at once, so no request warms the server for the "
                "others: leave warmup_requests out (run a short concurrency job first to warm "
                "the server)",
            )
        if load.arrival not in (None, "constant") or load.burstiness != 1.0:
            raise InvalidInput(
                "load.arrival",
                "a burst has no arrival process (every request is due at once): leave arrival "
                "and burstiness out",
            )
        fractional = [lvl for lvl in levels if not float(lvl).is_integer()]
        if fractional:
            raise InvalidInput(
                "load.levels",
                f"{fractional[0]:g} is not a whole number; a burst level is a number of "
                "requests sent at once",
            )
        too_many = [lvl for lvl in levels if lvl > MAX_REQUESTS_PER_LEVEL]
        if too_many:
            raise InvalidInput(
                "load.levels",
                f"{too_many[0]:g} requests at once is over the limit of "
                f"{MAX_REQUESTS_PER_LEVEL:,} per level",
            )
        # All in flight at once unless capped; shards split a level's requests among them.
        in_flight = [
            lvl
            for lvl in levels
            if min(-(-lvl // load.shards), load.max_concurrency or lvl) > self.max_concurrency
        ]
        if in_flight:
            raise InvalidInput(
                "load.levels",
                f"{in_flight[0]:g} requests at once exceeds this server's limit of "
                f"{self.max_concurrency} concurrent requests (INFERCOST_MAX_CONCURRENCY)"
                + (f" per shard ({load.shards} shards)" if load.shards > 1 else "")
                + "; lower the level, raise load.shards or set load.max_concurrency",
            )

    def _check_sweep_fields(self, load: Load) -> None:
        """A sweep chooses its own levels; the sweep's own fields apply to nothing else."""
        if load.mode == "sweep":
            if load.levels is not None:
                raise InvalidInput(
                    "load.levels",
                    "a sweep chooses its own levels: leave load.levels out (load.rate_levels "
                    "sets how many request rates it measures, load.max_concurrency the users "
                    "of its throughput level)",
                )
            if load.max_concurrency is not None and load.max_concurrency > self.max_concurrency:
                raise InvalidInput(
                    "load.max_concurrency",
                    f"{load.max_concurrency} exceeds this server's limit of "
                    f"{self.max_concurrency} concurrent requests (INFERCOST_MAX_CONCURRENCY)",
                )
            return
        if load.levels is None:
            raise InvalidInput(
                "load.levels",
                f"mode '{load.mode}' needs levels ("
                + {"concurrency": "users", "burst": "requests sent at once"}.get(
                    load.mode, "requests/s"
                )
                + ", e.g. [1, 8, 32]); or use mode 'sweep' to have them chosen",
            )
        # max_concurrency also caps rate and burst levels (_check_cap).
        given = [
            name for name in ("rate_levels", "max_error_rate") if getattr(load, name) is not None
        ]
        if given:
            raise InvalidInput(
                f"load.{given[0]}",
                f"applies only to mode 'sweep' (this plan has '{load.mode}'); leave it out",
            )

    def _resolved(self, load: Load) -> Load:
        """The plan with the defaults that depend on its mode filled in: the arrival process,
        and a sweep's rate levels, users (capped by this server's limit) and error rate."""
        resolved = msgspec.structs.replace(load, arrival=_arrival(load))
        if load.mode != "sweep":
            return resolved
        return msgspec.structs.replace(
            resolved,
            rate_levels=load.rate_levels or DEFAULT_RATE_LEVELS,
            max_concurrency=load.max_concurrency
            or min(DEFAULT_MAX_CONCURRENCY, self.max_concurrency),
            max_error_rate=(
                DEFAULT_MAX_ERROR_RATE if load.max_error_rate is None else load.max_error_rate
            ),
        )

    @staticmethod
    def _stored_load(load: Load) -> dict[str, Any]:
        """The plan as the worker reads it: defaults resolved, whole-number levels as ints.
        A sweep that gives neither a count nor a duration runs DEFAULT_SWEEP_DURATION_S per
        level (a count lasts a second at high load)."""
        if load.mode == "sweep" and load.requests_per_level is None and load.duration_s is None:
            load = msgspec.structs.replace(load, duration_s=DEFAULT_SWEEP_DURATION_S)
        resolved = msgspec.structs.replace(
            load,
            levels=(
                None
                if load.levels is None
                else [int(x) if float(x).is_integer() else x for x in load.levels]
            ),
            # A burst level is its own count of requests.
            requests_per_level=(
                load.requests_per_level
                if load.requests_per_level is not None
                or load.duration_s is not None
                or load.mode == "burst"
                else DEFAULT_REQUESTS_PER_LEVEL
            ),
        )
        stored: dict[str, Any] = msgspec.to_builtins(resolved)
        return stored

    @staticmethod
    def _with_preset(data: JobCreate) -> JobCreate:
        """The job with its preset's lengths and SLO filled in where it gave none."""
        name = data.workload.preset
        if name is None:
            return data
        preset = get_preset(name)
        workload = data.workload
        if workload.dataset_id is None and workload.input_tokens is None:
            workload = msgspec.structs.replace(
                workload, input_tokens=msgspec.convert(dict(preset.input_tokens), Lengths)
            )
        if workload.output_tokens is None:
            workload = msgspec.structs.replace(
                workload, output_tokens=msgspec.convert(dict(preset.output_tokens), Lengths)
            )
        slo = data.slo if data.slo is not None else msgspec.convert(preset.default_slo(), Slo)
        return msgspec.structs.replace(data, workload=workload, slo=slo)

    async def plan(
        self, data: JobCreate, *, preflight: bool = True, field_prefix: str = ""
    ) -> PlannedJob:
        """Check a job and resolve its plan once, as its row stores it and a worker decodes
        it (infercost/jobs/plan.py): the preset, the plan's rules, the endpoint (its last
        preflight check too, with `preflight`), the dataset, every default. The seed stays
        None when the job names none: each job (or scheduled slot) draws its own.
        `field_prefix` goes before field names in errors ("job." inside a schedule)."""
        data = self._with_preset(data)
        self._check(data)
        endpoint = await self.endpoints.get(self.team_id, data.endpoint_id)
        if endpoint is None:
            raise InvalidInput(
                f"{field_prefix}endpoint_id",
                f"no endpoint {data.endpoint_id} in your team: GET /v1/endpoints",
            )
        if preflight:
            refuse_if_failed(endpoint.id, endpoint.name, endpoint.check, endpoint.checked_at)
        if endpoint.api == "openai-embeddings":
            _check_embeddings(data)
        dataset = await workload_dataset(self.session, self.team_id, data.workload, endpoint.api)
        load = self._stored_load(self._resolved(data.load))
        workload: dict[str, Any] = msgspec.to_builtins(data.workload)
        slo: dict[str, Any] | None = msgspec.to_builtins(data.slo) if data.slo else None
        # What a worker will decode, checked now: every key resolved (a field the plan does
        # not know, or a default left unresolved, fails here and not in the worker).
        decode_plan({**workload, "seed": workload["seed"] or 0}, load, slo, strict=True)
        return PlannedJob(
            endpoint_id=data.endpoint_id,
            workload=workload,
            load=load,
            slo=slo,
            dataset_id=None if dataset is None else dataset.id,
            workload_fingerprint=workload_fingerprint(
                # Embeddings are their own kind: the same texts embedded are another
                # workload than generated from, so comparisons by fingerprint never mix.
                # The seed never enters it.
                workload
                if endpoint.api != "openai-embeddings"
                else {**workload, "api": endpoint.api},
                None if dataset is None else dataset.content_sha256,
            ),
            progress_total=(
                sweep_planned_requests(load)
                if load["mode"] == "sweep"
                else sum(planned_requests(load, lvl) for lvl in load["levels"])
            ),
        )

    async def submit(self, data: JobCreate, idempotency_key: str | None) -> tuple[Job, bool]:
        """Store a queued job and enqueue it once committed; the bool says whether it is new."""
        planned = await self.plan(data, preflight=not data.force)
        workload = planned.workload
        seed_given = workload["seed"] is not None
        if not seed_given:
            # A fresh seed per job: identical prompts would let the engine's prefix cache
            # answer a rerun (README, "Prompt caches"); stored, so the job can be repeated.
            workload = {**workload, "seed": secrets.randbits(32)}
        plan = {
            "endpoint_id": planned.endpoint_id,
            "workload": workload,
            "load": planned.load,
            "slo": planned.slo,
        }
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
        elif any(_replayed(getattr(job, name), value, seed_given) for name, value in plan.items()):
            raise Conflict(
                f"Idempotency-Key '{idempotency_key}' was already used for job {job.id} with a "
                "different body: send a new key to submit a different job"
            )
        return job, created

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
        sweep = job.load.get("mode") == "sweep"
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

        def summary(run: Run, price: HourlyPrice | None) -> RunSummary:
            known = physics[run.endpoint_id]
            return run_summary(run, price, run_physics(run, *known) if known else None)

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

    async def samples(
        self, run_id: uuid.UUID, *, after: int, limit: int, warmup: bool | None
    ) -> SamplePage:
        """One page of a run's raw samples."""
        await self.run(run_id)
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
