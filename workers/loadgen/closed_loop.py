"""Closed-loop load: N users, each sending its next request as soon as the previous ends."""

from __future__ import annotations

import asyncio
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
    """

    concurrency: int
    warmup: int
    measured: int
    stream: bool
    make_request: Callable[[int], tuple[bytes, int]]
    on_done: Callable[[RawRequest], None]

    @property
    def total(self) -> int:
        """Requests sent at this level, warm-up included."""
        return self.warmup + self.measured


async def run_closed_loop(
    client: httpx.AsyncClient, target: Target, plan: LevelPlan, done: list[RawRequest]
) -> None:
    """Send `plan.total` requests with `plan.concurrency` in flight, appending each to `done`.

    t_sched is the moment a user's slot freed, so queue delay is the client's own lateness.
    `done` belongs to the caller, so requests that finished survive a cancellation.
    """
    next_seq = 0
    total = plan.total

    async def user() -> None:
        nonlocal next_seq
        while next_seq < total:
            seq = next_seq
            next_seq += 1
            t_sched = perf_counter_ns()
            body, n_in = plan.make_request(seq)
            rec = RawRequest(seq, seq < plan.warmup, t_sched, n_in)
            await send(client, target, body, rec, stream=plan.stream)
            done.append(rec)
            plan.on_done(rec)

    await asyncio.gather(*(user() for _ in range(min(plan.concurrency, total))))
