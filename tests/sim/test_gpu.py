"""GPU mode of the simulator: the engine as a model (fake clock, figures by hand from the
catalog), the asyncio runner on a real loop, and the endpoint end to end over TCP."""

from __future__ import annotations

import asyncio
import json
import math
import re
import select
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from cli.sim import sim as sim_command
from sim.config import SimConfig
from sim.gpu import (
    IDLE_POWER_FRACTION,
    EngineRunner,
    GpuEngine,
    GpuRequest,
)
from sim.metrics import GpuCollector, exposition, registry
from sim.process import SimProcess, sim_process

# Catalog figures the expectations below are computed from, by hand.
H200_BANDWIDTH = 4800e9  # bytes/s
H200_BF16_FLOPS = 989e12
H200_TDP_W = 700.0
L4_MEMORY = 24e9
L4_BANDWIDTH = 300e9
L4_TDP_W = 72.0
P = 8e9  # parameters
WEIGHTS = P * 2  # bf16
KV = 131072  # bytes per token of an 8B Llama-like model in bf16
EFF = 0.7
OVERHEAD_S = 0.0005
MIB = 1024 * 1024


def _engine(**overrides: Any) -> GpuEngine:
    return GpuEngine.from_config(SimConfig(mode="gpu", **overrides))


def _run(engine: GpuEngine, *requests: GpuRequest, at: float = 0.0) -> float:
    for request in requests:
        engine.submit(request, at)
    return engine.drain()


# ------------------------------------------------------------------ the model, by hand


def test_single_stream_decode_runs_at_the_bandwidth_bound() -> None:
    engine = _engine()  # 8B bf16 on one H200
    bound = H200_BANDWIDTH * EFF / WEIGHTS
    assert bound == pytest.approx(210.0)
    assert engine.model.decode_bound_tokens_per_s() == pytest.approx(bound)

    prompt, n = 100, 65
    request = GpuRequest(prompt, n)
    _run(engine, request)
    # A 100-token prefill is memory-bound too: one read of the weights, plus overhead.
    assert request.first_token_at == pytest.approx(1 / bound + OVERHEAD_S, rel=1e-12)
    itl = (request.finished_at - request.first_token_at) / (n - 1)
    # Decode step k (1..n-1) reads the weights and prompt + k tokens of KV cache.
    mean_context = prompt + n / 2
    expected = 1 / bound + OVERHEAD_S + mean_context * KV / (H200_BANDWIDTH * EFF)
    assert itl == pytest.approx(expected, rel=1e-9)

    # Without overhead and with a negligible KV cache, the speed is the bound itself.
    bare = _engine(step_overhead_ms=0, kv_bytes_per_token=1)
    request = GpuRequest(1, 101)
    _run(bare, request)
    rate = 100 / (request.finished_at - request.first_token_at)
    assert rate == pytest.approx(bound, rel=1e-6)


def test_decode_bound_scales_with_gpu_count_and_precision() -> None:
    one = _engine().model
    two = _engine(gpu_count=2).model
    fp8 = _engine(precision="fp8").model
    assert two.decode_bound_tokens_per_s() == pytest.approx(2 * one.decode_bound_tokens_per_s())
    assert two.kv_budget_bytes == pytest.approx(2 * 141e9 * 0.9 - WEIGHTS)
    assert fp8.decode_bound_tokens_per_s() == pytest.approx(2 * one.decode_bound_tokens_per_s())
    assert fp8.compute_bound_tokens_per_s() == pytest.approx(1979e12 * EFF / (2 * P))
    assert fp8.kv_bytes_per_token == KV // 2


def _decode_throughput(n: int, output_tokens: int = 33) -> float:
    """Tokens/s of n streams decoding in lockstep (1-token prompts, one prefill step)."""
    engine = _engine(max_batch=1024)
    requests = [GpuRequest(1, output_tokens) for _ in range(n)]
    _run(engine, *requests)
    assert len({r.first_token_at for r in requests}) == 1
    assert len({r.finished_at for r in requests}) == 1
    first = requests[0]
    return n * (output_tokens - 1) / (first.finished_at - first.first_token_at)


def test_throughput_rises_with_batch_and_flattens_at_the_compute_bound() -> None:
    sizes = [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024]
    throughput = {n: _decode_throughput(n) for n in sizes}
    compute_bound = H200_BF16_FLOPS * EFF / (2 * P)  # 43,269 tokens/s
    assert _engine().model.compute_bound_tokens_per_s() == pytest.approx(compute_bound)

    rates = [throughput[n] for n in sizes]
    assert rates == sorted(rates) and len(set(rates)) == len(rates), rates
    assert all(rate < compute_bound for rate in rates)
    # Memory-bound at small batches: a second stream nearly doubles the output ...
    assert throughput[2] / throughput[1] > 1.95
    # ... compute-bound at large ones: doubling the batch hardly helps.
    assert throughput[1024] / throughput[512] < 1.05
    assert throughput[1024] > 0.95 * compute_bound


def test_ttft_grows_with_the_prompt_as_compute_bound_prefill() -> None:
    ttft: dict[int, float] = {}
    for m in (2048, 3000, 4096, 8192, 16384):
        engine = _engine()
        request = GpuRequest(m, 1)
        _run(engine, request)
        ttft[m] = request.first_token_at - request.submitted_at
        chunks = math.ceil(m / 2048)
        prefill = 2 * P * m / (H200_BF16_FLOPS * EFF)
        assert engine.model.prefill_bound_s(m) == pytest.approx(prefill)
        assert ttft[m] == pytest.approx(prefill + chunks * OVERHEAD_S, rel=1e-9), m
        assert request.done and request.finished_at == request.first_token_at
    assert ttft[16384] / ttft[2048] == pytest.approx(8.0, rel=1e-9)
    # A short prompt is bound by reading the weights, not by compute.
    engine = _engine()
    short = GpuRequest(16, 1)
    _run(engine, short)
    assert short.first_token_at == pytest.approx(WEIGHTS / (H200_BANDWIDTH * EFF) + OVERHEAD_S)
    assert short.first_token_at > engine.model.prefill_bound_s(16) + OVERHEAD_S


def test_prefill_is_chunked_across_requests_next_to_decodes() -> None:
    engine = _engine()
    a, b, c = (GpuRequest(1500, 4) for _ in range(3))
    for request in (a, b, c):
        engine.submit(request, 0.0)

    step = engine.plan_step()
    assert [(r, k) for r, k in step.prefill] == [(a, 1500), (b, 548)]
    assert step.decode == []
    engine.finish_step(step)
    assert (a.generated, b.generated) == (1, 0)

    step = engine.plan_step()
    assert step.prefill == [(b, 952), (c, 1096)]
    assert step.decode == [a]
    assert step.tokens == 1 + 2048
    assert step.kv_tokens_read == 1500 + 1
    expected = max(
        (WEIGHTS + 1501 * KV) / (H200_BANDWIDTH * EFF), 2 * P * 2049 / (H200_BF16_FLOPS * EFF)
    )
    assert step.end - step.start == pytest.approx(expected + OVERHEAD_S)
    engine.finish_step(step)

    step = engine.plan_step()
    assert step.prefill == [(c, 404)]
    assert step.decode == [a, b]
    engine.finish_step(step)
    assert (a.generated, b.generated, c.generated) == (3, 2, 1)
    engine.drain()
    assert all(r.done and r.generated == 4 for r in (a, b, c))
    assert engine.prompt_tokens_total == 4500
    assert engine.generation_tokens_total == 12
    assert engine.kv_reserved_bytes == 0


def test_kv_budget_limits_admission() -> None:
    engine = _engine(gpu="L4")
    budget = L4_MEMORY * 0.9 - WEIGHTS  # 5.6 GB
    assert engine.model.kv_budget_bytes == pytest.approx(budget)
    capacity = int(budget // KV)
    assert engine.model.kv_capacity_tokens == capacity == 42724

    # 10,000 tokens each: four fit, the fifth waits although max_batch (256) has room.
    requests = [GpuRequest(9000, 1000) for _ in range(5)]
    for request in requests:
        engine.submit(request, 0.0)
    step = engine.plan_step()
    assert engine.running == requests[:4]
    assert list(engine.waiting) == requests[4:]
    assert engine.kv_usage() == pytest.approx(4 * 10000 * KV / budget)
    engine.finish_step(step)

    most_running = 4
    while not engine.idle:
        step = engine.plan_step()
        assert engine.kv_reserved_bytes <= budget
        most_running = max(most_running, len(engine.running))
        engine.finish_step(step)
    assert most_running == 4
    # It is admitted by the step right after the first reservation is freed.
    assert requests[4].admitted_at == min(r.finished_at for r in requests[:4])
    assert all(r.done for r in requests)
    assert engine.kv_usage() == 0

    # A request that could never fit is refused up front, not queued forever.
    problem = engine.rejection(40000, capacity - 40000 + 1)
    assert problem is not None and str(capacity) in problem
    assert engine.rejection(40000, capacity - 40000) is None
    with pytest.raises(ValueError, match="KV cache"):
        engine.submit(GpuRequest(40000, capacity), 0.0)


def test_requests_beyond_max_batch_queue_in_arrival_order() -> None:
    engine = _engine(max_batch=4)
    requests = [GpuRequest(10, 20) for _ in range(6)]
    for request in requests:
        engine.submit(request, 0.0)
    step = engine.plan_step()
    assert engine.running == requests[:4]
    assert list(engine.waiting) == requests[4:]
    engine.finish_step(step)
    engine.drain()
    first_batch_end = requests[0].finished_at
    assert {r.finished_at for r in requests[:4]} == {first_batch_end}
    assert {r.admitted_at for r in requests[4:]} == {first_batch_end}
    # The queued pair waits out the whole first batch, then runs as a pair would alone.
    pair = [GpuRequest(10, 20), GpuRequest(10, 20)]
    _run(_engine(max_batch=4), *pair)
    assert requests[4].first_token_at == pytest.approx(first_batch_end + pair[0].first_token_at)
    assert requests[5].finished_at == pytest.approx(first_batch_end + pair[1].finished_at)
    assert requests[5].finished_at > 1.9 * first_batch_end


def test_a_later_arrival_waits_for_the_step_in_progress() -> None:
    engine = _engine()
    early, late = GpuRequest(10, 50), GpuRequest(10, 5)
    engine.submit(early, 0.0)
    step = engine.plan_step()
    engine.submit(late, step.start + 0.001)  # arrives during the first step
    engine.finish_step(step)
    nxt = engine.plan_step()
    assert late.admitted_at == step.end == nxt.start
    assert nxt.decode == [early] and nxt.prefill == [(late, 10)]
    engine.finish_step(nxt)
    engine.drain()
    assert late.done and early.done

    # After idling, the next step starts when the next request arrives.
    idle_arrival = engine.clock + 5.0
    again = GpuRequest(10, 1)
    engine.submit(again, idle_arrival)
    engine.drain()
    assert again.admitted_at == idle_arrival


def test_cancel_frees_the_kv_and_the_batch_slot() -> None:
    engine = _engine(max_batch=1)
    a, b = GpuRequest(10, 100), GpuRequest(10, 3)
    engine.submit(a, 0.0)
    engine.submit(b, 0.0)
    step = engine.plan_step()
    reserved = engine.kv_reserved_bytes
    assert reserved == 110 * KV
    engine.cancel(a)  # the client left during the step: no token, no KV
    assert engine.kv_reserved_bytes == 0
    engine.finish_step(step)
    assert (a.state, a.generated) == ("cancelled", 0)
    assert engine.generation_tokens_total == 0
    engine.drain()
    assert b.done and b.generated == 3

    waiting = GpuRequest(10, 3)
    engine.submit(GpuRequest(10, 3), engine.clock)
    engine.submit(waiting, engine.clock)
    engine.cancel(waiting)
    assert waiting not in engine.waiting
    engine.cancel(b)  # finished already: nothing happens
    assert b.state == "finished"


def test_telemetry_follows_the_steps() -> None:
    engine = _engine()
    engine.started_at = 0.0
    request = GpuRequest(1, 400)
    engine.submit(request, 0.0)
    step = engine.plan_step()
    assert engine.memory_used_bytes() == WEIGHTS + 401 * KV
    engine.finish_step(step)
    while engine.clock < 1.5:  # busy, back to back from t = 0, for 1.5 s
        engine.finish_step(engine.plan_step())
    busy = engine.activity(engine.clock)
    step_s = engine.clock / engine.steps_total
    end = engine.drain()
    assert end > 2.0  # 400 steps of about 5.3 ms

    assert busy.busy == pytest.approx(1.0)
    # Outside the per-step overhead the GPU works: memory-bound, at 70% of peak bandwidth.
    assert busy.active == pytest.approx(1 - OVERHEAD_S / step_s, abs=0.01)
    assert busy.dram == pytest.approx(EFF * busy.active, abs=0.01)
    assert busy.tensor == pytest.approx(2 * P / H200_BF16_FLOPS / step_s, rel=0.05)
    assert engine.power_w(busy.busy) == pytest.approx(H200_TDP_W)

    idle = engine.activity(end + 2.0)
    assert (idle.busy, idle.active, idle.dram, idle.tensor) == (0.0, 0.0, 0.0, 0.0)
    assert engine.power_w(idle.busy) == pytest.approx(IDLE_POWER_FRACTION * H200_TDP_W)
    assert engine.memory_used_bytes() == WEIGHTS
    idle_w = IDLE_POWER_FRACTION * H200_TDP_W
    assert engine.energy_j(end + 2.0) == pytest.approx(
        idle_w * (end + 2.0) + (H200_TDP_W - idle_w) * end
    )


def test_metrics_text_parses_with_one_series_per_gpu() -> None:
    engine = _engine(gpu_count=2, params_b=70, model="m")
    engine.started_at = 0.0
    request = GpuRequest(100, 10)
    engine.submit(request, 0.0)
    step = engine.plan_step()
    collector = GpuCollector(engine, 'a "quoted" model', kv_gauges=True, clock=lambda: step.end)
    text = exposition(registry(collector)).decode()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }
    model_label = (("model_name", 'a "quoted" model'),)
    kv = 110 * 327680  # the derived KV per token of a 70B model
    budget = 2 * 141e9 * 0.9 - 70e9 * 2
    assert samples[("vllm:kv_cache_usage_perc", model_label)] == pytest.approx(kv / budget)
    assert samples[("vllm:gpu_cache_usage_perc", model_label)] == pytest.approx(kv / budget)
    for gpu in ("0", "1"):
        labels = (("device", f"nvidia{gpu}"), ("gpu", gpu), ("modelName", "H200-SXM"))
        assert samples[("DCGM_FI_DEV_GPU_UTIL", labels)] == round(100 * (step.end - 0) / 1.0)
        assert samples[("DCGM_FI_DEV_FB_USED", labels)] == round((140e9 + kv) / 2 / MIB)
        assert samples[("DCGM_FI_DEV_FB_FREE", labels)] == round((141e9 - (140e9 + kv) / 2) / MIB)
        assert samples[("DCGM_FI_DEV_POWER_USAGE", labels)] > IDLE_POWER_FRACTION * H200_TDP_W
        assert 0 < samples[("DCGM_FI_PROF_SM_ACTIVE", labels)] < 1
        assert samples[("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION_total", labels)] > 0
    # dcgm-exporter's counter has no _total: the family is typed as it names its samples.
    assert "# TYPE DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION counter\n" in text
    assert "\nDCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{" in text


# ------------------------------------------------------------------ config and CLI


def test_config_for_gpu_mode() -> None:
    config = SimConfig(mode="gpu", port=0, gpu="B200", params_b=70, precision="fp8")
    assert SimConfig.from_json(config.to_json()) == config
    assert config.kv_bytes == 327680 // 2
    assert SimConfig(mode="gpu").kv_bytes == KV
    assert SimConfig(mode="gpu", kv_bytes_per_token=4096).kv_bytes == 4096
    assert config.describe().startswith("gpu, 1 x B200, 70B fp8, kv 163840 B/token")
    with pytest.raises(ValueError, match="unknown GPU 'X1'; known: A100-SXM-80GB, H100-SXM"):
        SimConfig(mode="gpu", gpu="X1")
    with pytest.raises(ValueError, match="A100-SXM-80GB has no FP8"):
        SimConfig(mode="gpu", gpu="A100-SXM-80GB", precision="fp8")
    with pytest.raises(ValueError, match="raise gpu_count"):
        SimConfig(mode="gpu", params_b=70)  # 140 GB of weights on one 141 GB H200
    assert SimConfig(mode="gpu", params_b=70, gpu_count=2).gpu_count == 2
    with pytest.raises(ValueError, match="max_batch"):
        SimConfig(mode="gpu", max_batch=0)
    with pytest.raises(ValueError, match="efficiency"):
        SimConfig(mode="gpu", efficiency=1.5)
    with pytest.raises(ValueError, match="use max_batch"):
        SimConfig(mode="gpu", max_concurrency=4)
    # Fixed mode is untouched by the GPU fields' defaults.
    assert SimConfig().describe() == "fixed, ttft 50 ms, itl 10 ms"


def test_cli_rejects_an_unknown_gpu_and_lists_the_known_ones() -> None:
    result = CliRunner().invoke(sim_command, ["--mode", "gpu", "--gpu", "H300"])
    assert result.exit_code == 2
    assert "unknown GPU 'H300'" in result.output
    assert "H200-SXM" in result.output and "MI300X" in result.output
    result = CliRunner().invoke(sim_command, ["--mode", "gpu", "--params-b", "405"])
    assert result.exit_code == 2
    assert "raise gpu_count" in result.output


def test_cli_gpu_mode_prints_its_model_and_serves_per_gpu_metrics() -> None:
    argv = [
        sys.executable, "-c", "from cli.sim import sim; sim()",
        "--port", "0", "--mode", "gpu", "--gpu", "h100-sxm", "--gpu-count", "2",
        "--precision", "fp8", "--params-b", "8", "--kv-bytes-per-token", "1000",
        "--efficiency", "0.5", "--max-batch", "8",
    ]  # fmt: skip
    process = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    assert process.stdout is not None
    try:
        ready, _, _ = select.select([process.stdout], [], [], 20.0)
        assert ready, "no startup line within 20 s"
        line = process.stdout.readline().decode()
        match = re.fullmatch(
            r"sim listening on (http://127\.0\.0\.1:\d+) \(gpu, 2 x H100-SXM, 8B fp8, "
            r"kv 1000 B/token, efficiency 0\.5, max batch 8, .*\)\n",
            line,
        )
        assert match, line
        metrics = httpx.get(f"{match.group(1)}/metrics", timeout=5.0).text
        fb_used = [
            s.labels
            for family in text_string_to_metric_families(metrics)
            for s in family.samples
            if s.name == "DCGM_FI_DEV_FB_USED"
        ]
        assert fb_used == [
            {"gpu": gpu, "device": f"nvidia{gpu}", "modelName": "H100-SXM"} for gpu in ("0", "1")
        ]
    finally:
        process.terminate()
        process.wait(10)
        process.stdout.close()


# ------------------------------------------------------------------ the runner, real loop


async def _run_one(runner: EngineRunner, request: GpuRequest, seen: list[int]) -> None:
    """Submit `request` to a running runner and wait for its last token."""
    finished = asyncio.get_running_loop().create_future()
    user_progress = request.on_progress

    def progress() -> None:
        seen.append(request.generated)
        if user_progress is not None:
            user_progress()
        if request.done and not finished.done():
            finished.set_result(None)

    request.on_progress = progress
    runner.submit(request)
    await asyncio.wait_for(finished, 10.0)


def _twin(config: SimConfig, request: GpuRequest) -> GpuRequest:
    """The same request run on a fake clock from the same arrival."""
    engine = GpuEngine.from_config(config)
    twin = GpuRequest(request.prompt_tokens, request.max_tokens)
    engine.submit(twin, request.submitted_at)
    engine.drain()
    return twin


async def test_runner_keeps_the_models_schedule_and_rests_when_idle() -> None:
    config = SimConfig(mode="gpu", params_b=1)  # about 1.1 ms a step
    engine = GpuEngine.from_config(config)
    # No catch-up at all here, so a busy test machine cannot change the instants.
    runner = EngineRunner(engine, max_lag_s=math.inf)
    try:
        request = GpuRequest(50, 30)
        seen: list[int] = []
        await _run_one(runner, request, seen)
        assert seen == list(range(1, 31))  # one notification per token, in order
        # However late the loop woke, the times are the model's: a fake-clock run of the
        # same request from the same arrival gives the same instants exactly.
        twin = _twin(config, request)
        assert request.first_token_at == twin.first_token_at
        assert request.finished_at == twin.finished_at

        steps = engine.steps_total
        await asyncio.sleep(0.05)
        assert engine.steps_total == steps  # idle: no steps while nothing is queued
        later = GpuRequest(5, 2)
        await _run_one(runner, later, [])
        assert later.admitted_at == later.submitted_at  # the idle engine starts at arrival
    finally:
        runner.stop()


async def test_runner_gives_up_lag_beyond_its_limit() -> None:
    config = SimConfig(mode="gpu", params_b=1)
    runner = EngineRunner(GpuEngine.from_config(config), max_lag_s=0.02)
    blocked = False

    def stall_once() -> None:
        nonlocal blocked
        if not blocked:
            blocked = True
            time.sleep(0.06)  # the process falls 60 ms behind after the first token

    try:
        request = GpuRequest(50, 10, on_progress=stall_once)
        await _run_one(runner, request, [])
    finally:
        runner.stop()
    twin = _twin(config, request)
    assert request.first_token_at == twin.first_token_at
    assert runner.slipped_s >= 0.06
    # The remaining steps keep the model's durations, shifted by what was given up.
    assert request.finished_at == pytest.approx(twin.finished_at + runner.slipped_s, abs=1e-9)


# ------------------------------------------------------------------ end to end over TCP

# 8B bf16 on an L4: about 77 ms a token, slow enough to watch a stream run.
L4_STEP_S = WEIGHTS / (L4_BANDWIDTH * EFF) + OVERHEAD_S
L4_KV_BUDGET = L4_MEMORY * 0.9 - WEIGHTS
GPU_MODEL = "sim-l4-8b"


@pytest.fixture(scope="module")
def gpu_sim() -> Iterator[SimProcess]:
    """A gpu-mode simulator of this module's own, so counter deltas are exact."""
    with sim_process(SimConfig(port=0, mode="gpu", gpu="L4", model=GPU_MODEL)) as proc:
        yield proc


@pytest.fixture
async def gpu_client(gpu_sim: SimProcess) -> AsyncIterator[httpx.AsyncClient]:
    async with httpx.AsyncClient(base_url=gpu_sim.base_url, timeout=30.0) as c:
        (await c.get("/health")).raise_for_status()
        yield c


async def _scrape(
    client: httpx.AsyncClient,
) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(response.text)
        for s in family.samples
    }


VLLM = (("model_name", GPU_MODEL),)
GPU0 = (("device", "nvidia0"), ("gpu", "0"), ("modelName", "L4"))


Scrape = dict[tuple[str, tuple[tuple[str, str], ...]], float]


async def test_gpu_stream_delivers_every_token_and_metrics_show_it_running(
    gpu_client: httpx.AsyncClient,
) -> None:
    n, prompt = 12, "one two three four"
    body = {"model": GPU_MODEL, "messages": [{"role": "user", "content": prompt}],
            "max_tokens": n, "stream": True, "stream_options": {"include_usage": True}}  # fmt: skip
    generated = ("vllm:generation_tokens_total", VLLM)
    # A scrape taken once the first token arrived lands mid-stream unless a loaded machine
    # delayed it past the stream's end; the generation counter says which, so the stream
    # is run again until a scrape saw it part-way (a state, not a duration).
    for _ in range(5):
        before = await _scrape(gpu_client)
        events: list[Any] = []
        token_times: list[float] = []
        during: Scrape | None = None
        t_send = time.perf_counter()
        async with gpu_client.stream("POST", "/v1/chat/completions", json=body) as response:
            assert response.status_code == 200
            assert response.headers["content-type"].startswith("text/event-stream")
            buffer = b""
            async for chunk in response.aiter_raw():
                now = time.perf_counter()
                buffer += chunk
                while b"\n\n" in buffer:
                    raw, buffer = buffer.split(b"\n\n", 1)
                    payload = raw.removeprefix(b"data: ")
                    event = "DONE" if payload == b"[DONE]" else json.loads(payload)
                    events.append(event)
                    choices = event["choices"] if isinstance(event, dict) else None
                    if choices and choices[0]["delta"].get("content"):
                        token_times.append(now - t_send)
                if token_times and during is None:
                    during = await _scrape(gpu_client)
        after = await _scrape(gpu_client)
        assert during is not None
        if during[generated] - before[generated] < n:
            break  # the scrape landed while tokens were still to come
    else:
        pytest.fail("no scrape landed mid-stream in 5 streams of 12 tokens")

    assert len(token_times) == n
    assert events[-1] == "DONE"
    assert events[-2]["usage"] == {"prompt_tokens": 4, "completion_tokens": n,
                                   "total_tokens": n + 4}  # fmt: skip
    assert events[-3]["choices"][0]["finish_reason"] == "length"
    # Never earlier than the model: the first token needs at least one step.
    assert token_times[0] >= L4_STEP_S

    assert during[("vllm:num_requests_running", VLLM)] == 1
    assert during[("vllm:num_requests_waiting", VLLM)] == 0
    kv_usage = (4 + n) * KV / L4_KV_BUDGET
    assert during[("vllm:kv_cache_usage_perc", VLLM)] == pytest.approx(kv_usage)
    assert during[("vllm:gpu_cache_usage_perc", VLLM)] == pytest.approx(kv_usage)
    assert 0 < during[("DCGM_FI_DEV_GPU_UTIL", GPU0)] <= 100
    assert 0 < during[("DCGM_FI_PROF_SM_ACTIVE", GPU0)] <= 1
    assert IDLE_POWER_FRACTION * L4_TDP_W < during[("DCGM_FI_DEV_POWER_USAGE", GPU0)] <= L4_TDP_W
    assert during[("DCGM_FI_DEV_FB_USED", GPU0)] == round((WEIGHTS + (4 + n) * KV) / MIB)

    assert after[("vllm:num_requests_running", VLLM)] == 0
    assert after[("vllm:kv_cache_usage_perc", VLLM)] == 0
    assert after[("DCGM_FI_DEV_FB_USED", GPU0)] == round(WEIGHTS / MIB)

    def delta(name: str) -> float:
        return after[(name, VLLM)] - before[(name, VLLM)]

    assert delta("vllm:prompt_tokens_total") == 4
    assert delta("vllm:generation_tokens_total") == n
    assert delta("vllm:request_success_total") == 1


async def test_gpu_non_streaming_and_a_request_too_large_for_the_kv_cache(
    gpu_client: httpx.AsyncClient,
) -> None:
    t0 = time.perf_counter()
    response = await gpu_client.post("/v1/completions", json={"prompt": "a b c", "max_tokens": 3})
    elapsed = time.perf_counter() - t0
    assert response.status_code == 200
    body = response.json()
    assert len(body["choices"][0]["text"].split()) == 3
    assert body["usage"] == {"prompt_tokens": 3, "completion_tokens": 3, "total_tokens": 6}
    assert elapsed >= 3 * L4_STEP_S  # one prefill step and two decode steps, never fewer

    too_long = {"prompt": "x " * 40000, "max_tokens": 5000}  # 45,000 > 42,724 tokens of KV
    response = await gpu_client.post("/v1/completions", json=too_long)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "invalid_request_error"
    assert "42724" in error["message"]


async def test_gpu_client_disconnect_removes_the_request(gpu_client: httpx.AsyncClient) -> None:
    before = await _scrape(gpu_client)
    request = {"messages": [{"role": "user", "content": "a"}], "max_tokens": 1000, "stream": True}
    async with (
        httpx.AsyncClient(base_url=str(gpu_client.base_url), timeout=10.0) as other,
        other.stream("POST", "/v1/chat/completions", json=request) as response,
    ):
        async for chunk in response.aiter_raw():
            if b'"content":" ' in chunk:
                break  # leave after the first token; closing drops the connection
    after = before
    for _ in range(100):
        after = await _scrape(gpu_client)
        if after[("vllm:num_requests_running", VLLM)] == 0:
            break
        await asyncio.sleep(0.02)
    assert after[("vllm:num_requests_running", VLLM)] == 0
    assert after[("vllm:kv_cache_usage_perc", VLLM)] == 0
    success = ("vllm:request_success_total", VLLM)
    assert after[success] == before[success]
    generated = after[("vllm:generation_tokens_total", VLLM)]
    assert 1 <= generated - before[("vllm:generation_tokens_total", VLLM)] < 100
