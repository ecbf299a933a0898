"""A shard's part of a level's plan: every K-th request of the level, renumbered back; and
its part of the schedule counted from the agreed instant, not from its own wake-up."""

from __future__ import annotations

import asyncio
from time import perf_counter_ns

from tests.workers.test_transport_servers import SSE_RESPONSE, raw_server
from workers.loadgen.closed_loop import LevelPlan
from workers.loadgen.open_loop import RatePlan, run_open_loop, wait_until
from workers.loadgen.stream import RawRequest, Target
from workers.loadgen.transport import load_client
from workers.runner.shards import level_shards, split_plan


def test_a_rate_shard_keeps_every_kth_arrival_of_the_level_schedule() -> None:
    made: list[int] = []
    seen: list[int] = []

    def make(seq: int) -> tuple[bytes, int]:
        made.append(seq)
        return b"{}", 8

    plan = RatePlan(list(range(0, 70, 10)), 3, True, make, lambda rec: seen.append(rec.seq))
    part = split_plan(plan, 1, 2)
    assert isinstance(part, RatePlan)
    assert list(part.offsets_ns) == [10, 30, 50]
    assert part.warmup == 1  # level-wide seq 1 is warm-up; 3 is not
    part.make_request(2)
    rec = RawRequest(2, False, 0, 8)
    part.on_done(rec)
    assert made == [5]
    assert rec.seq == seen[0] == 5


def test_a_concurrency_shard_takes_its_users_and_count() -> None:
    plan = LevelPlan(
        concurrency=5,
        warmup=4,
        measured=11,
        stream=True,
        make_request=lambda seq: (b"{}", seq),
        on_done=lambda rec: None,
    )
    parts = [split_plan(plan, i, 2) for i in range(2)]
    assert all(isinstance(p, LevelPlan) for p in parts)
    assert [p.concurrency for p in parts] == [3, 2]
    assert [p.total for p in parts] == [8, 7]
    assert [p.make_request(3)[1] for p in parts] == [6, 7]


def test_levels_never_use_more_shards_than_users() -> None:
    assert level_shards("concurrency", 1, 4) == 1
    assert level_shards("concurrency", 8, 4) == 4
    assert level_shards("rate", 0.5, 4) == 4


async def test_a_shard_that_wakes_late_keeps_the_level_schedule() -> None:
    """Two shards of one rate level share an agreed instant; shard 1 wakes 7 ms after it (a
    busy process). Every request's t_sched is the agreed instant plus its offset in the
    level's schedule, whichever shard sent it and however late: lateness shows as queue
    delay (t_send - t_sched), never as a shifted schedule."""
    offsets = [k * 20_000_000 for k in range(8)]  # every 20 ms
    done: list[RawRequest] = []
    plan = RatePlan(offsets, 0, True, lambda _seq: (b"{}", 8), done.append)

    async def answer(writer: asyncio.StreamWriter, nth: int) -> bool:
        writer.write(SSE_RESPONSE)
        await writer.drain()
        return True

    async with raw_server(answer) as (url, _seen):
        target = Target.for_endpoint(url, "openai-chat", "m", None, 5.0)
        agreed = perf_counter_ns() + 30_000_000

        async def shard(index: int, wakes_ns: int) -> None:
            await wait_until(agreed + wakes_ns)
            async with load_client(4) as client:
                part = split_plan(plan, index, 2)
                assert isinstance(part, RatePlan)
                await run_open_loop(client, target, part, [], start_ns=agreed)

        await asyncio.gather(shard(0, 0), shard(1, 7_000_000))

    assert sorted(r.seq for r in done) == list(range(8))
    assert all(r.error_class is None for r in done), [r.error for r in done]
    by_seq = sorted(done, key=lambda r: r.seq)
    assert [r.t_sched - agreed for r in by_seq] == offsets
    assert all(r.t_send >= r.t_sched for r in by_seq)
    # Shard 1's first request was due at 20 ms but it woke at 7 ms: on time then; had it
    # counted from its own wake-up, its t_sched would have been 27 ms.
    assert by_seq[1].t_sched - agreed == 20_000_000
