"""How late the load generator itself was on the reading side (the run's `client` block).

Queue delay only says how late requests went out. A client can send on time and still read
late: its event loop busy with other streams' events, bytes waiting in the socket buffer or
in the connection's queue. Three figures measure that, per level:

- read lag: the age of a response's bytes when the parser takes them (parse time minus the
  read's own stamp, workers/loadgen/transport.py), once per wake of a reading coroutine.
  With stamps taken at the socket this no longer moves a timestamp, but a client that parses
  late also frees its slots late.
- loop lag: how long a callback made ready waits before the event loop runs it, probed
  every few milliseconds through the level from a thread (call_soon_threadsafe wakes the
  loop at once, so no timer rounding enters). A socket read is such a callback, so this
  bounds how late a read (and its stamp) can be: the one lateness stamping at the socket
  cannot remove.
- CPU: the process's CPU time over wall time in one-second windows (its peak), since one
  Python process cannot use more than one core.

The probe thread cannot see a pause that holds the whole interpreter (a garbage collection
holds the thread that would post the probe too), so pauses are also measured from inside
(`PauseWatch`):

- the loop's own ticks: a callback every TICK_S on the loop itself records how late it ran
  against its due time (`loop_stall_*`): stamp to stamp on the loop, so whatever held the
  loop (a collection, a slow callback, the operating system not scheduling the process)
  shows as the gap;
- the collector's own callbacks (`gc.callbacks`): every collection timed, by generation;
- per level: the time the loop stood still (ticks later than STALL_MS, summed: `paused_ms`)
  and the pause exposure: the share of the level's events whose stamps could be more than
  PAUSE_BOUND_MS late. Every pause longer than the bound (a tick that late: the loop could
  not run from its due time until it ran; a collection that long) is kept as an interval,
  and an event stamped from the bound into the pause until one tick after it ends could
  have waited through it: its bytes may have come when the pause began. Above 1% of the
  events, a p99 figure can move by more than the bound, and the level is client-bound
  (infercost.figures.metrics, `client_paused`). Counted over the events, not the window's
  time, so a pause in which no event was due spoils nothing.

Lags are counted in a fixed histogram of 10 µs buckets up to 1 s: recording is an index and
an increment, with no allocation on the hot path. A new level zeroes the histograms in place:
bodies still being read hold them.
"""

from __future__ import annotations

import asyncio
import gc
import threading
import time
from array import array
from collections.abc import Iterable, Mapping, Sequence
from time import perf_counter_ns
from typing import Any, Final

import numpy as np

#: Bucket width of the lag histograms in ns (10 µs), and how many buckets (up to 1 s).
BUCKET_NS: Final = 10_000
_BUCKETS: Final = 100_000
#: The loop-lag sampler's period, and the CPU window.
SAMPLE_S: Final = 0.005
CPU_WINDOW_S: Final = 1.0
#: The loop's own tick; a tick later than STALL_MS counts as time the loop stood still (the
#: selector's timeout is whole milliseconds, so a tick up to about 1 ms late is the timer's).
TICK_S: Final = 0.002
STALL_MS: Final = 2.0
#: A stamp later than this is spoilt; PAUSE_EXPOSURE_LIMIT of the window exposed to such
#: lateness makes a level client-bound (infercost.figures.metrics.PAUSE_EXPOSURE_LIMIT).
PAUSE_BOUND_MS: Final = 5.0
_BOUND_NS: Final = round(PAUSE_BOUND_MS * 1e6)
#: Pauses kept per level at most (a level that stalls more often is spoilt anyway).
_MAX_PAUSES: Final = 100_000


class LagHistogram:
    """Lags in ns; quantiles are exact to one bucket (reported as the bucket's upper edge,
    capped at the largest lag seen, so never understated)."""

    __slots__ = ("count", "counts", "max_ns")

    def __init__(self) -> None:
        self.counts = array("q", bytes(8 * (_BUCKETS + 1)))
        self.count = 0
        self.max_ns = 0

    def clear(self) -> None:
        """Forget every lag, in place."""
        np.frombuffer(self.counts, dtype=np.int64)[:] = 0
        self.count = 0
        self.max_ns = 0

    def record(self, lag_ns: int) -> None:
        """Count one lag (negative ones, from clock granularity, count as 0)."""
        index = lag_ns // BUCKET_NS if lag_ns > 0 else 0
        self.counts[index if index < _BUCKETS else _BUCKETS] += 1
        self.count += 1
        self.max_ns = max(self.max_ns, lag_ns)

    def quantile_ms(self, q: float) -> float | None:
        """The q-quantile in ms; None when nothing was recorded."""
        if self.count == 0:
            return None
        # The first bucket whose running count reaches the rank (at least one lag in).
        seen = np.cumsum(np.frombuffer(self.counts, dtype=np.int64))
        index = int(np.searchsorted(seen, max(q * self.count, 1), side="left"))
        if index >= _BUCKETS:
            # The overflow bucket (a lag of a second or more) reports the largest lag.
            return round(self.max_ns / 1e6, 3)
        return round(min((index + 1) * BUCKET_NS, self.max_ns) / 1e6, 3)


class PauseWatch:
    """Pauses of this process over one level, measured from inside: the loop's own ticks and
    every garbage collection (see the module docstring). `start` on the loop, `stop` after."""

    def __init__(self) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._handle: asyncio.TimerHandle | None = None
        self._forget()

    def _forget(self) -> None:
        self.stalls = LagHistogram()
        self.stalled_ns = 0
        self.gc_count = [0, 0, 0]
        self.gc_ns = [0, 0, 0]
        self.gc_max_ns = 0
        # (start, end) of every pause longer than PAUSE_BOUND_MS, in perf_counter_ns.
        self.pauses: list[tuple[int, int]] = []
        self.started_ns = 0
        self.stopped_ns = 0
        self._due = 0
        self._gc_started = 0

    def start(self) -> None:
        """Forget the last level; tick on the running loop and time every collection."""
        self.stop()
        self._forget()
        self._loop = asyncio.get_running_loop()
        self.started_ns = perf_counter_ns()
        self._schedule(self.started_ns)
        gc.callbacks.append(self._on_gc)

    def stop(self) -> None:
        """Stop ticking and timing collections (the level's figures stay)."""
        self.stopped_ns = perf_counter_ns()
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def _schedule(self, now: int) -> None:
        assert self._loop is not None
        self._due = now + round(TICK_S * 1e9)
        self._handle = self._loop.call_at(self._loop.time() + TICK_S, self._tick)

    def _tick(self) -> None:
        now = perf_counter_ns()
        late = now - self._due
        self.stalls.record(late)
        if late > STALL_MS * 1e6:
            self.stalled_ns += late
        if late > _BOUND_NS and len(self.pauses) < _MAX_PAUSES:
            self.pauses.append((self._due, now))
        self._schedule(now)

    def _on_gc(self, phase: str, info: Mapping[str, int]) -> None:
        now = perf_counter_ns()
        if phase == "start":
            self._gc_started = now
            return
        took = now - self._gc_started
        generation = min(2, info.get("generation", 2))
        self.gc_count[generation] += 1
        self.gc_ns[generation] += took
        self.gc_max_ns = max(self.gc_max_ns, took)
        if took > _BOUND_NS and len(self.pauses) < _MAX_PAUSES:
            self.pauses.append((self._gc_started, now))

    def exposure(self, stamps: Iterable[Sequence[int]]) -> float | None:
        """The share of the events stamped at `stamps` (perf_counter_ns, one sequence per
        request) that could be more than PAUSE_BOUND_MS late: stamped from a pause's start
        plus the bound until one tick after its end. None without events."""
        flat = np.fromiter((t for request in stamps for t in request), dtype=np.int64)
        if flat.size == 0:
            return None
        if not self.pauses:
            return 0.0
        flat.sort()
        tick = round(TICK_S * 1e9)
        lo = np.array([a + _BOUND_NS for a, _ in self.pauses], dtype=np.int64)
        hi = np.array([b + tick for _, b in self.pauses], dtype=np.int64)
        order = np.argsort(lo)
        lo, hi = lo[order], np.maximum.accumulate(hi[order])
        # Overlapping intervals merged: each starts where the previous ones ended, if later.
        starts = np.maximum(lo, np.concatenate(([lo[0]], hi[:-1])))
        inside = np.searchsorted(flat, hi, side="right") - np.searchsorted(flat, starts, "left")
        return round(float(np.clip(inside, 0, None).sum()) / flat.size, 5)

    def figures(self, stamps: Iterable[Sequence[int]] = ()) -> dict[str, Any]:
        """loop_stall_p99/max_ms, paused_ms, gc (per generation), pause_bound_ms and
        pause_exposure over the events stamped at `stamps` (see `exposure`); None where
        nothing was measured."""
        stalls = self.stalls
        return {
            "loop_stall_p99_ms": stalls.quantile_ms(0.99),
            "loop_stall_max_ms": round(stalls.max_ns / 1e6, 3) if stalls.count else None,
            "paused_ms": round(self.stalled_ns / 1e6, 3) if stalls.count else None,
            "gc": {
                "collections": list(self.gc_count),
                "paused_ms": [round(ns / 1e6, 3) for ns in self.gc_ns],
                "max_ms": round(self.gc_max_ns / 1e6, 3),
            }
            if self.started_ns
            else None,
            "pause_bound_ms": PAUSE_BOUND_MS,
            "pause_exposure": self.exposure(stamps) if self.started_ns else None,
        }


class ReadCost:
    """This process's CPU per received event over its recent levels (request overheads
    included): the measured budget `load.shards: "auto"` splits levels by
    (infercost/shards/auto.py). A request's own overhead is spread over its events, so the
    figure holds for requests of about the same length only: a level is judged by the
    levels whose requests carried within a factor of LENGTH_FACTOR as many events."""

    #: Levels with fewer events say too little; the last KEEP levels count.
    MIN_EVENTS: Final = 2000
    KEEP: Final = 8
    LENGTH_FACTOR: Final = 2.0

    def __init__(self) -> None:
        self._levels: list[tuple[float, int, int]] = []

    def record(self, cpu_s: float, events: int, requests: int) -> None:
        """A level's CPU seconds spent, content events received and requests sent by this
        process."""
        if events >= self.MIN_EVENTS and cpu_s > 0 and requests > 0:
            self._levels = [*self._levels, (cpu_s, events, requests)][-self.KEEP :]

    def cpu_us_per_event(self, events_per_request: float | None = None) -> float | None:
        """CPU microseconds per event over the kept levels whose requests carried about
        `events_per_request` events each (all kept levels when None); None before any."""
        levels = self._levels
        if events_per_request is not None and events_per_request > 0:
            levels = [
                level
                for level in levels
                if 1 / self.LENGTH_FACTOR
                <= level[1] / level[2] / events_per_request
                <= self.LENGTH_FACTOR
            ]
        if not levels:
            return None
        return sum(c for c, _, _ in levels) / sum(e for _, e, _ in levels) * 1e6


def merged(readings: Sequence[Mapping[str, Any] | None]) -> dict[str, Any] | None:
    """One level's reading figures from its shards' (one process each): the worst lag, stall,
    CPU peak and pause exposure of any shard, re-sends and collections summed, the longest
    pause and stalled time of any shard; None when no shard had any."""
    present = [r for r in readings if r]
    if not present:
        return None
    out: dict[str, Any] = {}
    for key in {k for r in present for k in r}:
        values = [r[key] for r in present if r.get(key) is not None]
        if not values:
            out[key] = None
        elif key == "resent":
            out[key] = sum(values)
        elif key == "gc":
            out[key] = {
                "collections": [sum(v["collections"][g] for v in values) for g in range(3)],
                "paused_ms": [round(sum(v["paused_ms"][g] for v in values), 3) for g in range(3)],
                "max_ms": max(v["max_ms"] for v in values),
            }
        else:
            out[key] = max(values)
    return out


class ClientHealth:
    """The reading side's figures of one process, per level: `start()` when the level
    starts (on the event loop), `await stop()` for its figures. The transport records read
    lag and re-sends into it; `start()` starts the loop-lag and CPU sampler and the pause
    watch."""

    def __init__(self) -> None:
        self.read_lag = LagHistogram()
        self.loop_lag = LagHistogram()
        self.pauses = PauseWatch()
        # Requests sent again on a fresh connection after a kept-alive one turned out closed.
        self.resent = 0
        self.cpu_peak: float | None = None
        # Loop-lag probes posted by the sampler thread so far.
        self.posted = 0
        self._stop: threading.Event | None = None
        self._thread: threading.Thread | None = None

    def reset(self) -> None:
        """Forget everything recorded so far (a new level)."""
        self.read_lag.clear()
        self.loop_lag.clear()
        self.resent = 0
        self.cpu_peak = None

    def start(self) -> None:
        """Reset, and sample the running loop's lag and the CPU, and watch for pauses, until
        `stop`."""
        self.reset()
        self.pauses.start()
        if self._thread is not None:
            return
        self._stop = stop = threading.Event()
        self._thread = threading.Thread(
            target=self._sample,
            args=(asyncio.get_running_loop(), stop),
            name="infercost-loop-lag",
            daemon=True,
        )
        self._thread.start()

    async def stop(self, stamps: Iterable[Sequence[int]] = ()) -> dict[str, Any]:
        """Stop sampling; the level's figures (see `figures`), the pause exposure over the
        events stamped at `stamps` (each request's content-event stamps)."""
        self.pauses.stop()
        thread, stop = self._thread, self._stop
        self._thread = self._stop = None
        if thread is not None and stop is not None:
            stop.set()
            # Off the loop: the thread may be waiting for the loop to run its last probe.
            await asyncio.to_thread(thread.join)
        return self.figures(stamps)

    def figures(self, stamps: Iterable[Sequence[int]] = ()) -> dict[str, Any]:
        """read_lag_p50/p99/max_ms, loop_lag_p50/p99/max_ms, cpu_util_peak, resent and the
        pause watch's figures over the events stamped at `stamps` (the keys of the run's
        `client` block that infercost.figures.metrics.summarize takes as `reading`)."""
        read, loop = self.read_lag, self.loop_lag
        return {
            "read_lag_p50_ms": read.quantile_ms(0.5),
            "read_lag_p99_ms": read.quantile_ms(0.99),
            "read_lag_max_ms": round(read.max_ns / 1e6, 3) if read.count else None,
            "loop_lag_p50_ms": loop.quantile_ms(0.5),
            "loop_lag_p99_ms": loop.quantile_ms(0.99),
            "loop_lag_max_ms": round(loop.max_ns / 1e6, 3) if loop.count else None,
            "cpu_util_peak": None if self.cpu_peak is None else round(self.cpu_peak, 3),
            "resent": self.resent,
            **self.pauses.figures(stamps),
        }

    def _probe(self, posted_ns: int) -> None:
        """On the loop: how long the probe posted at `posted_ns` waited to run."""
        self.loop_lag.record(perf_counter_ns() - posted_ns)

    def _sample(self, loop: asyncio.AbstractEventLoop, stop: threading.Event) -> None:
        """The sampler thread. Every SAMPLE_S it posts a probe to the loop, which wakes the
        loop at once (no timer rounding) and runs after whatever the loop was doing: its wait
        is the lag a socket read that became ready then would have had. One probe at a time,
        so a blocked loop counts once, for as long as it was blocked. Every CPU_WINDOW_S:
        the process's CPU share over that window (the busiest one is the peak)."""
        cpu_at, wall_at = time.process_time(), time.perf_counter()
        ran = threading.Event()
        ran.set()
        while not stop.wait(SAMPLE_S):
            if ran.is_set():
                ran.clear()
                posted = perf_counter_ns()
                try:
                    loop.call_soon_threadsafe(self._after_probe, posted, ran)
                except RuntimeError:  # the loop closed
                    return
                self.posted += 1
            wall = time.perf_counter()
            if wall - wall_at >= CPU_WINDOW_S:
                cpu = time.process_time()
                share = (cpu - cpu_at) / (wall - wall_at)
                self.cpu_peak = share if self.cpu_peak is None else max(self.cpu_peak, share)
                cpu_at, wall_at = cpu, wall
        # A level shorter than one window still gets a figure: its whole length's share.
        wall = time.perf_counter()
        if self.cpu_peak is None and wall - wall_at >= CPU_WINDOW_S / 10:
            self.cpu_peak = (time.process_time() - cpu_at) / (wall - wall_at)

    def _after_probe(self, posted_ns: int, ran: threading.Event) -> None:
        self._probe(posted_ns)
        ran.set()
