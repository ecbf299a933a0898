"""Gathering a report's figures: the job's run summaries (as GET /v1/jobs/{id} serves them),
its endpoint, and TTFT histograms binned by Postgres. Drawing happens elsewhere, in a thread
(infercost.reports), so this module only reads."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from api.domain.jobs.schemas import JobRead
from api.domain.jobs.services import JobService
from api.domain.runs.schemas import CapacityAtSlo, RunSummary, StructuredBlock
from infercost.endpoints.repository import EndpointRepository
from infercost.errors import InvalidInput, NotFound
from infercost.hardware.repository import HardwareRepository
from infercost.jobs.models import Job
from infercost.jobs.plan import LengthSpec, LoadPlan, SloPlan, WorkloadPlan, read_plan
from infercost.planning.estimate import DEFAULT_TARGET_UTILIZATION
from infercost.planning.fleets import DEFAULT_INTERVAL_S, plan_fleets
from infercost.reports.charts import CHART_NAMES
from infercost.reports.data import (
    ComparisonReport,
    Deployment,
    FleetSeries,
    Histogram,
    JobReport,
    LevelFigures,
    SloLimit,
    StructuredFigures,
    level_label,
)
from infercost.reports.numbers import number
from infercost.reports.repository import MeasuredOn, ReportRepository
from infercost.traffic.repository import TrafficRepository

#: How many jobs one comparison page may show side by side (and at least how many).
MIN_COMPARED, MAX_COMPARED = 2, 8
_SLO_ORDER = ("ttft_ms", "tpot_ms", "itl_ms", "e2e_ms")
_STAT_ORDER = ("mean", "p50", "p90", "p95", "p99", "p999", "max")
#: What a report says of a plan its row holds in no shape the API ever stored.
UNREADABLE = "not readable (the job's stored plan is in no shape infercost writes)"


def chart_name(file_name: str) -> str:
    """The chart a `/charts/<name>.svg` path asks for, or 404 naming the valid ones."""
    name = file_name.removesuffix(".svg")
    if not file_name.endswith(".svg") or name not in CHART_NAMES:
        valid = [f"{n}.svg" for n in CHART_NAMES]
        raise NotFound(
            f"no chart '{file_name}'; the charts are: {', '.join(valid)}", valid_names=valid
        )
    return name


def structured_figures(block: StructuredBlock | None) -> StructuredFigures | None:
    """A structured run's answers judged and its plain twin, as the report shows them."""
    if block is None:
        return None
    plain = block.plain
    if plain is None:
        return StructuredFigures(
            block.answers, block.valid, block.valid_share, plain_reason=block.plain_reason
        )
    return StructuredFigures(
        block.answers,
        block.valid,
        block.valid_share,
        plain_run_id=str(plain.run_id),
        plain_job_id=str(plain.job_id),
        plain_finished_at=plain.finished_at,
        plain_ttft_p50_ms=plain.ttft_p50_ms,
        plain_tpot_p50_ms=plain.tpot_p50_ms,
        plain_e2e_p50_ms=plain.e2e_p50_ms,
        plain_output_tokens_per_s=plain.output_tokens_per_s,
        ttft_p50_ratio=plain.ratios.ttft_p50,
        tpot_p50_ratio=plain.ratios.tpot_p50,
        e2e_p50_ratio=plain.ratios.e2e_p50,
        output_tokens_per_s_ratio=plain.ratios.output_tokens_per_s,
    )


def level_figures(run: RunSummary) -> LevelFigures:
    """A run summary reduced to what the report's table and charts show."""
    return LevelFigures(
        level=run.level,
        mode=run.mode,
        status=run.status,
        ttft_p50_ms=run.ttft_ms.p50,
        ttft_p95_ms=run.ttft_ms.p95,
        tpot_p50_ms=run.tpot_ms.p50,
        tpot_p95_ms=run.tpot_ms.p95,
        itl_p50_ms=run.itl_ms.p50,
        itl_p95_ms=run.itl_ms.p95,
        e2e_p50_ms=run.e2e_ms.p50,
        e2e_p95_ms=run.e2e_ms.p95,
        output_tokens_per_s=run.output_tokens_per_s,
        requests_per_s=run.requests_per_s,
        error_rate=run.error_rate,
        goodput_rps=run.goodput_rps,
        slo_passed=run.slo_passed,
        client_bound=run.client_bound,
        usd_per_hour=run.cost.usd_per_hour,
        cost_per_million_output_usd=run.cost.per_million_output_tokens_usd,
        cost_at_slo_per_million_output_usd=run.cost.at_slo_per_million_output_tokens_usd,
        cost_note=run.cost.reason,
        gpu_util_mean=run.telemetry.gpu_util_mean,
        gpu_util_p95=run.telemetry.gpu_util_p95,
        sm_active_mean=run.telemetry.sm_active_mean,
        telemetry_errors=tuple(run.telemetry.errors),
        telemetry_sources=tuple(run.telemetry.sources),
        requests_running_mean=run.telemetry.requests_running_mean,
        requests_waiting_mean=run.telemetry.requests_waiting_mean,
        requests_waiting_max=run.telemetry.requests_waiting_max,
        busy_slots_per_decode=run.telemetry.busy_slots_per_decode,
        kv_cache_usage_mean=run.telemetry.kv_cache_usage_mean,
        prompt_tokens_cached_share=run.telemetry.prompt_tokens_cached_share,
        server_prompt_tokens_per_s=run.telemetry.prompt_tokens_per_s,
        server_output_tokens_per_s=run.telemetry.generation_tokens_per_s,
        telemetry_notes=tuple(run.telemetry.notes),
        inadequate=tuple(r.code for r in run.adequacy.reasons)
        if run.adequacy is not None and not run.adequacy.ok
        else (),
        measured_again=run.replaces_run_id is not None,
        structured=structured_figures(run.structured),
    )


def _lengths(spec: LengthSpec | None) -> str:
    """A length distribution as a reader says it: '512 (std 64)', 'uniform 100-900'."""
    if spec is None:
        return "not set"
    low, high = spec.min, spec.max
    if spec.distribution == "uniform":
        return f"uniform {low}\u2013{high}"
    text = f"{0 if spec.mean is None else spec.mean:g}"
    if spec.std:
        text += f" (std {spec.std:g})"
    if spec.distribution == "lognormal":
        text = f"lognormal, mean {text}"
    if low is not None or high is not None:
        upper = "\u221e" if high is None else str(high)
        text += f", clipped to {low or 1}\u2013{upper}"
    return text


def workload_text(workload: WorkloadPlan) -> str:
    """The workload in one line: lengths (or dataset), sessions, preset."""
    parts = []
    if workload.dataset_id is not None:
        parts.append(f"dataset {workload.dataset_id}")
    else:
        parts.append(f"input {_lengths(workload.input_tokens)} tokens")
    parts.append(f"output {_lengths(workload.output_tokens)} tokens")
    sessions = workload.sessions
    if sessions is not None:
        parts.append(
            f"multi-turn, {sessions.turns} turns, shared system prompt of "
            f"{sessions.system_prompt_tokens} tokens"
        )
    if workload.preset:
        parts.append(f"preset {workload.preset}")
    return "; ".join(parts)


#: What a trace replay's requests ask for: the trace says it, request by request.
TRACE_WORKLOAD = (
    "the trace's own requests: each one's input and output lengths, shared prefix blocks as "
    "shared text, sessions as growing prompts"
)


def load_text(load: LoadPlan) -> str:
    """The load plan in one line: mode, levels, requests or seconds per level, warm-up."""
    levels = ", ".join(f"{x:g}" for x in load.levels or [])
    if load.mode == "concurrency":
        text = f"closed loop at {levels} users"
    elif load.mode == "rate":
        text = f"open loop ({load.arrival} arrivals) at {levels} requests/s"
    elif load.mode == "trace":
        window = load.window
        span = (
            ""
            if window is None or window.duration_s is None
            else f" {window.start_s:g} to {window.start_s + window.duration_s:g} s of"
        )
        text = (
            f"trace replay:{span} a traffic log at {load.time_scale or 1:g}x its recorded "
            f"speed, {load.requests_per_level} requests"
        )
        if load.max_concurrency is not None:
            text += f", at most {load.max_concurrency} in flight"
        return text
    elif load.mode == "sweep":
        text = (
            f"sweep: 1 user, then {load.max_concurrency} users, then "
            f"{load.rate_levels} request rates between them"
        )
    else:
        text = str(load.mode)
    if load.duration_s:
        text += f"; {load.duration_s:g} s per level"
    elif load.requests_per_level:
        text += f"; {load.requests_per_level} requests per level"
    if load.warmup_requests:
        text += f" after {load.warmup_requests} warm-up requests"
    elif load.warmup_s:
        text += f" after {load.warmup_s:g} s of warm-up"
    if load.shards == "auto":
        text += "; shards as each level needed"
    elif load.shards > 1:
        text += f"; {load.shards} shards"
    return text


def _workload_of(job: Job) -> str:
    plan = read_plan(job.workload, job.load, job.slo)
    return UNREADABLE if plan is None else workload_text(plan.workload)


def slo_limits(slo: SloPlan | None) -> tuple[SloLimit, ...]:
    """The job's SLO as a list of limits, in a fixed order."""
    limits = []
    for metric in _SLO_ORDER:
        stats = slo[metric] if slo is not None and metric in slo else {}
        limits += [
            SloLimit(metric, stat, float(stats[stat])) for stat in _STAT_ORDER if stat in stats
        ]
    return tuple(limits)


def capacity_text(capacity: CapacityAtSlo | None) -> str | None:
    """The job's capacity at its SLO in one line, or why there is none."""
    if capacity is None:
        return None
    if capacity.requests_per_s is None:
        return capacity.reason
    text = (
        f"{number(capacity.requests_per_s)} requests/s "
        f"({number(capacity.output_tokens_per_s)} output tokens/s)"
    )
    if capacity.lower_bound:
        text = "at least " + text
    elif capacity.requests_per_s_low is not None and capacity.requests_per_s_high is not None:
        text += (
            f", between {number(capacity.requests_per_s_low)} and "
            f"{number(capacity.requests_per_s_high)} requests/s (the bracketing levels)"
        )
    if capacity.per_million_output_tokens_usd is not None:
        text += f", ${number(capacity.per_million_output_tokens_usd)} per million output tokens"
    if capacity.skipped:
        text += (
            f"; from adequate levels only ({len(capacity.skipped)} left out as inadequate "
            "or client-bound)"
        )
    return text


def _engine_text(engine: str | None, version: str | None) -> str | None:
    """'vllm 0.6.3', 'vllm', or None when neither is stated."""
    return " ".join(x for x in (engine, version) if x) or None


def _setup_text(m: MeasuredOn) -> str:
    """One deployment in one line: 'm8b, vllm 0.6 on H200-SXM x 2 GPUs'."""
    gpus = f"{m.gpu_count} GPU" + ("s" if m.gpu_count != 1 else "")
    return (
        f"{m.model}, {_engine_text(m.engine, m.engine_version) or 'engine not stated'} "
        f"on {m.hardware or 'hardware not stated'} \u00d7 {gpus}"
    )


class ReportService:
    """A team's report data: the same summaries as the job routes, plus histograms."""

    def __init__(self, jobs: JobService) -> None:
        self.jobs = jobs
        self.session = jobs.session
        self.team_id = jobs.team_id

    async def _deployment(self, job: Job, read: JobRead) -> Deployment:
        """The job's deployment as its runs measured it (the endpoint keeps only its name
        here: it may have been re-sized or upgraded since), or, before any level ran, as
        the endpoint describes it now (flagged `from_endpoint`)."""
        endpoint = await EndpointRepository(self.session).get_kept(self.team_id, job.endpoint_id)
        if endpoint is None:  # a job's endpoint is kept (soft-deleted) for its history
            raise NotFound(f"the endpoint of job {job.id} no longer exists")
        measured = await ReportRepository(self.session).measured_on(
            self.team_id, [r.id for r in read.runs]
        )
        # Each deployment the runs measured, in level order, with the levels measured on it.
        setups: dict[MeasuredOn, list[str]] = {}
        for run in read.runs:
            if run.id in measured:
                setups.setdefault(measured[run.id], []).append(level_label(run.level, run.mode))
        if setups:
            first = next(iter(setups))
            model, engine, version = first.model, first.engine, first.engine_version
            hardware, gpu_count = first.hardware, first.gpu_count
        else:
            model, engine, version = endpoint.model, endpoint.engine, endpoint.engine_version
            gpu_count, hardware = endpoint.gpu_count, None
            if endpoint.hardware_id is not None:
                row = await HardwareRepository(self.session).get(self.team_id, endpoint.hardware_id)
                hardware = None if row is None else row.name
        starts = [r.started_at for r in read.runs if r.started_at is not None]
        ends = [r.finished_at for r in read.runs if r.finished_at is not None]
        return Deployment(
            label=endpoint.name,
            job_id=str(job.id),
            endpoint_name=endpoint.name,
            model=model,
            engine=_engine_text(engine, version),
            hardware=hardware,
            gpu_count=gpu_count,
            status=job.status,
            runs=tuple(level_figures(r) for r in read.runs),
            workload_fingerprint=job.workload_fingerprint,
            measured_from=min(starts, default=None),
            measured_to=max(ends, default=None),
            has_metrics_urls=bool(endpoint.metrics_urls),
            setups=(
                tuple(f"{_setup_text(m)}: {', '.join(levels)}" for m, levels in setups.items())
                if len(setups) > 1
                else ()
            ),
            from_endpoint=not setups,
        )

    async def _histograms(self, runs: Sequence[RunSummary]) -> tuple[Histogram, ...]:
        edges, counts = await ReportRepository(self.session).ttft_histograms(
            self.team_id, [r.id for r in runs]
        )
        if not edges:
            return ()
        return tuple(
            Histogram(level_label(r.level, r.mode), tuple(edges), tuple(counts[r.id])) for r in runs
        )

    async def job_report(self, job_id: uuid.UUID, *, histograms: bool = True) -> JobReport:
        """The report of one of the team's jobs (404 otherwise), priced as measured."""
        job = await self.jobs.get(job_id)
        read = await self.jobs.read(job)
        plan = read_plan(job.workload, job.load, job.slo)
        return JobReport(
            deployment=await self._deployment(job, read),
            workload=UNREADABLE
            if plan is None
            else TRACE_WORKLOAD
            if plan.load.mode == "trace"
            else workload_text(plan.workload),
            load_plan=UNREADABLE if plan is None else load_text(plan.load),
            slo=() if plan is None else slo_limits(plan.slo),
            created_at=job.created_at,
            generated_at=datetime.now(UTC),
            error=job.error,
            capacity=capacity_text(read.capacity_at_slo),
            histograms=await self._histograms(read.runs) if histograms else (),
            fleets=None
            if plan is None or plan.load.mode != "trace"
            else await self._fleets(plan.load, read.capacity_at_slo),
        )

    async def _fleets(self, load: LoadPlan, capacity: CapacityAtSlo | None) -> FleetSeries:
        """A trace replay's demand over its whole log with the fixed and autoscaled fleets
        that serve it at the job's capacity at the SLO (the estimate's rules and defaults:
        target utilisation 0.8, a 5-minute lag, at least one replica; 5-minute intervals,
        or minutes for a log under half an hour)."""
        window = load.window
        shaded = (
            None
            if window is None or window.duration_s is None
            else (window.start_s, window.start_s + window.duration_s)
        )
        interval_s = DEFAULT_INTERVAL_S
        traffic = (
            None
            if load.traffic_id is None
            else await TrafficRepository(self.session).get(self.team_id, load.traffic_id)
        )
        if traffic is None:
            return FleetSeries(interval_s, why_empty="the traffic log was deleted")
        if capacity is None or capacity.requests_per_s is None:
            why = "no capacity at the SLO" + (
                f" ({capacity.reason})" if capacity is not None and capacity.reason else ""
            )
            return FleetSeries(interval_s, why_empty=why)
        if traffic.duration_s < 1800:
            interval_s = 60
        if not traffic.duration_s > 0:
            return FleetSeries(interval_s, why_empty="the log spans a single instant")
        plan = plan_fleets(
            traffic.minute_counts,
            duration_s=traffic.duration_s,
            output_tokens=traffic.output_tokens_total,
            capacity_rps=capacity.requests_per_s,
            usd_per_hour=capacity.usd_per_hour or 0.0,
            target_utilization=DEFAULT_TARGET_UTILIZATION,
            interval_s=interval_s,
        )
        return FleetSeries(
            interval_s=float(interval_s),
            starts_s=tuple(i.start_s for i in plan.intervals),
            demand_rps=tuple(i.demand_rps for i in plan.intervals),
            autoscaled=tuple(i.autoscaled for i in plan.intervals),
            fixed=plan.fixed_replicas,
            capacity_rps=capacity.requests_per_s,
            window=shaded,
        )

    async def comparison(self, job_ids: Sequence[uuid.UUID]) -> ComparisonReport:
        """Several of the team's jobs side by side; warns when their workloads differ."""
        if not MIN_COMPARED <= len(job_ids) <= MAX_COMPARED:
            raise InvalidInput(
                "job_id",
                f"give {MIN_COMPARED} to {MAX_COMPARED} jobs to compare (repeat job_id), "
                f"not {len(job_ids)}",
            )
        if len(set(job_ids)) != len(job_ids):
            raise InvalidInput("job_id", "a job is listed twice; give each job once")
        jobs = [await self.jobs.get(job_id) for job_id in job_ids]
        reads = [await self.jobs.read(job) for job in jobs]
        found = [await self._deployment(job, read) for job, read in zip(jobs, reads, strict=True)]
        # Two jobs on one endpoint would share a legend entry: name them by job as well.
        names = [d.label for d in found]
        deployments = tuple(
            d if names.count(d.label) == 1 else replace(d, label=f"{d.label} (job {d.job_id[:8]})")
            for d in found
        )
        return ComparisonReport(
            deployments=deployments,
            workloads={str(job.id): _workload_of(job) for job in jobs},
            generated_at=datetime.now(UTC),
            warnings=_fingerprint_warnings(deployments, reads),
        )


def _fingerprint_warnings(
    deployments: Sequence[Deployment], reads: Sequence[JobRead]
) -> tuple[str, ...]:
    """A warning when the compared runs did not all send the same kind of requests."""
    seen: dict[str, list[str]] = {}
    for deployment, read in zip(deployments, reads, strict=True):
        prints = {r.workload_fingerprint or "unknown" for r in read.runs} or {
            deployment.workload_fingerprint or "unknown"
        }
        for fingerprint in sorted(prints):
            seen.setdefault(fingerprint, []).append(deployment.label)
    if len(seen) <= 1:
        return ()
    listing = "; ".join(f"{fp}: {', '.join(labels)}" for fp, labels in seen.items())
    return (
        "these jobs ran different workloads (workload fingerprints "
        f"{listing}), so their latency, throughput and cost are not measured on the same "
        "requests; compare jobs with equal fingerprints for a like-for-like answer",
    )
