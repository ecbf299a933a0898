"""Running figures of the level being measured, for progress bars (`runs.live`).

The worker's heartbeat (JobRunner._watch, about twice a second) asks `LiveLevel.figures()`
for the level's figures so far and writes them to its run. The load generator is never
touched: the accumulator reads the requests it already appended to the level's `done` list
since the previous beat, so each beat costs O(requests finished since the last one) plus a
median over a bounded reservoir, never a pass over every sample of the level.

Figures follow docs/figures.md over the requests finished so far: TTFT over measured (not
warm-up) requests that succeeded; output tokens/s as the tokens that arrived inside the
measured window so far (first measured send to last measured end, failed requests included,
as `infercost.figures.metrics.measured_window`), from every request (warm-up ones too, placed
by their events' arrival, as `infercost.figures.metrics.tokens_in_window`), over that window. A
measured request's tokens all lie inside the window (it starts at or before its send and ends at or
after its end); only warm-up requests are weighed against the window, and one wholly inside
stays inside, as the window only grows. Once every request of a level has finished the
figures equal the run summary's (the median exactly while at most RESERVOIR TTFTs were
seen; an unbiased sample of them beyond that).

A sharded level's requests finish in other processes: its coordinator knows only the count
each shard reports in its heartbeat, so it writes `sharded_figures` (done, planned and the
time since the agreed start; the rest null).
"""

from __future__ import annotations

import random
import statistics
from collections.abc import Sequence
from typing import Any

from workers.loadgen.stream import RawRequest

#: TTFTs kept for the running median: exact up to this many, a uniform sample beyond.
RESERVOIR = 2048

_NS = 1e-9


class LiveLevel:
    """Running sums over a level's finished requests, read from the list the load generator
    appends to. Not thread-safe: it runs on the worker's event loop, as the load does."""

    def __init__(
        self, done: Sequence[RawRequest], planned: int | None, origin_ns: int, seed: int = 0
    ) -> None:
        self._done = done
        self._seen = 0
        self.planned = planned or None
        self.origin_ns = origin_ns
        self.errors = 0
        self._measured = 0  # measured requests that succeeded (TTFTs offered to the reservoir)
        self._ttft_ms: list[float] = []
        self._out_tokens = 0
        # Warm-up requests with events not yet wholly inside the window, and the tokens of
        # those that are.
        self._warm: list[RawRequest] = []
        self._warm_tokens = 0
        self._first_send: int | None = None
        self._last_end: int | None = None
        # Seeded so a level's live figures do not depend on anything but its requests.
        self._rng = random.Random(seed)  # noqa: S311 - sampling, not security

    def _take(self, rec: RawRequest) -> None:
        failed = rec.error_class is not None
        if failed:
            self.errors += 1
        if rec.warmup:
            if rec.chunk_ns:
                self._warm.append(rec)
            return
        # The measured window spans failed requests too (infercost.figures.metrics.measured_window).
        if self._first_send is None or rec.t_send < self._first_send:
            self._first_send = rec.t_send
        if rec.t_end is not None and (self._last_end is None or rec.t_end > self._last_end):
            self._last_end = rec.t_end
        if not rec.chunk_ns:
            return
        # Every request's tokens count (docs/figures.md output tokens/s), a failed one's too.
        self._out_tokens += rec.n_out
        if failed:
            return
        ttft_ms = (rec.chunk_ns[0] - rec.t_send) * 1e-6
        self._measured += 1
        if len(self._ttft_ms) < RESERVOIR:
            self._ttft_ms.append(ttft_ms)
            return
        # Algorithm R: each TTFT seen so far stays with probability RESERVOIR / seen.
        slot = self._rng.randrange(self._measured)
        if slot < RESERVOIR:
            self._ttft_ms[slot] = ttft_ms

    def figures(self, now_ns: int) -> dict[str, Any]:
        """The figures so far, as stored in `runs.live` (the run summary's `live` block)."""
        done = self._done
        end = len(done)
        for i in range(self._seen, end):
            self._take(done[i])
        self._seen = end
        window_s: float | None = None
        warm = 0.0
        if self._first_send is not None and self._last_end is not None:
            window_s = (self._last_end - self._first_send) * _NS
            warm = self._warm_inside(self._first_send, self._last_end)
        return {
            "done": end,
            "planned": self.planned,
            "errors": self.errors,
            "elapsed_s": round(max(0, now_ns - self.origin_ns) * _NS, 3),
            "ttft_ms_p50": (round(statistics.median(self._ttft_ms), 3) if self._ttft_ms else None),
            "output_tokens_per_s": (
                round((self._out_tokens + warm) / window_s, 3)
                if window_s and window_s > 0
                else None
            ),
        }

    def _warm_inside(self, start: int, stop: int) -> float:
        """Output tokens of warm-up requests that arrived inside [start, stop], placed as
        infercost.figures.metrics.tokens_in_window places them; those wholly inside are settled."""
        partial = 0.0
        pending: list[RawRequest] = []
        for rec in self._warm:
            c = rec.chunk_ns
            if c[0] >= start and c[-1] <= stop:
                self._warm_tokens += rec.n_out
                continue
            pending.append(rec)
            if c[-1] < start or c[0] > stop:
                continue
            k = rec.chunk_tokens
            if k and len(k) == len(c):
                partial += sum(n for at, n in zip(c, k, strict=True) if start <= at <= stop)
            else:
                partial += rec.n_out * sum(1 for at in c if start <= at <= stop) / len(c)
        self._warm = pending
        return self._warm_tokens + partial


def sharded_figures(done: int, planned: int | None, elapsed_s: float) -> dict[str, Any]:
    """`runs.live` of a sharded level, from its shards' request counts: errors, TTFT and
    throughput are known only once the shards' samples are merged, so they are null."""
    return {
        "done": done,
        "planned": planned or None,
        "errors": None,
        "elapsed_s": round(max(0.0, elapsed_s), 3),
        "ttft_ms_p50": None,
        "output_tokens_per_s": None,
    }
