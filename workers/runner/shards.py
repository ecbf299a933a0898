"""Shards: K worker processes run one load level together (load.shards, README "Shards").

The coordinator is the worker running the job. For a level it inserts K shard rows and,
in the same transaction, a `benchmark.run_shard` task for each of shards 1..K-1 in the
task outbox (infercost/jobs/outbox.py), sends them once that commits (the maintenance
relay sends whatever the broker refused), and runs shard 0 itself. Each task carries the
fencing token of the coordinator's lease on the job: every shard write checks it
(infercost/shards/store.py), so shards of a runner that lost the job write nothing.
Every shard claims its row (a guarded queued -> running, so a duplicate delivery never
runs it twice), builds its part of the level (infercost.shards.split), opens its
connections and says it is ready.
Once every shard is ready the coordinator writes the agreed instant, START_LEAD_S ahead;
each shard sleeps until that instant on its own clock and takes it as the origin of its
samples and of its part of the level's schedule (never the moment it woke: a shard that woke
late sends late, which its queue delay shows, but its t_sched stays on the level's one
schedule), so all shards' times are on one clock to within the hosts' clock sync (the same
host, or NTP-synced hosts). Each shard COPYs its samples and finishes its row; the
coordinator reads every sample back and computes the run's figures over all of them.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from time import perf_counter_ns
from typing import Any

from infercost.db.base import utcnow
from infercost.figures.metrics import RequestTiming, distribution
from infercost.jobs import outbox
from infercost.jobs.samples import timing_of
from infercost.jobs.tasks import RUN_SHARD_TASK
from infercost.settings import Settings
from infercost.shards.split import shard_share
from infercost.shards.store import SHARD_DONE, RunShard, ShardRepository
from workers.broker import make_celery
from workers.lease import Lease
from workers.loadgen.closed_loop import LevelPlan
from workers.loadgen.health import merged
from workers.loadgen.open_loop import RatePlan, wait_until
from workers.loadgen.stream import RawRequest
from workers.runtime import Runtime

log = logging.getLogger("infercost.worker")

#: Every shard must have claimed its row this long after the coordinator queued them.
START_TIMEOUT_S = 30.0
#: The agreed instant is this far ahead of the moment the last shard said it was ready.
START_LEAD_S = 1.0
#: A running shard silent for this long lost its worker; the level fails.
SHARD_SILENT_S = 30.0
#: How often a shard beats while it waits for the start (then twice a second).
WAIT_POLL_S = 0.1
BEAT_S = 0.5
#: After a cancel, how long the coordinator waits for the other shards to store samples.
CANCEL_GRACE_S = 10.0


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def wall_minus_perf_ns() -> int:
    """time.time_ns() - perf_counter_ns(), from the closest of a few bracketed reads: a
    process preempted between its two clock reads would otherwise put its whole share of
    the schedule off by the length of that preemption."""
    best_width, offset = None, 0
    for _ in range(5):
        before = perf_counter_ns()
        wall = time.time_ns()
        after = perf_counter_ns()
        if best_width is None or after - before < best_width:
            best_width, offset = after - before, wall - (before + after) // 2
    return offset


class ShardStopped(Exception):
    """The shard was stopped (its job cancelled, or the coordinator gave the level up)
    before its load began."""


def split_plan(plan: LevelPlan | RatePlan, shard: int, shards: int) -> LevelPlan | RatePlan:
    """Shard `shard`'s part of a level's plan: every K-th request by seq (a rate level keeps
    every K-th arrival of the level's own schedule), its share of the users, and requests
    renumbered to their level-wide seq as they finish."""
    is_rate = isinstance(plan, RatePlan)
    share = shard_share(
        shard,
        shards,
        users=0 if is_rate else plan.concurrency,  # type: ignore[union-attr]
        warmup=plan.warmup,
        measured=None if is_rate else plan.measured,  # type: ignore[union-attr]
    )
    make, finished = plan.make_request, plan.on_done

    def make_request(local: int) -> tuple[bytes, int]:
        return make(share.global_seq(local))

    def on_done(rec: RawRequest) -> None:
        rec.seq = share.global_seq(rec.seq)
        finished(rec)

    if isinstance(plan, RatePlan):
        return replace(
            plan,
            offsets_ns=list(plan.offsets_ns[shard::shards]),
            warmup=share.warmup,
            make_request=make_request,
            on_done=on_done,
        )
    return replace(
        plan,
        concurrency=share.users,
        warmup=share.warmup,
        measured=share.measured,
        make_request=make_request,
        on_done=on_done,
    )


def free_workers(settings: Settings, timeout_s: float = 3.0) -> int:
    """Worker processes that could take a shard of a level now: the idle ones of every
    worker consuming this queue (Celery's remote control: each worker's pool size less its
    tasks running), plus this one, which runs the level's shard 0. Blocks about `timeout_s`
    (the three questions are asked at once, each waiting that long for answers); run it in
    a thread."""
    celery = make_celery(settings)

    def ask(question: str) -> dict[str, Any]:
        with celery.connection_for_write() as connection:
            inspect = celery.control.inspect(timeout=timeout_s, connection=connection)
            answer: dict[str, Any] | None = getattr(inspect, question)()
            return answer or {}

    try:
        with ThreadPoolExecutor(3) as pool:
            queues, stats, active = pool.map(ask, ("active_queues", "stats", "active"))
    finally:
        celery.close()
    free = 0
    for node, consumed in queues.items():
        if not any(q.get("name") == settings.queue for q in consumed or []):
            continue
        pool_info = (stats.get(node) or {}).get("pool") or {}
        size = int(pool_info.get("max-concurrency") or 1)
        free += max(0, size - len(active.get(node) or []))
    # This process runs the job: it is among the active ones, and takes shard 0.
    return free + 1


def level_shards(mode: str, level: float, shards: int) -> int:
    """Shards a level uses: as asked, but never more than a concurrency level's users."""
    return shards if mode == "rate" else max(1, min(shards, int(level)))


def worker_name() -> str:
    """host:pid of this process, shown per shard."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass(slots=True)
class ShardSlot:
    """This process's shard of a run, from claim to finish: heartbeat, barrier, outcome."""

    rt: Runtime
    job_id: uuid.UUID
    run_id: uuid.UUID
    index: int
    count: int
    # The fencing token of the coordinator's lease on the job: every write checks it.
    token: int
    done: Callable[[], int] = lambda: 0
    ready: bool = False
    start_at: datetime | None = None
    started_at: datetime | None = None
    lag_ms: float | None = None
    stopped: asyncio.Event = field(default_factory=asyncio.Event)
    started: asyncio.Event = field(default_factory=asyncio.Event)
    _task: asyncio.Task[None] | None = None

    async def claim(self) -> bool:
        """Take this shard; False when another delivery already did (or it was stopped)."""
        async with self.rt.sessionmaker() as session:
            claimed = await ShardRepository(session).claim(
                self.run_id, self.index, worker_name(), job_id=self.job_id, token=self.token
            )
            await session.commit()
        return claimed

    async def beat(self) -> None:
        """One heartbeat: progress, readiness; learn the start instant or that it must stop."""
        async with self.rt.sessionmaker() as session:
            go_on, start_at = await ShardRepository(session).beat(
                self.run_id,
                self.index,
                self.job_id,
                self.done(),
                ready=self.ready,
                token=self.token,
            )
            await session.commit()
        if not go_on:
            self.stopped.set()
        if start_at is not None and self.start_at is None:
            self.start_at = start_at
            self.started.set()

    def start_beating(self, done: Callable[[], int]) -> None:
        """Beat in the background until `stop_beating` (fast until the start is known)."""
        self.done = done

        async def loop() -> None:
            while not self.stopped.is_set():
                await asyncio.sleep(BEAT_S if self.started.is_set() else WAIT_POLL_S)
                try:
                    await self.beat()
                except Exception:  # noqa: BLE001 - a missed beat is retried; silence is caught
                    log.warning("shard %s/%s: heartbeat failed", self.run_id, self.index)

        self._task = asyncio.ensure_future(loop())

    async def stop_beating(self) -> None:
        """End the background heartbeat."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def wait_for_start(self) -> int:
        """Say ready, wait for the agreed instant and sleep until it; return it in this
        process's perf_counter_ns (the origin of this shard's samples)."""
        self.ready = True
        await self.beat()
        waits = [asyncio.ensure_future(e.wait()) for e in (self.started, self.stopped)]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for w in waits:
                w.cancel()
        if self.stopped.is_set() or self.start_at is None:
            raise ShardStopped
        # Whole microseconds from the epoch (a float timestamp would round to ~0.2 us).
        start_ns = (self.start_at - _EPOCH) // timedelta(microseconds=1) * 1000
        target = start_ns - wall_minus_perf_ns()
        await wait_until(target)
        self.lag_ms = (perf_counter_ns() - target) / 1e6
        self.started_at = utcnow()
        return target

    async def watch(self, level_task: asyncio.Task[None]) -> bool:
        """Cancel the level when the shard is stopped (job cancelled or level given up);
        True when it did."""
        waiter = asyncio.ensure_future(self.stopped.wait())
        try:
            await asyncio.wait([waiter, level_task], return_when=asyncio.FIRST_COMPLETED)
        finally:
            waiter.cancel()
        if self.stopped.is_set() and not level_task.done():
            level_task.cancel()
            return True
        return False


@dataclass(frozen=True, slots=True)
class Coordinated:
    """A sharded level's outcome: its merged requests, client health per shard and merged
    (`reading`: the worst of any shard), and why it failed (None when every shard finished)."""

    timings: list[RequestTiming]
    cpu_util: float | None
    shards: list[dict[str, Any]]
    error: str | None
    cancelled: bool
    reading: dict[str, Any] | None = None


def _shard_health(
    rows: Sequence[RunShard], timings: Sequence[RequestTiming], count: int
) -> list[dict[str, Any]]:
    """Per shard: worker, requests, CPU, its first send against the earliest shard's, how
    late it woke for the agreed instant (`start_lag_ms`), how late it actually sent against
    the level's schedule (`send_late_p50_ms`, `_p99_ms`, `_max_ms`: t_send - t_sched over its
    requests), and how late it read (`loop_lag_p99_ms`, `loop_stall_max_ms`, `paused_ms`,
    `pause_exposure`: its process's reading health, workers/loadgen/health.py)."""
    first: dict[int, float] = {}
    sent: dict[int, int] = {}
    late: dict[int, list[float]] = {}
    for t in timings:
        shard = t.seq % count
        first[shard] = min(first.get(shard, t.t_send), t.t_send)
        sent[shard] = sent.get(shard, 0) + 1
        late.setdefault(shard, []).append((t.t_send - t.t_sched) * 1000.0)
    earliest = min(first.values(), default=0.0)
    health = []
    for r in rows:
        lateness = distribution(late.get(r.shard, []))
        health.append(
            {
                "shard": r.shard,
                "worker": r.worker,
                "requests": sent.get(r.shard, 0),
                "cpu_util": r.cpu_util,
                "start_offset_ms": (first[r.shard] - earliest) * 1000.0
                if r.shard in first
                else None,
                "start_lag_ms": r.start_lag_ms,
                "send_late_p50_ms": lateness["p50"],
                "send_late_p99_ms": lateness["p99"],
                "send_late_max_ms": lateness["max"],
                **{
                    key: (r.reading or {}).get(key)
                    for key in (
                        "loop_lag_p99_ms",
                        "loop_stall_max_ms",
                        "paused_ms",
                        "pause_exposure",
                    )
                },
            }
        )
    return health


async def _send_shards(
    rt: Runtime, ids: list[int], enqueue: Callable[[str, list[Any]], None] | None
) -> None:
    """Send the other shards' tasks from the outbox now (default: to the broker by name, as
    the API does); what the broker refuses stays for the maintenance relay."""

    try:
        async with rt.sessionmaker() as session:
            rows = await outbox.take(session, ids=ids)
            with contextlib.ExitStack() as stack:
                send = enqueue
                if send is None:  # one broker connection for all of them
                    celery = stack.enter_context(make_celery(rt.settings))

                    def send(task: str, args: list[Any]) -> None:
                        celery.send_task(task, args=args)

                try:
                    await outbox.publish(session, rows, lambda row: send(row.task, row.args))
                finally:
                    await session.commit()
    except Exception as exc:  # noqa: BLE001 - the rows stay for the relay
        log.warning(
            "shard tasks %s: the broker did not take them (%s); the maintenance relay will",
            ids,
            type(exc).__name__,
        )


def _why_stop(
    rows: Sequence[RunShard], *, now: datetime, claim_expired: bool, cancel_expired: bool
) -> str | None:
    """Why the level must stop now (a shard failed, fell silent or never started), or None."""
    count = len(rows)
    failed = [r for r in rows if r.status == "failed"]
    if failed:
        return f"shard {failed[0].shard} failed: {failed[0].error}"
    silent = [
        r
        for r in rows
        if r.status == "running"
        and r.heartbeat_at is not None
        and now - r.heartbeat_at > timedelta(seconds=SHARD_SILENT_S)
    ]
    if silent:
        return (
            f"shard {silent[0].shard} (worker {silent[0].worker}) sent no heartbeat for "
            f"{SHARD_SILENT_S:.0f} s: its worker stopped; resubmit the job"
        )
    claimed = sum(r.status != "queued" for r in rows)
    if claimed < count and claim_expired:
        return (
            f"only {claimed} of {count} shards started within {START_TIMEOUT_S:.0f} s: "
            f"run more workers, e.g. `infercost worker` {count} times or "
            f"`infercost worker --concurrency {count}`"
        )
    if cancel_expired:
        return "cancelled by the user"
    return None


async def coordinate(
    rt: Runtime,
    job_id: uuid.UUID,
    run_id: uuid.UUID,
    count: int,
    *,
    token: int,
    own_shard: Callable[[ShardSlot], Awaitable[None]],
    heartbeat: Callable[[int], Awaitable[bool]],
    enqueue: Callable[[str, list[Any]], None] | None = None,
) -> Coordinated:
    """Run one level on `count` shards: queue the others, run shard 0 here (`own_shard`),
    start them together, watch them, then read back every shard's samples. Every write
    is made under the job's lease with fencing token `token` (LeaseLost once it is gone).

    `heartbeat(requests done by all shards)` records the job's progress and returns False
    once the job is no longer running (cancelled); the shards see that themselves and stop.
    `enqueue(task name, args)` replaces sending the tasks to the broker.
    """
    lease = Lease(job_id, token)
    async with rt.sessionmaker() as session:
        await lease.hold(session)
        await ShardRepository(session).add(run_id, count)
        # The other shards' tasks commit with their rows: a broker that is down or loses
        # them delays the level (up to START_TIMEOUT_S), never leaves rows nobody runs.
        tasks = [
            outbox.add_task(
                session, RUN_SHARD_TASK, [str(job_id), str(run_id), i, count, token], None
            )
            for i in range(1, count)
        ]
        await session.flush()
        ids = [task.id for task in tasks]
        await session.commit()
    await _send_shards(rt, ids, enqueue)
    own = asyncio.ensure_future(own_shard(ShardSlot(rt, job_id, run_id, 0, count, token)))
    claim_deadline = time.monotonic() + START_TIMEOUT_S
    cancel_deadline: float | None = None
    stop: str | None = None
    start_set = False
    while stop is None:
        await asyncio.sleep(WAIT_POLL_S if not start_set else BEAT_S)
        async with rt.sessionmaker() as session:
            repo = ShardRepository(session)
            rows = await repo.of_run(run_id)
            if all(r.status in SHARD_DONE for r in rows):
                break
            running = await heartbeat(sum(r.requests_done for r in rows))
            if not running and cancel_deadline is None:
                cancel_deadline = time.monotonic() + CANCEL_GRACE_S
            now = utcnow()
            stop = _why_stop(
                rows,
                now=now,
                claim_expired=cancel_deadline is None and time.monotonic() > claim_deadline,
                cancel_expired=cancel_deadline is not None and time.monotonic() > cancel_deadline,
            )
            cancelled = cancel_deadline is not None
            if stop is not None:
                await lease.hold(session)
                await repo.stop(run_id, "cancelled" if cancelled else "failed", stop)
            elif not start_set and all(r.ready_at is not None for r in rows):
                await lease.hold(session)
                await repo.set_start(run_id, now + timedelta(seconds=START_LEAD_S))
                start_set = True
            await session.commit()
    # Shard 0 ends by itself once it is stopped or done.
    with contextlib.suppress(Exception):
        await own
    async with rt.sessionmaker() as session:
        repo = ShardRepository(session)
        rows = await repo.of_run(run_id)
        timings = [timing_of(s) for s in await repo.samples(run_id)]
    utils = [r.cpu_util for r in rows if r.cpu_util is not None]
    # A shard cancels itself only when it saw its job cancelled.
    cancelled = cancel_deadline is not None or any(r.status == "cancelled" for r in rows)
    return Coordinated(
        timings,
        max(utils) if utils else None,
        _shard_health(rows, timings, count),
        None if cancelled else stop,
        cancelled,
        merged([r.reading for r in rows]),
    )
