"""Runs one benchmark job: claim it, drive each load level, store samples and summaries.

The task boundary commits; each level is committed as soon as it is measured, so a crash
later in the job never loses a level already measured.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, fields
from datetime import datetime
from functools import partial
from time import perf_counter_ns
from typing import Any

import numpy as np
import psutil

from infercost.arrivals import arrival_offsets, planned_requests
from infercost.db.base import utcnow
from infercost.db.retry import is_transient
from infercost.endpoints.models import Endpoint
from infercost.endpoints.repository import EndpointRepository
from infercost.jobs.deployments import deployment_of
from infercost.jobs.models import Job, Run
from infercost.jobs.repository import JobRepository
from infercost.jobs.shards import ShardRepository
from infercost.metrics import RequestTiming, RunFigures, ServerTimings, summarize
from infercost.outbound import OutboundRefused, Policy, pinned
from infercost.prices.pricing import hourly_price
from infercost.security import CredentialError
from infercost.telemetry.store import TelemetryRepository
from infercost.workload import LengthDraws, PromptMaker
from workers.finish import finish_job, record_run_changes
from workers.lease import Lease, LeaseLost, LevelNotStored, heartbeat_every_s, stored
from workers.live import LiveLevel, sharded_figures
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.embeddings import EMBEDDINGS_API
from workers.loadgen.open_loop import RatePlan, run_open_loop
from workers.loadgen.stream import RawRequest, Target, open_connections, request_body
from workers.loadgen.tokenize import (
    APPROXIMATE,
    CALIBRATIONS,
    EXACT,
    MAX_CHECKED_PROMPTS,
    PROBES,
    Calibration,
    Prepared,
    Tokenizer,
    count_outputs,
    prepare_prompts,
)
from workers.replay import DATASET, Replay, load_replay
from workers.runtime import Runtime
from workers.sessions import Script, Sessions, script_of
from workers.shards import (
    Coordinated,
    ShardSlot,
    ShardStopped,
    coordinate,
    level_shards,
    split_plan,
)
from workers.sweep import run_sweep
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


#: A level's request builder: request `seq`'s body and local prompt-token estimate, and what
#: to do when a request ends besides counting it (None: nothing).
_Requests = tuple[Callable[[int], tuple[bytes, int]], Callable[[RawRequest], None] | None]


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
            t.cached_tokens,
            *_server_columns(t.server),
        )
        for t in timings
    ]


def _server_columns(server: ServerTimings | None) -> tuple[Any, ...]:
    """The sample's server_* columns, in SAMPLE_COLUMNS order."""
    if server is None:
        return (None,) * 6
    return (
        server.source,
        server.prefill_ms,
        server.per_token_ms,
        server.queue_ms,
        server.n_out,
        server.n_prefilled,
    )


def _figures_to_columns(figures: RunFigures) -> dict[str, Any]:
    """The runs-table columns of a run's figures: scalars as columns, distributions as JSONB."""
    nested = {"errors", "client", "stats", "not_measured"}
    columns = {f.name: getattr(figures, f.name) for f in fields(figures) if f.name not in nested}
    for name in ("ttft_ms", "tpot_ms"):
        for stat in ("p50", "p95"):
            columns[f"{name[:-3]}_{stat}_ms"] = figures.stat(name, stat)
    columns["stats"] = {**figures.stats, "errors": figures.errors, "client": figures.client}
    if figures.not_measured:
        columns["stats"]["not_measured"] = figures.not_measured
    return columns


@dataclass(frozen=True, slots=True)
class MeasuredLevel:
    """A stored level: its run, figures, and why it failed (every request failed) or None."""

    run_id: uuid.UUID
    figures: RunFigures
    failed: str | None


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
        # The claim's fencing token: every write below checks it (workers/lease.py).
        self.lease = Lease(job.id, job.lease_token)
        self.progress = _Progress()
        # The mode of the level being measured: the job's, or (in a sweep) each level's own.
        self.level_mode: str = job.load["mode"]
        # This process's shard of a sharded level (workers/shards.py), while it runs one.
        self.shard: ShardSlot | None = None
        # The current level's scrapes and clock origin (perf_counter seconds).
        self.telemetry = LevelTelemetry([], 1.0)
        self.origin_s = 0.0
        # The run being measured and its running figures, which the heartbeat writes.
        self.run_id: uuid.UUID | None = None
        self.live: LiveLevel | None = None
        # The last level's reading-side health (ClientHealth.figures), for its `client` block.
        self.reading: dict[str, Any] | None = None
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
        # The target as registered; self.target is it pinned to a checked address per level.
        self.registered = self.target
        # The current level's tokenizer route (None: the endpoint has none) and which of its
        # prompts were checked to be exactly their drawn length, by seq.
        self.tokenizer: Tokenizer | None = None
        self.exact_prompts: list[bool] = []
        # The current level's prompt_tokenizer block (TokenizerProbe.block): which tokenizer
        # form built its prompts, or that none worked; stored on the run as the level starts.
        self.prompt_tokenizer: dict[str, Any] | None = None
        # The job's dataset items (workload.dataset_id), loaded at its first level.
        self.replay: Replay | None = None
        # The tokenizer route that counts output without usage (_output_counter), probed at
        # the job's first level of dataset or session prompts.
        self._counter: Tokenizer | None = None
        self._counter_probed = False

    async def _plan(self, level_index: int, level: float) -> LevelPlan | RatePlan:
        """The level's plan: a rate level's schedule, or a concurrency level's users.

        Its prompts are prepared here, before the level's clock starts: with the endpoint's
        tokenizer route each is checked to be exactly its drawn length.
        """
        workload = self.job.workload
        load = self.job.load
        seed = int(workload.get("seed") or 0)
        warmup = int(load["warmup_requests"])
        warmup_s: float | None = load.get("warmup_s")
        measured: int | None = load.get("requests_per_level")
        duration: float | None = load.get("duration_s")
        offsets_ns: list[int] | None = None
        if self.level_mode == "rate":
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
        stream = bool(workload.get("stream", True))
        sessions = bool(workload.get("sessions"))
        if sessions:
            make_request, then = await self._session_requests(known, rng, level_index)
        elif workload.get("dataset_id") is not None:
            make_request, then = await self._replay_requests(known, rng, level_index)
        else:
            make_request, then = await self._synthetic_requests(known, rng)
        progress = self.progress

        def on_done(rec: RawRequest) -> None:
            progress.in_level += 1
            if then is not None:
                then(rec)

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
            keep_answer=sessions,
        )

    async def _synthetic_requests(self, known: int, rng: np.random.Generator) -> _Requests:
        """Request `seq`'s body and what to do when it ends, for synthetic prompts of drawn
        lengths; `known` of them are drawn (and checked) before the level starts."""
        workload = self.job.workload
        inputs = LengthDraws(workload["input_tokens"], known, rng)
        outputs = LengthDraws(workload["output_tokens"], known, rng)
        prefix = workload.get("prefix") or {}
        prompts = PromptMaker(
            rng, prefixes=int(prefix.get("count", 0)), prefix_words=int(prefix.get("tokens", 0))
        )
        sent_words: dict[int, int] = {}
        calibration, checked = await self._prepare_prompts(
            prompts, [inputs[seq] for seq in range(min(known, MAX_CHECKED_PROMPTS))]
        )

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
            return self._body(prompts.make(seq, words, pad), outputs[seq]), n_in

        def on_done(rec: RawRequest) -> None:
            if rec.count_source == "usage" and rec.n_in:
                prompts.observe(sent_words.pop(rec.seq, 0), rec.n_in)

        return make_request, on_done

    async def _replay_requests(
        self, known: int, rng: np.random.Generator, level_index: int
    ) -> _Requests:
        """Request `seq`'s body and what to do when it ends, for a dataset's items (loaded
        once per job): each item's max_tokens, else a length drawn from output_tokens."""
        workload = self.job.workload
        replay = (await self._load_replay()).for_level(level_index)
        # Dataset prompts have no drawn length to check; the tokenizer route, where there is
        # one, still counts output when the server sends no usage.
        self.tokenizer = await self._output_counter()
        self.exact_prompts = []
        spec = workload.get("output_tokens")
        outputs = LengthDraws(spec, known, rng) if spec else None

        def make_request(seq: int) -> tuple[bytes, int]:
            item = replay[seq]
            max_tokens = item.max_tokens
            if max_tokens is None:
                # The API refuses a dataset without max_tokens everywhere unless
                # output_tokens is given.
                assert outputs is not None
                max_tokens = outputs[seq]
            return self._body(item.prompt, max_tokens, item.messages), item.local_tokens

        return make_request, None

    async def _load_replay(self) -> Replay:
        """The job's dataset items, loaded at its first level and kept for the others."""
        if self.replay is None:
            workload = self.job.workload
            self.replay = await load_replay(
                self.rt.sessionmaker,
                uuid.UUID(str(workload["dataset_id"])),
                int(workload.get("seed") or 0),
            )
        return self.replay

    async def _session_requests(
        self, known: int, rng: np.random.Generator, level_index: int
    ) -> _Requests:
        """Request `seq`'s body and what to do when it ends, for multi-turn sessions
        (workload.sessions; workers/sessions.py): a dataset's conversations, or synthetic
        ones whose user messages have drawn input_tokens lengths."""
        workload = self.job.workload
        spec = workload["sessions"]
        seed = int(workload.get("seed") or 0)
        turns = int(spec["turns"])
        # Prompts grow with the history: there is no drawn length to check; the tokenizer
        # route, where there is one, still counts output when the server sends no usage.
        self.tokenizer = counter = await self._output_counter()
        self.exact_prompts = []
        output_spec = workload.get("output_tokens")
        outputs = LengthDraws(output_spec, known, rng) if output_spec else None
        system_tokens = int(spec.get("system_prompt_tokens") or 0)
        # The same text for every user and level: a generator of its own, from the seed.
        system_prompt = (
            PromptMaker(np.random.default_rng([seed, 0, 3])).make(0, system_tokens)
            if system_tokens
            else None
        )
        new_script: Callable[[int], Script]
        if workload.get("dataset_id") is not None:
            replay = (await self._load_replay()).for_level(level_index)

            def new_script(n: int) -> Script:
                item = replay[n]
                return script_of(item.conversation, item.prompt, item.max_tokens)

        else:
            inputs = LengthDraws(workload["input_tokens"], known, rng)
            prompts = PromptMaker(rng)

            def new_script(n: int) -> Script:
                ids = range(n * turns, (n + 1) * turns)
                return Script(
                    [
                        [{"role": "user", "content": prompts.make(i, prompts.words_for(inputs[i]))}]
                        for i in ids
                    ]
                )

        sessions = Sessions(turns, system_prompt, new_script)

        def make_request(seq: int) -> tuple[bytes, int]:
            messages, max_tokens, local_tokens = sessions.next(seq)
            if max_tokens is None:
                # The API asks for output_tokens unless every item gives max_tokens.
                assert outputs is not None
                max_tokens = outputs[seq]
            return self._body("", max_tokens, messages), local_tokens

        def on_done(rec: RawRequest) -> None:
            ok = rec.error_class is None and bool(rec.text)
            sessions.done(rec.seq, "".join(rec.text or ()) if ok else None)
            if counter is None:
                rec.text = None  # kept only for the tokenizer's count after the level

        return make_request, on_done

    def _body(
        self, prompt: str, max_tokens: int, messages: list[dict[str, Any]] | None = None
    ) -> bytes:
        """One request's JSON body with the workload's stream, ignore_eos and temperature."""
        workload = self.job.workload
        return request_body(
            self.target,
            prompt,
            max_tokens,
            stream=bool(workload.get("stream", True)),
            ignore_eos=bool(workload.get("ignore_eos", True)),
            temperature=workload.get("temperature"),
            messages=messages,
        )

    async def _output_counter(self) -> Tokenizer | None:
        """The endpoint's tokenizer route when it answers, to count output tokens of
        responses without usage (METRICS.md n_out); else None. Probed once per job: a
        failed probe may take the whole request timeout."""
        if not self._counter_probed:
            self._counter = (await PROBES.get(self.rt.http, self.target)).tokenizer
            self._counter_probed = True
        return self._counter

    async def _prepare_prompts(
        self, prompts: PromptMaker, lengths: list[int]
    ) -> tuple[Calibration | None, list[Prepared]]:
        """With the endpoint's tokenizer route: its calibration, and how to build prompts
        0, 1, ... of exactly `lengths` tokens (self.exact_prompts says which made it).
        Without one: (None, []), and prompts are estimated as they are sent."""
        # Which of the engines' tokenizer forms answers here (workers/loadgen/tokenize.py);
        # probed once per worker process and endpoint.
        probe = await PROBES.get(self.rt.http, self.target)
        self.prompt_tokenizer = probe.block()
        tokenizer = probe.tokenizer
        calibration = None
        if tokenizer is not None:
            calibration = await CALIBRATIONS.get(self.rt.http, tokenizer, prompts)
        self.tokenizer = None if calibration is None else tokenizer
        self.exact_prompts = []
        if tokenizer is not None and calibration is None:
            self.prompt_tokenizer = {
                **self.prompt_tokenizer,
                "exact": False,
                "note": f"{probe.form} stopped answering while prompts were calibrated: "
                "prompt lengths are approximate",
            }
        if not self.prompt_tokenizer["exact"]:
            log.warning("job %s: %s", self.job.id, self.prompt_tokenizer["note"])
        if tokenizer is None or calibration is None:
            return None, []
        shard = self.shard
        # A shard checks only the prompts it sends: seqs shard.index mod shard.count.
        mine = None if shard is None else (lambda seq: seq % shard.count == shard.index)
        prepared = await prepare_prompts(
            self.rt.http, tokenizer, calibration, prompts, lengths, check=mine
        )
        # A prompt is exact only where the form counts what the server will (probe.exact).
        self.exact_prompts = [p.exact and probe.exact for p in prepared]
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

    async def _beat(self, live: dict[str, Any] | None = None) -> bool:
        """Write progress as the job's heartbeat, and `live` as the running figures of the
        run being measured (cleared with the level's figures, in _store_run); False when
        the job is no longer running (cancelled) or its lease was lost. A database that
        does not answer for a moment is waited out: the level goes on, its samples in memory."""
        try:
            async with self.rt.sessionmaker() as session:
                repo = JobRepository(session)
                running = await repo.heartbeat(
                    self.job.id, self.progress.done, self.progress.total, token=self.lease.token
                )
                if running and live is not None and self.run_id is not None:
                    await repo.update_run(self.run_id, live=live)
                await session.commit()
        except Exception as exc:
            if not is_transient(exc):
                raise
            log.warning("job %s: progress not written (database unreachable)", self.job.id)
            return True
        return running

    async def _watch(self, level_task: asyncio.Task[None]) -> None:
        """Write progress and a heartbeat, and notice a cancel, about twice a second."""
        if self.shard is not None:
            # A shard's own heartbeat (ShardSlot) says when to stop.
            if await self.shard.watch(level_task):
                self.progress.cancelled = True
            return
        while not level_task.done():
            await asyncio.sleep(PROGRESS_INTERVAL_S)
            live = None if self.live is None else self.live.figures(perf_counter_ns())
            if not await self._beat(live):
                self.progress.cancelled = True
                level_task.cancel()
                return

    async def _run_level(self, level_index: int, level: float) -> tuple[list[RequestTiming], float]:
        """Drive one level; return its requests in seconds from the level's start, and CPU use."""
        plan = await self._plan(level_index, level)
        if self.run_id is not None and self.shard is None and self.prompt_tokenizer is not None:
            # Up front: the run says how its prompt lengths were built before it is measured.
            async with self.rt.sessionmaker() as session:
                await JobRepository(session).update_run(
                    self.run_id, stats={"prompt_tokenizer": self.prompt_tokenizer}
                )
                await session.commit()
        if self.shard is not None:
            plan = split_plan(plan, self.shard.index, self.shard.count)
        done: list[RawRequest] = []
        self.progress.in_level = 0
        self.progress.level_planned = plan.total or 0
        if isinstance(plan, LevelPlan):
            # A closed loop needs `level` connections at once; open them off the clock.
            await open_connections(
                self.rt.http, self.target, min(plan.concurrency, plan.total or plan.concurrency)
            )
        # A shard starts at the instant agreed with the others: the origin of its samples.
        start = None if self.shard is None else await self.shard.wait_for_start()
        # One scraper per level: a sharded level's shard 0 (in the coordinator's process).
        scrape = self.shard is None or self.shard.index == 0
        self.telemetry = LevelTelemetry(
            self.endpoint.metrics_urls if scrape else [],
            float(self.job.load.get("telemetry_interval_s", 1.0)),
            policy=Policy.from_settings(self.rt.settings),
        )
        self.telemetry.start()
        proc = psutil.Process()
        cpu_before = sum(proc.cpu_times()[:2])
        wall_before = time.perf_counter()
        origin = perf_counter_ns() if start is None else start
        self.origin_s = origin / 1e9
        self.live = LiveLevel(done, plan.total, origin, seed=level_index)
        # The reading side's health over the level (workers/loadgen/health.py).
        self.rt.health.start()
        # A shard's schedule counts from the agreed instant, never from its own wake-up.
        level_task = asyncio.ensure_future(
            run_open_loop(self.rt.http, self.target, plan, done, start_ns=start)
            if isinstance(plan, RatePlan)
            else run_closed_loop(self.rt.http, self.target, plan, done, start_ns=start)
        )
        watcher = asyncio.ensure_future(self._watch(level_task))
        try:
            with contextlib.suppress(asyncio.CancelledError):
                await level_task
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            self.reading = await self.rt.health.stop()
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
            if self.replay is not None:
                # Taken from a dataset: no length was drawn for it.
                t.prompt_length, t.n_in_target = DATASET, None
        return timings, cpu_util

    async def _start_run(self, level_index: int, level: float) -> uuid.UUID:
        """Insert the level's run with the price in effect as it starts (the snapshot that
        later queries re-price from), or a note saying how to give the endpoint a price;
        retried through a lost database connection (workers/lease.py)."""
        run_id, started_at = uuid.uuid4(), utcnow()
        return await stored(
            partial(self._insert_run, run_id, level_index, level, started_at),
            settings=self.rt.settings,
            what=f"job {self.job.id} level {level:g}",
        )

    async def _insert_run(
        self, run_id: uuid.UUID, level_index: int, level: float, started_at: datetime
    ) -> uuid.UUID:
        """One attempt of _start_run, under the lease; keeps a run an earlier attempt
        committed before its connection broke."""
        async with self.rt.sessionmaker() as session:
            await self.lease.hold(session)
            if await session.get(Run, run_id) is not None:
                return run_id
            price = await hourly_price(session, self.endpoint, started_at)
            deployment_id = await deployment_of(session, self.endpoint)
            run = Run(
                id=run_id,
                team_id=self.job.team_id,
                job_id=self.job.id,
                endpoint_id=self.endpoint.id,
                deployment_id=deployment_id,
                engine_version=self.endpoint.engine_version,
                level_index=level_index,
                level=float(level),
                mode=self.level_mode,
                status="running",
                started_at=started_at,
                usd_per_hour=price.usd_per_hour,
                price_note=price.note,
                usd_per_million_input_tokens=price.per_token[0] if price.per_token else None,
                usd_per_million_output_tokens=price.per_token[1] if price.per_token else None,
                workload_fingerprint=self.job.workload_fingerprint,
            )
            await JobRepository(session).add_run(run)
            await session.commit()
        return run.id

    async def _store_run(
        self,
        run_id: uuid.UUID,
        status: str,
        timings: list[RequestTiming],
        figures: RunFigures,
        *,
        samples: bool = True,
    ) -> None:
        """Store a level's samples (unless its shards stored them) and figures, then its
        telemetry in a transaction of its own: a telemetry value the database refuses costs
        the telemetry, never the measured level."""
        summary = self.telemetry.summary(timings, self.origin_s, self.endpoint.gpu_count)
        columns = _figures_to_columns(figures)
        if self.prompt_tokenizer is not None:
            columns["stats"]["prompt_tokenizer"] = self.prompt_tokenizer
        # Held in memory until stored: a lost connection is retried for store_retry_s, and
        # each attempt replaces what an earlier one may have committed (one transaction).
        sample_values = sample_rows(run_id, timings) if samples else []

        async def store() -> None:
            async with self.rt.sessionmaker() as session:
                await self.lease.hold(session)
                repo = JobRepository(session)
                if samples:
                    await repo.delete_samples(run_id)
                    await repo.copy_samples(sample_values)
                await repo.update_run(
                    run_id,
                    status=status,
                    finished_at=utcnow(),
                    telemetry=summary,
                    live=None,
                    **columns,
                )
                await repo.heartbeat(
                    self.job.id, self.progress.done, self.progress.total, token=self.lease.token
                )
                await session.commit()

        try:
            await stored(
                store,
                settings=self.rt.settings,
                what=f"run {run_id}: storing {len(sample_values)} samples",
            )
        except LevelNotStored as exc:
            await self._fail_run(run_id, str(exc))
            raise
        rows = self.telemetry.rows(self.origin_s)
        if not rows:
            return

        async def store_telemetry() -> None:
            async with self.rt.sessionmaker() as session:
                await self.lease.hold(session)
                await TelemetryRepository(session).copy(run_id, rows)
                await session.commit()

        try:
            await stored(
                store_telemetry, settings=self.rt.settings, what=f"run {run_id}: telemetry"
            )
        except LeaseLost:
            raise
        except Exception as exc:
            log.exception("run %s: storing %d telemetry values failed", run_id, len(rows))
            note = (
                f"the scraped values could not be stored ({type(exc).__name__}); "
                "the figures above were computed from them"
            )
            async with self.rt.sessionmaker() as session:
                await JobRepository(session).update_run(
                    run_id,
                    telemetry={
                        **(summary or {}),
                        "errors": [*(summary or {}).get("errors", []), note],
                    },
                )
                await session.commit()

    async def _fail_run(self, run_id: uuid.UUID, error: str) -> None:
        """Mark a level failed with why, if this runner still holds the job; best effort (the
        sweep fails runs of a job it gives up, so none stays 'running')."""
        try:
            async with self.rt.sessionmaker() as session:
                if await JobRepository(session).hold_lease(self.lease.job_id, self.lease.token):
                    await JobRepository(session).update_run(
                        run_id, status="failed", finished_at=utcnow(), live=None, error=error
                    )
                    await session.commit()
        except Exception:
            log.exception("run %s: could not record that its level failed", run_id)

    async def _run_shards(
        self, run_id: uuid.UUID, index: int, level: float, shards: int
    ) -> Coordinated:
        """Run a level on `shards` worker processes, this one running shard 0, and merge
        their samples; progress counts every shard's requests."""
        self.progress.in_level = 0
        self.progress.level_planned = planned_requests(
            {**self.job.load, "mode": self.level_mode}, level
        )
        own = JobRunner(self.rt, self.job, self.endpoint)
        own.level_mode = self.level_mode
        planned = self.progress.level_planned

        async def heartbeat(done: int) -> bool:
            self.progress.in_level = done
            # Elapsed from the instant the shards agreed to start (0 until it is set).
            start_at = None if own.shard is None else own.shard.start_at
            elapsed_s = 0.0 if start_at is None else (utcnow() - start_at).total_seconds()
            running = await self._beat(sharded_figures(done, planned, elapsed_s))
            self.progress.cancelled = self.progress.cancelled or not running
            return running

        outcome = await coordinate(
            self.rt,
            self.job.id,
            run_id,
            shards,
            own_shard=lambda slot: own.run_shard(slot, index, level),
            heartbeat=heartbeat,
        )
        # Shard 0 scraped the telemetry, with the agreed instant as its origin.
        self.telemetry, self.origin_s = own.telemetry, own.origin_s
        self.prompt_tokenizer = own.prompt_tokenizer
        self.progress.in_level = len(outcome.timings)
        self.progress.cancelled = self.progress.cancelled or outcome.cancelled
        return outcome

    async def run_shard(self, slot: ShardSlot, index: int, level: float) -> None:
        """Claim and run this process's shard of a level from the agreed instant, then COPY
        its samples and finish its row in one transaction (not at all if it was stopped)."""
        if not await slot.claim():
            log.info("shard %d of run %s: not queued (duplicate delivery)", slot.index, slot.run_id)
            return
        self.shard = slot
        await self._pin()
        slot.start_beating(lambda: self.progress.in_level)
        timings: list[RequestTiming] = []
        cpu_util: float | None = None
        error: str | None = None
        status = "failed"
        try:
            timings, cpu_util = await self._run_level(index, level)
            status = "cancelled" if self.progress.cancelled else "succeeded"
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
            if await ShardRepository(session).finish(
                slot.run_id,
                slot.index,
                status,
                error=error,
                requests_done=len(timings),
                cpu_util=cpu_util,
                started_at=slot.started_at,
                start_lag_ms=slot.lag_ms,
            ):
                await JobRepository(session).copy_samples(sample_rows(slot.run_id, timings))
                await session.commit()

    async def _pin(self) -> None:
        """Resolve the endpoint's host once for the level, check every address against the
        outbound policy, and aim every request of the level at the first one (Host header and
        TLS name kept), so a name re-pointed since registration (say at 169.254.169.254)
        is refused, and one that changes mid-level is not followed. OutboundRefused or
        socket.gaierror when it cannot be used."""
        policy = Policy.from_settings(self.rt.settings)
        base = self.registered.base_url
        address = (await policy.check_connect(base, "base_url"))[0]
        at = pinned(base, address)
        self.target = dataclasses.replace(
            self.registered,
            url=pinned(self.registered.url, address).url,
            base_url=at.url,
            headers={**self.registered.headers, **at.headers},
        )

    async def measure_level(self, index: int, level: float) -> MeasuredLevel:
        """Run, summarise and store one level in `self.level_mode`; progress moves past it.

        A cancel during the level shows in self.progress.cancelled."""
        await self._pin()
        rate_mode = self.level_mode == "rate"
        run_id = await self._start_run(index, level)
        self.run_id = run_id
        shards = level_shards(self.level_mode, level, int(self.job.load.get("shards") or 1))
        try:
            sharded = await self._run_shards(run_id, index, level, shards) if shards > 1 else None
            cpu_util: float | None
            if sharded is None:
                timings, cpu_util = await self._run_level(index, level)
            else:
                timings, cpu_util = sharded.timings, sharded.cpu_util
        except Exception as exc:
            # The run row must not stay 'running' after its level broke off.
            await self._fail_run(run_id, f"the level broke off ({type(exc).__name__})")
            raise
        figures = summarize(
            timings,
            target_concurrency=None if rate_mode else int(level),
            target_rate=level if rate_mode else None,
            slo=self.job.slo,
            client_cpu_util=cpu_util,
            # A sharded level's reading health stays in its shards' processes (not merged).
            reading=self.reading if sharded is None else None,
            telemetry_interval_s=float(self.job.load.get("telemetry_interval_s", 1.0))
            if self.endpoint.metrics_urls
            else None,
            # Sessions resend their history and share a system prompt, shared prefixes are
            # there to be cached: for them cache hits are the point, not a flaw.
            cache_expected=bool(
                self.job.workload.get("sessions") or self.job.workload.get("prefix")
            ),
            embeddings=self.target.api == EMBEDDINGS_API,
        )
        status = "cancelled" if self.progress.cancelled else "succeeded"
        failed = failure_message(timings)
        if sharded is not None:
            figures.client["shards"] = sharded.shards
            failed = sharded.error or failed
        if failed and not self.progress.cancelled:
            status = "failed"
        await self._store_run(run_id, status, timings, figures, samples=sharded is None)
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

    async def run(self) -> tuple[str, str | None]:
        """Run every level; return the job's final status and error message."""
        load = self.job.load
        if load["mode"] == "sweep":
            return await run_sweep(self)
        levels = [float(x) for x in load["levels"]]
        planned = [planned_requests(load, level) for level in levels]
        for index, level in enumerate(levels):
            self.progress.planned_after = sum(planned[index + 1 :])
            failed = (await self.measure_level(index, level)).failed
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
            if not await self._beat():
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
    lease = Lease(job.id, job.lease_token)
    if endpoint is None:
        status, error = "failed", "the job's endpoint no longer exists"
    else:
        runner = asyncio.ensure_future(JobRunner(rt, job, endpoint).run())
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
        except CredentialError as exc:
            status, error = "failed", f"{exc}; re-enter the endpoint's api_key with PATCH"
        except OutboundRefused as exc:
            status, error = "failed", f"refused by the outbound policy: {exc.detail}"
        except socket.gaierror as exc:
            status, error = "failed", f"base_url: its host does not resolve ({exc.strerror})"
        except LevelNotStored as exc:
            status, error = "failed", str(exc)
        except Exception as exc:
            log.exception("job %s failed inside the worker", job_id)
            status, error = (
                "failed",
                f"the worker failed while running this job ({type(exc).__name__}); "
                "see the worker log",
            )
        finally:
            keeper.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await keeper
    if status == "cancelled":
        # The API stored (and announced) the cancel; the levels measured before it still
        # get their verdicts against their baselines.
        await record_run_changes(rt, job_id)
        return
    await finish_job(rt, job_id, status, error, token=lease.token)


async def run_shard(
    rt: Runtime, job_id: uuid.UUID, run_id: uuid.UUID, shard: int, count: int
) -> None:
    """The body of `benchmark.run_shard`: one shard of a sharded level. A duplicate delivery,
    or a shard of a job no longer running, does nothing."""
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
    runner = JobRunner(rt, job, endpoint)
    runner.level_mode = run.mode
    await runner.run_shard(ShardSlot(rt, job_id, run_id, shard, count), run.level_index, run.level)
