"""A shard's part of a level's plan: every K-th request of the level, renumbered back."""

from __future__ import annotations

from workers.loadgen.closed_loop import LevelPlan
from workers.loadgen.open_loop import RatePlan
from workers.loadgen.stream import RawRequest
from workers.shards import level_shards, split_plan


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
