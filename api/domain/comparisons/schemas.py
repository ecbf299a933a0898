"""Response shapes of GET /v1/comparisons and GET /v1/comparisons/frontier."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Literal

import msgspec

from api.domain.runs.schemas import AdequacyReason, SkippedLevel
from infercost.comparisons.repository import Aggregate, GroupBy


class Deployment(msgspec.Struct):
    """What was measured: the model, served by an engine on hardware with this many GPUs."""

    model: str
    engine: str | None
    hardware: str | None
    gpu_count: int


class ComparisonRow(msgspec.Struct):
    """One deployment at one load level (or, grouped by deployment, at its level with the
    highest output tokens/s), over the runs it aggregates.

    `figures` holds the figures asked for, by name, aggregated over `run_ids` (oldest
    first). `client_bound` is true when any of those runs was (only with
    include_client_bound=true); `slo_passed` is true when all passed, false when any failed,
    null when none had an SLO. `adequate` is false when any of its runs' evidence was
    inadequate (`inadequate` gives one reason per code: few_requests, short, client_bound,
    ...; runs stored before verdicts are judged on client_bound and request count), true
    when all were adequate, null when none had a verdict.
    """

    deployment: Deployment
    mode: str
    level: float
    workload_fingerprint: str | None
    runs: int
    run_ids: list[uuid.UUID]
    endpoint_ids: list[uuid.UUID]
    client_bound: bool
    slo_passed: bool | None
    first_measured_at: datetime | None
    last_measured_at: datetime | None
    figures: dict[str, float | None]
    adequate: bool | None = None
    inadequate: list[AdequacyReason] = []
    # Whose definitions its figures follow: "infercost", or the tool whose result file its
    # runs were imported from (vllm, guidellm, aiperf; POST /v1/imports). Rows of different
    # definitions are never aggregated together.
    definitions: str = "infercost"
    # With split=model: the model (or adapter) this row's requests asked for
    # (workload.models; the deployment's own model for a run of one model), its figures
    # those of its requests alone; null without split.
    served_model: str | None = None


class ComparisonPage(msgspec.Struct):
    """A page of comparison rows, how they were made, and the workloads they come from.

    `fingerprints` lists the workload fingerprint of every matching row (not just this
    page), null for runs measured before fingerprints; `mixed_workloads` is true when there
    is more than one, and then `warnings` says so: such rows measured different requests.
    `excluded` counts the matching runs left out and why (`client_bound`, unless
    include_client_bound=true); `inadequate_rows` counts this page's rows marked
    adequate=false.
    """

    items: list[ComparisonRow]
    total: int
    limit: int
    offset: int
    group_by: GroupBy
    aggregate: Aggregate
    figures: list[str]
    sort: list[str]
    fingerprints: list[str | None]
    mixed_workloads: bool
    warnings: list[str]
    excluded: dict[str, int] = {}
    inadequate_rows: int = 0
    # "model" when each row is one model of its runs (split=model), else null.
    split: Literal["model"] | None = None


class FrontierPoint(msgspec.Struct):
    """One deployment at one load level on the speed/throughput plane.

    x = `per_user_tokens_per_s_p50`, y = `output_tokens_per_s_per_gpu`; cost at the runs'
    stored prices. `dominated_by` (dominated points only) is the index into `frontier` of
    a point at least as good on both axes and better on one.
    """

    deployment: Deployment
    mode: str
    level: float
    per_user_tokens_per_s_p50: float
    output_tokens_per_s_per_gpu: float
    output_tokens_per_s: float | None
    cost_per_million_output_tokens_usd: float | None
    run_ids: list[uuid.UUID]
    client_bound: bool
    slo_passed: bool | None
    dominated_by: int | None = None


class FrontierRead(msgspec.Struct):
    """The Pareto frontier of one model on one workload, by per-user speed ascending.

    `dominated` is filled only with include_dominated=true. `left_out` counts deployment
    levels without both figures (no per-user speed, or no hardware to divide by). Only
    adequate, not client-bound runs make points: `excluded` counts the runs left out by
    reason (`client_bound`, `inadequate`), and `skipped` names the inadequate ones (newest
    200) with their reasons.
    """

    model: str
    workload_fingerprint: str | None
    x: str
    y: str
    aggregate: Aggregate
    frontier: list[FrontierPoint]
    dominated: list[FrontierPoint] | None
    left_out: int
    warnings: list[str]
    excluded: dict[str, int] = {}
    skipped: list[SkippedLevel] = []
