"""How one load level is split among K shards (worker processes that run it together).

Requests are dealt out by sequence number: shard i sends the level's requests
i, i + K, i + 2K, ... (global seq = local seq x K + i), so every seq stays unique in the
merged run and a request's length draws and prompt are those of the unsharded level. A
rate level's schedule is drawn once, exactly as for one process, and shard i keeps
arrivals i, i + K, ...: the merged schedule is the unsharded one for any arrival process.
A concurrency level's users are split as evenly as possible, the first `users mod K`
shards taking one more. Warm-up is by global seq: request s is warm-up when s < warmup.
"""

from __future__ import annotations

from dataclasses import dataclass

#: The most shards one level may have.
MAX_SHARDS = 64


@dataclass(frozen=True, slots=True)
class ShardShare:
    """One shard's part of a level: users (concurrency levels), and how many of the level's
    warm-up and measured requests it sends (None: unbounded, a level of fixed duration)."""

    shard: int
    shards: int
    users: int
    warmup: int
    measured: int | None

    def global_seq(self, local: int) -> int:
        """The level-wide sequence number of this shard's `local`-th request."""
        return local * self.shards + self.shard


def dealt(total: int, shard: int, shards: int) -> int:
    """How many of seqs 0..total-1 fall to `shard` when dealt round-robin among `shards`."""
    return len(range(shard, total, shards))


def split_users(users: int, shards: int) -> list[int]:
    """Users per shard: users // K each, the first users mod K shards one more."""
    if shards < 1:
        raise ValueError("shards must be at least 1")
    base, extra = divmod(users, shards)
    return [base + (1 if i < extra else 0) for i in range(shards)]


def shard_share(
    shard: int, shards: int, *, users: int, warmup: int, measured: int | None
) -> ShardShare:
    """Shard `shard`'s part of a level with `users` users (0 for a rate level), `warmup`
    warm-up requests and `measured` measured ones (None when the level lasts a time)."""
    if not 0 <= shard < shards:
        raise ValueError(f"shard {shard} is not in 0..{shards - 1}")
    mine_warm = dealt(warmup, shard, shards)
    mine_measured = (
        None if measured is None else dealt(warmup + measured, shard, shards) - mine_warm
    )
    return ShardShare(shard, shards, split_users(users, shards)[shard], mine_warm, mine_measured)
