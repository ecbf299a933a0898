"""Turning stored runs into planning evidence: capacity at an SLO, and efficiency against
the roofline bounds of the endpoint's hardware and model (docs/figures.md, Cost and Physical
limits). Used by job reads and by the estimate planner, so both say the same thing."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from api.domain.runs.schemas import AdequacyReason, CapacityAtSlo, Efficiency, SkippedLevel
from infercost.endpoints.models import Endpoint
from infercost.figures.cost import per_million
from infercost.figures.replay import INTERVAL_MIN_REQUESTS
from infercost.hardware.catalog import BYTES_PER_PARAM
from infercost.hardware.models import Hardware as HardwareRow
from infercost.jobs.models import Job, Run
from infercost.jobs.plan import read_load
from infercost.planning.capacity import (
    Capacity,
    LevelResult,
    LoadPoint,
    capacity_at_slo,
    pooled_capacity,
    slo_margin,
)
from infercost.planning.capacity import inadequate_reasons as run_inadequacy
from infercost.planning.roofline import (
    Hardware,
    ModelFacts,
    RooflineBounds,
    batch_throughput_bound_tokens_per_s,
    roofline_bounds,
)

#: Most measured requests that may fail for a run to count as passing an estimate's SLO.
MAX_ERROR_RATE = 0.01


def model_facts(endpoint: Endpoint) -> ModelFacts | None:
    """The endpoint's model facts, when it says how big the model is and at what precision
    (bf16 when only the size is given)."""
    if endpoint.params_b is None:
        return None
    return ModelFacts(
        params_b=endpoint.params_b,
        bytes_per_param=BYTES_PER_PARAM[endpoint.precision or "bf16"],
        kv_bytes_per_token=endpoint.kv_bytes_per_token,
    )


def replica_hardware(row: HardwareRow, precision: str | None, gpu_count: int) -> Hardware:
    """One replica's hardware at the serving precision (bf16 when none is given)."""
    return Hardware.from_gpu(row, precision or "bf16", gpu_count)


def mean_context(run: Run, served: Served | None = None) -> float | None:
    """A run's mean context over a request's decode: its successful requests' (for `served`,
    that model's) mean prompt and half their mean output, in tokens."""
    figures = load_figures(run, served)
    if figures is None:
        return None
    rps, given, out = (
        figures.requests_per_s,
        figures.input_tokens_per_s,
        figures.output_tokens_per_s,
    )
    if not rps or given is None or not out:
        return None
    return given / rps + out / rps / 2


def run_physics(run: Run, facts: ModelFacts, hardware: Hardware) -> Efficiency:
    """The roofline figures of one run (docs/figures.md, Physical limits)."""
    context = mean_context(run)
    bounds: RooflineBounds = roofline_bounds(facts, hardware, context)
    at_load: float | None = None
    if context is not None and run.mean_concurrency and run.mean_concurrency >= 0.5:
        streams = max(1, round(run.mean_concurrency))
        at_load = batch_throughput_bound_tokens_per_s(facts, hardware, streams, context)
    speed = ((run.stats or {}).get("per_user_tokens_per_s") or {}).get("p50")
    out = run.output_tokens_per_s
    return Efficiency(
        decode_bound_tokens_per_s=bounds.decode_tokens_per_s,
        throughput_bound_tokens_per_s=at_load,
        peak_throughput_bound_tokens_per_s=bounds.peak_output_tokens_per_s,
        decode=None if speed is None else float(speed) / bounds.decode_tokens_per_s,
        throughput=None if not out or at_load is None else out / at_load,
        peak=None if not out else out / bounds.peak_output_tokens_per_s,
    )


@dataclass(frozen=True, slots=True)
class Served:
    """Evidence for one model of an endpoint's traffic (workload.models): `model`, the name
    the requests asked for, and `base`, the model the deployment itself served, which is
    what a run without a models block sent every request to."""

    model: str
    base: str


@dataclass(frozen=True, slots=True)
class LoadFigures:
    """A run's figures as evidence for one model: its requests/s, output and input tokens/s,
    statistics by metric ({"ttft_ms": {"p95": ...}, ...}) and error rate, and its share of
    the run's tokens (1 for the whole run). `model` names the models block they came from
    (None: the run as a whole)."""

    requests_per_s: float | None
    output_tokens_per_s: float | None
    input_tokens_per_s: float | None
    stats: Mapping[str, Any]
    error_rate: float | None
    token_share: float
    model: str | None = None


def load_figures(run: Run, served: Served | None = None) -> LoadFigures | None:
    """A run as a load point for `served` (docs/figures.md, "Capacity of one model"):
    without one, or for a run without a models block whose deployment served that very
    model, the run's own figures (share 1); from a run with a models block, that model's
    entry; None when the model did not appear in the run (it is not its evidence)."""
    blocks = run.models or []
    if served is None or (not blocks and served.base == served.model):
        return LoadFigures(
            run.requests_per_s,
            run.output_tokens_per_s,
            run.input_tokens_per_s,
            run.stats or {},
            run.error_rate,
            1.0,
        )
    block = next((b for b in blocks if b.get("model") == served.model), None)
    if block is None:
        return None
    stats = {metric: block.get(metric) or {} for metric in ("ttft_ms", "tpot_ms", "e2e_ms")}
    share = block.get("token_share")
    return LoadFigures(
        block.get("requests_per_s"),
        block.get("output_tokens_per_s"),
        block.get("input_tokens_per_s"),
        stats,
        block.get("error_rate"),
        0.0 if share is None else float(share),
        served.model,
    )


def models_sent(run: Run, served: Served) -> list[str]:
    """The models a run sent requests to: its models block's, else the deployment's."""
    return [b["model"] for b in run.models or ()] or [served.base]


def passes(
    run: Run, slo: Mapping[str, Mapping[str, float]], served: Served | None = None
) -> tuple[bool, float | None]:
    """Whether a stored run meets `slo` (which may not be the SLO its job had), and its
    margin: every limited percentile within its limit, and at most 1% of requests failed;
    for `served`, judged on that model's own statistics and error rate."""
    figures = load_figures(run, served)
    if figures is None:
        return False, None
    margin = slo_margin(figures.stats, slo)
    ok = (
        margin is not None
        and margin <= 1.0
        and (figures.error_rate or 0.0) <= MAX_ERROR_RATE
        and run.status == "succeeded"
    )
    return ok, margin


def inadequate_reasons(run: Run) -> list[dict[str, str]]:
    """Why a run cannot be capacity evidence (see planning.capacity.inadequate_reasons), and
    load that is not a sustained rate: a burst, or a rate level held back by its cap on
    requests in flight (the server never saw the offered rate, and the queueing the cap
    caused is outside every latency, so its SLO verdict would flatter it)."""
    reasons = run_inadequacy(
        run.adequacy, client_bound=run.client_bound, requests_succeeded=run.requests_succeeded
    )
    if run.mode == "burst":
        reasons.append(
            {
                "code": "burst",
                "detail": f"a burst of {run.level:g} requests sent at once shows how the "
                "endpoint absorbs a spike, not a rate it sustains",
            }
        )
    cap = run.concurrency_cap or {}
    if cap.get("waited"):
        reasons.append(
            {
                "code": "concurrency_capped",
                "detail": f"{cap.get('waited_share') or 0:.0%} of requests waited for a "
                f"load.max_concurrency slot ({cap.get('max_concurrency')}): the endpoint "
                "never saw the offered rate; measure without the cap for capacity",
            }
        )
    return reasons


@dataclass(frozen=True, slots=True)
class CapacityEvidence:
    """One job's capacity at an SLO (None when no adequate level met it), the runs it rests
    on, the levels left out as evidence with why (inadequate or client-bound), and the
    levels that served fewer requests/s than a lower load (`falls`)."""

    capacity: Capacity | None
    run_ids: list[uuid.UUID] = field(default_factory=list)
    skipped: list[SkippedLevel] = field(default_factory=list)
    falls: list[uuid.UUID] = field(default_factory=list)


def paused_but_passed(
    run: Run, slo: Mapping[str, Mapping[str, float]], served: Served | None = None
) -> bool:
    """Whether the only thing wrong with a level is its load generator's pauses
    (client_paused) and it met `slo` all the same. A pause only makes stamps late, so it
    only raises latency figures (and lowers the requests/s a closed loop carried): a level
    that meets an SLO despite its pauses met it, and stands as evidence that it did (its
    load point client-bound, so a capacity resting on it may be understated). A paused
    level that failed may have failed for the pauses, and stays out."""
    codes = {r.get("code") for r in ((run.adequacy or {}).get("reasons") or ())}
    return codes == {"client_paused"} and passes(run, slo, served)[0]


def _usable(
    runs: Sequence[Run], slo: Mapping[str, Mapping[str, float]], served: Served | None = None
) -> tuple[list[Run], list[SkippedLevel]]:
    """A job's finished levels that can stand as evidence at `slo` (for `served`: those
    that sent it requests), and the others with why not."""
    usable: list[Run] = []
    skipped: list[SkippedLevel] = []
    for run in runs:
        figures = load_figures(run, served)
        if (
            run.status != "succeeded"
            or figures is None
            or not figures.requests_per_s
            or figures.output_tokens_per_s is None
            # a model's figures with no share of the tokens cannot bear a cost
            or not figures.token_share
        ):
            continue
        reasons = inadequate_reasons(run)
        if reasons and paused_but_passed(run, slo, served):
            reasons = []
        if served is not None and run.mode == "trace" and run.models:
            reasons.append(
                {
                    "code": "per_model_intervals",
                    "detail": "a trace replay's intervals are not split by model, so its "
                    f"load points say nothing of {served.model}'s own capacity",
                }
            )
        if reasons:
            skipped.append(
                SkippedLevel(
                    run_id=run.id,
                    level=run.level,
                    mode=run.mode,
                    reasons=[AdequacyReason(r["code"], r["detail"]) for r in reasons],
                )
            )
        else:
            usable.append(run)
    return usable, skipped


@dataclass(frozen=True, slots=True)
class _Point:
    """One load point of a run: the run itself, or one interval of a trace replay."""

    level: float
    mode: str
    requests_per_s: float
    output_tokens_per_s: float
    slo_passed: bool
    slo_margin: float | None


def _points_of(
    run: Run,
    slo: Mapping[str, Mapping[str, float]],
    *,
    as_rate: bool,
    served: Served | None = None,
) -> list[_Point]:
    """A run's load points at `slo`: a trace replay's intervals (each at the requests/s it
    achieved, judged on its own statistics; intervals with fewer than
    INTERVAL_MIN_REQUESTS successful requests left out), else the run at its level, or at
    the requests/s it carried when `as_rate` (a sweep's levels); for `served`, at that
    model's own requests/s and output tokens/s, judged on its own figures."""
    if run.mode == "trace":
        points = []
        for interval in (run.replay or {}).get("intervals") or []:
            if interval["succeeded"] < INTERVAL_MIN_REQUESTS or not interval["requests_per_s"]:
                continue
            margin = slo_margin(interval["stats"], slo)
            ok = (
                margin is not None
                and margin <= 1.0
                and (interval["error_rate"] or 0.0) <= MAX_ERROR_RATE
            )
            rps = float(interval["requests_per_s"])
            out = float(interval["output_tokens_per_s"] or 0.0)
            points.append(_Point(rps, "rate", rps, out, ok, margin))
        return points
    figures = load_figures(run, served)
    if figures is None:
        return []
    ok, margin = passes(run, slo, served)
    rps = float(figures.requests_per_s or 0.0)
    return [
        _Point(
            rps if as_rate else run.level,
            "rate" if as_rate or run.mode == "rate" else "concurrency",
            rps,
            float(figures.output_tokens_per_s or 0.0),
            ok,
            margin,
        )
    ]


def _unique(ids: Sequence[uuid.UUID]) -> list[uuid.UUID]:
    return list(dict.fromkeys(ids))


def capacity_of(
    runs: Sequence[Run], slo: Mapping[str, Mapping[str, float]], *, sweep: bool = False
) -> CapacityEvidence:
    """One job's capacity at `slo` over its finished, adequate, not client-bound levels; the
    runs it rests on; the levels skipped and why.

    A sweep's runs mix closed-loop and open-loop levels, so each is taken as a load point
    at the requests/s it carried (mode rate, level = measured requests/s) and they are
    ordered by that; other jobs' levels keep their own mode and level."""
    usable, skipped = _usable(runs, slo)
    if not usable or (not sweep and len({r.mode for r in usable}) > 1):
        return CapacityEvidence(None, skipped=skipped)
    levels = []
    # The run of each load point (a trace run gives one per interval).
    of_point: list[Run] = []
    for run in usable:
        for point in _points_of(run, slo, as_rate=sweep):
            of_point.append(run)
            levels.append(
                LevelResult(
                    level=point.level,
                    mode="rate" if point.mode == "rate" else "concurrency",
                    requests_per_s=point.requests_per_s,
                    output_tokens_per_s=point.output_tokens_per_s,
                    slo_passed=point.slo_passed,
                    slo_margin=point.slo_margin,
                    client_bound=bool(run.client_bound),
                )
            )
    if not levels:
        return CapacityEvidence(None, skipped=skipped)
    found = capacity_at_slo(levels)
    if found is None:
        return CapacityEvidence(None, skipped=skipped)
    return CapacityEvidence(
        found,
        _unique([of_point[i].id for i in found.basis_run_indices]),
        skipped,
        _unique([of_point[i].id for i in found.falls_with_load]),
    )


@dataclass(frozen=True, slots=True)
class PooledEvidence:
    """A deployment's capacity at an SLO from every adequate level of the jobs given (None
    when no standing level met it): `runs` the levels taken as load points (with their
    jobs in `jobs_of`), `basis` those the capacity rests on, `overruled` passing levels a
    newer job's failure at a lower rate overruled, `falls` levels that served fewer
    requests/s than a lower load of their job, `skipped` the levels left out and why;
    `figures` each run's figures as a load point (for `served`: that model's)."""

    capacity: Capacity | None
    runs: list[Run] = field(default_factory=list)
    jobs_of: dict[uuid.UUID, Job] = field(default_factory=dict)
    basis: list[uuid.UUID] = field(default_factory=list)
    overruled: list[uuid.UUID] = field(default_factory=list)
    falls: list[uuid.UUID] = field(default_factory=list)
    skipped: list[SkippedLevel] = field(default_factory=list)
    passed: dict[uuid.UUID, bool] = field(default_factory=dict)
    figures: dict[uuid.UUID, LoadFigures] = field(default_factory=dict)
    served: Served | None = None

    @property
    def token_share(self) -> float:
        """The served model's share of its replica's tokens at the capacity's basis level
        (the best passing one; 1 without a model, or for a run of that model alone)."""
        if not self.basis:
            return 1.0
        return self.figures[self.basis[0]].token_share


def pooled_evidence(
    jobs: Sequence[tuple[Job, Sequence[Run]]],
    slo: Mapping[str, Mapping[str, float]],
    served: Served | None = None,
) -> PooledEvidence:
    """The capacity at `slo` over the adequate levels of every job in `jobs` (newest job
    first), each level a load point at the requests/s it served (see pooled_capacity); for
    `served`, at that model's own figures, from the runs that sent it requests."""
    runs: list[Run] = []
    # The run of each load point (a trace run gives one per interval of its replay).
    of_point: list[Run] = []
    points: list[LoadPoint] = []
    skipped: list[SkippedLevel] = []
    jobs_of: dict[uuid.UUID, Job] = {}
    passed: dict[uuid.UUID, bool] = {}
    figures: dict[uuid.UUID, LoadFigures] = {}
    for rank, (job, job_runs) in enumerate(jobs):
        usable, left_out = _usable(job_runs, slo, served)
        skipped += left_out
        load = read_load(job.load)
        sweep = load is not None and load.mode == "sweep"
        for run in usable:
            run_figures = load_figures(run, served)
            run_points = _points_of(run, slo, as_rate=sweep, served=served)
            if run_figures is None or not run_points:
                continue
            runs.append(run)
            figures[run.id] = run_figures
            jobs_of[run.id] = job
            # A trace run passes when every interval taken as a load point did.
            passed[run.id] = all(p.slo_passed for p in run_points)
            for point in run_points:
                of_point.append(run)
                points.append(
                    LoadPoint(
                        job=rank,
                        level=point.level,
                        mode=point.mode,
                        requests_per_s=point.requests_per_s,
                        output_tokens_per_s=point.output_tokens_per_s,
                        slo_passed=point.slo_passed,
                        slo_margin=point.slo_margin,
                        client_bound=bool(run.client_bound),
                    )
                )
    found = pooled_capacity(points) if points else None
    if found is None:
        return PooledEvidence(
            None, runs, jobs_of, skipped=skipped, passed=passed, figures=figures, served=served
        )
    capacity = found.capacity
    return PooledEvidence(
        capacity,
        runs,
        jobs_of,
        basis=_unique([of_point[i].id for i in capacity.basis_run_indices]),
        overruled=_unique([of_point[i].id for i in found.overruled]),
        falls=_unique([of_point[i].id for i in capacity.falls_with_load]),
        skipped=skipped,
        passed=passed,
        figures=figures,
        served=served,
    )


def capacity_block(
    runs: Sequence[Run],
    slo: Mapping[str, Mapping[str, float]] | None,
    usd_per_hour_of: Callable[[uuid.UUID], float | None],
    *,
    sweep: bool = False,
) -> CapacityAtSlo:
    """A job's `capacity_at_slo` block: the capacity, the interval it lies in and its cost per
    million output tokens, priced like the (lower) run it rests on (`usd_per_hour_of` a run
    id), or a `reason` when there is none; `skipped` names the levels left out as evidence
    (`sweep`: see capacity_of)."""
    if not slo:
        return CapacityAtSlo(reason="the job has no SLO, so there is no capacity at the SLO")
    found = capacity_of(runs, slo, sweep=sweep)
    capacity, run_ids = found.capacity, found.run_ids
    if capacity is None:
        reason = "no finished level met the SLO"
        if found.skipped:
            reason = (
                f"no adequate finished level met the SLO ({len(found.skipped)} level(s) "
                "skipped as inadequate or client-bound: see skipped)"
            )
        return CapacityAtSlo(reason=reason, skipped=found.skipped)
    usd_per_hour = usd_per_hour_of(run_ids[0])
    return CapacityAtSlo(
        requests_per_s=capacity.requests_per_s,
        output_tokens_per_s=capacity.output_tokens_per_s,
        level=capacity.level,
        interpolated=capacity.interpolated,
        between=list(capacity.between) if capacity.between else None,
        lower_bound=capacity.limited_by_measurements,
        client_bound=capacity.client_bound,
        run_ids=run_ids,
        usd_per_hour=usd_per_hour,
        per_million_output_tokens_usd=per_million(usd_per_hour, capacity.output_tokens_per_s),
        requests_per_s_low=capacity.requests_per_s_low,
        requests_per_s_high=capacity.requests_per_s_high,
        skipped=found.skipped,
        monotone=capacity.monotone,
        falls_with_load=found.falls,
    )
