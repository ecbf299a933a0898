"""The level driver: a level's plan from the job's load plan, then the level itself.

`plan_level` turns one level of a LoadPlan into what the load generator runs (a RatePlan's
schedule or a LevelPlan's users) with a source's requests; `drive_level` runs it and
returns its requests' timings and the client's health over it (CPU use, the reading side's
figures), scraping the endpoint's metrics meanwhile. Neither writes to the database: the
caller's `watch` (the job's heartbeat, or a shard's) sees the level as it runs, and the
recorder (workers/runner/recorder.py) stores what it returns.
"""

from __future__ import annotations

import asyncio
import contextlib
import gc
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from time import perf_counter_ns
from typing import Any

import numpy as np
import psutil

from infercost.figures.metrics import RequestTiming
from infercost.jobs.arrivals import arrival_offsets, level_cap
from infercost.jobs.plan import LoadPlan, Mode
from infercost.net.outbound import Policy
from infercost.workload.tools import Judge
from workers.live import LiveLevel
from workers.loadgen.closed_loop import LevelPlan, run_closed_loop
from workers.loadgen.open_loop import RatePlan, busiest_second, run_open_loop
from workers.loadgen.stream import RawRequest, Target, open_connections
from workers.loadgen.tokenize import APPROXIMATE, EXACT, count_outputs
from workers.progress import Progress
from workers.replay import DATASET
from workers.runner.sources import LevelRequests, Mine, RequestSource, TraceSource
from workers.runtime import Runtime
from workers.telemetry import LevelTelemetry

#: Sees the level's task while it runs (with its running figures); returns True when it
#: cancelled the level (the job was cancelled or the level given up).
Watch = Callable[["asyncio.Task[None]", LiveLevel], Awaitable[bool]]


def level_schedule(
    load: LoadPlan, mode: Mode, level: float, rng: np.random.Generator
) -> np.ndarray:
    """A rate (or burst) level's send times (s from its start). With warmup_s, the warm-up
    seconds come first and the measured part (requests_per_level or duration_s) follows."""
    if mode == "burst":
        # Every request of the level due at once (its level is their count).
        return np.zeros(int(level))
    warmup_s = load.warmup_s
    measured = load.requests_per_level or 0
    duration = load.duration_s

    def part(count: int | None, seconds: float | None) -> np.ndarray:
        return arrival_offsets(
            level,
            load.arrival,
            rng,
            burstiness=load.burstiness,
            count=count,
            duration_s=seconds,
        )

    if not warmup_s:
        if duration is not None:
            return part(None, duration)
        return part(measured + load.warmup_requests, None)
    if duration is not None:
        return part(None, warmup_s + duration)
    return np.concatenate([part(None, warmup_s), warmup_s + part(measured, None)])


async def plan_level(
    source: RequestSource,
    target: Target,
    *,
    load: LoadPlan,
    mode: Mode,
    level: float,
    level_index: int,
    progress: Progress,
    mine: Mine = None,
) -> tuple[LevelPlan | RatePlan, LevelRequests]:
    """Level `level_index`'s plan in `mode` (a rate level's schedule, or a concurrency
    level's users) and its requests; each finished request counts in `progress`.

    Its prompts are prepared here, before the level's clock starts: with the endpoint's
    tokenizer route each is checked to be exactly its drawn length."""
    seed = source.workload.seed
    warmup = load.warmup_requests
    warmup_s = load.warmup_s
    measured = load.requests_per_level
    duration = load.duration_s
    offsets_ns: list[int] | None = None
    if mode == "trace":
        if not isinstance(source, TraceSource):
            raise ValueError("a trace level needs the trace's requests")
        # The trace's own schedule, compressed by time_scale; every request is measured.
        offsets_ns = (await source.window()).offsets_ns()
        warmup = 0
        known = len(offsets_ns)
    elif mode in ("rate", "burst"):
        # A generator of its own, so the schedule never shifts the lengths or prompts.
        offsets = level_schedule(load, mode, level, np.random.default_rng([seed, level_index, 1]))
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
    models = source.draw_models(known, level_index)
    requests = await source.requests(target, known, rng, level_index, mine)
    requests.models = models
    requests.judge = source.judge
    judging = requests.judge is not None or requests.judge_for is not None
    requests.images = 0 if source.images is None else source.images.count
    then = requests.on_done

    def on_done(rec: RawRequest) -> None:
        progress.in_level += 1
        if then is not None:
            then(rec)

    stream = source.workload.stream
    keep_text = requests.tokenizer is not None
    if offsets_ns is not None:
        plan: LevelPlan | RatePlan = RatePlan(
            offsets_ns,
            warmup,
            stream,
            requests.make_request,
            on_done,
            keep_text,
            max_concurrency=level_cap(load.mode, mode, load.max_concurrency),
            keep_parts=judging,
        )
    else:
        plan = LevelPlan(
            concurrency=int(level),
            warmup=warmup,
            measured=None if duration is not None else int(measured or 0),
            stream=stream,
            make_request=requests.make_request,
            on_done=on_done,
            duration_s=duration,
            warmup_s=warmup_s,
            keep_text=keep_text,
            keep_answer=requests.keep_answer,
            keep_parts=judging,
        )
    return plan, requests


@dataclass(slots=True)
class DrivenLevel:
    """A level as the client saw it: its requests (seconds from `origin_s`, sorted by seq),
    the client's CPU use and reading-side health over it, and the metrics scraped."""

    timings: list[RequestTiming]
    cpu_util: float
    reading: dict[str, Any] | None
    telemetry: LevelTelemetry
    origin_s: float


async def drive_level(
    rt: Runtime,
    target: Target,
    plan: LevelPlan | RatePlan,
    requests: LevelRequests,
    progress: Progress,
    *,
    mode: Mode,
    metrics_urls: list[str],
    telemetry_interval_s: float,
    live_seed: int,
    watch: Watch,
    start: Callable[[], Awaitable[int]] | None = None,
) -> DrivenLevel:
    """Run one level; `progress.cancelled` is set when `watch` cancelled it. With `start`
    (a shard), the level starts at the instant it returns (perf_counter_ns), agreed with
    the other shards: the origin of its samples and of its part of the schedule."""
    done: list[RawRequest] = []
    progress.in_level = 0
    progress.level_planned = plan.total or 0
    if isinstance(plan, LevelPlan):
        # A closed loop needs `level` connections at once; open them off the clock.
        await open_connections(
            rt.http, target, min(plan.concurrency, plan.total or plan.concurrency)
        )
    elif mode == "burst":
        # Every request goes at once: their connections too are opened off the clock.
        await open_connections(rt.http, target, min(plan.total, plan.max_concurrency or plan.total))
    elif mode == "trace":
        # A trace's bursts: as many connections as its busiest second sends, off the clock.
        await open_connections(
            rt.http, target, busiest_second(plan.offsets_ns, plan.max_concurrency)
        )
    # Off the clock: collect now and set aside every object alive (the runtime, earlier
    # levels' data), so the collector's passes during the level walk only what the level
    # itself makes (workers/loadgen/health.py times every pass).
    gc.collect()
    gc.freeze()
    start_ns = None if start is None else await start()
    telemetry = LevelTelemetry(
        metrics_urls, telemetry_interval_s, policy=Policy.from_settings(rt.settings)
    )
    telemetry.start()
    proc = psutil.Process()
    cpu_before = sum(proc.cpu_times()[:2])
    wall_before = time.perf_counter()
    origin = perf_counter_ns() if start_ns is None else start_ns
    live = LiveLevel(done, plan.total, origin, seed=live_seed)
    # The reading side's health over the level (workers/loadgen/health.py).
    rt.health.start()
    # A shard's schedule counts from the agreed instant, never from its own wake-up.
    level_task = asyncio.ensure_future(
        run_open_loop(rt.http, target, plan, done, start_ns=start_ns)
        if isinstance(plan, RatePlan)
        else run_closed_loop(rt.http, target, plan, done, start_ns=start_ns)
    )

    async def watcher() -> None:
        if await watch(level_task, live):
            progress.cancelled = True

    watching = asyncio.ensure_future(watcher())
    try:
        with contextlib.suppress(asyncio.CancelledError):
            await level_task
    finally:
        watching.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watching
        reading = await rt.health.stop(r.chunk_ns for r in done)
        await telemetry.stop()
        gc.unfreeze()  # the level's garbage, and older, may be collected again
    wall = time.perf_counter() - wall_before
    cpu_s = sum(proc.cpu_times()[:2]) - cpu_before
    cpu_util = cpu_s / wall if wall > 0 else 0.0
    rt.read_cost.record(cpu_s, sum(len(r.chunk_ns) for r in done), len(done))
    done.sort(key=lambda r: r.seq)
    if requests.tokenizer is not None:
        # Responses without usage: count their text with the endpoint's tokenizer, now
        # that the level's clock has stopped.
        await count_outputs(rt.http, requests.tokenizer, done)
    timings = [r.timing(origin) for r in done]
    _label(timings, requests)
    if requests.judge is not None or requests.judge_for is not None:
        judge_for = requests.judge_for or (lambda _seq: requests.judge)
        _judge_answers(done, timings, judge_for)
    return DrivenLevel(timings, cpu_util, reading, telemetry, origin / 1e9)


def _judge_answers(
    done: list[RawRequest],
    timings: list[RequestTiming],
    judge_for: Callable[[int], Judge | None],
) -> None:
    """Each answer judged now that the level's clock has stopped (workload.features tools,
    structured): its tool calls (valid when they name an offered tool and their arguments
    are JSON of its schema) and its structured answer (JSON of the schema asked for)."""
    for rec, t in zip(done, timings, strict=True):
        parts = rec.parts
        judge = judge_for(t.seq)
        if parts is None or judge is None or t.error_class is not None:
            continue
        calls = parts.tool_calls()
        if judge.tools:
            verdict = judge.calls(calls)
            t.tool_calls, t.tool_calls_valid = verdict.calls, verdict.valid
            t.invalid_reasons = list(verdict.why)
        if judge.structured and not calls:
            verdict = judge.answer("".join(parts.content))
            t.structured_valid = bool(verdict.valid)
            t.invalid_reasons = [*(t.invalid_reasons or []), *verdict.why]
        rec.parts = None


def _label(timings: list[RequestTiming], requests: LevelRequests) -> None:
    """What each request's figures need from how it was made: whether its prompt had exactly
    its drawn length, and the model it asked for (workload.models)."""
    exact = requests.exact
    models = requests.models
    for t in timings:
        if models is not None:
            t.model = models[t.seq]
        if requests.images:
            t.images = requests.images
        checked = t.seq < len(exact) and exact[t.seq]
        # A checked prompt stays exact only if the server's own count agrees.
        t.prompt_length = EXACT if checked and t.n_in == t.n_in_target else APPROXIMATE
        if requests.from_dataset:
            # Taken from a dataset: no length was drawn for it.
            t.prompt_length, t.n_in_target = DATASET, None
