"""Replaying a traffic log: the window's requests, when each is due and the text it sends.

A trace gives each request's time and lengths, and sometimes the prefix blocks it shares with
others (Mooncake's `hash_ids`, renumbered on import) or the session it belongs to. The text is
ours to make, so it is made to share what the trace says is shared: every prefix block is one
fixed run of words (the same words wherever the block appears), so requests with the same
leading blocks have the same leading text and an engine's prefix cache finds them as it would
in production; a session is one growing run of words, each request its first n words, so a
conversation's prompt grows by its own earlier text. Anything else is the request's own:
its number in the window, then pool words, shared with nobody.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from infercost.jobs.plan import LoadPlan
from infercost.traffic.repository import TrafficRepository, WindowRequest
from infercost.workload.synthetic import WORDS

#: Tokens a prefix block covers when the log does not say (Mooncake's block size).
DEFAULT_BLOCK_TOKENS = 512


@dataclass(frozen=True, slots=True)
class TraceWindow:
    """The requests of a replay's window, in time order, and how its blocks are sized."""

    requests: list[WindowRequest]
    block_tokens: int
    start_s: float
    time_scale: float

    def offsets_ns(self) -> list[int]:
        """When each request is due, in ns after the level's start (docs/figures.md "replay"):
        (t_i - t_0 - start_s) / time_scale."""
        start, scale = self.start_s, self.time_scale
        return [round((r.at_s - start) / scale * 1e9) for r in self.requests]


async def load_window(
    sessionmaker: async_sessionmaker[AsyncSession], load: LoadPlan
) -> TraceWindow:
    """A trace plan's window of its log (a log deleted since the job was submitted is said)."""
    window = load.window
    if load.traffic_id is None or window is None or window.duration_s is None:
        raise ValueError("a trace plan without traffic_id or a resolved window")
    async with sessionmaker() as session:
        repo = TrafficRepository(session)
        traffic = await repo.get_any(load.traffic_id)
        if traffic is None:
            raise LookupError(
                f"traffic log {load.traffic_id} no longer exists: import it again and submit "
                "a new job"
            )
        requests = await repo.window(traffic.id, window.start_s, window.duration_s)
    return TraceWindow(
        requests,
        traffic.block_tokens or DEFAULT_BLOCK_TOKENS,
        window.start_s,
        load.time_scale or 1.0,
    )


class _Runs:
    """Fixed runs of words by key, grown on demand: the same key, the same words."""

    def __init__(self, seed: int, stream: int, head: Callable[[int], str]) -> None:
        self.seed = seed
        self.stream = stream
        self.head = head
        self._runs: dict[int, list[str]] = {}

    def words(self, key: int, n: int) -> list[str]:
        run = self._runs.get(key)
        if run is None:
            run = self._runs[key] = [self.head(key)]
        if len(run) < n:
            rng = np.random.default_rng([self.seed, self.stream, key, len(run)])
            run.extend(WORDS[i] for i in rng.integers(0, len(WORDS), n - len(run)))
        return run[:n]


class TraceText:
    """The prompt text of a window's requests, built from `words_for` (tokens -> words to
    send: the endpoint's calibration, or one word a token)."""

    def __init__(self, window: TraceWindow, seed: int, words_for: Callable[[int], int]) -> None:
        self.window = window
        self.words_for = words_for
        # Each block's words start with its own marker, so two blocks never share a leading
        # word and a cache can match no further than the blocks really shared.
        self.blocks = _Runs(seed, 4, lambda b: f"block{b}")
        self.sessions = _Runs(seed, 5, lambda s: f"session{s}")
        self.own = _Runs(seed, 6, str)

    def prompt(self, index: int) -> str:
        """Request `index` of the window's prompt."""
        request = self.window.requests[index]
        want = self.words_for(request.input_tokens)
        words: list[str] = []
        if request.prefix_blocks:
            per_block = self.words_for(self.window.block_tokens)
            for block in request.prefix_blocks:
                if len(words) >= want:
                    break
                words += self.blocks.words(block, min(per_block, want - len(words)))
        elif request.session_id is not None:
            key = zlib.crc32(request.session_id.encode())
            words = self.sessions.words(key, want)
        if len(words) < want:
            # The request's own part: its number, then words nobody else sends.
            words += self.own.words(index, want - len(words))
        return " ".join(words)
