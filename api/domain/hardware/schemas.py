"""Request and response shapes for the GPU catalog."""

from __future__ import annotations

import uuid
from typing import Annotated, Literal

import msgspec

Positive = Annotated[float, msgspec.Meta(gt=0)]


HardwareKind = Literal["gpu", "cpu"]


class HardwareCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/hardware: a SKU the public catalog lacks, or a CPU machine a llama.cpp or
    transformers server runs on; visible to your team."""

    name: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][\w.\-]*$")],
        msgspec.Meta(
            description="The SKU's name: letters, digits, '.', '_' or '-'", examples=["MI325X"]
        ),
    ]
    vendor: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=32)],
        msgspec.Meta(description="Who makes it", examples=["AMD"]),
    ]
    memory_gb: Annotated[
        Positive, msgspec.Meta(description="Memory per GPU, in GB", examples=[256.0])
    ]
    memory_bandwidth_gbps: Annotated[
        Positive, msgspec.Meta(description="Memory bandwidth per GPU, in GB/s", examples=[6000.0])
    ]
    bf16_tflops: Annotated[
        Positive,
        msgspec.Meta(description="Dense BF16 compute per GPU, in TFLOPS", examples=[1307.0]),
    ]
    power_w: Annotated[
        Positive, msgspec.Meta(description="Board power per GPU, in watts", examples=[1000.0])
    ]
    fp8_tflops: Annotated[
        Positive | None,
        msgspec.Meta(
            description="Dense FP8 compute per GPU, in TFLOPS; absent: not supported",
            examples=[2615.0],
        ),
    ] = None
    kind: Annotated[
        HardwareKind,
        msgspec.Meta(
            description="'gpu', or 'cpu' for a CPU machine (its memory, memory bandwidth, "
            "BF16 TFLOPS of its matrix units and power as one unit; an endpoint's gpu_count "
            "then counts machines)",
            examples=["cpu"],
        ),
    ] = "gpu"


class HardwareRead(msgspec.Struct):
    """A SKU; `public` is true for the seeded catalog."""

    id: uuid.UUID
    name: str
    vendor: str
    kind: HardwareKind
    memory_gb: float
    memory_bandwidth_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    power_w: float
    public: bool
