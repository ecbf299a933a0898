"""Physical limits of decoding and prefill on given hardware (docs/figures.md, Physical limits).

Notation: P parameters, b bytes per parameter, B memory bandwidth (bytes/s), F peak dense
compute (FLOP/s), kv bytes of KV cache per token of context. Each function returns a
bound a real deployment cannot beat, so a measured figure over its bound is an
*efficiency* in [0, 1]; a figure above 1 means the model facts are wrong (or a technique
such as speculative decoding or prefix caching changes the work per token).

Several GPUs are taken to scale perfectly (B and F times gpu_count), which keeps every
figure an upper limit for tensor- or pipeline-parallel deployments.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

from infercost.hardware.catalog import BYTES_PER_PARAM

_BYTES_PER_GB = 1e9
_FLOPS_PER_TFLOP = 1e12


@dataclass(frozen=True, slots=True)
class ModelFacts:
    """What the bounds need to know about a model.

    params_b: parameters, in billions (8 for an 8B model); bytes_per_param: bytes per weight
    as served (2 for bf16, 1 for fp8); kv_bytes_per_token: KV-cache bytes one token of
    context takes over all layers, or None when unknown (the KV term is then left out,
    which loosens but never breaks a bound).
    """

    params_b: float
    bytes_per_param: float
    kv_bytes_per_token: float | None = None

    def __post_init__(self) -> None:
        if not self.params_b > 0 or not self.bytes_per_param > 0:
            raise ValueError("params_b and bytes_per_param must be above 0")
        if self.kv_bytes_per_token is not None and self.kv_bytes_per_token < 0:
            raise ValueError("kv_bytes_per_token must be 0 or more")

    @property
    def params(self) -> float:
        """P: parameters (count)."""
        return self.params_b * 1e9

    @property
    def weight_bytes(self) -> float:
        """P x b: bytes of weights read per decode step."""
        return self.params * self.bytes_per_param


class GpuFigures(Protocol):
    """A GPU's datasheet figures: a catalog GpuSpec or a hardware row."""

    @property
    def memory_bandwidth_gbps(self) -> float: ...
    @property
    def bf16_tflops(self) -> float: ...
    @property
    def fp8_tflops(self) -> float | None: ...


@dataclass(frozen=True, slots=True)
class Hardware:
    """One replica's hardware: per-GPU memory bandwidth (bytes/s), per-GPU peak dense
    compute (FLOP/s) at the serving precision, and the GPU count."""

    memory_bandwidth_bytes_s: float
    peak_flops: float
    gpu_count: int = 1

    def __post_init__(self) -> None:
        if not self.memory_bandwidth_bytes_s > 0 or not self.peak_flops > 0:
            raise ValueError("memory_bandwidth_bytes_s and peak_flops must be above 0")
        if self.gpu_count < 1:
            raise ValueError("gpu_count must be 1 or more")

    @classmethod
    def from_gpu(cls, gpu: GpuFigures, precision: str = "bf16", gpu_count: int = 1) -> Hardware:
        """From a GPU's figures at a weight precision (a catalog Precision): 8-bit and
        narrower weights use fp8_tflops where the GPU has fp8 compute, everything else (and
        GPUs without it, which upcast to compute) bf16_tflops."""
        narrow = BYTES_PER_PARAM[precision] <= 1
        tflops = gpu.fp8_tflops if narrow and gpu.fp8_tflops is not None else gpu.bf16_tflops
        return cls(
            memory_bandwidth_bytes_s=gpu.memory_bandwidth_gbps * _BYTES_PER_GB,
            peak_flops=tflops * _FLOPS_PER_TFLOP,
            gpu_count=gpu_count,
        )

    @property
    def bandwidth(self) -> float:
        """B: memory bandwidth of the whole replica, bytes/s."""
        return self.memory_bandwidth_bytes_s * self.gpu_count

    @property
    def flops(self) -> float:
        """F: peak dense compute of the whole replica, FLOP/s."""
        return self.peak_flops * self.gpu_count


def decode_bound_tokens_per_s(model: ModelFacts, hw: Hardware) -> float:
    """One stream's decode limit, tokens/s: B / (P x b), since every token reads all weights."""
    return hw.bandwidth / model.weight_bytes


def batch_step_time_bound_s(
    model: ModelFacts, hw: Hardware, streams: int, mean_context_tokens: float
) -> float:
    """Least time of one decode step for `streams` sequences of `mean_context_tokens` context,
    seconds: max((P x b + n x c x kv) / B, 2 x P x n / F)."""
    if streams < 1:
        raise ValueError("streams must be 1 or more")
    if mean_context_tokens < 0:
        raise ValueError("mean_context_tokens must be 0 or more")
    kv = model.kv_bytes_per_token or 0.0
    memory_s = (model.weight_bytes + streams * mean_context_tokens * kv) / hw.bandwidth
    compute_s = 2.0 * model.params * streams / hw.flops
    return max(memory_s, compute_s)


def batch_throughput_bound_tokens_per_s(
    model: ModelFacts, hw: Hardware, streams: int, mean_context_tokens: float
) -> float:
    """Output tokens/s limit of `streams` concurrent sequences: n / least step time."""
    return streams / batch_step_time_bound_s(model, hw, streams, mean_context_tokens)


def prefill_time_bound_s(model: ModelFacts, hw: Hardware, prompt_tokens: float) -> float:
    """Least time to prefill `prompt_tokens` prompt tokens, seconds: 2 x P x m / F."""
    if prompt_tokens < 0:
        raise ValueError("prompt_tokens must be 0 or more")
    return 2.0 * model.params * prompt_tokens / hw.flops


def peak_throughput_bound_tokens_per_s(
    model: ModelFacts, hw: Hardware, mean_context_tokens: float | None = None
) -> float:
    """Output tokens/s no batch size can beat: the batch bound's limit as n grows.

    n / max(a + n x d, n x e) <= 1 / e = F / (2 x P) for every n, and approaches it as n
    grows, so F / (2P) is the compute limit whatever the batch. With a context length and a
    known KV size, each stream also reads its KV cache every step (d = c x kv / B), and the
    limit is the tighter min(F / (2P), B / (c x kv)). Memory capacity (how many streams
    fit) is not modelled; it can only lower the figure further.
    """
    compute_limit = hw.flops / (2.0 * model.params)
    kv = model.kv_bytes_per_token
    if mean_context_tokens and kv:
        return min(compute_limit, hw.bandwidth / (mean_context_tokens * kv))
    return compute_limit


@dataclass(frozen=True, slots=True)
class RooflineBounds:
    """The two limits a run is compared with, tokens/s: one stream's decode speed and the
    deployment's output throughput."""

    decode_tokens_per_s: float
    peak_output_tokens_per_s: float


def roofline_bounds(
    model: ModelFacts, hw: Hardware, mean_context_tokens: float | None = None
) -> RooflineBounds:
    """Both limits of `model` on `hw` (see the functions above for each)."""
    return RooflineBounds(
        decode_tokens_per_s=decode_bound_tokens_per_s(model, hw),
        peak_output_tokens_per_s=peak_throughput_bound_tokens_per_s(model, hw, mean_context_tokens),
    )
