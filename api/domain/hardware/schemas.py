"""Request and response shapes for the GPU catalog."""

from __future__ import annotations

import uuid
from typing import Annotated

import msgspec

Positive = Annotated[float, msgspec.Meta(gt=0)]


class HardwareCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/hardware: a SKU the public catalog lacks, visible to your team."""

    name: Annotated[
        str, msgspec.Meta(min_length=1, max_length=64, pattern=r"^[A-Za-z0-9][\w.\-]*$")
    ]
    vendor: Annotated[str, msgspec.Meta(min_length=1, max_length=32)]
    memory_gb: Positive
    memory_bandwidth_gbps: Positive
    bf16_tflops: Positive
    power_w: Positive
    fp8_tflops: Positive | None = None


class HardwareRead(msgspec.Struct):
    """A SKU; `public` is true for the seeded catalog."""

    id: uuid.UUID
    name: str
    vendor: str
    memory_gb: float
    memory_bandwidth_gbps: float
    bf16_tflops: float
    fp8_tflops: float | None
    power_w: float
    public: bool
