"""Splitting one level among shards: every request exactly once, warm-up by level-wide seq."""

from __future__ import annotations

import pytest

from infercost.shards.split import dealt, shard_share, split_users


def test_users_split_evenly_with_the_remainder_first() -> None:
    assert split_users(10, 3) == [4, 3, 3]
    assert split_users(2, 2) == [1, 1]
    assert split_users(5, 1) == [5]
    with pytest.raises(ValueError, match="at least 1"):
        split_users(4, 0)


@pytest.mark.parametrize(("warmup", "measured", "shards"), [(0, 10, 2), (4, 40, 2), (5, 7, 3)])
def test_every_request_falls_to_exactly_one_shard(warmup: int, measured: int, shards: int) -> None:
    total = warmup + measured
    shares = [
        shard_share(i, shards, users=shards, warmup=warmup, measured=measured)
        for i in range(shards)
    ]
    seqs = [s.global_seq(local) for s in shares for local in range(s.warmup + (s.measured or 0))]
    assert sorted(seqs) == list(range(total))
    # A shard's first `warmup` local requests are exactly its level-wide seqs below warmup.
    for s in shares:
        warm = {s.global_seq(local) for local in range(s.warmup)}
        assert warm == {q for q in range(warmup) if q % shards == s.shard}
    assert sum(s.measured or 0 for s in shares) == measured


def test_a_level_of_fixed_duration_has_no_count() -> None:
    share = shard_share(1, 2, users=3, warmup=2, measured=None)
    assert (share.users, share.warmup, share.measured) == (1, 1, None)
    assert [share.global_seq(n) for n in range(3)] == [1, 3, 5]
    assert dealt(5, 0, 2) == 3
    with pytest.raises(ValueError, match=r"not in 0\.\.1"):
        shard_share(2, 2, users=2, warmup=0, measured=1)
