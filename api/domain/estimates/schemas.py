"""Request and response shapes of POST /v1/estimates and GET /v1/presets (CONTRACT.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from api.domain.jobs.schemas import Slo

Rate = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
Tokens = Annotated[float, msgspec.Meta(ge=1, le=10_000_000)]


class TrafficIn(msgspec.Struct, forbid_unknown_fields=True):
    """The traffic to plan for: `requests_per_s` (the peak to size for), or
    `requests_per_day` with `peak_to_mean` (peak rate over the day's average); mean
    prompt and output tokens per request, or leave them to the preset."""

    requests_per_s: Rate | None = None
    requests_per_day: Rate | None = None
    peak_to_mean: Annotated[float, msgspec.Meta(ge=1, le=1000)] = 1.0
    input_tokens: Tokens | None = None
    output_tokens: Tokens | None = None


class EstimateCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/estimates. `slo` defaults to the preset's; `hardware` keeps only those
    SKUs; `include_projections` adds hardware you have a price for but no measurement of
    this model on, projected from the model's measured efficiency elsewhere; a measurement
    older than `max_age_days` is used but flagged stale."""

    model: Annotated[str, msgspec.Meta(min_length=1, max_length=256)]
    traffic: TrafficIn
    slo: Slo | None = None
    preset: str | None = None
    hardware: list[str] | None = None
    include_projections: bool = True
    max_age_days: Annotated[int, msgspec.Meta(ge=1, le=3650)] = 90


class TrafficRead(msgspec.Struct):
    """The traffic as planned: requests_per_s is the sizing (peak) rate,
    mean_requests_per_s the average that tokens and bills follow."""

    requests_per_s: float
    mean_requests_per_s: float
    peak_to_mean: float
    input_tokens: float
    output_tokens: float


class DeploymentRead(msgspec.Struct):
    """What a candidate is: a registered endpoint, or hardware projected from one."""

    endpoint_id: uuid.UUID | None
    name: str
    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int | None
    provider: str | None = None


class EvidenceRead(msgspec.Struct):
    """A run a candidate's figures rest on."""

    run_id: uuid.UUID
    measured_at: datetime | None


class BreakEvenRead(msgspec.Struct):
    """Against the hosted API `against`: self-hosting is cheaper per token from
    `break_even_rps` (first crossing) and at every rate above `always_cheaper_above_rps`
    (whole replicas make it lose again just above some multiples of capacity in between);
    null when it never is."""

    against: str
    break_even_rps: float | None
    always_cheaper_above_rps: float | None


class Candidate(msgspec.Struct):
    """One way to serve the traffic, with its cost, sizing and evidence.

    Self-hosted: `replicas` = ceil(requests_per_s / capacity_rps) whole replicas of
    `capacity_rps` each (requests/s at the SLO), `utilization` = requests_per_s / (replicas
    x capacity_rps), `headroom` = 1 - utilization. Hosted APIs have no replicas; they cost
    the average rate's tokens at their per-token prices.
    """

    kind: Literal["self_hosted", "hosted_api"]
    deployment: DeploymentRead
    replicas: int | None
    gpus: int | None
    utilization: float | None
    mean_utilization: float | None
    capacity_rps: float | None
    headroom: float | None
    headroom_rps: float | None
    usd_per_hour: float
    usd_per_month: float
    per_million_output_tokens_usd: float
    per_million_total_tokens_usd: float
    basis: Literal["measured", "projection", "list_price"]
    evidence: list[EvidenceRead]
    warnings: list[str]
    workload_similarity: float | None = None
    blended_usd_per_million_tokens: float | None = None
    break_even: BreakEvenRead | None = None


class Unavailable(msgspec.Struct):
    """An endpoint of the model that could not be a candidate, and what would make it one."""

    endpoint_id: uuid.UUID
    name: str
    reason: str


class EstimateRead(msgspec.Struct):
    """Candidates cheapest first (USD per hour at this traffic), why the first one wins,
    and the endpoints left out. With no evidence, `candidates` is empty and `reason` says
    what to measure."""

    model: str
    traffic: TrafficRead
    slo: dict[str, Any]
    preset: str | None
    candidates: list[Candidate]
    explanation: str | None
    unavailable: list[Unavailable]
    reason: str | None = None


class PresetRead(msgspec.Struct):
    """A workload preset: token length distributions, default SLO, and the figure its
    application cares most about (`optimises`), with the others worth watching."""

    name: str
    description: str
    input_tokens: dict[str, float]
    output_tokens: dict[str, float]
    slo: dict[str, dict[str, float]]
    optimises: str
    also_watch: list[str]
