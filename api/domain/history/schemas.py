"""Response shapes of GET /v1/endpoints/{id}/history and of a run's `change` block."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

RunVerdict = Literal[
    "regression", "improvement", "no_change", "insufficient_data", "baseline", "incomparable"
]
MetricVerdict = Literal["regression", "improvement", "no_change", "insufficient_data"]


class MetricChange(msgspec.Struct):
    """One per-request metric of a run against its baseline's (README, "History and
    regressions").

    `relative_change` = current median / baseline median - 1 (0.5: 50 % slower), with its
    bootstrap confidence interval [`ci_low`, `ci_high`]; `p_value` of a two-sided
    Mann-Whitney U test on the successful measured requests of both runs; `cliffs_delta`
    in [-1, 1], P(current > baseline) - P(current < baseline), positive when slower.
    `n_baseline`, `n_current`: requests compared. Figures are null with insufficient data.

    The tail: `p95_relative_change` = current p95 / baseline p95 - 1, with its bootstrap
    interval [`p95_ci_low`, `p95_ci_high`], and `p95_p_value`, the two-sided p-value of a
    quantile test (each run's share of requests above the pooled p95); the interval and
    p-value are null under `method.min_tail_samples` requests a side, when `p95_verdict`
    is insufficient_data. `median_verdict` and `p95_verdict` are
    each check's own verdict; `verdict` is regression when either regressed, else
    improvement when either improved, and `flagged_by` names the checks that gave it
    ("median", "p95"). These fields are absent (null, empty) on changes decided before the
    tail check existed.
    """

    verdict: MetricVerdict
    n_baseline: int
    n_current: int
    baseline_p50_ms: float | None
    current_p50_ms: float | None
    relative_change: float | None
    ci_low: float | None
    ci_high: float | None
    p_value: float | None
    cliffs_delta: float | None
    median_verdict: MetricVerdict | None = None
    p95_verdict: MetricVerdict | None = None
    baseline_p95_ms: float | None = None
    current_p95_ms: float | None = None
    p95_relative_change: float | None = None
    p95_ci_low: float | None = None
    p95_ci_high: float | None = None
    p95_p_value: float | None = None
    flagged_by: list[Literal["median", "p95"]] = msgspec.field(default_factory=list)


class RateChange(msgspec.Struct):
    """A run-level figure against the baseline's; one number per run, so never tested."""

    baseline: float | None
    current: float | None
    relative_change: float | None


class ChangeMethod(msgspec.Struct):
    """The thresholds the verdict was decided with: flagged when p_value < `alpha`, the
    interval excludes 0 and |relative_change| >= `min_effect`; under `min_samples` requests
    on either side a metric is insufficient_data. The tail check: the `tail_quantile`
    (0.95) is flagged when p95_p_value (`tail_test`) < `alpha`, its interval excludes 0 and
    |p95_relative_change| >= `min_tail_effect`, with at least `min_tail_samples` requests
    a side (null on changes decided before the tail check existed)."""

    test: str
    alpha: float
    min_effect: float
    min_samples: int
    max_samples: int
    confidence: float
    bootstrap_resamples: int
    seed: int
    tail_quantile: float | None = None
    min_tail_effect: float | None = None
    min_tail_samples: int | None = None
    tail_test: str | None = None


class ErrorRateChange(msgspec.Struct):
    """The run's share of failed measured requests against its baseline's: `verdict`
    regression (improvement) when it rose (fell) by at least `min_change` (absolute) and
    Fisher's exact test on the failed and succeeded counts gives `p_value` < `alpha`."""

    verdict: MetricVerdict
    baseline: float | None
    current: float | None
    baseline_failed: int
    current_failed: int
    p_value: float | None
    min_change: float
    alpha: float
    test: str


class Outage(msgspec.Struct):
    """A stretch of consecutive failed requests: from the first one's send (`start_s`, on
    the run's clock) to the next successful send, or the level's end; the requests that
    failed in it by error class."""

    start_s: float
    end_s: float
    duration_s: float
    failed: int
    errors: dict[str, int]


class Availability(msgspec.Struct):
    """Time the endpoint served nothing during the level: `unavailable_s` summed over its
    `outages`, as a share of the level's window (first send to last end), and the longest
    outages (at most five)."""

    window_s: float
    unavailable_s: float
    unavailable_share: float | None
    outages: int
    longest: list[Outage]


class Change(msgspec.Struct):
    """A run against its baseline: the latest earlier succeeded, not client-bound run of
    another job on the same endpoint, workload fingerprint, mode and level.

    `verdict`: `regression` when any metric (ttft_ms, tpot_ms, e2e_ms) regressed, else
    `improvement` when any improved, else `no_change` (`insufficient_data` when no metric
    had enough requests); `baseline` when there was no earlier comparable run (then
    `metrics` is empty); `incomparable` when the two runs' shares of prompt tokens served
    from the prefix cache differ by more than 10 points (cached prefill is far cheaper, so
    TTFT would differ for that reason alone; `notes` says by how much, `metrics` is empty).
    `output_tokens_per_s` is reported, never tested. `errors`: the error rate against the
    baseline's; a rise beyond noise makes the run a regression whatever its latency.
    `availability`: how long the endpoint was unavailable during the level (null on
    changes decided before these existed, `errors` also when there is no baseline).
    """

    verdict: RunVerdict
    baseline_run_id: uuid.UUID | None
    baseline_job_id: uuid.UUID | None
    baseline_finished_at: datetime | None
    metrics: dict[str, MetricChange]
    output_tokens_per_s: RateChange | None
    method: ChangeMethod
    notes: list[str]
    errors: ErrorRateChange | None = None
    availability: Availability | None = None


class HistoryPoint(msgspec.Struct):
    """One succeeded run of a series: when it finished, its headline figures (docs/figures.md)
    and its change against its baseline (null for runs measured before history)."""

    run_id: uuid.UUID
    job_id: uuid.UUID
    started_at: datetime | None
    finished_at: datetime
    # The endpoint's engine_version when the run started (null when none was set), so a
    # change between points can be told apart from an engine upgrade.
    engine_version: str | None
    ttft_p50_ms: float | None
    ttft_p95_ms: float | None
    tpot_p50_ms: float | None
    tpot_p95_ms: float | None
    e2e_p50_ms: float | None
    e2e_p95_ms: float | None
    output_tokens_per_s: float | None
    cost_per_million_output_tokens_usd: float | None
    client_bound: bool | None
    slo_passed: bool | None
    change: Change | None


class Series(msgspec.Struct):
    """The runs of one workload (fingerprint), mode and load level, oldest first.

    `total` counts the series' runs in the time window; `points` holds the latest `limit`
    of them. `latest_verdict` is the newest point's change verdict.
    """

    workload_fingerprint: str | None
    mode: str
    level: float
    total: int
    latest_verdict: RunVerdict | None
    points: list[HistoryPoint]
    # With split=model: the model (or adapter) the series' requests asked for
    # (workload.models; the deployment's own model for runs of one model), each point that
    # model's figures and no change (a run's change judged all its requests); else null.
    model: str | None = None


class History(msgspec.Struct):
    """An endpoint's succeeded runs as series over time, ordered by workload fingerprint,
    mode and level. `regressions` lists the run ids (among the points shown) flagged as
    regressions, newest first."""

    endpoint_id: uuid.UUID
    limit: int
    series: list[Series]
    regressions: list[uuid.UUID]
