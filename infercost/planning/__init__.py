"""Cost planning: presets, physical limits, capacity at the SLO and cost at your traffic.

Pure library (no database, no HTTP): frozen dataclasses in, frozen dataclasses out.
"""

from infercost.planning.capacity import Capacity, LevelResult, capacity_at_slo, slo_margin
from infercost.planning.estimate import (
    BreakEven,
    Deployment,
    Estimate,
    Evidence,
    HostedApi,
    HostedEstimate,
    NoEvidence,
    ProjectedCapacity,
    SelfHostedEstimate,
    Traffic,
    break_even,
    hosted_cost,
    plan,
    project_capacity,
    replicas_for,
    self_hosted_cost,
)
from infercost.planning.presets import PRESETS, UnknownPreset, WorkloadPreset, get_preset
from infercost.planning.roofline import (
    Hardware,
    ModelFacts,
    RooflineBounds,
    batch_step_time_bound_s,
    batch_throughput_bound_tokens_per_s,
    decode_bound_tokens_per_s,
    peak_throughput_bound_tokens_per_s,
    prefill_time_bound_s,
    roofline_bounds,
)

__all__ = [
    "PRESETS",
    "BreakEven",
    "Capacity",
    "Deployment",
    "Estimate",
    "Evidence",
    "Hardware",
    "HostedApi",
    "HostedEstimate",
    "LevelResult",
    "ModelFacts",
    "NoEvidence",
    "ProjectedCapacity",
    "RooflineBounds",
    "SelfHostedEstimate",
    "Traffic",
    "UnknownPreset",
    "WorkloadPreset",
    "batch_step_time_bound_s",
    "batch_throughput_bound_tokens_per_s",
    "break_even",
    "capacity_at_slo",
    "decode_bound_tokens_per_s",
    "get_preset",
    "hosted_cost",
    "peak_throughput_bound_tokens_per_s",
    "plan",
    "prefill_time_bound_s",
    "project_capacity",
    "replicas_for",
    "roofline_bounds",
    "self_hosted_cost",
    "slo_margin",
]
