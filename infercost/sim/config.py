"""The simulator's settings: one frozen object shared by the CLI, the server and test helpers."""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import Literal

SimMode = Literal["fixed"]

# What /tokenize reports and the largest max_tokens a request may ask for.
MAX_MODEL_LEN = 131072


@dataclass(frozen=True, slots=True)
class SimConfig:
    """How the simulated endpoint behaves; `port` 0 binds a free port."""

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

    def __post_init__(self) -> None:
        if self.mode != "fixed":
            raise ValueError(f"mode must be 'fixed', got {self.mode!r}")
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

    def to_json(self) -> str:
        """Serialize for handing to a child process (see infercost.sim.process)."""
        return json.dumps(asdict(self))

    @classmethod
    def from_json(cls, raw: str) -> SimConfig:
        """Inverse of `to_json`; validation runs again in __post_init__."""
        return cls(**json.loads(raw))

    def describe(self) -> str:
        """The parenthesised part of the startup line, e.g. `fixed, ttft 50 ms, itl 10 ms`."""
        text = f"{self.mode}, ttft {self.ttft_ms:g} ms, itl {self.itl_ms:g} ms"
        if self.max_concurrency is not None:
            text += f", max concurrency {self.max_concurrency}"
        return text
