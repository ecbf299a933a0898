"""The demo endpoints `infercost up` runs and registers, and what seeding them gave: light to
import (the launcher's --help and its banner need them; seeding itself, in
cli.seed, pulls in the database layer)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from sim.config import SimPrecision, default_kv_bytes_per_token

SIM_ENDPOINT = "sim-fixed"
SIM_MODEL = "sim-model"
SIM_GPU_ENDPOINT = "sim-gpu"
SIM_GPU_MODEL = "sim-llama-8b"
# What both demo endpoints declare they run on, and the model `sim-gpu` simulates.
SIM_HARDWARE = "H200-SXM"
SIM_USD_PER_HOUR = 3.5
SIM_GPU_PARAMS_B = 8
SIM_GPU_PRECISION: SimPrecision = "bf16"


@dataclass(frozen=True)
class DemoEndpoint:
    """A demo simulator `up` runs and registers: its port, its flags and its endpoint fields."""

    name: str
    port: int
    sim_args: tuple[str, ...]
    fields: dict[str, Any]  # registration fields besides name, base_url and metrics_urls
    with_metrics: bool = False  # register its /metrics as the endpoint's metrics_urls

    @property
    def base_url(self) -> str:
        """The OpenAI base URL registered for it."""
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def port_fields(self) -> dict[str, Any]:
        """The registered fields that follow the port (updated when it changes)."""
        fields: dict[str, Any] = {"base_url": self.base_url}
        if self.with_metrics:
            fields["metrics_urls"] = [f"http://127.0.0.1:{self.port}/metrics"]
        return fields

    def argv(self) -> list[str]:
        """`infercost` arguments that start its simulator."""
        return ["sim", "--host", "127.0.0.1", "--port", str(self.port), *self.sim_args]


def demo_endpoints(sim_port: int, sim_gpu_port: int) -> tuple[DemoEndpoint, DemoEndpoint]:
    """`sim-fixed` (50 ms TTFT, 10 ms per token) and `sim-gpu` (8B bf16 on a modelled H200)."""
    common = {
        "api": "openai-chat",
        "engine": "infercost-sim",
        "hardware": SIM_HARDWARE,
        "gpu_count": 1,
        "usd_per_hour": SIM_USD_PER_HOUR,
    }
    kv_bytes = default_kv_bytes_per_token(SIM_GPU_PARAMS_B, SIM_GPU_PRECISION)
    fixed = DemoEndpoint(
        name=SIM_ENDPOINT,
        port=sim_port,
        sim_args=("--mode", "fixed", "--ttft-ms", "50", "--itl-ms", "10", "--model", SIM_MODEL),
        fields={**common, "model": SIM_MODEL},
    )  # fmt: skip
    gpu = DemoEndpoint(
        name=SIM_GPU_ENDPOINT,
        port=sim_gpu_port,
        sim_args=("--mode", "gpu", "--gpu", SIM_HARDWARE, "--params-b", str(SIM_GPU_PARAMS_B),
                  "--precision", SIM_GPU_PRECISION, "--gpu-count", "1", "--model", SIM_GPU_MODEL),
        fields={**common, "model": SIM_GPU_MODEL, "params_b": SIM_GPU_PARAMS_B,
                "precision": SIM_GPU_PRECISION, "kv_bytes_per_token": kv_bytes},
        with_metrics=True,
    )  # fmt: skip
    return fixed, gpu


@dataclass(frozen=True)
class Seeded:
    """The default team's key (None when it is unknown) and the demo endpoints' ids."""

    team_key: str | None = None
    endpoint_ids: dict[str, str] = field(default_factory=dict)
