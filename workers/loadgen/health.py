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

Lags are counted in a fixed histogram of 10 µs buckets up to 1 s: recording is an index and
an increment, with no allocation on the hot path. A new level zeroes the histograms in place:
bodies still being read hold them.
"""

from __future__ import annotations

import asyncio
import threading
import time
from array import array
from time import perf_counter_ns
from typing import Any, Final

import numpy as np

#: Bucket width of the lag histograms in ns (10 µs), and how many buckets (up to 1 s).
BUCKET_NS: Final = 10_000
_BUCKETS: Final = 100_000
#: The loop-lag sampler's period, and the CPU window.
SAMPLE_S: Final = 0.005
CPU_WINDOW_S: Final = 1.0


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


class ClientHealth:
    """The reading side's figures of one process, per level: `start()` when the level
    starts (on the event loop), `await stop()` for its figures. The transport records read
    lag and re-sends into it; `start()` starts the loop-lag and CPU sampler."""

    def __init__(self) -> None:
        self.read_lag = LagHistogram()
        self.loop_lag = LagHistogram()
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
        """Reset, and sample the running loop's lag and the CPU until `stop`."""
        self.reset()
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

    async def stop(self) -> dict[str, Any]:
        """Stop sampling; the level's figures (see `figures`)."""
        thread, stop = self._thread, self._stop
        self._thread = self._stop = None
        if thread is not None and stop is not None:
            stop.set()
            # Off the loop: the thread may be waiting for the loop to run its last probe.
            await asyncio.to_thread(thread.join)
        return self.figures()

    def figures(self) -> dict[str, Any]:
        """read_lag_p50/p99/max_ms, loop_lag_p50/p99/max_ms, cpu_util_peak, resent (the keys
        of the run's `client` block that infercost.figures.metrics.summarize takes as `reading`)."""
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
