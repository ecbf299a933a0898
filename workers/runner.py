"""Runs one benchmark job: claim it, drive each load level, store samples and summaries.

The task boundary commits; each level is committed as soon as it is measured, so a crash
later in the job never loses a level already measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import uuid
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, fields
from time import perf_counter_ns
from typing import Any

import numpy as np
import psutil

from infercost.arrivals import arrival_offsets, planned_requests
from infercost.db.base import utcnow
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.jobs.models import Job, Run
from infercost.jobs.repository import JobRepository
from infercost.metrics import RequestTiming, RunFigures, summarize
from infercost.prices.pricing import hourly_price
from infercost.security import CredentialError
from infercost.telemetry.store import TelemetryRepository
from infercost.workload import LengthDraws, PromptMaker
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.open_loop import RatePlan, run_open_loop
from workers.loadgen.stream import RawRequest, Target, open_connections, request_body
from workers.loadgen.tokenize import (
    APPROXIMATE,
    CALIBRATIONS,
    EXACT,
    MAX_CHECKED_PROMPTS,
    Calibration,
    Prepared,
    Tokenizer,
    count_outputs,
    prepare_prompts,
)
from workers.runtime import Runtime
from workers.telemetry import LevelTelemetry

log = logging.getLogger("infercost.worker")

#: How often progress is written and a user's cancel is noticed (the issue asks for <= 1 s).
PROGRESS_INTERVAL_S = 0.5


@dataclass(slots=True)
class _Progress:
    done_before: int = 0
    in_level: int = 0
    cancelled: bool = False
    # The current level's planned count (0 while unknown: a concurrency level of fixed
    # duration), and the planned count of the levels after it.
    level_planned: int = 0
    planned_after: int = 0

    @property
    def done(self) -> int:
        return self.done_before + self.in_level

    @property
    def total(self) -> int:
        """Requests done in finished levels, this level's plan (never below what it has done)
        and later levels' plans: equal to `done` once every level has finished."""
        return self.done_before + max(self.level_planned, self.in_level) + self.planned_after


def sample_rows(run_id: uuid.UUID, timings: Sequence[RequestTiming]) -> list[tuple[Any, ...]]:
    """Rows for COPY into request_samples, in SAMPLE_COLUMNS order; times in ms from t_send."""

    def ms(value: float | None) -> float | None:
        return None if value is None else value * 1000.0

    return [
        (
            run_id,
            t.seq,
            t.warmup,
            t.t_sched,
            t.t_send,
            ms(t.ttfb),
            ms(t.ttft),
            ms(t.tpot),
            ms(t.e2e),
            t.n_in,
            t.n_out,
            t.count_source,
            t.status,
            t.error_class,
            t.error,
            [(c - t.t_send) * 1000.0 for c in t.chunk_times],
            ms(t.ttfo),
            t.chunk_tokens,
            t.n_in_target,
            t.prompt_length,
        )
        for t in timings
    ]


def _figures_to_columns(figures: RunFigures) -> dict[str, Any]:
    """The runs-table columns of a run's figures: scalars as columns, distributions as JSONB."""
    nested = {"errors", "client", "stats"}
    columns = {f.name: getattr(figures, f.name) for f in fields(figures) if f.name not in nested}
    for name in ("ttft_ms", "tpot_ms"):
        for stat in ("p50", "p95"):
            columns[f"{name[:-3]}_{stat}_ms"] = figures.stat(name, stat)
    columns["stats"] = {**figures.stats, "errors": figures.errors, "client": figures.client}
    return columns


def failure_message(timings: Sequence[RequestTiming]) -> str | None:
    """'all N requests failed: <most common reason>' when nothing succeeded, else None."""
    if not timings or any(t.succeeded for t in timings):
        return None
    reasons = Counter(t.error or t.error_class or "unknown error" for t in timings)
    reason, _ = reasons.most_common(1)[0]
    return f"all {len(timings)} requests failed: {reason}"


class JobRunner:
    """One job's execution on a worker's runtime (its loop, engine and HTTP client)."""

    def __init__(self, rt: Runtime, job: Job, endpoint: Endpoint) -> None:
        self.rt = rt
        self.job = job
        self.endpoint = endpoint
        self.progress = _Progress()
        # The current level's scrapes and clock origin (perf_counter seconds).
        self.telemetry = LevelTelemetry([], 1.0)
        self.origin_s = 0.0
        api_key = (
            rt.vault.decrypt(endpoint.api_key_encrypted) if endpoint.api_key_encrypted else None
        )
        self.target = Target.for_endpoint(
            endpoint.base_url,
            endpoint.api,
            endpoint.model,
            api_key,
            float(job.load["timeout_s"]),
            engine=endpoint.engine,
        )
        # The current level's tokenizer route (None: the endpoint has none) and which of its
        # prompts were checked to be exactly their drawn length, by seq.
        self.tokenizer: Tokenizer | None = None
        self.exact_prompts: list[bool] = []

    async def _plan(self, level_index: int, level: float) -> LevelPlan | RatePlan:
        """The level's plan: a rate level's schedule, or a concurrency level's users.

        Its prompts are prepared here, before the level's clock starts: with the endpoint's
        tokenizer route each is checked to be exactly its drawn length.
        """
        workload = self.job.workload
        load = self.job.load
        seed = int(workload.get("seed", 0))
        warmup = int(load["warmup_requests"])
        warmup_s: float | None = load.get("warmup_s")
        measured: int | None = load.get("requests_per_level")
        duration: float | None = load.get("duration_s")
        offsets_ns: list[int] | None = None
        if load["mode"] == "rate":
            # A generator of its own, so the schedule never shifts the lengths or prompts.
            offsets = self._schedule(level, np.random.default_rng([seed, level_index, 1]))
            if warmup_s:
                warmup = int(np.searchsorted(offsets, warmup_s, side="left"))
            offsets_ns = np.rint(offsets * 1e9).astype(np.int64).tolist()
            known = len(offsets_ns)
        elif duration is None and not warmup_s:
            known = int(measured or 0) + warmup
        else:
            # Unknown until the level ends; more are drawn on demand.
            known = int(measured or 0) + warmup + 1024
        rng = np.random.default_rng([seed, level_index])
        inputs = LengthDraws(workload["input_tokens"], known, rng)
        outputs = LengthDraws(workload["output_tokens"], known, rng)
        prompts = PromptMaker(rng)
        sent_words: dict[int, int] = {}
        calibration, checked = await self._prepare_prompts(
            prompts, [inputs[seq] for seq in range(min(known, MAX_CHECKED_PROMPTS))]
        )
        progress = self.progress
        stream = bool(workload.get("stream", True))
        ignore_eos = bool(workload.get("ignore_eos", True))
        temperature = workload.get("temperature")

        def make_request(seq: int) -> tuple[bytes, int]:
            n_in = inputs[seq]
            pad = 0
            if seq < len(checked):
                words, pad = checked[seq].words, checked[seq].pad
            elif calibration is not None:
                words = calibration.words_for(n_in)
            else:
                words = prompts.words_for(n_in)
            sent_words[seq] = words + pad
            body = request_body(
                self.target,
                prompts.make(seq, words, pad),
                outputs[seq],
                stream=stream,
                ignore_eos=ignore_eos,
                temperature=temperature,
            )
            return body, n_in

        def on_done(rec: RawRequest) -> None:
            progress.in_level += 1
            if rec.count_source == "usage" and rec.n_in:
                prompts.observe(sent_words.pop(rec.seq, 0), rec.n_in)

        keep_text = self.tokenizer is not None
        if offsets_ns is not None:
            return RatePlan(offsets_ns, warmup, stream, make_request, on_done, keep_text)
        return LevelPlan(
            concurrency=int(level),
            warmup=warmup,
            measured=None if duration is not None else int(measured or 0),
            stream=stream,
            make_request=make_request,
            on_done=on_done,
            duration_s=duration,
            warmup_s=warmup_s,
            keep_text=keep_text,
        )

    async def _prepare_prompts(
        self, prompts: PromptMaker, lengths: list[int]
    ) -> tuple[Calibration | None, list[Prepared]]:
        """With the endpoint's tokenizer route: its calibration, and how to build prompts
        0, 1, ... of exactly `lengths` tokens (self.exact_prompts says which made it).
        Without one: (None, []), and prompts are estimated as they are sent."""
        tokenizer = Tokenizer.for_target(self.target)
        calibration = await CALIBRATIONS.get(self.rt.http, tokenizer, prompts)
        self.tokenizer = None if calibration is None else tokenizer
        self.exact_prompts = []
        if calibration is None:
            return None, []
        prepared = await prepare_prompts(self.rt.http, tokenizer, calibration, prompts, lengths)
        self.exact_prompts = [p.exact for p in prepared]
        return calibration, prepared

    def _schedule(self, level: float, rng: np.random.Generator) -> np.ndarray:
        """A rate level's send times (s from its start). With warmup_s, the warm-up seconds
        come first and the measured part (requests_per_level or duration_s) follows them."""
        load = self.job.load
        warmup_s: float | None = load.get("warmup_s")
        measured = int(load.get("requests_per_level") or 0)
        duration: float | None = load.get("duration_s")

        def part(count: int | None, seconds: float | None) -> np.ndarray:
            return arrival_offsets(
                level,
                load.get("arrival", "poisson"),
                rng,
                burstiness=float(load.get("burstiness", 1.0)),
                count=count,
                duration_s=seconds,
            )

        if not warmup_s:
            if duration is not None:
                return part(None, duration)
            return part(measured + int(load["warmup_requests"]), None)
        if duration is not None:
            return part(None, warmup_s + duration)
        return np.concatenate([part(None, warmup_s), warmup_s + part(measured, None)])

    async def _watch(self, level_task: asyncio.Task[None]) -> None:
        """Write progress and a heartbeat, and notice a cancel, about twice a second."""
        while not level_task.done():
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            async with self.rt.sessionmaker() as session:
                running = await JobRepository(session).heartbeat(
                    self.job.id, self.progress.done, self.progress.total
                )
                await session.commit()
            if not running:
                self.progress.cancelled = True
                level_task.cancel()
                return

    async def _run_level(self, level_index: int, level: float) -> tuple[list[RequestTiming], float]:
        """Drive one level; return its requests in seconds from the level's start, and CPU use."""
        plan = await self._plan(level_index, level)
        done: list[RawRequest] = []
        self.progress.in_level = 0
        self.progress.level_planned = plan.total or 0
        if isinstance(plan, LevelPlan):
            # A closed loop needs `level` connections at once; open them off the clock.
            await open_connections(
                self.rt.http, self.target, min(plan.concurrency, plan.total or plan.concurrency)
            )
        self.telemetry = LevelTelemetry(
            self.endpoint.metrics_urls, float(self.job.load.get("telemetry_interval_s", 1.0))
        )
        self.telemetry.start()
        proc = psutil.Process()
        cpu_before = sum(proc.cpu_times()[:2])
        wall_before = time.perf_counter()
        origin = perf_counter_ns()
        self.origin_s = origin / 1e9
        level_task = asyncio.ensure_future(
            run_open_loop(self.rt.http, self.target, plan, done)
            if isinstance(plan, RatePlan)
            else run_closed_loop(self.rt.http, self.target, plan, done)
        )
        watcher = asyncio.ensure_future(self._watch(level_task))
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await level_task
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            await self.telemetry.stop()
        wall = time.perf_counter() - wall_before
        cpu_util = (sum(proc.cpu_times()[:2]) - cpu_before) / wall if wall > 0 else 0.0
        done.sort(key=lambda r: r.seq)
        if self.tokenizer is not None:
            # Responses without usage: count their text with the endpoint's tokenizer, now
            # that the level's clock has stopped.
            await count_outputs(self.rt.http, self.tokenizer, done)
        timings = [r.timing(origin) for r in done]
        exact = self.exact_prompts
        for t in timings:
            checked = t.seq < len(exact) and exact[t.seq]
            # A checked prompt stays exact only if the server's own count agrees.
            t.prompt_length = EXACT if checked and t.n_in == t.n_in_target else APPROXIMATE
        return timings, cpu_util

    async def _start_run(self, level_index: int, level: float) -> uuid.UUID:
        """Insert the level's run with the price in effect as it starts (the snapshot that
        later queries re-price from), or a note saying how to give the endpoint a price."""
        started_at = utcnow()
        async with self.rt.sessionmaker() as session:
            price = await hourly_price(session, self.endpoint, started_at)
            run = Run(
                team_id=self.job.team_id,
                job_id=self.job.id,
                endpoint_id=self.endpoint.id,
                level_index=level_index,
                level=float(level),
                mode=self.job.load["mode"],
                status="running",
                started_at=started_at,
                usd_per_hour=price.usd_per_hour,
                price_note=price.note,
                usd_per_million_input_tokens=price.per_token[0] if price.per_token else None,
                usd_per_million_output_tokens=price.per_token[1] if price.per_token else None,
            )
            await JobRepository(session).add_run(run)
            await session.commit()
        return run.id

    async def _store_run(
        self, run_id: uuid.UUID, status: str, timings: list[RequestTiming], figures: RunFigures
    ) -> None:
        async with self.rt.sessionmaker() as session:
            repo = JobRepository(session)
            await repo.copy_samples(sample_rows(run_id, timings))
            await TelemetryRepository(session).copy(run_id, self.telemetry.rows(self.origin_s))
            await repo.update_run(
                run_id,
                status=status,
                finished_at=utcnow(),
                telemetry=self.telemetry.summary(timings, self.origin_s, self.endpoint.gpu_count),
                **_figures_to_columns(figures),
            )
            await repo.heartbeat(self.job.id, self.progress.done, self.progress.total)
            await session.commit()

    async def run(self) -> tuple[str, str | None]:
        """Run every level; return the job's final status and error message."""
        load = self.job.load
        rate_mode = load["mode"] == "rate"
        levels = [float(x) for x in load["levels"]]
        planned = [planned_requests(load, level) for level in levels]
        for index, level in enumerate(levels):
            self.progress.planned_after = sum(planned[index + 1 :])
            run_id = await self._start_run(index, level)
            timings, cpu_util = await self._run_level(index, level)
            figures = summarize(
                timings,
                target_concurrency=None if rate_mode else int(level),
                target_rate=level if rate_mode else None,
                slo=self.job.slo,
                client_cpu_util=cpu_util,
            )
            status = "cancelled" if self.progress.cancelled else "succeeded"
            failed = failure_message(timings)
            if failed and not self.progress.cancelled:
                status = "failed"
            await self._store_run(run_id, status, timings, figures)
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
            if self.progress.cancelled:
                return "cancelled", None
            if failed:
                return "failed", f"level {level:g}: {failed}"
            cooldown = float(load.get("cooldown_s") or 0.0)
            if cooldown > 0 and index + 1 < len(levels) and not await self._cool_down(cooldown):
                return "cancelled", None
        return "succeeded", None

    async def _cool_down(self, seconds: float) -> bool:
        """Pause between levels (load.cooldown_s) so the server drains before the next one,
        still sending heartbeats; False when the job was cancelled meanwhile."""
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            await asyncio.sleep(min(PROGRESS_INTERVAL_S, left))
            async with self.rt.sessionmaker() as session:
                running = await JobRepository(session).heartbeat(
                    self.job.id, self.progress.done, self.progress.total
                )
                await session.commit()
            if not running:
                self.progress.cancelled = True
                return False
        return True


async def run_job(rt: Runtime, job_id: uuid.UUID) -> None:
    """The body of `benchmark.run_job`: a duplicate delivery or a cancelled job does nothing."""
    async with rt.sessionmaker() as session:
        repo = JobRepository(session)
        job = await repo.claim(job_id)
        await session.commit()
        if job is None:
            log.info("job %s is not queued (duplicate delivery or cancelled); skipping", job_id)
            return
        endpoint = await EndpointRepository(session).get_any(job.endpoint_id)
    status: str
    error: str | None
    if endpoint is None:
        status, error = "failed", "the job's endpoint no longer exists"
    else:
        try:
            status, error = await JobRunner(rt, job, endpoint).run()
        except CredentialError as exc:
            status, error = "failed", f"{exc}; re-enter the endpoint's api_key with PATCH"
        except Exception as exc:
            log.exception("job %s failed inside the worker", job_id)
            status, error = (
                "failed",
                f"the worker failed while running this job ({type(exc).__name__}); "
                "see the worker log",
            )
    if status == "cancelled":
        return
    async with rt.sessionmaker() as session:
        await JobRepository(session).finish(job_id, status, error)
        await session.commit()
