"""The simulator's timing models: when a request is admitted and when its tokens are due.

The app (sim.app) has one request path: parse, admission, then a stream in the
configured engine's shape or one answer. A mode supplies only the timing model behind it:

- `FixedMode`: the first token `ttft` after admission (less for a prefix-cache hit), then
  one every `itl` (or `burst` per write), at most `max_concurrency` generating at once.
- `GpuMode`: tokens as the modelled GPU engine emits them (sim.gpu), which also
  owns admission (its KV budget and batch) and the counters behind /metrics.

A mode makes a `Generation` per admitted request; the app gives it an `emit(k, end)`
callback that writes content tokens k..end-1, and reads back the request's prompt and
generation seconds for the stream's end, the answer and the counters.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any, Protocol

from sim.config import SimConfig
from sim.gpu import EngineRunner, GpuEngine, GpuRequest, wake
from sim.lateness import Lateness
from sim.metrics import GpuCollector, SimMetrics

#: Writes content tokens k..end-1 of the request (one write).
Emit = Callable[[int, int], Awaitable[None]]


@dataclass(slots=True)
class Job:
    """One generation request as the simulator serves it."""

    chat: bool
    prompt_tokens: int
    n: int  # tokens the request asked for (or the default)
    reason: str  # finish_reason when all n are sent
    stream: bool
    include_usage: bool
    continuous_usage: bool  # usage on every chunk
    keys: list[int]  # prefix-cache block keys of the prompt
    cached: int = 0  # prompt tokens served from the prefix cache (set at admission)
    n_out: int = 0  # tokens sent before the stream ends: n, or fewer for a fault
    # record_writes: [arrival, then the loop time of each content write] (GET /stats).
    writes: list[float] | None = None
    # Of the n tokens, the first this many are reasoning text (chat with reasoning_tokens).
    reasoning: int = 0
    # Fixed mode: this request's own (ttft, itl) in seconds, its model's (served_models) or
    # a JSON answer's (structured_itl_ms); None: the config's.
    speed: tuple[float, float] | None = None
    # The model it asked for, when one of served_models (its events name it); None: the
    # config's.
    model: str | None = None
    # An answer of tool calls or JSON (sim.answers): each token's pre-encoded choice, the
    # reasoning ones first; and, for a whole answer, the call (name, arguments) or the text.
    pieces: list[bytes] | None = None
    call: tuple[str, str] | None = None
    json_text: str | None = None
    # llama.cpp with reasoning_format "none": the reasoning is content, in think tags.
    inline_reasoning: bool = False
    # Image parts: their prompt tokens (within prompt_tokens) and, in fixed mode, the
    # prefill time they add before the first token (s).
    images: int = 0
    image_tokens: int = 0
    image_s: float = 0.0


class Inflight:
    """One generating request: its current sleep, and whether to stop (client left or the
    server is shutting down), so streams end at once and the gauges stay true."""

    __slots__ = ("client_gone", "notified", "stopped", "waiter")

    def __init__(self) -> None:
        self.client_gone = False
        self.notified = False
        self.stopped = False
        self.waiter: asyncio.Future[None] | None = None

    def notify(self) -> None:
        """The engine emitted tokens (gpu mode); remembered until the next wait()."""
        self.notified = True
        if self.waiter is not None:
            wake(self.waiter)

    def stop(self) -> None:
        """End the generation: its sleep or wait returns at once, with `stopped` set."""
        self.stopped = True
        if self.waiter is not None:
            wake(self.waiter)

    async def watch(self, receive: Callable[[], Awaitable[MutableMapping[str, Any]]]) -> None:
        """Stop when the client disconnects."""
        # After the body, uvicorn's receive() returns only when the client disconnects (or
        # the response completes, when nobody looks at the flag any more).
        while (await receive())["type"] != "http.disconnect":
            pass
        self.client_gone = True
        self.stop()

    async def sleep_until(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        """Sleep to an absolute loop time (overshoot never accumulates into drift), or
        until stop()."""
        self.waiter = fut = loop.create_future()
        handle = loop.call_at(when, wake, fut)
        try:
            await fut
        finally:
            handle.cancel()
            self.waiter = None

    async def wait(self, loop: asyncio.AbstractEventLoop) -> None:
        """Until notify() or stop(), or at once if either came since the last wait."""
        if not (self.notified or self.stopped):
            self.waiter = fut = loop.create_future()
            try:
                await fut
            finally:
                self.waiter = None
        self.notified = False


class Generation(Protocol):
    """One admitted request's timing."""

    async def stream(self, inflight: Inflight, emit: Emit) -> bool:
        """Emit the job's n_out tokens when due; False if stopped first."""

    async def complete(self, inflight: Inflight) -> bool:
        """Wait until the last token is due (a non-streamed answer); False if stopped."""

    def answered(self) -> None:
        """The non-streamed answer went out."""

    def times(self) -> tuple[float, float]:
        """(prompt, generation) seconds: arrival to first token, first to last token."""

    def close(self) -> None:
        """The request is over (finished, failed or its client left)."""


class Mode(Protocol):
    """A timing model; see the module doc."""

    def on_request(self) -> None:
        """An HTTP request arrived (gpu mode starts its clock on first contact)."""

    def stop(self) -> None:
        """The server is shutting down."""

    def overloaded(self, limit: int) -> bool:
        """Whether `limit` requests already wait for admission."""

    def admitted(self, arrival: float) -> contextlib.AbstractAsyncContextManager[float]:
        """Wait for admission; yields the time the first token's wait starts from."""

    def rejection(self, job: Job) -> str | None:
        """Why the request can never run (400), or None."""

    def begin(self, job: Job, arrival: float, inflight: Inflight) -> Generation:
        """Start generating an admitted request (its cached tokens already looked up)."""

    def sync(self, metrics: SimMetrics) -> None:
        """Bring the counters behind /metrics up to date before they are exposed."""

    def collectors(self, config: SimConfig) -> list[GpuCollector]:
        """Collectors of the mode's own series (gpu mode: the GPU's telemetry)."""


# ------------------------------------------------------------------------ fixed mode


class Admission:
    """--max-concurrency slots, and the running count of the requests holding them. A request
    that ends hands its slot straight to the next in line, which stops counting as waiting and
    counts as running at that moment (before its own task next runs), so /metrics never shows
    a request waiting beside a free slot (an engine's scheduler fills a freed slot in the step
    that frees it)."""

    def __init__(self, limit: int, metrics: SimMetrics) -> None:
        self.free = limit
        self.metrics = metrics
        self._line: deque[asyncio.Future[None]] = deque()

    def full(self) -> bool:
        """Whether every slot is taken."""
        return self.free == 0

    async def acquire(self) -> None:
        """A slot: at once when one is free and nobody waits, else in arrival order."""
        if self.free > 0 and not self._line:
            self.free -= 1
            self.metrics.started()
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._line.append(waiter)
        self.metrics.waiting += 1
        try:
            await waiter
        except asyncio.CancelledError:
            if waiter.done() and not waiter.cancelled():
                self.release()  # handed a slot as it was cancelled: pass it on
            else:
                with contextlib.suppress(ValueError):  # release() may have dropped it
                    self._line.remove(waiter)
                self.metrics.waiting -= 1
            raise

    def release(self) -> None:
        """Hand the slot to the next in line still waiting (still running: it changes
        hands), else free it."""
        metrics = self.metrics
        while self._line:
            waiter = self._line.popleft()
            if not waiter.done():
                metrics.waiting -= 1
                waiter.set_result(None)
                return
        self.free += 1
        metrics.ended()


class FixedMode:
    """Timings from the config: ttft, then itl per token; --max-concurrency admission."""

    def __init__(
        self,
        config: SimConfig,
        metrics: SimMetrics,
        lateness: Lateness,
        remember: Callable[[Job], None],
    ) -> None:
        self.metrics = metrics
        self.lateness = lateness
        self.remember = remember
        self.ttft_s = config.ttft_ms / 1000.0
        self.itl_s = config.itl_ms / 1000.0
        self.burst = config.burst
        limit = config.max_concurrency
        self._admission = Admission(limit, metrics) if limit is not None else None

    def on_request(self) -> None:
        """Nothing to start: the timings need no clock of their own."""

    def stop(self) -> None:
        """Nothing to stop."""

    def overloaded(self, limit: int) -> bool:
        """Whether `limit` requests already wait behind --max-concurrency."""
        admission = self._admission
        return admission is not None and admission.full() and self.metrics.waiting >= limit

    @contextlib.asynccontextmanager
    async def admitted(self, arrival: float) -> AsyncIterator[float]:
        """Queue behind --max-concurrency; the first token is due ttft after admission. The
        request counts as running from admission to its end."""
        admission = self._admission
        if admission is None:
            metrics = self.metrics
            metrics.started()
            try:
                yield arrival
            finally:
                metrics.ended()
            return
        await admission.acquire()
        try:
            yield asyncio.get_running_loop().time()
        finally:
            admission.release()

    def rejection(self, job: Job) -> str | None:
        """Any size fits."""
        return None

    def begin(self, job: Job, arrival: float, inflight: Inflight) -> FixedGeneration:
        """Start its schedule; its prompt is cached once its first token is due."""
        return FixedGeneration(self, job, arrival)

    def sync(self, metrics: SimMetrics) -> None:
        """The counters are kept as requests go."""

    def collectors(self, config: SimConfig) -> list[GpuCollector]:
        """No series of its own."""
        return []


class FixedGeneration:
    """A request on the fixed schedule: token k due at first + k x itl."""

    __slots__ = ("first", "itl_s", "job", "mode", "prompt_s")

    def __init__(self, mode: FixedMode, job: Job, arrival: float) -> None:
        self.mode = mode
        self.job = job
        metrics = mode.metrics
        metrics.prompt_tokens += job.prompt_tokens
        metrics.running_max_tokens += job.prompt_tokens + job.n
        # TTFT with a prefix-cache hit: ttft x uncached / prompt tokens (prefill time is
        # taken as proportional to the tokens computed).
        ttft_s = mode.ttft_s if job.speed is None else job.speed[0]
        self.itl_s = mode.itl_s if job.speed is None else job.speed[1]
        text_tokens = job.prompt_tokens - job.image_tokens
        self.prompt_s = ttft_s * max(0, text_tokens - job.cached) / max(1, text_tokens)
        self.prompt_s += job.image_s
        self.first = arrival + self.prompt_s
        asyncio.get_running_loop().call_at(self.first, mode.remember, job)

    async def stream(self, inflight: Inflight, emit: Emit) -> bool:
        """One event per token at first + k x itl.

        With --burst B, tokens go out B events per write, each write when its last token is
        due (never early). Every write's lateness against that due time is recorded.
        """
        loop = asyncio.get_running_loop()
        mode = self.mode
        metrics = mode.metrics
        record = mode.lateness.record
        itl = self.itl_s
        burst = mode.burst
        first = self.first
        writes = self.job.writes
        n_out = self.job.n_out
        k = 0
        while k < n_out:
            end = min(k + burst, n_out)
            due = first + (end - 1) * itl
            if due > loop.time():  # already due (behind, or itl 0): no timer to wait on
                await inflight.sleep_until(loop, due)
            if inflight.stopped:
                return False
            record(loop.time() - due)
            if writes is not None:
                writes.append(loop.time())
            await emit(k, end)
            metrics.generation_tokens += end - k
            metrics.n_decode += end - k
            metrics.busy_slot_sum += metrics.running * (end - k)
            k = end
        return True

    async def complete(self, inflight: Inflight) -> bool:
        """Until first + (n-1) x itl, when a stream would have ended."""
        loop = asyncio.get_running_loop()
        due = self.first + (self.job.n - 1) * self.itl_s
        await inflight.sleep_until(loop, due)
        if inflight.stopped:
            return False
        self.mode.lateness.record(loop.time() - due)
        return True

    def answered(self) -> None:
        """Count the answer's tokens, as one decode each."""
        metrics = self.mode.metrics
        metrics.generation_tokens += self.job.n
        metrics.n_decode += self.job.n

    def times(self) -> tuple[float, float]:
        """The schedule's: the (cache-shortened) TTFT, and (n-1) x itl."""
        return self.prompt_s, (self.job.n - 1) * self.itl_s

    def close(self) -> None:
        """No longer generating (admission counts it out of the running)."""
        metrics = self.mode.metrics
        metrics.running_max_tokens -= self.job.prompt_tokens + self.job.n


# -------------------------------------------------------------------------- gpu mode


class GpuMode:
    """Tokens as the modelled GPU engine emits them (see sim.gpu)."""

    def __init__(self, config: SimConfig, remember: Callable[[Job], None]) -> None:
        self.engine = GpuEngine.from_config(config)
        self.runner = EngineRunner(self.engine)
        self.remember = remember

    def on_request(self) -> None:
        """The GPU clock (and its telemetry) starts on first contact."""
        self.runner.start()

    def stop(self) -> None:
        """Stop the engine's step loop."""
        self.runner.stop()

    def overloaded(self, limit: int) -> bool:
        """Whether `limit` requests wait in the engine (not yet admitted)."""
        return len(self.engine.waiting) >= limit

    @contextlib.asynccontextmanager
    async def admitted(self, arrival: float) -> AsyncIterator[float]:
        """At once: the engine queues and admits on its own clock."""
        yield arrival

    def rejection(self, job: Job) -> str | None:
        """The request's KV reservation exceeds the whole budget."""
        return self.engine.rejection(job.prompt_tokens, job.n)

    def begin(self, job: Job, arrival: float, inflight: Inflight) -> GpuGeneration:
        """Queue the request in the engine; it wakes `inflight` at each of its tokens."""
        request = GpuRequest(
            job.prompt_tokens, job.n, on_progress=inflight.notify, cached_tokens=job.cached
        )
        generation = GpuGeneration(self, job, request)
        self.runner.submit(request)
        return generation

    def sync(self, metrics: SimMetrics) -> None:
        """Copy the engine's state and counters into the exposed ones."""
        engine = self.engine
        metrics.running = len(engine.running)
        metrics.waiting = len(engine.waiting)
        # The engine prefills only uncached tokens; the counter counts every prompt token.
        metrics.prompt_tokens = engine.prompt_tokens_total + metrics.cached_tokens
        metrics.generation_tokens = engine.generation_tokens_total
        metrics.n_decode = engine.steps_total
        metrics.busy_slot_sum = engine.generation_tokens_total
        metrics.kv_usage = engine.kv_usage()
        metrics.kv_used_tokens = int(engine.kv_reserved_bytes // engine.model.kv_bytes_per_token)
        metrics.running_max_tokens = sum(r.prompt_tokens + r.max_tokens for r in engine.running)

    def collectors(self, config: SimConfig) -> list[GpuCollector]:
        """The GPU's telemetry, on the loop's clock; vLLM's KV gauges beside the default set."""
        return [
            GpuCollector(
                self.engine,
                config.model,
                kv_gauges=config.metrics == "default",
                clock=lambda: asyncio.get_running_loop().time(),
            )
        ]


class GpuGeneration:
    """A request in the engine: its tokens go out as the engine's steps emit them."""

    __slots__ = ("job", "mode", "request")

    def __init__(self, mode: GpuMode, job: Job, request: GpuRequest) -> None:
        self.mode = mode
        self.job = job
        self.request = request

    async def stream(self, inflight: Inflight, emit: Emit) -> bool:
        """Emit each token as the engine emits it; a fault's early end cancels the rest."""
        loop = asyncio.get_running_loop()
        request = self.request
        job = self.job
        n_out = job.n_out
        sent = 0
        while True:
            await inflight.wait(loop)
            if inflight.stopped:
                return False
            emitted = min(request.generated, n_out)
            if emitted > sent:
                if sent == 0:
                    self.mode.remember(job)
                # Usually one token; more only when this task fell a step behind.
                await emit(sent, emitted)
                sent = emitted
            if sent >= n_out and n_out < job.n:  # a fault ends the stream here
                self.mode.runner.cancel(request)
                return True
            if request.done:
                return True

    async def complete(self, inflight: Inflight) -> bool:
        """Until the engine emitted the last token."""
        loop = asyncio.get_running_loop()
        request = self.request
        remembered = False
        while not request.done:
            await inflight.wait(loop)
            if inflight.stopped:
                return False
            if request.generated > 0 and not remembered:  # prefill done
                self.mode.remember(self.job)
                remembered = True
        if not remembered:
            self.mode.remember(self.job)
        return True

    def answered(self) -> None:
        """The engine counted its tokens."""

    def times(self) -> tuple[float, float]:
        """By the model's clock: arrival to first token, first to last (0 while unknown)."""
        request = self.request
        prompt = request.first_token_at - request.submitted_at
        predicted = request.finished_at - request.first_token_at
        return (
            0.0 if math.isnan(prompt) else prompt,
            0.0 if math.isnan(predicted) else predicted,
        )

    def close(self) -> None:
        """Free its KV if the client left early; else a no-op."""
        self.mode.runner.cancel(self.request)
