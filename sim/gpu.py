"""GPU mode: a continuous-batching server modelled on the roofline of a named GPU.

Three layers, so the model can be checked with a fake clock and no sockets:

- `GpuModel`: the deployment's figures and the step-time formula (pure functions).
- `GpuEngine`: requests, admission under the KV-cache budget, chunked prefill and decode,
  one step at a time on whatever clock the caller passes (a plain state machine; `drain`
  runs it until idle). Also the telemetry it implies (DCGM fields, KV-cache usage).
- `EngineRunner`: the asyncio task that runs the engine's steps on the loop's clock.

The model (see docs/figures.md, "Physical limits"): a step reads the weights once plus the KV
cache of every decoding request, and does 2 x P FLOPs per token it processes, so

    step time = max(bytes / (B x eff), FLOPs / (F x eff)) + step overhead
    bytes     = P x b + sum over decoding requests of context x kv_bytes_per_token
    FLOPs     = 2 x P x (decode tokens + prefill tokens)

with B and F the peak bandwidth and compute of all GPUs together (tensor parallel).
Attention FLOPs, and the KV reads of chunked prefill, are left out.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import math
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Final, Literal

from infercost.hardware.catalog import BYTES_PER_PARAM
from sim.config import SimConfig, gpu_spec

logger = logging.getLogger(__name__)

#: Power of an idle GPU as a share of its TDP (an H100/H200 idles near 70-100 W of 700 W).
IDLE_POWER_FRACTION: Final = 0.1
#: The telemetry gauges (utilisation, SM activity, power) average over this much wall time.
UTIL_WINDOW_S: Final = 1.0
#: How far the runner lets the model's clock trail the loop's before it gives up the
#: difference (see EngineRunner).
MAX_LAG_S: Final = 0.02
_MIB: Final = 1024 * 1024

RequestState = Literal["waiting", "running", "finished", "cancelled"]


@dataclass(frozen=True, slots=True)
class GpuModel:
    """One deployment's figures: P parameters at b bytes on gpu_count GPUs, and the engine."""

    gpu: str
    gpu_count: int
    params: float  # P, parameters
    bytes_per_param: float  # b
    kv_bytes_per_token: int
    bandwidth_bytes_per_s: float  # B, peak, all GPUs
    peak_flops: float  # F, peak in this precision, all GPUs
    memory_bytes: float  # all GPUs
    efficiency: float
    step_overhead_s: float
    memory_utilization: float
    tdp_w: float  # per GPU

    @classmethod
    def from_config(cls, config: SimConfig) -> GpuModel:
        """The model a gpu-mode SimConfig describes (catalog figures times gpu_count)."""
        spec = gpu_spec(config.gpu)
        tflops = spec.bf16_tflops if config.precision == "bf16" else spec.fp8_tflops
        if tflops is None:
            raise ValueError(f"{spec.name} has no {config.precision} compute figure")
        n = config.gpu_count
        return cls(
            gpu=spec.name,
            gpu_count=n,
            params=config.params_b * 1e9,
            bytes_per_param=BYTES_PER_PARAM[config.precision],
            kv_bytes_per_token=config.kv_bytes,
            bandwidth_bytes_per_s=spec.memory_bandwidth_gbps * 1e9 * n,
            peak_flops=tflops * 1e12 * n,
            memory_bytes=spec.memory_gb * 1e9 * n,
            efficiency=config.efficiency,
            step_overhead_s=config.step_overhead_ms / 1000.0,
            memory_utilization=config.gpu_memory_utilization,
            tdp_w=spec.power_w,
        )

    @property
    def weight_bytes(self) -> float:
        """P x b: what every step reads once."""
        return self.params * self.bytes_per_param

    @property
    def kv_budget_bytes(self) -> float:
        """Memory x utilisation - weights: what requests may reserve for their KV cache."""
        return self.memory_bytes * self.memory_utilization - self.weight_bytes

    @property
    def kv_capacity_tokens(self) -> int:
        """How many tokens of KV cache the budget holds."""
        return int(self.kv_budget_bytes // self.kv_bytes_per_token)

    def step_bytes(self, kv_tokens_read: int) -> float:
        """Bytes a step reads: the weights plus `kv_tokens_read` tokens of KV cache."""
        return self.weight_bytes + kv_tokens_read * self.kv_bytes_per_token

    def step_flops(self, tokens: int) -> float:
        """FLOPs of a step that processes `tokens` tokens (prefill and decode alike)."""
        return 2.0 * self.params * tokens

    def roofline_s(self, *, tokens: int, kv_tokens_read: int) -> float:
        """The GPU time of a step: memory- or compute-bound, whichever is slower."""
        memory_s = self.step_bytes(kv_tokens_read) / (self.bandwidth_bytes_per_s * self.efficiency)
        compute_s = self.step_flops(tokens) / (self.peak_flops * self.efficiency)
        return max(memory_s, compute_s)

    def step_s(self, *, tokens: int, kv_tokens_read: int) -> float:
        """Wall time of one engine step: the roofline time plus the fixed overhead."""
        return self.roofline_s(tokens=tokens, kv_tokens_read=kv_tokens_read) + (
            self.step_overhead_s
        )

    def decode_bound_tokens_per_s(self) -> float:
        """One stream's decode limit, B x eff / (P x b), before overhead and KV reads."""
        return self.bandwidth_bytes_per_s * self.efficiency / self.weight_bytes

    def compute_bound_tokens_per_s(self) -> float:
        """The limit of any batch, F x eff / (2 x P) tokens/s."""
        return self.peak_flops * self.efficiency / (2.0 * self.params)

    def prefill_bound_s(self, prompt_tokens: int) -> float:
        """Compute-bound time to prefill m tokens, 2 x P x m / (F x eff)."""
        return self.step_flops(prompt_tokens) / (self.peak_flops * self.efficiency)


class GpuRequest:
    """One request in the engine: its sizes, its progress and when things happened.

    `generated` is the number of tokens emitted so far; `on_progress` (if set) is called
    after every step that emitted one of them, so a handler can send it.
    """

    __slots__ = (
        "admitted_at",
        "cached_tokens",
        "finished_at",
        "first_token_at",
        "generated",
        "kv_bytes",
        "max_tokens",
        "on_progress",
        "prefilled",
        "prompt_tokens",
        "state",
        "submitted_at",
    )

    def __init__(
        self,
        prompt_tokens: int,
        max_tokens: int,
        on_progress: Callable[[], None] | None = None,
        cached_tokens: int = 0,
    ) -> None:
        if prompt_tokens < 1 or max_tokens < 1:
            raise ValueError("a request has at least one prompt token and one output token")
        if not 0 <= cached_tokens < prompt_tokens:
            raise ValueError("cached_tokens must be in 0..prompt_tokens - 1")
        self.prompt_tokens = prompt_tokens
        self.max_tokens = max_tokens
        self.on_progress = on_progress
        self.kv_bytes = 0  # reserved when admitted: (prompt + max_tokens) x kv per token
        # A prefix-cache hit: those prompt tokens' KV exists, only the rest is prefilled.
        self.cached_tokens = cached_tokens
        self.prefilled = cached_tokens
        self.generated = 0
        self.state: RequestState = "waiting"
        self.submitted_at = math.nan
        self.admitted_at = math.nan  # start of the step that admitted it
        self.first_token_at = math.nan
        self.finished_at = math.nan

    @property
    def done(self) -> bool:
        """Whether every requested token has been emitted."""
        return self.state == "finished"

    def __repr__(self) -> str:
        return (
            f"GpuRequest(prompt={self.prompt_tokens}, max_tokens={self.max_tokens}, "
            f"state={self.state}, prefilled={self.prefilled}, generated={self.generated})"
        )


@dataclass(slots=True)
class Step:
    """One engine step: its schedule and what it processes."""

    start: float
    end: float
    prefill: list[tuple[GpuRequest, int]]  # (request, prompt tokens in this step)
    decode: list[GpuRequest]
    tokens: int
    kv_tokens_read: int
    bytes_read: float
    flops: float


@dataclass(frozen=True, slots=True)
class Activity:
    """Shares of a telemetry window: in steps (busy), in GPU work (active, no overhead),
    and the DRAM and tensor-core load at peak rates. All 0..1."""

    busy: float
    active: float
    dram: float
    tensor: float


class GpuEngine:
    """Continuous batching on a GpuModel, driven step by step on the caller's clock.

    Admission is FIFO: the oldest waiting request is admitted while fewer than
    `max_batch` run and its KV reservation (prompt + max_tokens tokens) fits the budget;
    a request that does not fit blocks those behind it. A step prefills at most
    `prefill_chunk` prompt tokens (oldest requests first) and decodes one token of every
    request whose prompt is done. A prompt finishing in a step emits its first token at
    the step end; each decode emits one token at the step end.
    """

    def __init__(self, model: GpuModel, *, max_batch: int, prefill_chunk: int) -> None:
        if max_batch < 1 or prefill_chunk < 1:
            raise ValueError("max_batch and prefill_chunk must be >= 1")
        if model.kv_budget_bytes <= 0:
            raise ValueError("the weights leave no memory for the KV cache")
        self.model = model
        self.max_batch = max_batch
        self.prefill_chunk = prefill_chunk
        self.waiting: deque[GpuRequest] = deque()
        self.running: list[GpuRequest] = []
        self.kv_reserved_bytes = 0
        self.clock = -math.inf  # when the last step ended
        self.current: Step | None = None
        self.prompt_tokens_total = 0
        self.generation_tokens_total = 0
        self.steps_total = 0
        # Telemetry: (start, end, active start, bytes, flops) of recent steps; busy seconds
        # of all steps planned so far; when the clock started (for the energy counter).
        self._recent: deque[tuple[float, float, float, float, float]] = deque()
        self._busy_s_total = 0.0
        self.started_at: float | None = None

    @classmethod
    def from_config(cls, config: SimConfig) -> GpuEngine:
        """The engine a gpu-mode SimConfig describes."""
        return cls(
            GpuModel.from_config(config),
            max_batch=config.max_batch,
            prefill_chunk=config.prefill_chunk,
        )

    # -- requests

    def rejection(self, prompt_tokens: int, max_tokens: int) -> str | None:
        """Why a request can never run (its KV reservation exceeds the whole budget)."""
        need = prompt_tokens + max_tokens
        capacity = self.model.kv_capacity_tokens
        if need > capacity:
            return (
                f"prompt ({prompt_tokens} tokens) plus max_tokens ({max_tokens}) needs {need} "
                f"tokens of KV cache, more than the {capacity} the simulated "
                f"{self.model.gpu_count} x {self.model.gpu} holds: ask for fewer tokens"
            )
        return None

    def submit(self, request: GpuRequest, now: float) -> None:
        """Queue a request that arrived at `now` (arrival order: `now` never decreases)."""
        problem = self.rejection(request.prompt_tokens, request.max_tokens)
        if problem is not None:
            raise ValueError(problem)
        if request.state != "waiting" or not math.isnan(request.submitted_at):
            raise ValueError(f"{request!r} was submitted already")
        request.submitted_at = now
        request.kv_bytes = (
            request.prompt_tokens + request.max_tokens
        ) * self.model.kv_bytes_per_token
        self.waiting.append(request)

    def cancel(self, request: GpuRequest) -> None:
        """Drop a request (its client left), freeing its KV; no-op once finished."""
        if request.state == "waiting":
            with contextlib.suppress(ValueError):  # not submitted (yet)
                self.waiting.remove(request)
        elif request.state == "running":
            self.running.remove(request)
            self.kv_reserved_bytes -= request.kv_bytes
        else:
            return
        request.state = "cancelled"

    @property
    def idle(self) -> bool:
        """Nothing running and nothing waiting."""
        return not self.running and not self.waiting

    # -- steps

    def plan_step(self) -> Step:
        """Admit what fits, then plan the next step from the end of the last one (or from
        the oldest arrival, after idling). Call finish_step(step) at step.end."""
        if self.current is not None:
            raise RuntimeError("finish the current step first")
        if self.idle:
            raise RuntimeError("no request to run")
        start = self.clock
        if not self.running:
            start = max(start, self.waiting[0].submitted_at)
        self._admit(start)
        prefill: list[tuple[GpuRequest, int]] = []
        decode: list[GpuRequest] = []
        budget = self.prefill_chunk
        kv_tokens_read = 0
        for request in self.running:
            remaining = request.prompt_tokens - request.prefilled
            if remaining == 0:
                decode.append(request)
                kv_tokens_read += request.prompt_tokens + request.generated
            elif budget > 0:
                take = min(remaining, budget)
                prefill.append((request, take))
                budget -= take
        tokens = len(decode) + self.prefill_chunk - budget
        model = self.model
        duration = model.step_s(tokens=tokens, kv_tokens_read=kv_tokens_read)
        step = Step(
            start=start,
            end=start + duration,
            prefill=prefill,
            decode=decode,
            tokens=tokens,
            kv_tokens_read=kv_tokens_read,
            bytes_read=model.step_bytes(kv_tokens_read),
            flops=model.step_flops(tokens),
        )
        self.current = step
        self._record(step)
        return step

    def _admit(self, start: float) -> None:
        waiting = self.waiting
        budget = self.model.kv_budget_bytes
        while waiting and len(self.running) < self.max_batch:
            head = waiting[0]
            if head.submitted_at > start or self.kv_reserved_bytes + head.kv_bytes > budget:
                break
            waiting.popleft()
            head.state = "running"
            head.admitted_at = start
            self.running.append(head)
            self.kv_reserved_bytes += head.kv_bytes

    def finish_step(self, step: Step) -> None:
        """Apply a step at its end: emit tokens, free finished requests, notify handlers."""
        if step is not self.current:
            raise RuntimeError("not the current step")
        self.current = None
        self.clock = end = step.end
        self.steps_total += 1
        emitted: list[GpuRequest] = []
        for request, take in step.prefill:
            if request.state != "running":  # cancelled during the step
                continue
            request.prefilled += take
            self.prompt_tokens_total += take
            if request.prefilled == request.prompt_tokens:
                request.generated = 1
                request.first_token_at = end
                emitted.append(request)
        for request in step.decode:
            if request.state != "running":
                continue
            request.generated += 1
            emitted.append(request)
        self.generation_tokens_total += len(emitted)
        finished = False
        for request in emitted:
            if request.generated >= request.max_tokens:
                request.state = "finished"
                request.finished_at = end
                self.kv_reserved_bytes -= request.kv_bytes
                finished = True
        if finished:
            self.running = [r for r in self.running if r.state == "running"]
        for request in emitted:
            if request.on_progress is not None:
                request.on_progress()

    def catch_up(self, now: float) -> float:
        """Move the clock to `now` when the last step ended earlier; the time skipped."""
        if self.current is not None:
            raise RuntimeError("finish the current step first")
        skipped = now - self.clock
        if skipped <= 0 or math.isinf(skipped):
            return 0.0
        self.clock = now
        return skipped

    def drain(self) -> float:
        """Run steps back to back until idle (fake clock); the time the last one ended."""
        while not self.idle:
            self.finish_step(self.plan_step())
        return self.clock

    # -- telemetry

    def _record(self, step: Step) -> None:
        duration = step.end - step.start
        self._busy_s_total += duration
        active_start = step.start + min(self.model.step_overhead_s, duration)
        recent = self._recent
        recent.append((step.start, step.end, active_start, step.bytes_read, step.flops))
        horizon = step.start - UTIL_WINDOW_S
        while recent and recent[0][1] < horizon:
            recent.popleft()

    def activity(self, now: float) -> Activity:
        """Shares of the last UTIL_WINDOW_S before `now` spent in steps, in GPU work, and
        the DRAM and tensor load that work puts on each GPU at peak rates."""
        lo = now - UTIL_WINDOW_S
        busy = active = dram = tensor = 0.0
        for start, end, active_start, bytes_read, flops in self._recent:
            if end <= lo or start >= now:
                continue
            busy += min(end, now) - max(start, lo)
            work = end - active_start
            if work > 0:
                overlap = max(0.0, min(end, now) - max(active_start, lo))
                active += overlap
                share = overlap / work
                dram += bytes_read * share
                tensor += flops * share
        model = self.model
        return Activity(
            busy=min(1.0, busy / UTIL_WINDOW_S),
            active=min(1.0, active / UTIL_WINDOW_S),
            dram=min(1.0, dram / (model.bandwidth_bytes_per_s * UTIL_WINDOW_S)),
            tensor=min(1.0, tensor / (model.peak_flops * UTIL_WINDOW_S)),
        )

    def kv_usage(self) -> float:
        """Share of the KV budget reserved by running requests (0..1)."""
        return self.kv_reserved_bytes / self.model.kv_budget_bytes

    def power_w(self, busy: float) -> float:
        """One GPU's draw: linear from idle (IDLE_POWER_FRACTION x TDP) to TDP in `busy`."""
        idle = IDLE_POWER_FRACTION * self.model.tdp_w
        return idle + (self.model.tdp_w - idle) * busy

    def energy_j(self, now: float) -> float:
        """One GPU's energy since the clock started: the integral of power_w over time."""
        if self.started_at is None:
            return 0.0
        busy = self._busy_s_total
        if self.current is not None and self.current.end > now:  # the rest is not done yet
            busy -= self.current.end - max(now, self.current.start)
        idle = IDLE_POWER_FRACTION * self.model.tdp_w
        elapsed = max(0.0, now - self.started_at)
        return idle * elapsed + (self.model.tdp_w - idle) * max(0.0, busy)

    def memory_used_bytes(self) -> float:
        """One GPU's share of weights plus reserved KV cache."""
        return (self.model.weight_bytes + self.kv_reserved_bytes) / self.model.gpu_count

    def dcgm_values(self, now: float) -> dict[str, float]:
        """One GPU's telemetry at `now`, by the DCGM field dcgm-exporter publishes it as
        (every GPU of the deployment reads the same; sim.metrics exposes them)."""
        model = self.model
        act = self.activity(now)
        per_gpu_memory = model.memory_bytes / model.gpu_count
        used = self.memory_used_bytes()
        return {
            "DCGM_FI_DEV_GPU_UTIL": float(round(100.0 * act.busy)),
            "DCGM_FI_PROF_SM_ACTIVE": act.active,
            "DCGM_FI_PROF_DRAM_ACTIVE": act.dram,
            "DCGM_FI_PROF_PIPE_TENSOR_ACTIVE": act.tensor,
            "DCGM_FI_DEV_POWER_USAGE": self.power_w(act.busy),
            "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION": float(round(1000.0 * self.energy_j(now))),
            "DCGM_FI_DEV_FB_USED": float(round(used / _MIB)),
            "DCGM_FI_DEV_FB_FREE": float(round((per_gpu_memory - used) / _MIB)),
        }


def wake(fut: asyncio.Future[None]) -> None:
    """Resolve `fut` unless it already is (a timer and a notify may race to it)."""
    if not fut.done():
        fut.set_result(None)


class EngineRunner:
    """Runs a GpuEngine's steps on the running loop's clock, as one asyncio task.

    Each step ends at an absolute loop time (call_at), so a late wake-up shortens the wait
    before the next step instead of shifting every later one: the model's schedule is what
    counts. Only when the process falls more than MAX_LAG_S behind it (the CPU cannot send
    tokens as fast as the modelled GPU makes them) does the next step start from now: the
    simulator then runs like a slower GPU, rather than letting the debt grow, with new
    arrivals waiting for the model's clock to reach them and tokens bursting out as it
    catches up. `slipped_s` adds up the time given up that way (0 when the simulator kept
    up). When idle it waits for a submit without spinning.
    """

    def __init__(self, engine: GpuEngine, *, max_lag_s: float = MAX_LAG_S) -> None:
        self.engine = engine
        self.max_lag_s = max_lag_s
        self.slipped_s = 0.0
        self._task: asyncio.Task[None] | None = None
        self._wakeup: asyncio.Future[None] | None = None

    def start(self) -> None:
        """Start the step loop in the running event loop (once; later calls do nothing)."""
        if self._task is not None:
            return
        loop = asyncio.get_running_loop()
        self.engine.started_at = loop.time()
        self._task = loop.create_task(self._run(loop), name="sim-gpu-engine")
        self._task.add_done_callback(_log_failure)

    def stop(self) -> None:
        """Cancel the step loop (the server is shutting down)."""
        if self._task is not None:
            self._task.cancel()

    def submit(self, request: GpuRequest) -> None:
        """Queue a request now (ValueError when it can never fit; see GpuEngine.rejection)."""
        self.start()
        self.engine.submit(request, asyncio.get_running_loop().time())
        if self._wakeup is not None:
            wake(self._wakeup)

    def cancel(self, request: GpuRequest) -> None:
        """Drop a request whose client left; no-op once it finished."""
        self.engine.cancel(request)

    async def _run(self, loop: asyncio.AbstractEventLoop) -> None:
        engine = self.engine
        while True:
            if engine.idle:
                self._wakeup = fut = loop.create_future()
                try:
                    await fut
                finally:
                    self._wakeup = None
                continue
            step = engine.plan_step()
            fut = loop.create_future()
            handle = loop.call_at(step.end, wake, fut)
            try:
                await fut
            finally:
                handle.cancel()
            engine.finish_step(step)
            now = loop.time()
            if now - step.end > self.max_lag_s and not engine.idle:
                self.slipped_s += engine.catch_up(now)


def _log_failure(task: asyncio.Task[None]) -> None:
    if not task.cancelled() and task.exception() is not None:
        logger.error("the simulated GPU engine stopped", exc_info=task.exception())
