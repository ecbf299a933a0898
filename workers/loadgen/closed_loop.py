"""Closed-loop load: N users, each sending its next request as soon as the previous ends."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns

import httpx

from workers.loadgen.stream import RawRequest, Target, send


@dataclass(slots=True)
class LevelPlan:
    """One level: how many users, how many requests, and how to build request `seq`.

    `make_request(seq)` returns the body and the locally intended prompt token count.
    `on_done(rec)` sees every finished request (for calibration and progress).
    With `duration_s`, users start no new request once that long has passed since the
    level began (`measured` then only caps the count; None for no cap).
    """

    concurrency: int
    warmup: int
    measured: int | None
    stream: bool
    make_request: Callable[[int], tuple[bytes, int]]
    on_done: Callable[[RawRequest], None]
    duration_s: float | None = None

    @property
    def total(self) -> int | None:
        """Requests sent at this level, warm-up included; None when only duration_s ends it."""
        return None if self.measured is None else self.warmup + self.measured


async def run_closed_loop(
    client: httpx.AsyncClient, target: Target, plan: LevelPlan, done: list[RawRequest]
) -> None:
    """Send `plan.total` requests with `plan.concurrency` in flight, appending each to `done`.

    t_sched is the moment a user's slot freed, so queue delay is the client's own lateness.
    `done` belongs to the caller, so requests that finished survive a cancellation.
    """
    next_seq = 0
    total = plan.total
    limit = sys.maxsize if total is None else total
    deadline = (
        sys.maxsize if plan.duration_s is None else perf_counter_ns() + round(plan.duration_s * 1e9)
    )

    async def user(slot: int) -> None:
        # Each user keeps its own connection (its slot), as a real client would.
        nonlocal next_seq
        while next_seq < limit and perf_counter_ns() < deadline:
            seq = next_seq
            next_seq += 1
            t_sched = perf_counter_ns()
            body, n_in = plan.make_request(seq)
            rec = RawRequest(seq, seq < plan.warmup, t_sched, n_in)
            await send(client, target, body, rec, stream=plan.stream, slot=slot)
            done.append(rec)
            plan.on_done(rec)

    await asyncio.gather(*(user(slot) for slot in range(min(plan.concurrency, limit))))
