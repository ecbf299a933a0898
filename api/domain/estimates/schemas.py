"""Request and response shapes of POST /v1/estimates and GET /v1/presets (docs/cli-and-api.md)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Any, Literal

import msgspec

from api.domain.plans.schemas import Slo
from api.domain.runs.schemas import SkippedLevel
from infercost.planning.estimate import DEFAULT_TARGET_UTILIZATION
from infercost.planning.fleets import DEFAULT_INTERVAL_S, DEFAULT_LAG_S, DEFAULT_MIN_REPLICAS

Rate = Annotated[float, msgspec.Meta(gt=0, le=1e9)]
Tokens = Annotated[float, msgspec.Meta(ge=1, le=10_000_000)]


class TrafficIn(msgspec.Struct, forbid_unknown_fields=True):
    """The traffic to plan for: `requests_per_s` (the peak to size for), or
    `requests_per_day` with `peak_to_mean` (peak rate over the day's average; without it an
    estimate assumes 2 and says so in `assumptions`); mean prompt and output tokens per
    request, or leave them to the preset."""

    requests_per_s: Annotated[
        Rate | None,
        msgspec.Meta(
            description="The peak request rate to size for, in requests/s", examples=[40.0]
        ),
    ] = None
    requests_per_day: Annotated[
        Rate | None,
        msgspec.Meta(
            description="Requests per day (instead of requests_per_s; the peak is this average "
            "times peak_to_mean)",
            examples=[2000000.0],
        ),
    ] = None
    peak_to_mean: Annotated[
        Annotated[float, msgspec.Meta(ge=1, le=1000)] | None,
        msgspec.Meta(
            description="Peak request rate over the day's average (1 to 1000; default 2, said in "
            "assumptions)",
            examples=[2.0],
        ),
    ] = None
    input_tokens: Annotated[
        Tokens | None,
        msgspec.Meta(
            description="Mean prompt length per request, in tokens; absent: the preset's",
            examples=[512.0],
        ),
    ] = None
    output_tokens: Annotated[
        Tokens | None,
        msgspec.Meta(
            description="Mean output length per request, in tokens; absent: the preset's",
            examples=[256.0],
        ),
    ] = None


class FleetsIn(msgspec.Struct, forbid_unknown_fields=True):
    """How a plan from a request log is cut and how its autoscaler behaves."""

    interval_s: Annotated[
        Annotated[int, msgspec.Meta(ge=60, le=86_400, multiple_of=60)],
        msgspec.Meta(
            description="Seconds per interval of the plan, a whole number of minutes (each "
            "interval's demand is its busiest minute)",
            examples=[300],
        ),
    ] = DEFAULT_INTERVAL_S
    lag_s: Annotated[
        Annotated[float, msgspec.Meta(ge=0, le=86_400)],
        msgspec.Meta(
            description="How late the autoscaled fleet follows demand, in seconds (rounded to "
            "whole intervals, at least one)",
            examples=[300],
        ),
    ] = DEFAULT_LAG_S
    min_replicas: Annotated[
        Annotated[int, msgspec.Meta(ge=0, le=100_000)],
        msgspec.Meta(description="The fewest replicas any interval runs", examples=[1]),
    ] = DEFAULT_MIN_REPLICAS


class EstimateCreate(msgspec.Struct, forbid_unknown_fields=True):
    """POST /v1/estimates. `slo` defaults to the preset's; `hardware` keeps only those
    SKUs; `include_projections` adds hardware you have a price for but no measurement of
    this model on, projected from the model's measured efficiency elsewhere; a measurement
    older than `max_age_days` is used but flagged stale. Replicas are sized to run at most
    `target_utilization` of their capacity at the SLO (default 0.8: 20% headroom). Evidence
    measured on other token lengths (workload similarity below 0.8) gives no figures unless
    `allow_mismatched_workload` is true; then the candidate's basis is "extrapolation".
    `traffic_id` (a request log, POST /v1/traffic) may replace `traffic`: the log's busiest
    minute is the rate to size for, its mean lengths and token counts price it, and each
    self-hosted candidate gets `fleets`, cut and lagged as `fleets` says. `served_model`
    plans one model of those a job's `workload.models` spread requests over (an adapter on
    the endpoints' base, or the base itself) from that model's own figures in each run."""

    model: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=256)],
        msgspec.Meta(
            description="The model to price, as your endpoints name it",
            examples=["meta-llama/Llama-3.1-8B-Instruct"],
        ),
    ]
    served_model: Annotated[
        Annotated[str, msgspec.Meta(min_length=1, max_length=256)] | None,
        msgspec.Meta(
            description="The model or adapter whose traffic this is, as workload.models named "
            "it, when the endpoints serve several: each candidate's evidence is then that "
            "model's own figures in runs that sent it requests, and its cost the share of the "
            "replicas its tokens bear",
            examples=["lora-support"],
        ),
    ] = None
    traffic: Annotated[
        TrafficIn | None,
        msgspec.Meta(
            description="The traffic to plan for (or traffic_id)",
            examples=[{"requests_per_s": 40, "input_tokens": 512, "output_tokens": 256}],
        ),
    ] = None
    traffic_id: Annotated[
        uuid.UUID | None,
        msgspec.Meta(
            description="A request log of your team (GET /v1/traffic) to plan for, instead of "
            "traffic: each candidate then gets fleets per interval",
            examples=["8b58da70-87c4-4a5e-9d3a-1f0e2b3c4d5e"],
        ),
    ] = None
    fleets: Annotated[
        FleetsIn | None,
        msgspec.Meta(
            description="With traffic_id: interval, autoscaler lag and minimum replicas of the "
            "plan (defaults 300 s, 300 s, 1)",
            examples=[{"interval_s": 300, "lag_s": 300, "min_replicas": 1}],
        ),
    ] = None
    slo: Annotated[
        Slo | None,
        msgspec.Meta(
            description="The SLO each replica must hold, limits in ms; absent: the preset's",
            examples=[{"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}}],
        ),
    ] = None
    preset: Annotated[
        str | None,
        msgspec.Meta(
            description="A workload preset (GET /v1/presets) for lengths and SLO left out",
            examples=["interactive-chatbot"],
        ),
    ] = None
    hardware: Annotated[
        list[str] | None,
        msgspec.Meta(
            description="Keep only these hardware SKUs (GET /v1/hardware names)",
            examples=[["H200-SXM", "H100-SXM"]],
        ),
    ] = None
    include_projections: Annotated[
        bool,
        msgspec.Meta(
            description="Add hardware you have a price for but no measurement of this model on, "
            "projected from its measured efficiency elsewhere",
            examples=[True],
        ),
    ] = True
    max_age_days: Annotated[
        Annotated[int, msgspec.Meta(ge=1, le=3650)],
        msgspec.Meta(
            description="Measurements older than this many days are used but flagged stale",
            examples=[90],
        ),
    ] = 90
    target_utilization: Annotated[
        Annotated[float, msgspec.Meta(gt=0, le=1)],
        msgspec.Meta(
            description="Share of a replica's capacity at the SLO it may carry (0 to 1; the rest "
            "is headroom)",
            examples=[0.8],
        ),
    ] = DEFAULT_TARGET_UTILIZATION
    allow_mismatched_workload: Annotated[
        bool,
        msgspec.Meta(
            description="Use evidence measured on other token lengths (similarity below 0.8) as an"
            " extrapolation",
            examples=[False],
        ),
    ] = False


class TrafficRead(msgspec.Struct):
    """The traffic as planned: requests_per_s is the sizing (peak) rate,
    mean_requests_per_s the average that tokens and bills follow. From a request log
    (`traffic_id`): requests_per_s is its busiest minute's rate (the peak interval's
    demand), mean_requests_per_s its requests over its duration, the lengths its means."""

    requests_per_s: float
    mean_requests_per_s: float
    peak_to_mean: float
    input_tokens: float
    output_tokens: float
    traffic_id: uuid.UUID | None = None
    name: str | None = None
    requests: int | None = None
    duration_s: float | None = None


class LoadPointRead(msgspec.Struct):
    """A measured level taken as evidence of a capacity, at the requests/s it served.

    `role`: basis (the capacity rests on it), passed or failed (evidence around it), or
    overruled (it passed, but a newer job failed at the same or a lower rate).
    `stale`: older than max_age_days (still counted). `falls_with_load`: it served fewer
    requests/s than a lower load of its own job (the curve is not monotone)."""

    run_id: uuid.UUID
    job_id: uuid.UUID
    measured_at: datetime | None
    level: float
    mode: str
    requests_per_s: float
    slo_passed: bool
    role: Literal["basis", "passed", "failed", "overruled"]
    stale: bool
    falls_with_load: bool


class IntervalRead(msgspec.Struct):
    """One interval of a plan from a log: from `start_s` after its first request, for
    `length_s`; its requests; `demand_rps` = its busiest minute's requests / 60; replicas
    `needed` = max(min_replicas, ceil(demand / (target_utilization x capacity))) and those the
    autoscaled fleet runs (`autoscaled`); `at_risk` when it ran fewer than needed."""

    start_s: float
    length_s: float
    requests: int
    demand_rps: float
    needed: int
    autoscaled: int
    at_risk: bool


class FixedFleetRead(msgspec.Struct):
    """The fleet sized for the peak interval, run all the time: replicas, replica-hours and
    USD over the log, USD per day (x 86,400 / the log's duration), mean utilisation (mean
    requests/s / (replicas x capacity)) and USD per million output tokens of the log."""

    replicas: int
    replica_hours: float
    usd: float
    usd_per_day: float
    mean_utilization: float
    per_million_output_tokens_usd: float | None


class SloRiskRead(msgspec.Struct):
    """Intervals (their indices) where the autoscaled fleet ran fewer replicas than needed,
    and the log's requests in them (count and share)."""

    intervals: list[int]
    requests: int
    share_of_requests: float


class AutoscaledFleetRead(msgspec.Struct):
    """The fleet that follows demand `lag_intervals` late, up and down: its replica-hours,
    time-weighted mean replicas, cost, mean utilisation and SLO risk."""

    replica_hours: float
    mean_replicas: float
    usd: float
    usd_per_day: float
    mean_utilization: float
    per_million_output_tokens_usd: float | None
    slo_risk: SloRiskRead


class FleetsRead(msgspec.Struct):
    """A self-hosted candidate over a request log (docs/figures.md, "Plans from traffic"):
    per-interval demand and replicas, the fixed and the autoscaled fleet, which is cheaper
    and what it saves a day. `lag_intervals` = max(1, round(lag_s / interval_s))."""

    interval_s: int
    lag_s: float
    lag_intervals: int
    min_replicas: int
    capacity_rps: float
    target_utilization: float
    usd_per_replica_hour: float
    intervals: list[IntervalRead]
    fixed: FixedFleetRead
    autoscaled: AutoscaledFleetRead
    cheaper: Literal["fixed", "autoscaled"]
    saving_usd_per_day: float


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


class ServedModelRead(msgspec.Struct):
    """Whose figures a candidate rests on when the estimate names a served_model
    (docs/figures.md, "Capacity of one model"): the model; its `token_share` of the replica's
    tokens at the capacity's basis level (1 when `whole_runs`: runs without a models block,
    of an endpoint serving that model alone); `replica_usd_per_hour`, one replica's whole
    price, of which the candidate's usd_per_hour is replicas x it x token_share; and the
    model's output tokens/s per replica at its capacity."""

    model: str
    token_share: float
    whole_runs: bool
    replica_usd_per_hour: float | None
    capacity_output_tokens_per_s: float


class Candidate(msgspec.Struct):
    """One way to serve the traffic, with its cost, sizing and evidence.

    Self-hosted: `replicas` = ceil(requests_per_s / (target_utilization x capacity_rps))
    whole replicas of `capacity_rps` each (requests/s at the SLO, from adequate levels only),
    `utilization` = requests_per_s / (replicas x capacity_rps), `headroom` = 1 -
    utilization. The capacity lies in [`capacity_rps_low`, `capacity_rps_high`] (the
    bracketing levels; high null when every level passed), so replicas and cost lie in their
    `*_range` (fewest first; null without both ends). `skipped`: levels of the evidence job
    left out as inadequate or client-bound. Hosted APIs have no replicas; they cost the
    average rate's tokens at their per-token prices (from a log: its own token counts).
    `load_points`: every level the capacity was chosen from; `monotone` false when a level
    served fewer requests/s than a lower load of its job (the capacity is the best passing
    level). `fleets`: with traffic_id, the plan over the log. `served_model`: with the
    estimate's served_model, the model's figures it used and its share of the cost.
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
    basis: Literal["measured", "projection", "extrapolation", "list_price"]
    evidence: list[EvidenceRead]
    warnings: list[str]
    workload_similarity: float | None = None
    blended_usd_per_million_tokens: float | None = None
    break_even: BreakEvenRead | None = None
    target_utilization: float | None = None
    capacity_rps_low: float | None = None
    capacity_rps_high: float | None = None
    replicas_range: list[int] | None = None
    usd_per_hour_range: list[float] | None = None
    per_million_output_tokens_usd_range: list[float] | None = None
    skipped: list[SkippedLevel] = []
    load_points: list[LoadPointRead] = []
    monotone: bool | None = None
    fleets: FleetsRead | None = None
    served_model: ServedModelRead | None = None


class Unavailable(msgspec.Struct):
    """An endpoint of the model that could not be a candidate, and what would make it one;
    `skipped` names its levels left out as inadequate or client-bound."""

    endpoint_id: uuid.UUID
    name: str
    reason: str
    workload_similarity: float | None = None
    skipped: list[SkippedLevel] = []


class EstimateRead(msgspec.Struct):
    """Candidates cheapest first (USD per hour at this traffic), why the first one wins,
    and the endpoints left out. With no evidence, `candidates` is empty and `reason` says
    what to measure. `assumptions` states every default the figures rest on (peak over
    average, target utilisation), so none is silent. `served_model`: the model of a mix the
    traffic was planned for (null: the endpoints' traffic as a whole)."""

    model: str
    traffic: TrafficRead
    slo: dict[str, Any]
    preset: str | None
    candidates: list[Candidate]
    explanation: str | None
    unavailable: list[Unavailable]
    reason: str | None = None
    target_utilization: float = DEFAULT_TARGET_UTILIZATION
    assumptions: list[str] = []
    served_model: str | None = None


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
