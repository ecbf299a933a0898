"""The simulator's settings: one frozen object shared by the CLI, the server and test helpers."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Final, Literal, get_args

from infercost.hardware.catalog import BYTES_PER_PARAM, PUBLIC_GPUS, GpuSpec

SimMode = Literal["fixed", "gpu"]
SimPrecision = Literal["bf16", "fp8"]

# What /tokenize reports and the largest max_tokens a request may ask for.
MAX_MODEL_LEN = 131072

# Default KV cache per token for a Llama-3-like model with grouped-query attention
# (2 x layers x kv_heads x head_dim x bytes): 131072 B at 8B and 327680 B at 70B in bf16
# (Llama-3.1 8B: 32 x 8 x 128; 70B: 80 x 8 x 128), a power law through both in between.
_KV_BF16_AT_8B: Final = 131072
_KV_EXPONENT: Final = math.log(327680 / 131072) / math.log(70 / 8)


def gpu_spec(name: str) -> GpuSpec:
    """The catalog entry called `name`; ValueError listing the known names otherwise."""
    for spec in PUBLIC_GPUS:
        if spec.name == name:
            return spec
    raise ValueError(f"unknown GPU {name!r}; known: {', '.join(gpu_names())}")


def gpu_names() -> list[str]:
    """Names of the GPUs gpu mode can model, in catalog order."""
    return [spec.name for spec in PUBLIC_GPUS]


def default_kv_bytes_per_token(params_b: float, precision: SimPrecision) -> int:
    """KV-cache bytes per token of a Llama-3-like model of `params_b` billion parameters."""
    bf16: float = _KV_BF16_AT_8B * math.pow(params_b / 8.0, _KV_EXPONENT)
    return max(1, round(bf16 * BYTES_PER_PARAM[precision] / 2))


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How the simulated endpoint behaves; `port` 0 binds a free port.

    `fixed` mode uses ttft_ms, itl_ms and max_concurrency. `gpu` mode models a
    continuous-batching server of a `params_b` model on `gpu_count` x `gpu` (see
    infercost.sim.gpu) and uses the fields from `gpu` on.
    """

    host: str = "127.0.0.1"
    port: int = 9100
    mode: SimMode = "fixed"
    ttft_ms: float = 50.0
    itl_ms: float = 10.0
    model: str = "sim-model"
    max_tokens_default: int = 16
    error_rate: float = 0.0
    seed: int = 0
    # At most this many requests generate at once; the rest wait, in arrival order, before
    # their first token (None: no limit), so load tests meet a server that saturates.
    max_concurrency: int | None = None
    # Fixed mode: stream this many events per write (each write when its last token is
    # due), so that at itl 0 the simulator is not the bottleneck of a capacity benchmark.
    burst: int = 1
    # gpu mode: the hardware (a catalog name), the model and the engine.
    gpu: str = "H200-SXM"
    gpu_count: int = 1
    params_b: float = 8.0
    precision: SimPrecision = "bf16"
    # None: derived from params_b and precision (default_kv_bytes_per_token).
    kv_bytes_per_token: int | None = None
    max_batch: int = 256
    # Share of peak bandwidth and compute a step achieves.
    efficiency: float = 0.7
    # Fixed cost of every step (scheduling, kernel launches), on top of the roofline time.
    step_overhead_ms: float = 0.5
    # At most this many prompt tokens are prefilled per step, across requests.
    prefill_chunk: int = 2048
    # Share of GPU memory the engine may use for weights plus KV cache (vLLM's default).
    gpu_memory_utilization: float = 0.9

    def __post_init__(self) -> None:
        if self.mode not in ("fixed", "gpu"):
            raise ValueError(f"mode must be 'fixed' or 'gpu', got {self.mode!r}")
        if not 0 <= self.port <= 65535:
            raise ValueError(f"port must be in 0..65535, got {self.port}")
        for name, value in (("ttft_ms", self.ttft_ms), ("itl_ms", self.itl_ms)):
            if not math.isfinite(value) or value < 0:
                raise ValueError(f"{name} must be a finite number >= 0, got {value}")
        if not 1 <= self.max_tokens_default <= MAX_MODEL_LEN:
            raise ValueError(
                f"max_tokens_default must be in 1..{MAX_MODEL_LEN}, got {self.max_tokens_default}"
            )
        if not 0.0 <= self.error_rate <= 1.0:
            raise ValueError(f"error_rate must be in 0..1, got {self.error_rate}")
        if not self.model:
            raise ValueError("model must be a non-empty name")
        if self.max_concurrency is not None and self.max_concurrency < 1:
            raise ValueError(f"max_concurrency must be >= 1, got {self.max_concurrency}")
        if self.burst < 1:
            raise ValueError(f"burst must be >= 1, got {self.burst}")
        self._check_gpu_fields()
        if self.mode == "gpu":
            self._check_gpu_fits()

    def _check_gpu_fields(self) -> None:
        gpu_spec(self.gpu)  # a known name, in either mode
        if self.gpu_count < 1:
            raise ValueError(f"gpu_count must be >= 1, got {self.gpu_count}")
        if not (math.isfinite(self.params_b) and self.params_b > 0):
            raise ValueError(f"params_b must be a number > 0, got {self.params_b}")
        if self.precision not in get_args(SimPrecision):
            raise ValueError(f"precision must be 'bf16' or 'fp8', got {self.precision!r}")
        if self.kv_bytes_per_token is not None and self.kv_bytes_per_token < 1:
            raise ValueError(f"kv_bytes_per_token must be >= 1, got {self.kv_bytes_per_token}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch}")
        if not 0.0 < self.efficiency <= 1.0:
            raise ValueError(f"efficiency must be in (0, 1], got {self.efficiency}")
        if not (math.isfinite(self.step_overhead_ms) and self.step_overhead_ms >= 0):
            raise ValueError(f"step_overhead_ms must be >= 0, got {self.step_overhead_ms}")
        if self.prefill_chunk < 1:
            raise ValueError(f"prefill_chunk must be >= 1, got {self.prefill_chunk}")
        if not 0.0 < self.gpu_memory_utilization <= 1.0:
            raise ValueError(
                f"gpu_memory_utilization must be in (0, 1], got {self.gpu_memory_utilization}"
            )

    def _check_gpu_fits(self) -> None:
        spec = gpu_spec(self.gpu)
        if self.max_concurrency is not None:
            raise ValueError("max_concurrency is for fixed mode; in gpu mode use max_batch")
        if self.precision == "fp8" and spec.fp8_tflops is None:
            raise ValueError(f"{spec.name} has no FP8 compute: use precision 'bf16'")
        usable_gb = spec.memory_gb * self.gpu_count * self.gpu_memory_utilization
        weights_gb = self.params_b * BYTES_PER_PARAM[self.precision]
        if weights_gb >= usable_gb:
            raise ValueError(
                f"the weights of a {self.params_b:g}B model in {self.precision} take "
                f"{weights_gb:g} GB, but only {usable_gb:g} GB of {self.gpu_count} x "
                f"{spec.name} is usable for weights and KV cache: raise gpu_count, use "
                "fp8 or a smaller model"
            )

    @property
    def kv_bytes(self) -> int:
        """KV-cache bytes per token: the explicit kv_bytes_per_token or the derived default."""
        if self.kv_bytes_per_token is not None:
            return self.kv_bytes_per_token
        return default_kv_bytes_per_token(self.params_b, self.precision)

    def to_json(self) -> str:
        """Serialize for handing to a child process (see infercost.sim.process)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> SimConfig:
        """Inverse of `to_json`; validation runs again in __post_init__."""
        return cls(**json.loads(raw))

    def describe(self) -> str:
        """The parenthesised part of the startup line, e.g. `fixed, ttft 50 ms, itl 10 ms`."""
        if self.mode == "gpu":
            return (
                f"gpu, {self.gpu_count} x {self.gpu}, {self.params_b:g}B {self.precision}, "
                f"kv {self.kv_bytes} B/token, efficiency {self.efficiency:g}, "
                f"max batch {self.max_batch}, step overhead {self.step_overhead_ms:g} ms, "
                f"prefill chunk {self.prefill_chunk}"
            )
        text = f"{self.mode}, ttft {self.ttft_ms:g} ms, itl {self.itl_ms:g} ms"
        if self.max_concurrency is not None:
            text += f", max concurrency {self.max_concurrency}"
        if self.burst > 1:
            text += f", burst {self.burst}"
        return text
