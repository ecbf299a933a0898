"""Public specs of common inference GPUs (vendor datasheets; dense, without sparsity)."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

#: Weight precisions an endpoint may declare, and the bytes one parameter takes in each.
Precision = Literal["fp32", "bf16", "fp16", "fp8", "int8", "fp4", "int4"]
BYTES_PER_PARAM: dict[str, float] = {
    "fp32": 4.0,
    "bf16": 2.0,
    "fp16": 2.0,
    "fp8": 1.0,
    "int8": 1.0,
    "fp4": 0.5,
    "int4": 0.5,
}


@dataclass(frozen=True, slots=True)
class GpuSpec:
    """Datasheet figures: memory in GB as the vendor quotes it, bandwidth in GB/s, TFLOP/s, W."""

    name: str
    vendor: str
    memory_gb: float
    memory_bandwidth_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    power_w: float

    def as_row(self) -> dict[str, Any]:
        """The spec as a column -> value mapping for inserts."""
        return asdict(self)


PUBLIC_GPUS: tuple[GpuSpec, ...] = (
    GpuSpec("A100-SXM-80GB", "nvidia", 80, 2039, 312, None, 400),
    GpuSpec("H100-SXM", "nvidia", 80, 3350, 989, 1979, 700),
    GpuSpec("H200-SXM", "nvidia", 141, 4800, 989, 1979, 700),
    GpuSpec("B200", "nvidia", 180, 8000, 2250, 4500, 1000),
    GpuSpec("L40S", "nvidia", 48, 864, 362, 733, 350),
    GpuSpec("L4", "nvidia", 24, 300, 121, 242, 72),
    GpuSpec("MI300X", "amd", 192, 5300, 1307, 2615, 750),
)
