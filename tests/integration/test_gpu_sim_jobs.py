"""End to end on the GPU-like simulator: as load rises, throughput rises then flattens at
the engine's batch limit, TTFT grows, the GPU gets busier, and each token costs less
energy and money. Everything is read from the API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from sim.config import SimConfig
from sim.process import SimProcess, sim_process
from tests.conftest import TeamClient

pytestmark = [pytest.mark.integration, pytest.mark.usefixtures("worker")]


@pytest.fixture(scope="module")
def l4_sim() -> Iterator[SimProcess]:
    """An 8B bf16 model on one L4 (about 75 ms a decode step), at most 16 in a batch."""
    config = SimConfig(
        port=0, mode="gpu", gpu="L4", params_b=8, precision="bf16", max_batch=16, model="m8b"
    )
    with sim_process(config) as sim:
        yield sim


async def test_gpu_sim_levels_show_the_shape_of_a_real_deployment(
    team: TeamClient, l4_sim: SimProcess
) -> None:
    endpoint = await team.create_endpoint(
        base_url=l4_sim.openai_base_url,
        model="m8b",
        hardware="L4",
        usd_per_hour=0.8,
        params_b=8,
        precision="bf16",
        metrics_urls=[l4_sim.base_url + "/metrics"],
    )
    job = await team.run_job(
        {
            "endpoint_id": endpoint["id"],
            "workload": {"input_tokens": {"mean": 64}, "output_tokens": {"mean": 12}},
            "load": {
                "mode": "concurrency",
                # One user, the batch limit and four times it: rising, then flat.
                "levels": [1, 16, 64],
                "duration_s": 4,
                "telemetry_interval_s": 0.25,
            },
        },
        timeout=180,
    )
    runs = {int(r["level"]): r for r in job["runs"]}

    tokens = [runs[n]["output_tokens_per_s"] for n in (1, 16, 64)]
    assert tokens[0] < tokens[1], tokens
    # Beyond the batch limit of 16 the engine is full: throughput flattens.
    assert tokens[2] == pytest.approx(tokens[1], rel=0.25), tokens
    ttft = [runs[n]["ttft_ms"]["p50"] for n in (1, 16, 64)]
    assert ttft[2] > 2 * ttft[1] and ttft[1] >= ttft[0], ttft
    util = [runs[n]["telemetry"]["gpu_util_mean"] for n in (1, 16, 64)]
    assert all(u is not None and 0.0 < u <= 1.0 for u in util), util
    # The GPU works harder in a batch: a decode step of 16 does 16 tokens' matrix work in
    # about the time of one (decode is memory-bound), so tensor activity rises near 16-fold.
    # (GPU_UTIL, the share of time in any kernel, is high at one stream too, as on a real
    # GPU, and is left to how the client paced its requests.)
    tensor = [runs[n]["telemetry"]["tensor_active_mean"] for n in (1, 16, 64)]
    assert tensor[1] > 6 * tensor[0] and tensor[2] > 6 * tensor[0], tensor
    energy = [runs[n]["telemetry"]["energy_j_per_output_token"] for n in (1, 16, 64)]
    assert energy[0] > energy[1], energy
    cost = [runs[n]["cost"]["per_million_output_tokens_usd"] for n in (1, 16, 64)]
    assert cost[0] > cost[1], cost
    # The single stream's decode speed against its roofline bound (B / (P x b) on an L4):
    # the simulator runs at its configured efficiency, 0.7, less step overhead.
    decode = runs[1]["efficiency"]["decode"]
    assert 0.5 < decode < 0.75, runs[1]["efficiency"]
    for run in runs.values():
        assert run["telemetry"]["errors"] == [], run["telemetry"]["errors"]
        assert "dcgm" in run["telemetry"]["sources"]
