"""What a report draws: plain, immutable figures, independent of the API's schemas.

The API turns its run summaries into these; the charts and templates read nothing else,
so rendering needs no database, no session and no event loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from infercost.reports.numbers import rounded


def level_label(level: float, mode: str) -> str:
    """A load level as reports, the API and the CLI name it: '1 user', '8 users' (closed
    loop), '12.9 req/s' (open loop), '200 at once' (a burst) or 'trace, 12.9 req/s mean' (a
    replay: the mean rate its schedule asks for), rounded to three
    significant figures."""
    if mode == "burst":
        return f"{rounded(level)} at once"
    if mode == "trace":
        return f"trace, {rounded(level)} req/s mean"
    if mode != "concurrency":
        return f"{rounded(level)} req/s"
    return "1 user" if level == 1 else f"{rounded(level)} users"


@dataclass(frozen=True, slots=True)
class StructuredFigures:
    """A structured run's answers judged and its plain twin (the same lengths without
    response_format, docs/figures.md): the twin's figures and this run's / the twin's, or
    `plain_reason`, what to run to measure the twin."""

    answers: int
    valid: int
    valid_share: float | None
    plain_run_id: str | None = None
    plain_job_id: str | None = None
    plain_finished_at: datetime | None = None
    plain_ttft_p50_ms: float | None = None
    plain_tpot_p50_ms: float | None = None
    plain_e2e_p50_ms: float | None = None
    plain_output_tokens_per_s: float | None = None
    ttft_p50_ratio: float | None = None
    tpot_p50_ratio: float | None = None
    e2e_p50_ratio: float | None = None
    output_tokens_per_s_ratio: float | None = None
    plain_reason: str | None = None


@dataclass(frozen=True, slots=True)
class LevelFigures:
    """One run (one load level) as a report shows it; None where a figure is unknown."""

    level: float
    mode: str
    status: str
    ttft_p50_ms: float | None = None
    ttft_p95_ms: float | None = None
    tpot_p50_ms: float | None = None
    tpot_p95_ms: float | None = None
    itl_p50_ms: float | None = None
    itl_p95_ms: float | None = None
    e2e_p50_ms: float | None = None
    e2e_p95_ms: float | None = None
    output_tokens_per_s: float | None = None
    requests_per_s: float | None = None
    error_rate: float | None = None
    goodput_rps: float | None = None
    slo_passed: bool | None = None
    client_bound: bool | None = None
    usd_per_hour: float | None = None
    cost_per_million_output_usd: float | None = None
    cost_at_slo_per_million_output_usd: float | None = None
    cost_note: str | None = None
    gpu_util_mean: float | None = None
    gpu_util_p95: float | None = None
    sm_active_mean: float | None = None
    telemetry_errors: tuple[str, ...] = ()
    # Engine telemetry over the measured window (the run's telemetry block): requests in
    # and waiting for the engine, busy slots, cache, and the server's own token rates.
    telemetry_sources: tuple[str, ...] = ()
    requests_running_mean: float | None = None
    requests_waiting_mean: float | None = None
    requests_waiting_max: float | None = None
    busy_slots_per_decode: float | None = None
    kv_cache_usage_mean: float | None = None
    prompt_tokens_cached_share: float | None = None
    server_prompt_tokens_per_s: float | None = None
    server_output_tokens_per_s: float | None = None
    telemetry_notes: tuple[str, ...] = ()
    # Codes of why the level's evidence is inadequate (run adequacy); empty when adequate or
    # unknown. Such a level is marked, and capacity leaves it out.
    inadequate: tuple[str, ...] = ()
    # Measured again after its worker died mid-level: the interrupted run is not used.
    measured_again: bool = False
    # workload.features structured: valid answers, and the run against its plain twin.
    structured: StructuredFigures | None = None


@dataclass(frozen=True, slots=True)
class Deployment:
    """One job's deployment and its measured levels, in level order.

    model, engine (with its version), hardware and gpu_count are what the job's runs
    measured (the first level's, as each run recorded them when it started), not what the
    endpoint says now. When the endpoint changed during the job, `setups` names each
    deployment with the levels measured on it; it is empty when all levels share one.
    `from_endpoint` is set when no level has been measured yet, so the figures are the
    endpoint's current settings.
    """

    label: str
    job_id: str
    endpoint_name: str
    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int
    status: str
    runs: tuple[LevelFigures, ...]
    workload_fingerprint: str | None = None
    measured_from: datetime | None = None
    measured_to: datetime | None = None
    has_metrics_urls: bool = False
    setups: tuple[str, ...] = ()
    from_endpoint: bool = False


@dataclass(frozen=True, slots=True)
class Histogram:
    """TTFT counts of one run's measured, successful requests over shared bin edges (ms)."""

    label: str
    edges: tuple[float, ...]
    counts: tuple[int, ...]

    def __post_init__(self) -> None:
        if len(self.edges) != len(self.counts) + 1:
            raise ValueError("a histogram needs one more edge than counts")


@dataclass(frozen=True, slots=True)
class SloLimit:
    """One SLO limit, e.g. TTFT p95 <= 500 ms (metric is ttft_ms, tpot_ms, itl_ms, e2e_ms)."""

    metric: str
    stat: str
    limit_ms: float


@dataclass(frozen=True, slots=True)
class FleetSeries:
    """A trace's demand over time with the fleets that serve it (infercost.planning.fleets):
    per interval of `interval_s` from `starts_s`, the demand (requests/s of its busiest
    minute) and the autoscaled fleet's replicas; the fixed fleet's replicas; one replica's
    capacity at the SLO; the part of the trace the job replayed (`window`, seconds).
    `why_empty` says why there is nothing to draw (no capacity at the SLO, the log gone)."""

    interval_s: float
    starts_s: tuple[float, ...] = ()
    demand_rps: tuple[float, ...] = ()
    autoscaled: tuple[int, ...] = ()
    fixed: int = 0
    capacity_rps: float = 0.0
    window: tuple[float, float] | None = None
    why_empty: str | None = None


@dataclass(frozen=True, slots=True)
class JobReport:
    """Everything GET /v1/jobs/{id}/report shows."""

    deployment: Deployment
    workload: str
    load_plan: str
    slo: tuple[SloLimit, ...]
    created_at: datetime
    generated_at: datetime
    error: str | None = None
    capacity: str | None = None
    histograms: tuple[Histogram, ...] = ()
    # A trace replay's report: the trace's demand with the fixed and autoscaled fleets.
    fleets: FleetSeries | None = None


@dataclass(frozen=True, slots=True)
class ComparisonReport:
    """Everything GET /v1/reports/compare shows; `warnings` are shown above the charts."""

    deployments: tuple[Deployment, ...]
    workloads: dict[str, str]
    generated_at: datetime
    warnings: tuple[str, ...] = field(default=())
