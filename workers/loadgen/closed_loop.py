"""Closed-loop load: N users, each sending its next request as soon as the previous ends."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter_ns

import httpx

from workers.loadgen.open_loop import wait_until
from workers.loadgen.stream import RawRequest, Target, send


@dataclass(slots=True)
class LevelPlan:
    """One level: how many users, how many requests, and how to build request `seq`.

    `make_request(seq)` returns the body and the locally intended prompt token count.
    `on_done(rec)` sees every finished request (for calibration and progress).
    With `duration_s`, users start no new request once that long has passed since the
    level began (`measured` then only caps the count; None for no cap).
    The first `warmup` requests, and with `warmup_s` every request sent in that many
    seconds from the level's start, are warm-up; `measured` counts only the others, and
    `duration_s` then starts after the warm-up seconds. `keep_text` keeps each response's
    text (when the server sends no usage) for counting with the endpoint's tokenizer;
    `keep_answer` keeps it always (multi-turn sessions send it back).
    With `ramp_s`, user i sends its first request i/N of ramp_s after the level starts
    instead of all at once, so that against a server with steady timings the users stay
    spread out (a steady state) instead of sending, and being answered, in lockstep.
    """

    concurrency: int
    warmup: int
    measured: int | None
    stream: bool
    make_request: Callable[[int], tuple[bytes, int]]
    on_done: Callable[[RawRequest], None]
    duration_s: float | None = None
    warmup_s: float | None = None
    keep_text: bool = False
    keep_answer: bool = False
    # The answer's content and tool calls apart, judged after the level (AnswerParts).
    keep_parts: bool = False
    ramp_s: float | None = None

    @property
    def total(self) -> int | None:
        """Requests sent at this level, warm-up included; None when only duration_s ends it
        or when warm-up lasts a time (its count is known only afterwards)."""
        if self.measured is None or self.warmup_s:
            return None
        return self.warmup + self.measured


async def run_closed_loop(
    client: httpx.AsyncClient,
    target: Target,
    plan: LevelPlan,
    done: list[RawRequest],
    *,
    start_ns: int | None = None,
) -> None:
    """Send `plan.total` requests with `plan.concurrency` in flight, appending each to `done`.

    t_sched is the moment a user's slot freed, so queue delay is the client's own lateness.
    Warm-up seconds, duration and ramp count from `start_ns` (perf_counter_ns: a shard's
    agreed instant) when given, else from now.
    `done` belongs to the caller, so requests that finished survive a cancellation.
    """
    next_seq = 0
    measured_left = sys.maxsize if plan.measured is None else plan.measured
    start = perf_counter_ns() if start_ns is None else start_ns
    warm_until = start + round((plan.warmup_s or 0.0) * 1e9)
    deadline = sys.maxsize if plan.duration_s is None else warm_until + round(plan.duration_s * 1e9)
    keep_text = plan.keep_text
    keep_answer = plan.keep_answer
    keep_parts = plan.keep_parts

    total = plan.total
    users = plan.concurrency if total is None else min(plan.concurrency, total)

    async def user(slot: int) -> None:
        # Each user keeps its own connection (its slot), as a real client would.
        nonlocal next_seq, measured_left
        if plan.ramp_s:
            await wait_until(start + round(plan.ramp_s * 1e9 * slot / users))
        while True:
            t_sched = perf_counter_ns()
            if t_sched >= deadline:
                return
            warm = next_seq < plan.warmup or t_sched < warm_until
            if not warm:
                if measured_left <= 0:
                    return
                measured_left -= 1
            seq = next_seq
            next_seq += 1
            body, n_in = plan.make_request(seq)
            rec = RawRequest(
                seq,
                warm,
                t_sched,
                n_in,
                keep_text=keep_text,
                keep_answer=keep_answer,
                keep_parts=keep_parts,
            )
            await send(client, target, body, rec, stream=plan.stream, slot=slot)
            done.append(rec)
            plan.on_done(rec)

    await asyncio.gather(*(user(slot) for slot in range(users)))
