"""A job's levels, one after the other: pin the endpoint, measure, summarise, store.

`JobRunner` holds one job on a worker: its plan (decoded once, infercost/jobs/plan.py), its
progress, its request source (workers/runner/sources.py) and its recorder
(workers/runner/recorder.py). `measure_level` runs one level in a given mode and load plan
(a sweep passes each level's own) on this process or on K shards; `cool_down` pauses
between levels. `run_job` and `run_shard` are the bodies of the Celery tasks.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
import uuid
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import msgspec

from infercost.db.base import utcnow
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.figures.metrics import RequestTiming, RunFigures, summarize
from infercost.figures.replay import replay_block
from infercost.jobs.arrivals import level_cap
from infercost.jobs.models import Job, Run
from infercost.jobs.plan import DEFAULT_TRACE_INTERVAL_S, LoadPlan, Mode, Plan, decode_plan
from infercost.jobs.repository import JobRepository
from infercost.jobs.samples import sample_rows
from infercost.net.outbound import OutboundRefused, Policy, pinned
from infercost.net.redact import CREDENTIALS, Redactor
from infercost.security import CredentialError
from infercost.shards.auto import (
    DEFAULT_CPU_US_PER_EVENT,
    Budget,
    Decision,
    decide,
    expected_events,
)
from infercost.shards.store import ShardRepository
from workers.finish import finish_job, record_run_changes
from workers.lease import Lease, LeaseLost, LevelNotStored, heartbeat_every_s
from workers.live import LiveLevel, sharded_figures
from workers.loadgen.embeddings import EMBEDDINGS_API
from workers.loadgen.stream import Target
from workers.progress import PROGRESS_INTERVAL_S, MeasuredLevel, Progress
from workers.runner.driver import DrivenLevel, drive_level, plan_level
from workers.runner.recorder import Recorder, failure_message
from workers.runner.shards import (
    Coordinated,
    ShardSlot,
    ShardStopped,
    coordinate,
    free_workers,
    level_shards,
    split_plan,
)
from workers.runner.sources import RequestSource, request_source
from workers.runner.sweep import run_sweep
from workers.runtime import Runtime
from workers.telemetry import LevelTelemetry

log = logging.getLogger("infercost.worker")


@dataclass(slots=True)
class ShardPart:
    """What this process's shard of a level leaves the coordinator: shard 0 scraped the
    telemetry (with the agreed instant as its origin) and built prompts as the block says."""

    driven: DrivenLevel | None
    prompt_tokenizer: dict[str, Any] | None


class JobRunner:
    """One job's execution on a worker's runtime (its loop, engine and HTTP client)."""

    def __init__(
        self,
        rt: Runtime,
        job: Job,
        endpoint: Endpoint,
        lease: Lease | None = None,
        *,
        kept: dict[int, Run] | None = None,
        replaced: dict[int, uuid.UUID] | None = None,
    ) -> None:
        self.rt = rt
        # A job taken up after its worker died: the levels it stored (not measured again)
        # and, per level, the interrupted run the level's new run replaces.
        self.kept = kept or {}
        self.replaced = replaced or {}
        self.job = job
        self.endpoint = endpoint
        # The claim's fencing token: every write checks it (workers/lease.py).
        self.lease = lease or Lease(job.id, job.lease_token)
        # The job's plan as the API resolved it.
        self.plan: Plan = decode_plan(job.workload, job.load, job.slo)
        self.progress = Progress()
        self.recorder = Recorder(rt, job, endpoint, self.lease)
        self.source: RequestSource = request_source(rt, self.plan.workload, job.id, self.plan.load)
        api_key = (
            rt.vault.decrypt(endpoint.api_key_encrypted) if endpoint.api_key_encrypted else None
        )
        # The target as registered; each level aims at it pinned to a checked address.
        self.registered = Target.for_endpoint(
            endpoint.base_url,
            endpoint.api,
            endpoint.model,
            api_key,
            self.plan.load.timeout_s,
            engine=endpoint.engine,
        )
        # What the next level's expected events are reckoned from (auto_shards): one
        # stream's events per second and the mean output tokens, of the last level measured.
        self.stream_events_per_s: float | None = None
        self.n_out_mean: float | None = None
        # Written with the running level's live figures: its sharding decision.
        self.live_extra: dict[str, Any] = {}

    @property
    def job_id(self) -> uuid.UUID:
        return self.job.id

    @property
    def load(self) -> LoadPlan:
        """The job's load plan."""
        return self.plan.load

    @property
    def scraped(self) -> bool:
        """Whether the endpoint has metrics URLs (its levels are scraped)."""
        return bool(self.endpoint.metrics_urls)

    async def pin(self) -> Target:
        """Resolve the endpoint's host once for the level, check every address against the
        outbound policy, and aim every request of the level at the first one (Host header and
        TLS name kept), so a name re-pointed since registration (say at 169.254.169.254)
        is refused, and one that changes mid-level is not followed. OutboundRefused or
        socket.gaierror when it cannot be used."""
        policy = Policy.from_settings(self.rt.settings)
        base = self.registered.base_url
        address = (await policy.check_connect(base, "base_url"))[0]
        at = pinned(base, address)
        return dataclasses.replace(
            self.registered,
            url=pinned(self.registered.url, address).url,
            base_url=at.url,
            headers={**self.registered.headers, **at.headers},
        )

    async def run(self) -> tuple[str, str | None]:
        """Run every level; return the job's final status and error message."""
        load = self.plan.load
        if load.mode == "sweep":
            return await run_sweep(self)
        if load.mode == "trace":
            return await self.run_trace()
        if load.levels is None:
            raise ValueError(f"a {load.mode} plan without levels")
        levels = load.levels
        planned = [load.level_size(level).planned for level in levels]
        for index, level in enumerate(levels):
            if (stored := self.kept.get(index)) is not None:
                # Measured before its worker died: it stands, and counts as done.
                self.progress.done_before += planned[index] or stored.requests_total
                continue
            measured = await self.measure_level(
                index, level, planned_after=sum(planned[index + 1 :])
            )
            if self.progress.cancelled:
                return "cancelled", None
            if measured.failed:
                return "failed", f"level {level:g}: {measured.failed}"
            cooldown = load.cooldown_s
            if cooldown > 0 and index + 1 < len(levels) and not await self.cool_down(cooldown):
                return "cancelled", None
        return "succeeded", None

    async def run_trace(self) -> tuple[str, str | None]:
        """A trace replay: one level, the window's requests at their scaled times. Its level
        is the rate the schedule asks for on average (requests / scheduled seconds)."""
        size = self.plan.load.level_size(0.0)
        count, seconds = size.count or 0, size.scheduled_s or 0.0
        if (stored := self.kept.get(0)) is not None:
            # Stored before its worker died (the job handed over before it could finish):
            # the replay stands, and counts as done.
            self.progress.done_before += int(count) or int(stored.requests_total or 0)
            return "succeeded", None
        level = count / seconds if seconds > 0 else float(count)
        measured = await self.measure_level(0, level)
        if self.progress.cancelled:
            return "cancelled", None
        if measured.failed:
            return "failed", f"replay: {measured.failed}"
        return "succeeded", None

    async def cool_down(self, seconds: float) -> bool:
        """Pause between levels (load.cooldown_s) so the server drains before the next one,
        still sending heartbeats; False when the job was cancelled meanwhile."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(PROGRESS_INTERVAL_S, left))
            if not await self.recorder.beat(self.progress):
                self.progress.cancelled = True
                return False
        return True

    async def measure_level(
        self,
        index: int,
        level: float,
        *,
        mode: Mode | None = None,
        load: LoadPlan | None = None,
        planned_after: int = 0,
    ) -> MeasuredLevel:
        """Run, summarise and store level `index` in `mode` (default: the plan's) under
        `load` (default: the plan's); `planned_after` requests are planned after it.
        Progress moves past it; a cancel during the level shows in self.progress.cancelled."""
        lengthened = load is not None and load is not self.plan.load
        load = load or self.plan.load
        mode = mode or load.mode
        self.progress.planned_after = planned_after
        target = await self.pin()
        run_id = await self.recorder.start_run(
            index, level, mode, replaces=self.replaced.get(index)
        )
        shards, decision = await self._shards_of(run_id, level, mode, load, lengthened)
        reading = None
        try:
            if shards > 1:
                sharded = await self._run_shards(
                    run_id, shards, index=index, level=level, mode=mode, load=load
                )
                timings, cpu_util = sharded.timings, sharded.cpu_util
                driven, prompt_tokenizer = sharded.part.driven, sharded.part.prompt_tokenizer
                # Every shard's reading health, merged (the worst of any shard).
                reading = sharded.outcome.reading
            else:
                sharded = None
                driven, prompt_tokenizer = await self._run_here(
                    target, run_id, index=index, level=level, mode=mode, load=load
                )
                timings, cpu_util, reading = driven.timings, driven.cpu_util, driven.reading
            if reading is not None:
                # The limit this level is judged by travels with it (client block).
                reading = {**reading, "pause_exposure_limit": self.rt.settings.pause_exposure_limit}
        except Exception as exc:
            # The run row must not stay 'running' after its level broke off.
            await self.recorder.fail_run(run_id, f"the level broke off ({type(exc).__name__})")
            raise
        try:
            figures = summarize(
                timings,
                target_concurrency=int(level) if mode == "concurrency" else None,
                target_rate=level if mode in ("rate", "trace") else None,
                max_concurrency=level_cap(load.mode, mode, load.max_concurrency),
                slo=self.plan.slo,
                client_cpu_util=cpu_util,
                reading=reading,
                telemetry_interval_s=load.telemetry_interval_s
                if self.endpoint.metrics_urls
                else None,
                # Sessions resend their history and share a system prompt, shared prefixes are
                # there to be cached: for them cache hits are the point, not a flaw.
                cache_expected=(
                    self.plan.workload.sessions is not None or self.plan.workload.prefix is not None
                ),
                embeddings=target.api == EMBEDDINGS_API,
                capacity_short=decision.reason if decision and decision.client_bound else None,
                reasoning=self.plan.workload.has("reasoning"),
            )
            if decision is not None:
                figures.client["sharding"] = decision.block()
            replay = self._replay_block(timings) if mode == "trace" else None
            self._remember_pace(figures, timings)
            status = "cancelled" if self.progress.cancelled else "succeeded"
            failed = failure_message(timings)
            if sharded is not None:
                figures.client["shards"] = sharded.shards
                failed = sharded.error or failed
            if failed and not self.progress.cancelled:
                status = "failed"
            await self.recorder.store_run(
                run_id,
                status,
                timings,
                figures,
                self.progress,
                # Without shard 0's scrapes (it never started), the level has no telemetry.
                telemetry=driven.telemetry if driven else _no_telemetry(),
                origin_s=driven.origin_s if driven else 0.0,
                prompt_tokenizer=prompt_tokenizer,
                samples=sharded is None,
                replay=replay,
            )
        except (LeaseLost, LevelNotStored):
            raise  # not ours to write any more, or already failed with why
        except Exception as exc:
            # Its figures could not be made or stored: the run must not stay 'running'.
            await self.recorder.fail_run(
                run_id, f"its figures could not be computed or stored ({type(exc).__name__})"
            )
            raise
        self.progress.done_before += self.progress.in_level
        self.progress.in_level = 0
        log.info(
            "job %s level %g (%s): %d requests, %d failed",
            self.job.id,
            level,
            status,
            len(timings),
            figures.requests_failed,
        )
        return MeasuredLevel(run_id, figures, failed)

    async def _shards_of(
        self, run_id: uuid.UUID, level: float, mode: Mode, load: LoadPlan, lengthened: bool
    ) -> tuple[int, Decision | None]:
        """The shards of a level: as the plan says, or decided now under "auto" (stated in
        the run before it is measured)."""
        if load.shards != "auto" or lengthened:
            # Other shards read the level from the stored plan: a level measured under another
            # (a sweep's lengthened try) stays here.
            self.live_extra = {}
            return level_shards(mode, level, load.fixed_shards), None
        decision = await self.auto_shards(level, mode, load)
        self.live_extra = {"sharding": decision.block()}
        # Up front: the run says how many processes it takes and why, and whether that is too
        # few, before it is measured.
        planned = load.level_size(level, mode).planned or None
        before = {**sharded_figures(0, planned, 0.0), "errors": 0, **self.live_extra}
        await self.recorder.beat(self.progress, run_id, before)
        return decision.shards, decision

    async def auto_shards(self, level: float, mode: Mode, load: LoadPlan) -> Decision:
        """How many processes a level takes under `load.shards: "auto"`
        (infercost/shards/auto.py): its expected events against this process's measured
        budget, up to the worker processes free; sessions and a cap on requests in flight
        keep it in one."""
        workload = self.plan.workload
        together = (
            "multi-turn sessions"
            if workload.sessions is not None
            else "requests under load.max_concurrency"
            if load.max_concurrency is not None
            else None
        )
        lengths = workload.output_tokens
        tokens = (lengths.mean if lengths is not None else None) or self.n_out_mean
        expected = expected_events(
            mode, level, output_tokens=tokens, stream_events_per_s=self.stream_events_per_s
        )
        # Measured on levels of requests about this long (a request's overhead is spread over
        # its events); events a request: its output tokens, or one a token where unknown.
        measured = self.rt.read_cost.cpu_us_per_event(tokens)
        budget = Budget(measured or DEFAULT_CPU_US_PER_EVENT, measured is not None)
        workers = None
        if together is None and expected[0] > budget.events_per_s:
            workers = await asyncio.to_thread(free_workers, self.rt.settings)
        return decide(
            mode, level, expected=expected, budget=budget, workers_free=workers, together=together
        )

    def _replay_block(self, timings: list[RequestTiming]) -> dict[str, Any]:
        """A trace run's replay block: fidelity, compression and its intervals."""
        load = self.plan.load
        window = load.window
        if window is None or window.duration_s is None:
            raise ValueError("a trace plan without a resolved window")
        return replay_block(
            timings,
            window_requests=load.requests_per_level or len(timings),
            start_s=window.start_s,
            duration_s=window.duration_s,
            time_scale=load.time_scale or 1.0,
            interval_s=load.interval_s or DEFAULT_TRACE_INTERVAL_S,
            slo=self.plan.slo,
        )

    def _remember_pace(self, figures: RunFigures, timings: list[RequestTiming]) -> None:
        """One stream's event rate and the mean output tokens of the level just measured: what
        the next level's expected events are reckoned from (auto_shards)."""
        rate, inflight = figures.output_tokens_per_s, figures.mean_concurrency
        if rate and inflight:
            self.stream_events_per_s = rate / inflight
        outs = [t.n_out for t in timings if t.succeeded]
        if outs:
            self.n_out_mean = sum(outs) / len(outs)

    async def _run_here(
        self,
        target: Target,
        run_id: uuid.UUID,
        *,
        index: int,
        level: float,
        mode: Mode,
        load: LoadPlan,
    ) -> tuple[DrivenLevel, dict[str, Any] | None]:
        """Drive one level in this process, writing progress and its running figures."""
        progress = self.progress
        plan, requests = await plan_level(
            self.source,
            target,
            load=load,
            mode=mode,
            level=level,
            level_index=index,
            progress=progress,
        )
        if requests.prompt_tokenizer is not None:
            # Up front: the run says how its prompt lengths were built before it is measured.
            await self.recorder.note_prompt_tokenizer(run_id, requests.prompt_tokenizer)

        async def watch(level_task: asyncio.Task[None], live: LiveLevel) -> bool:
            """Write progress and a heartbeat, and notice a cancel, about twice a second."""
            while not level_task.done():
                await asyncio.sleep(PROGRESS_INTERVAL_S)
                figures = {**live.figures(perf_counter_ns()), **self.live_extra}
                if not await self.recorder.beat(progress, run_id, figures):
                    level_task.cancel()
                    return True
            return False

        driven = await drive_level(
            self.rt,
            target,
            plan,
            requests,
            progress,
            mode=mode,
            metrics_urls=self.endpoint.metrics_urls,
            telemetry_interval_s=load.telemetry_interval_s,
            live_seed=index,
            watch=watch,
        )
        return driven, requests.prompt_tokenizer

    async def _run_shards(
        self,
        run_id: uuid.UUID,
        shards: int,
        *,
        index: int,
        level: float,
        mode: Mode,
        load: LoadPlan,
    ) -> _Sharded:
        """Run a level on `shards` worker processes, this one running shard 0, and merge
        their samples; progress counts every shard's requests."""
        progress = self.progress
        progress.in_level = 0
        progress.level_planned = planned = load.level_size(level, mode).planned
        own: list[ShardSlot] = []
        part = ShardPart(None, None)

        async def heartbeat(done: int) -> bool:
            progress.in_level = done
            # Elapsed from the instant the shards agreed to start (0 until it is set).
            start_at = own[0].start_at if own else None
            elapsed_s = 0.0 if start_at is None else (utcnow() - start_at).total_seconds()
            running = await self.recorder.beat(
                progress, run_id, {**sharded_figures(done, planned, elapsed_s), **self.live_extra}
            )
            progress.cancelled = progress.cancelled or not running
            return running

        async def own_shard(slot: ShardSlot) -> None:
            nonlocal part
            own.append(slot)
            part = await self.run_shard(slot, index, level, mode, load)

        outcome = await coordinate(
            self.rt,
            self.job.id,
            run_id,
            shards,
            token=self.lease.token,
            own_shard=own_shard,
            heartbeat=heartbeat,
        )
        progress.in_level = len(outcome.timings)
        progress.cancelled = progress.cancelled or outcome.cancelled
        return _Sharded(outcome, part)

    async def run_shard(
        self, slot: ShardSlot, index: int, level: float, mode: Mode, load: LoadPlan | None = None
    ) -> ShardPart:
        """Claim and run this process's shard of a level from the agreed instant, then COPY
        its samples and finish its row in one transaction (not at all if it was stopped)."""
        if not await slot.claim():
            log.info("shard %d of run %s: not queued (duplicate delivery)", slot.index, slot.run_id)
            return ShardPart(None, None)
        load = load or self.plan.load
        # The shard's own count: it is the request count its shard row reports.
        progress = Progress()
        target = await self.pin()
        slot.start_beating(lambda: progress.in_level)
        driven: DrivenLevel | None = None
        prompt_tokenizer = None
        timings: list[RequestTiming] = []
        cpu_util: float | None = None
        error: str | None = None
        status = "failed"
        try:
            # A shard checks only the prompts it sends: seqs slot.index mod slot.count.
            plan, requests = await plan_level(
                self.source,
                target,
                load=load,
                mode=mode,
                level=level,
                level_index=index,
                progress=progress,
                mine=lambda seq: seq % slot.count == slot.index,
            )
            prompt_tokenizer = requests.prompt_tokenizer

            async def watch(level_task: asyncio.Task[None], live: LiveLevel) -> bool:
                # A shard's own heartbeat (ShardSlot) says when to stop.
                return await slot.watch(level_task)

            driven = await drive_level(
                self.rt,
                target,
                split_plan(plan, slot.index, slot.count),
                requests,
                progress,
                mode=mode,
                # One scraper per level: shard 0 (in the coordinator's process).
                metrics_urls=self.endpoint.metrics_urls if slot.index == 0 else [],
                telemetry_interval_s=load.telemetry_interval_s,
                live_seed=index,
                watch=watch,
                start=slot.wait_for_start,
            )
            timings, cpu_util = driven.timings, driven.cpu_util
            status = "cancelled" if progress.cancelled else "succeeded"
        except ShardStopped:
            status = "cancelled"
        except CredentialError as exc:
            error = f"{exc}; re-enter the endpoint's api_key with PATCH"
        except Exception as exc:
            log.exception("shard %d of run %s failed", slot.index, slot.run_id)
            error = (
                f"the worker failed while running this shard ({type(exc).__name__}); "
                "see the worker log"
            )
        finally:
            await slot.stop_beating()
        async with self.rt.sessionmaker() as session:
            # Under the lease (its row locked until commit): a runner that lost the job stores
            # nothing of it.
            if await JobRepository(session).hold_lease(
                slot.job_id, slot.token
            ) and await ShardRepository(session).finish(
                slot.run_id,
                slot.index,
                status,
                job_id=slot.job_id,
                token=slot.token,
                error=error,
                requests_done=len(timings),
                cpu_util=cpu_util,
                reading=driven.reading if driven is not None else None,
                started_at=slot.started_at,
                start_lag_ms=slot.lag_ms,
            ):
                await JobRepository(session).copy_samples(sample_rows(slot.run_id, timings))
                await session.commit()
        return ShardPart(driven, prompt_tokenizer)


@dataclass(frozen=True, slots=True)
class _Sharded:
    """A sharded level: the coordinator's outcome and shard 0's part."""

    outcome: Coordinated
    part: ShardPart

    @property
    def timings(self) -> list[RequestTiming]:
        return self.outcome.timings

    @property
    def cpu_util(self) -> float | None:
        return self.outcome.cpu_util

    @property
    def shards(self) -> list[dict[str, Any]]:
        return self.outcome.shards

    @property
    def error(self) -> str | None:
        return self.outcome.error


def _no_telemetry() -> LevelTelemetry:
    return LevelTelemetry([], 1.0)


def _failure(job_id: uuid.UUID, exc: Exception) -> str:
    """Why a job failed, for its user, from what stopped its runner."""
    if isinstance(exc, msgspec.ValidationError):
        return f"the job's stored plan cannot be run: {exc}"
    if isinstance(exc, CredentialError):
        return f"{exc}; re-enter the endpoint's api_key with PATCH"
    if isinstance(exc, OutboundRefused):
        return f"refused by the outbound policy: {exc.detail}"
    if isinstance(exc, socket.gaierror):
        return f"base_url: its host does not resolve ({exc.strerror})"
    if isinstance(exc, LevelNotStored | LookupError):
        # LookupError: what the job replays is gone (a dataset or traffic log deleted).
        return str(exc)
    log.exception("job %s failed inside the worker", job_id, exc_info=exc)
    return f"the worker failed while running this job ({type(exc).__name__}); see the worker log"


async def run_job(rt: Runtime, job_id: uuid.UUID, *, resume_token: int | None = None) -> None:
    """The body of `benchmark.run_job`: a duplicate delivery or a cancelled job does nothing.
    With `resume_token`, take up a job whose worker died (JobRepository.interrupt handed it
    over with that token): the levels it stored are kept, the rest measured here."""
    async with rt.sessionmaker() as session:
        repo = JobRepository(session)
        if resume_token is None:
            job = await repo.claim(job_id)
        else:
            job = await repo.resume(job_id, resume_token)
        await session.commit()
        if job is None:
            log.info(
                "job %s is not %s (duplicate delivery or cancelled); skipping",
                job_id,
                "queued" if resume_token is None else "handed over with this token",
            )
            return
        kept, replaced = (
            await repo.measured_levels(job_id) if resume_token is not None else ({}, {})
        )
        endpoint = await EndpointRepository(session).get_any(job.endpoint_id)
    status: str
    error: str | None
    lease = Lease(job.id, job.lease_token)
    # The endpoint's redactor once its key is read: the job's error passes it too.
    redact: Redactor = CREDENTIALS
    if endpoint is None:
        status, error = "failed", "the job's endpoint no longer exists"
    else:
        found = endpoint

        async def run() -> tuple[str, str | None]:
            nonlocal redact
            runner = JobRunner(rt, job, found, lease, kept=kept, replaced=replaced)
            redact = runner.registered.redact
            return await runner.run()

        runner = asyncio.ensure_future(run())
        lost = False

        def stop_runner() -> None:
            nonlocal lost
            lost = True
            runner.cancel()

        # The lease's own heartbeat, for the whole job (workers/lease.py).
        keeper = asyncio.ensure_future(
            lease.keep(rt.sessionmaker, heartbeat_every_s(rt.settings), stop_runner)
        )
        try:
            status, error = await runner
        except (LeaseLost, asyncio.CancelledError):
            if not lost and not runner.done():
                raise
            # Given up by the sweep (its heartbeat stopped for too long) or claimed again:
            # whatever this runner still held is not written.
            log.warning("job %s: lease %d lost; this runner stops", job_id, lease.token)
            return
        except Exception as exc:  # noqa: BLE001 - every failure ends the job, said in words
            status, error = "failed", _failure(job_id, exc)
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
    if status == "cancelled":
        # The API stored (and announced) the cancel; the levels measured before it still
        # get their verdicts against their baselines.
        await record_run_changes(rt, job_id)
        return
    await finish_job(rt, job_id, status, redact(error), token=lease.token)


async def run_shard(
    rt: Runtime,
    job_id: uuid.UUID,
    run_id: uuid.UUID,
    shard: int,
    count: int,
    *,
    token: int | None = None,
) -> None:
    """The body of `benchmark.run_shard`: one shard of a sharded level, fenced by `token`
    (the coordinator's lease on the job; a task queued without one takes the job's token
    now). A duplicate delivery, or a shard of a job no longer running, does nothing."""
    async with rt.sessionmaker() as session:
        found = await ShardRepository(session).run_and_job(run_id)
        endpoint = (
            None
            if found is None
            else await EndpointRepository(session).get_any(found[1].endpoint_id)
        )
    if found is None or endpoint is None or found[1].status != "running":
        log.info("shard %d of run %s: its job is not running; skipping", shard, run_id)
        return
    run, job = found
    token = job.lease_token if token is None else token
    if token != job.lease_token:
        log.info("shard %d of run %s: its job's lease moved on; skipping", shard, run_id)
        return
    mode: Mode = "rate" if run.mode == "rate" else "burst" if run.mode == "burst" else "concurrency"
    runner = JobRunner(rt, job, endpoint, Lease(job.id, token))
    await runner.run_shard(
        ShardSlot(rt, job_id, run_id, shard, count, token), run.level_index, run.level, mode
    )
