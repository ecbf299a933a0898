"""Open-loop load: requests go out at scheduled instants, whatever the server does.

A closed loop waits for a slow server and so hides how slow it is (coordinated omission).
Here one dispatcher starts each request as its own task at its scheduled time, and t_sched
is that scheduled time, not the moment the dispatcher got to it: any lateness of the client
(its event loop, or a full HTTP pool) shows up as queue delay instead of vanishing.
"""

from __future__ import annotations

import asyncio
import heapq
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from time import perf_counter_ns

import httpx

from workers.loadgen.stream import RawRequest, Target, send

#: The dispatcher sleeps until this long before a send is due, then yields to the loop until
#: it is. asyncio's timers round to the millisecond, so sleeping the whole wait would send up
#: to a millisecond late.
_SPIN_NS = 1_000_000


@dataclass(slots=True)
class RatePlan:
    """One open-loop level: when each request is due, and how to build request `seq`.

    `offsets_ns[seq]` is when request `seq` is due, in ns from the level's start, ascending
    (all 0 for a burst: every request at once). The first `warmup` requests are warm-up.
    `make_request`, `on_done` and `keep_text` are as in `LevelPlan`. `max_concurrency`
    (load.max_concurrency) caps the requests in flight: one due while that many are out
    waits for one to end, in order, and its wait is part of its queue delay.
    """

    offsets_ns: Sequence[int]
    warmup: int
    stream: bool
    make_request: Callable[[int], tuple[bytes, int]]
    on_done: Callable[[RawRequest], None]
    keep_text: bool = False
    max_concurrency: int | None = None
    # The answer's content and tool calls apart, judged after the level (AnswerParts).
    keep_parts: bool = False

    @property
    def total(self) -> int:
        """Requests sent at this level, warm-up included."""
        return len(self.offsets_ns)


def busiest_second(offsets_ns: Sequence[int], cap: int | None = None, limit: int = 256) -> int:
    """The most requests of an ascending schedule due within any one second, at most `cap`
    (a level's cap on requests in flight) and `limit`: the connections a replay opens
    before its clock starts, so its bursts are not sent late by connection setup."""
    most = 0
    first = 0
    for last, due in enumerate(offsets_ns):
        while due - offsets_ns[first] >= 1_000_000_000:
            first += 1
        most = max(most, last - first + 1)
    return min(most, limit, cap if cap is not None else most)


async def wait_until(deadline_ns: int) -> None:
    """Return at `deadline_ns` (perf_counter_ns) or just after, never before."""
    while True:
        left = deadline_ns - perf_counter_ns()
        if left <= 0:
            return
        if left > _SPIN_NS:
            await asyncio.sleep((left - _SPIN_NS) * 1e-9)
        else:
            # Let in-flight requests run while the last fraction of a millisecond passes.
            await asyncio.sleep(0)


class _Cap:
    """Requests in flight under load.max_concurrency, as slots that each remember when they
    became free. The dispatcher alone takes them, in order of due time; a request gives its
    slot back when it ends."""

    __slots__ = ("free_at", "freed")

    def __init__(self, limit: int) -> None:
        # When each free slot became free (perf_counter_ns; 0: free from the start), oldest
        # first, so the request due next gets the slot that has been free longest.
        self.free_at: deque[int] = deque([0] * limit)
        self.freed = asyncio.Event()

    async def take(self, due_ns: int) -> int:
        """Wait for a free slot and take it; return when a slot let the request go: its due
        time, or the moment its slot became free if later. That is never when the dispatcher
        got to it, so a dispatcher held up by earlier requests' waits does not hide the wait
        of the requests queued behind them, and its own lateness stays its own."""
        while not self.free_at:
            self.freed.clear()
            await self.freed.wait()
        return max(due_ns, self.free_at.popleft())

    def give(self) -> None:
        """A request ended: its slot is free from now."""
        self.free_at.append(perf_counter_ns())
        self.freed.set()


async def run_open_loop(
    client: httpx.AsyncClient,
    target: Target,
    plan: RatePlan,
    done: list[RawRequest],
    *,
    start_ns: int | None = None,
) -> None:
    """Send each request of `plan` at its scheduled time, appending each finished one to `done`.

    The schedule's offsets count from `start_ns` (perf_counter_ns) when given: a shard's
    agreed instant, so every shard's t_sched lies on the level's one schedule however late
    this process woke up; otherwise from the moment the first request is ready.

    Without `plan.max_concurrency` requests in flight are not capped here: the HTTP
    client's pool size is the only limit, and a wait for it counts as queue delay (the
    client's own lateness). With it, a request due while the cap is reached waits for a
    request to end, and the requests due meanwhile queue behind it in order; each one's
    `t_slot` is when a slot let it go (its due time, or the moment the slot it took was
    freed), so the wait the plan asked for (t_slot - t_sched) and the client's own lateness
    (t_send - t_slot) stay apart. `done` belongs to the caller, so requests that finished
    survive a cancellation; a cancel also cancels the requests still in flight.
    """
    in_flight: set[asyncio.Task[None]] = set()
    # Connection slots: a request takes the lowest free one and gives it back when it ends,
    # so connections are reused and each slot has at most one request at a time.
    free_slots: list[int] = []
    slots_made = 0
    cap = None if plan.max_concurrency is None else _Cap(plan.max_concurrency)

    async def one(body: bytes, rec: RawRequest, slot: int) -> None:
        try:
            await send(client, target, body, rec, stream=plan.stream, slot=slot)
        finally:
            heapq.heappush(free_slots, slot)
            if cap is not None:
                cap.give()
        done.append(rec)
        plan.on_done(rec)

    total = plan.total
    if total == 0:
        return
    # Each body is built before its wait, so building it never delays the send; the level
    # starts once the first one is ready.
    body, n_in = plan.make_request(0)
    start = perf_counter_ns() if start_ns is None else start_ns
    try:
        for seq, offset in enumerate(plan.offsets_ns):
            due = start + offset
            await wait_until(due)
            rec = RawRequest(
                seq,
                seq < plan.warmup,
                due,
                n_in,
                keep_text=plan.keep_text,
                keep_parts=plan.keep_parts,
            )
            if cap is not None:
                rec.t_slot = await cap.take(due)
            if free_slots:
                slot = heapq.heappop(free_slots)
            else:
                slot, slots_made = slots_made, slots_made + 1
            task = asyncio.create_task(one(body, rec, slot))
            in_flight.add(task)
            task.add_done_callback(in_flight.discard)
            if seq + 1 < total:
                body, n_in = plan.make_request(seq + 1)
        if in_flight:
            await asyncio.gather(*in_flight)
    finally:
        for task in in_flight:
            task.cancel()
        if in_flight:
            await asyncio.gather(*in_flight, return_exceptions=True)
