"""POST /v1/estimates: what a traffic profile costs on each deployment of a model.

Evidence comes from stored runs: for each endpoint serving the model, the capacity at the
SLO of its job whose workload is most like the traffic (interpolated between its adequate,
not client-bound levels), priced with the price in effect now, so a change in the price book
changes the answer without a new measurement. Evidence from other token lengths gives no
figures unless the caller allows an extrapolation. Hosted APIs are priced per token.
Hardware with a price but no measurement of the model is projected from the model's
measured efficiency elsewhere.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Literal

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.estimates.evidence import (
    PooledEvidence,
    Served,
    load_figures,
    mean_context,
    model_facts,
    models_sent,
    pooled_evidence,
    replica_hardware,
)
from api.domain.estimates.schemas import (
    AutoscaledFleetRead,
    BreakEvenRead,
    Candidate,
    DeploymentRead,
    EstimateCreate,
    EstimateRead,
    EvidenceRead,
    FixedFleetRead,
    FleetsIn,
    FleetsRead,
    IntervalRead,
    LoadPointRead,
    ServedModelRead,
    SloRiskRead,
    TrafficRead,
    Unavailable,
)
from api.domain.runs.schemas import SkippedLevel
from infercost.endpoints.models import Endpoint
from infercost.endpoints.pricing import hourly_price
from infercost.errors import InvalidInput, NotFound
from infercost.hardware.models import Hardware as HardwareRow
from infercost.hardware.repository import HardwareRepository
from infercost.jobs.models import Job, Run
from infercost.jobs.plan import read_plan
from infercost.jobs.repository import JobRepository
from infercost.planning.capacity import Capacity
from infercost.planning.estimate import (
    DEFAULT_PEAK_TO_MEAN,
    DEFAULT_TARGET_UTILIZATION,
    Deployment,
    Evidence,
    HostedApi,
    HostedEstimate,
    NoEvidence,
    SelfHostedEstimate,
    Traffic,
    plan,
    project_capacity,
)
from infercost.planning.fleets import Fleets, plan_fleets
from infercost.planning.presets import WorkloadPreset, get_preset
from infercost.planning.repository import EvidenceRepository
from infercost.planning.roofline import ModelFacts, roofline_bounds
from infercost.traffic.models import Traffic as TrafficLog
from infercost.traffic.repository import TrafficRepository

PointRole = Literal["basis", "passed", "failed", "overruled"]
#: Token lengths within this ratio of the traffic's count as the same workload.
SIMILAR_WORKLOAD = 0.8
#: The most recent jobs of an endpoint whose levels are evidence of its capacity.
EVIDENCE_JOBS = 200
#: How the capacity is chosen from several jobs' levels, stated in every estimate.
EVIDENCE_RULE = (
    "capacity at the SLO: the best passing level of every adequate level of every job of "
    "the deployment on this workload, however old (stale ones flagged), interpolated towards "
    "the next failing level that served more; a passing level is overruled when a newer job "
    "failed at the same or a lower rate (each candidate's load_points)"
)


def _stated_lengths(job: Job) -> tuple[float | None, float | None]:
    """The typical prompt and output length a job's workload states (infercost.jobs.plan:
    the mean, or a uniform distribution's midpoint); None where it states none."""
    plan = read_plan(job.workload, job.load, job.slo)
    if plan is None:
        return None, None
    given, out = plan.workload.input_tokens, plan.workload.output_tokens
    return (None if given is None else given.central), (None if out is None else out.central)


def _measured_lengths(
    runs: Sequence[Run], served: Served | None = None
) -> tuple[float | None, float | None]:
    """Mean prompt and output tokens per successful request over a job's runs (for `served`,
    that model's requests), from their token rates (for workloads that state no lengths:
    datasets, sessions)."""
    figures = [f for f in (load_figures(r, served) for r in runs) if f is not None]
    rps = sum(f.requests_per_s or 0.0 for f in figures if f.input_tokens_per_s is not None)
    if not rps:
        return None, None
    tokens_in = sum(f.input_tokens_per_s or 0.0 for f in figures if f.requests_per_s)
    tokens_out = sum(f.output_tokens_per_s or 0.0 for f in figures if f.requests_per_s)
    return tokens_in / rps, tokens_out / rps


def similarity(
    job: Job, traffic: Traffic, runs: Sequence[Run] = (), served: Served | None = None
) -> float | None:
    """How alike a job's token lengths and the traffic's are: the smaller of the two
    ratios (shorter over longer) of mean prompt and mean output length, 1 = the same. The
    job's stated lengths, else what its runs measured (of `served`'s requests); None when
    neither is known."""
    job_in, job_out = _stated_lengths(job)
    if job_in is None or job_out is None:
        job_in, job_out = _measured_lengths(runs, served)
    if job_in is None or job_out is None:
        return None

    def ratio(a: float, b: float) -> float:
        return min(a, b) / max(a, b) if max(a, b) > 0 else 1.0

    return min(ratio(job_in, traffic.input_tokens), ratio(job_out, traffic.output_tokens))


@dataclass(frozen=True, slots=True)
class Measured:
    """One endpoint's evidence: every adequate level of its jobs on this workload (`pooled`),
    the capacity at the SLO they give, the job the capacity's best level came from and
    how alike that job's workload is to the traffic."""

    job: Job
    pooled: PooledEvidence
    capacity: Capacity
    similarity: float | None

    @property
    def runs(self) -> list[Run]:
        """The levels taken as evidence (the basis first)."""
        basis = [r for r in self.pooled.runs if r.id in self.pooled.basis]
        return basis + [r for r in self.pooled.runs if r.id not in self.pooled.basis]

    @property
    def run_ids(self) -> list[uuid.UUID]:
        return self.pooled.basis

    @property
    def skipped(self) -> list[SkippedLevel]:
        return self.pooled.skipped

    def evidence(self) -> tuple[Evidence, ...]:
        by_id = {r.id: r for r in self.pooled.runs}
        return tuple(Evidence(str(run_id), by_id[run_id].finished_at) for run_id in self.run_ids)

    @property
    def similar(self) -> bool:
        """Token lengths close enough to the traffic's to count as the same workload."""
        return self.similarity is not None and self.similarity >= SIMILAR_WORKLOAD

    @property
    def token_share(self) -> float:
        """The planned model's share of its replica's tokens at the capacity's basis level."""
        return self.pooled.token_share

    @property
    def levels_rps(self) -> list[float]:
        """The requests/s of every level taken as evidence (the planned model's own)."""
        return [
            float(rps)
            for r in self.pooled.runs
            if (rps := self.pooled.figures[r.id].requests_per_s)
        ]

    @property
    def measured_at(self) -> datetime | None:
        """When the newest run the capacity rests on finished."""
        basis = [r for r in self.pooled.runs if r.id in self.pooled.basis]
        return max((r.finished_at for r in basis if r.finished_at), default=None)

    def points(self, stale_before: datetime) -> list[LoadPointRead]:
        """Every level taken as evidence, with its part in the capacity."""
        out = []
        pooled = self.pooled
        for run in pooled.runs:
            role: PointRole = "passed" if pooled.passed[run.id] else "failed"
            if run.id in pooled.overruled:
                role = "overruled"
            if run.id in pooled.basis:
                role = "basis"
            out.append(
                LoadPointRead(
                    run_id=run.id,
                    job_id=run.job_id,
                    measured_at=run.finished_at,
                    level=run.level,
                    mode=run.mode,
                    requests_per_s=float(pooled.figures[run.id].requests_per_s or 0.0),
                    slo_passed=pooled.passed[run.id],
                    role=role,
                    stale=run.finished_at is not None and run.finished_at < stale_before,
                    falls_with_load=run.id in pooled.falls,
                )
            )
        out.sort(key=lambda p: p.requests_per_s)
        return out


@dataclass(frozen=True, slots=True)
class Unmeasured:
    """Why an endpoint has no capacity at the SLO, and (when it was measured) what to do;
    `skipped`: the levels left out as inadequate or client-bound."""

    reason: str
    advice: str | None = None
    skipped: list[SkippedLevel] = field(default_factory=list)

    def sentence(self) -> str:
        return self.reason if self.advice is None else f"{self.reason}: {self.advice}"


def _resolve_slo(data: EstimateCreate, preset: WorkloadPreset | None) -> dict[str, Any]:
    slo: dict[str, Any] = msgspec.to_builtins(data.slo) if data.slo is not None else {}
    if not slo and preset is not None:
        slo = preset.default_slo()
    if not slo:
        raise InvalidInput(
            "slo",
            'give an SLO, e.g. {"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}}, or a '
            "preset whose SLO applies (GET /v1/presets lists them)",
        )
    for metric, limits in slo.items():
        if not limits:
            raise InvalidInput(
                f"slo.{metric}",
                f'{metric} names no statistic: give a percentile and a limit, e.g. {{"p95": 500}}',
            )
    return slo


def _resolve_traffic(
    data: EstimateCreate, preset: WorkloadPreset | None
) -> tuple[Traffic, list[str]]:
    """The traffic to plan for, and the assumptions made where the request said nothing."""
    given = data.traffic
    if given is None:
        raise InvalidInput(
            "traffic",
            "give traffic (requests_per_s, or requests_per_day with peak_to_mean, and token "
            "lengths) or traffic_id (a request log of your team: GET /v1/traffic)",
        )
    input_tokens = given.input_tokens or (float(preset.input_tokens["mean"]) if preset else None)
    output_tokens = given.output_tokens or (float(preset.output_tokens["mean"]) if preset else None)
    if input_tokens is None or output_tokens is None:
        missing = "traffic.input_tokens" if input_tokens is None else "traffic.output_tokens"
        raise InvalidInput(
            missing, "give the mean input and output tokens per request, or a preset"
        )
    if (given.requests_per_s is None) == (given.requests_per_day is None):
        raise InvalidInput(
            "traffic.requests_per_s",
            "give requests_per_s (the peak rate to size for) or requests_per_day with "
            "peak_to_mean, one of the two",
        )
    if given.requests_per_s is not None:
        if given.peak_to_mean is not None and given.peak_to_mean != 1.0:
            mean = given.requests_per_s / given.peak_to_mean
            return Traffic(given.requests_per_s, input_tokens, output_tokens, mean), []
        assumed = []
        if given.peak_to_mean is None:
            assumed.append(
                f"traffic.peak_to_mean not given: the average rate is taken to equal the "
                f"{given.requests_per_s:g} requests/s sized for (flat traffic), so cost per "
                "token is for traffic that stays at its peak; give peak_to_mean if it does not"
            )
        return Traffic(given.requests_per_s, input_tokens, output_tokens), assumed
    assert given.requests_per_day is not None
    peak_to_mean = given.peak_to_mean
    assumed = []
    if peak_to_mean is None:
        peak_to_mean = DEFAULT_PEAK_TO_MEAN
        peak = given.requests_per_day / 86_400 * peak_to_mean
        assumed.append(
            f"traffic.peak_to_mean not given: sized for a peak of {peak_to_mean:g} x the "
            f"daily average ({given.requests_per_day:g} / 86,400 x {peak_to_mean:g} = "
            f"{peak:.4g} requests/s); give peak_to_mean to size for your own peak"
        )
    traffic = Traffic.from_requests_per_day(
        given.requests_per_day, input_tokens, output_tokens, peak_to_mean
    )
    return traffic, assumed


@dataclass(slots=True)
class _Gathered:
    """What the endpoints of a model offer: planner inputs, and what to say about each."""

    deployments: list[Deployment] = field(default_factory=list)
    hosted: list[HostedApi] = field(default_factory=list)
    similarities: dict[str, float | None] = field(default_factory=dict)
    providers: dict[str, str | None] = field(default_factory=dict)
    hosted_notes: dict[str, list[str]] = field(default_factory=dict)
    unavailable: list[Unavailable] = field(default_factory=list)
    sources: list[tuple[Endpoint, HardwareRow, Measured, ModelFacts]] = field(default_factory=list)
    measured_hardware: set[uuid.UUID] = field(default_factory=set)
    skipped: dict[str, list[SkippedLevel]] = field(default_factory=dict)
    points: dict[str, list[LoadPointRead]] = field(default_factory=dict)
    monotone: dict[str, bool] = field(default_factory=dict)
    notes: dict[str, list[str]] = field(default_factory=dict)
    shares: dict[str, ServedModelRead] = field(default_factory=dict)


class EstimateService:
    """Plans one team's traffic on the deployments it has measured."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id
        self.evidence = EvidenceRepository(session)
        self.hardware = HardwareRepository(session)

    async def _best_measurement(
        self,
        endpoint: Endpoint,
        slo: Mapping[str, Mapping[str, float]],
        traffic: Traffic,
        served_model: str | None = None,
    ) -> Measured | Unmeasured:
        """The endpoint's capacity at the SLO from every adequate level of its jobs on this
        traffic's workload (docs/figures.md, "Capacity at the SLO"), measured on the
        deployment its newest evidence describes; from jobs of other workloads only when
        none of this one gives a capacity (then `similar` is false), or why there is none.
        With `served_model`, each level is that model's own figures, from the runs that
        sent it requests (docs/figures.md, "Capacity of one model")."""
        jobs = await self.evidence.finished_jobs(self.team_id, endpoint.id, EVIDENCE_JOBS)
        if not jobs:
            return Unmeasured("never measured: submit a job with several load levels")
        runs = await JobRepository(self.session).runs_of_jobs(self.team_id, [j.id for j in jobs])
        # A re-pointed or re-sized endpoint: only its present deployment's runs count.
        newest = next((r.deployment_id for r in runs if r.deployment_id is not None), None)
        served: Served | None = None
        if served_model is not None:
            base = (
                None
                if newest is None
                else await self.evidence.deployment_model(self.team_id, newest)
            )
            served = Served(served_model, base or endpoint.model)
        by_job: dict[uuid.UUID, list[Run]] = {}
        for run in runs:
            if run.deployment_id in (None, newest):
                by_job.setdefault(run.job_id, []).append(run)
        if served is not None:
            mine = [r for rs in by_job.values() for r in rs if load_figures(r, served)]
            if not mine:
                return Unmeasured(
                    _not_sent_reason(served, [r for rs in by_job.values() for r in rs], jobs)
                )
        alike = {j.id: similarity(j, traffic, by_job.get(j.id, []), served) for j in jobs}

        def is_similar(job: Job) -> bool:
            value = alike[job.id]
            return value is not None and value >= SIMILAR_WORKLOAD

        skipped: list[SkippedLevel] = []
        for group in (
            [j for j in jobs if is_similar(j)],
            [j for j in jobs if not is_similar(j)],
        ):
            if not group:
                continue
            pooled = pooled_evidence([(j, by_job.get(j.id, [])) for j in group], slo, served)
            skipped += pooled.skipped
            if pooled.capacity is not None:
                job = pooled.jobs_of[pooled.basis[0]]
                return Measured(job, pooled, pooled.capacity, alike[job.id])
        if skipped:
            codes = sorted({r.code for level in skipped for r in level.reasons})
            return Unmeasured(
                f"no adequate measured level of its {len(jobs)} latest job(s) met this "
                f"SLO; {len(skipped)} level(s) were left out as evidence ({', '.join(codes)})",
                advice="run levels long enough for their percentiles (load.duration_s), "
                "not client-bound (load.shards), then ask again",
                skipped=skipped,
            )
        return Unmeasured(
            f"no measured level of its {len(jobs)} latest job(s) met this SLO",
            advice="measure lower load levels, or relax the SLO",
        )

    @staticmethod
    def _deployment(
        endpoint: Endpoint,
        hardware: HardwareRow | None,
        measured: Measured,
        *,
        usd_per_hour: float,
        stale_before: datetime,
    ) -> Deployment:
        """A measured endpoint as the planner's input (one replica's capacity and price; for
        one model of a mix, its capacity and the part of the replica's price its share of
        the tokens bears)."""
        levels_rps = measured.levels_rps
        measured_at = measured.measured_at
        return Deployment(
            name=endpoint.name,
            capacity_rps=measured.capacity.requests_per_s,
            usd_per_hour=usd_per_hour * measured.token_share,
            gpu_count=endpoint.gpu_count,
            evidence=measured.evidence(),
            endpoint_id=str(endpoint.id),
            model=endpoint.model,
            engine=endpoint.engine,
            hardware=hardware.name if hardware else None,
            measured_range_rps=(min(levels_rps), max(levels_rps)) if levels_rps else None,
            capacity_is_lower_bound=measured.capacity.limited_by_measurements,
            client_bound=measured.capacity.client_bound,
            stale=measured_at is not None and measured_at < stale_before,
            workload_mismatch=not measured.similar,
            capacity_rps_low=measured.capacity.requests_per_s_low,
            capacity_rps_high=measured.capacity.requests_per_s_high,
        )

    async def _projections(
        self,
        sources: Sequence[tuple[Endpoint, HardwareRow, Measured, ModelFacts]],
        measured_hardware: set[uuid.UUID],
        allowed: set[str] | None,
        now: datetime,
    ) -> list[tuple[Deployment, str, Measured, str | None, float]]:
        """Hardware with a price in the book but no measurement of this model, projected
        from the best-measured source by the ratio of roofline bounds (the smaller of the
        decode and the peak-throughput ratios, so the projection errs low); each with one
        replica's whole price (for one model of a mix the deployment bears its share)."""
        if not sources:
            return []
        endpoint, source_hw, measured, facts = max(
            sources, key=lambda s: s[2].capacity.requests_per_s / max(s[0].gpu_count, 1)
        )
        context = mean_context(measured.runs[0], measured.pooled.served) if measured.runs else None
        source_bounds = roofline_bounds(
            facts, replica_hardware(source_hw, endpoint.precision, endpoint.gpu_count), context
        )
        out: list[tuple[Deployment, str, Measured, str | None, float]] = []
        visible = {h.id: h for h in await self.hardware.list(self.team_id)}
        for price in await self.evidence.prices_in_effect(self.team_id, now):
            if price.hardware_id in measured_hardware or price.pricing_model != "on-demand":
                continue
            row = visible.get(price.hardware_id)
            if row is None or (allowed is not None and row.name not in allowed):
                continue
            target = roofline_bounds(
                facts, replica_hardware(row, endpoint.precision, endpoint.gpu_count), context
            )
            ratio_decode = target.decode_tokens_per_s / source_bounds.decode_tokens_per_s
            ratio_peak = target.peak_output_tokens_per_s / source_bounds.peak_output_tokens_per_s
            use_decode = ratio_decode <= ratio_peak
            projected = project_capacity(
                measured.capacity.requests_per_s,
                source_bounds.decode_tokens_per_s
                if use_decode
                else source_bounds.peak_output_tokens_per_s,
                target.decode_tokens_per_s if use_decode else target.peak_output_tokens_per_s,
            )
            name = f"{row.name} x{endpoint.gpu_count} ({price.provider}, projected)"
            replica_usd_per_hour = price.usd_per_gpu_hour * endpoint.gpu_count
            out.append(
                (
                    Deployment(
                        name=name,
                        capacity_rps=projected.requests_per_s,
                        usd_per_hour=replica_usd_per_hour * measured.token_share,
                        gpu_count=endpoint.gpu_count,
                        evidence=measured.evidence(),
                        endpoint_id=None,
                        model=endpoint.model,
                        engine=endpoint.engine,
                        hardware=row.name,
                        client_bound=measured.capacity.client_bound,
                        projection=True,
                        workload_mismatch=not measured.similar,
                    ),
                    price.provider,
                    measured,
                    price.warning,
                    replica_usd_per_hour,
                )
            )
        return out

    async def _gather(
        self,
        found: _Gathered,
        endpoint: Endpoint,
        slo: Mapping[str, Mapping[str, float]],
        traffic: Traffic,
        *,
        allowed: set[str] | None,
        now: datetime,
        stale_before: datetime,
        allow_mismatched: bool = False,
        served_model: str | None = None,
    ) -> None:
        """Add one endpoint to the candidates (or to `unavailable`, saying why): evidence from
        another workload only when `allow_mismatched`, as an extrapolation; for
        `served_model`, that model's own evidence."""
        hardware = (
            await self.hardware.get(self.team_id, endpoint.hardware_id)
            if endpoint.hardware_id
            else None
        )
        hosted = endpoint.usd_per_million_input_tokens is not None
        if (
            allowed is not None
            and not hosted
            and (hardware is None or hardware.name not in allowed)
        ):
            # A hardware filter narrows self-hosted choices; hosted APIs have no hardware.
            return
        best = await self._best_measurement(endpoint, slo, traffic, served_model)
        measured = best if isinstance(best, Measured) else None
        price = await hourly_price(self.session, endpoint, now)
        found.providers[endpoint.name] = endpoint.provider
        if price.per_token is not None:
            found.hosted.append(
                HostedApi(
                    endpoint.name,
                    *price.per_token,
                    model=endpoint.model,
                    evidence=measured.evidence() if measured else (),
                )
            )
            if isinstance(best, Unmeasured) and best.advice is not None:
                found.hosted_notes[endpoint.name] = [
                    f"Measured, but no level met this SLO; {best.advice}."
                ]
            return
        if isinstance(best, Unmeasured) or price.usd_per_hour is None:
            reason = best.sentence() if isinstance(best, Unmeasured) else price.note or "no price"
            found.unavailable.append(
                Unavailable(
                    endpoint.id,
                    endpoint.name,
                    reason,
                    skipped=best.skipped if isinstance(best, Unmeasured) else [],
                )
            )
            return
        if not best.similar and not allow_mismatched:
            found.unavailable.append(
                Unavailable(
                    endpoint.id,
                    endpoint.name,
                    _mismatch_reason(best, traffic),
                    workload_similarity=best.similarity,
                    skipped=best.skipped,
                )
            )
            return
        if hardware is not None:
            found.measured_hardware.add(hardware.id)
        found.deployments.append(
            self._deployment(
                endpoint,
                hardware,
                best,
                usd_per_hour=price.usd_per_hour,
                stale_before=stale_before,
            )
        )
        found.similarities[endpoint.name] = best.similarity
        share = _share_read(best, price.usd_per_hour)
        if share is not None:
            found.shares[endpoint.name] = share
        found.skipped[endpoint.name] = best.skipped
        found.points[endpoint.name] = best.points(stale_before)
        found.monotone[endpoint.name] = best.capacity.monotone
        found.notes[endpoint.name] = _evidence_notes(best) + (
            [price.warning] if price.warning else []
        )
        facts = model_facts(endpoint)
        if facts is not None and hardware is not None:
            found.sources.append((endpoint, hardware, best, facts))

    async def _traffic(
        self, data: EstimateCreate, preset: WorkloadPreset | None, settings: FleetsIn
    ) -> tuple[Traffic, list[str], TrafficLog | None]:
        """The traffic to plan for, its assumptions, and the request log it came from."""
        if data.traffic_id is None:
            if data.fleets is not None:
                raise InvalidInput(
                    "fleets", "fleets are planned over a request log: give traffic_id with them"
                )
            return (*_resolve_traffic(data, preset), None)
        if data.traffic is not None:
            raise InvalidInput("traffic_id", "give traffic or traffic_id, not both")
        log = await TrafficRepository(self.session).get(self.team_id, data.traffic_id)
        if log is None:
            raise InvalidInput(
                "traffic_id",
                f"no request log {data.traffic_id} in your team: GET /v1/traffic lists yours",
            )
        return (*_log_traffic(log, settings), log)

    async def estimate(self, data: EstimateCreate) -> EstimateRead:
        """Rank every way the team could serve the traffic, cheapest first."""
        preset = get_preset(data.preset) if data.preset is not None else None
        slo = _resolve_slo(data, preset)
        settings = data.fleets or FleetsIn()
        traffic, assumptions, log = await self._traffic(data, preset, settings)
        assumptions.append(EVIDENCE_RULE)
        target = data.target_utilization
        assumptions.append(
            f"each replica is sized to carry at most {target:.0%} of its capacity at the SLO "
            f"(target_utilization {target:g}"
            + (", the default" if target == DEFAULT_TARGET_UTILIZATION else "")
            + "): the rest is headroom for bursts and for the capacity's own uncertainty"
        )
        if data.served_model is not None:
            name = data.served_model
            assumptions.append(
                f"traffic of '{name}' alone, planned from its own figures in runs that sent "
                f"it requests: a replica's capacity is {name}'s requests/s while the replica "
                "serves the mix those runs measured, and the cost is the replicas x one "
                f"replica's USD per hour x {name}'s share of its tokens at the capacity's "
                "basis level (each candidate's served_model)"
            )
        endpoints = await self.evidence.endpoints_serving(self.team_id, data.model)
        if not endpoints:
            models = await self.evidence.models(self.team_id)
            known = ", ".join(models) if models else "none yet"
            raise NotFound(
                f"no endpoint of your team serves model '{data.model}', so nothing was "
                f"measured: register one (POST /v1/endpoints) and benchmark it. Models you "
                f"serve: {known}"
            )
        allowed = set(data.hardware) if data.hardware else None
        now = datetime.now(UTC)
        found = _Gathered()
        for endpoint in endpoints:
            await self._gather(
                found,
                endpoint,
                slo,
                traffic,
                allowed=allowed,
                now=now,
                stale_before=now - timedelta(days=data.max_age_days),
                allow_mismatched=data.allow_mismatched_workload,
                served_model=data.served_model,
            )
        if data.include_projections:
            for (
                deployment,
                provider,
                source,
                warning,
                replica_usd_per_hour,
            ) in await self._projections(found.sources, found.measured_hardware, allowed, now):
                found.deployments.append(deployment)
                if warning:
                    found.notes[deployment.name] = [warning]
                found.providers[deployment.name] = provider
                found.similarities[deployment.name] = source.similarity
                share = _share_read(source, replica_usd_per_hour)
                if share is not None:
                    found.shares[deployment.name] = share
                found.skipped[deployment.name] = source.skipped
                found.monotone[deployment.name] = source.capacity.monotone

        planned = plan(traffic, found.deployments, found.hosted, target)
        traffic_read = TrafficRead(
            requests_per_s=traffic.requests_per_s,
            mean_requests_per_s=traffic.average_requests_per_s,
            peak_to_mean=traffic.peak_to_mean,
            input_tokens=traffic.input_tokens,
            output_tokens=traffic.output_tokens,
            traffic_id=None if log is None else log.id,
            name=None if log is None else log.name,
            requests=None if log is None else log.requests,
            duration_s=None if log is None else log.duration_s,
        )
        if isinstance(planned, NoEvidence):
            return EstimateRead(
                model=data.model,
                served_model=data.served_model,
                traffic=traffic_read,
                slo=slo,
                preset=data.preset,
                candidates=[],
                explanation=None,
                unavailable=found.unavailable,
                reason=_no_evidence_reason(planned.reason, found.unavailable),
                target_utilization=target,
                assumptions=assumptions,
            )
        candidates = []
        for c in planned.candidates:
            candidate = _candidate(
                c, found.similarities, found.providers, found.hosted_notes, found.skipped
            )
            name = candidate.deployment.name
            candidate.load_points = found.points.get(name, [])
            candidate.monotone = found.monotone.get(name)
            candidate.served_model = found.shares.get(name)
            candidate.warnings += found.notes.get(name, [])
            if log is not None and isinstance(c, SelfHostedEstimate):
                candidate.fleets = _fleets_read(
                    plan_fleets(
                        log.minute_counts,
                        duration_s=log.duration_s,
                        output_tokens=log.output_tokens_total,
                        capacity_rps=c.capacity_rps,
                        usd_per_hour=c.deployment.usd_per_hour,
                        target_utilization=target,
                        interval_s=settings.interval_s,
                        lag_s=settings.lag_s,
                        min_replicas=settings.min_replicas,
                    )
                )
            candidates.append(candidate)
        explanation = _explain(candidates)
        if log is not None and explanation is not None:
            explanation += _explain_fleets(candidates)
        return EstimateRead(
            model=data.model,
            served_model=data.served_model,
            traffic=traffic_read,
            slo=slo,
            preset=data.preset,
            candidates=candidates,
            explanation=explanation,
            unavailable=found.unavailable,
            target_utilization=target,
            assumptions=assumptions,
        )


def _log_traffic(log: TrafficLog, settings: FleetsIn) -> tuple[Traffic, list[str]]:
    """The traffic a request log describes: sized for its busiest minute (the peak
    interval's demand), with its mean rate and mean lengths, so hosted APIs are priced from
    its own token counts; and what the plan assumes about it."""
    if not log.duration_s > 0:
        raise InvalidInput(
            "traffic_id",
            f"request log '{log.name}' spans no time (its requests share one instant): a plan "
            "needs a log over minutes at least",
        )
    if not log.output_tokens_total:
        raise InvalidInput(
            "traffic_id", f"request log '{log.name}' has no output tokens: nothing to price"
        )
    peak = log.peak_1m_requests_per_s
    mean = log.requests / log.duration_s
    counts = log.minute_counts
    busiest = max(range(len(counts)), key=lambda m: (counts[m], -m))
    assumed = [
        f"traffic from request log '{log.name}': {log.requests:,} requests over "
        f"{log.duration_s:,.0f} s; sized for its busiest minute ({counts[busiest]:,} requests "
        f"from {busiest * 60:,} s, {peak:.4g} requests/s); mean {mean:.4g} requests/s, "
        f"{log.input_tokens_total / log.requests:.4g} prompt and "
        f"{log.output_tokens_total / log.requests:.4g} output tokens a request"
    ]
    if mean > peak:
        # A log of under a few minutes can average more than its busiest whole minute.
        assumed.append(
            f"the log's mean rate ({mean:.4g} requests/s) is above its busiest minute's: "
            "costs per token are taken at the busiest minute's rate"
        )
        mean = peak
    defaults = settings == FleetsIn()
    assumed.append(
        f"fleets: {settings.interval_s}-s intervals, each needing replicas for its busiest "
        f"minute; the autoscaled fleet follows demand {settings.lag_s:g} s late and runs at "
        f"least {settings.min_replicas} replica(s)" + (" (the defaults)" if defaults else "")
    )
    traffic = Traffic(
        requests_per_s=peak,
        input_tokens=log.input_tokens_total / log.requests,
        output_tokens=log.output_tokens_total / log.requests,
        mean_requests_per_s=mean,
    )
    return traffic, assumed


def _fleets_read(fleets: Fleets) -> FleetsRead:
    """The response shape of a plan over a log."""
    return FleetsRead(
        interval_s=fleets.interval_s,
        lag_s=fleets.lag_s,
        lag_intervals=fleets.lag_intervals,
        min_replicas=fleets.min_replicas,
        capacity_rps=fleets.capacity_rps,
        target_utilization=fleets.target_utilization,
        usd_per_replica_hour=fleets.usd_per_replica_hour,
        intervals=[
            IntervalRead(
                start_s=p.start_s,
                length_s=p.length_s,
                requests=p.requests,
                demand_rps=p.demand_rps,
                needed=p.needed,
                autoscaled=p.autoscaled,
                at_risk=p.at_risk,
            )
            for p in fleets.intervals
        ],
        fixed=FixedFleetRead(
            replicas=fleets.fixed_replicas,
            replica_hours=fleets.fixed.replica_hours,
            usd=fleets.fixed.usd,
            usd_per_day=fleets.fixed.usd_per_day,
            mean_utilization=fleets.fixed.mean_utilization,
            per_million_output_tokens_usd=fleets.fixed.per_million_output_tokens_usd,
        ),
        autoscaled=AutoscaledFleetRead(
            replica_hours=fleets.autoscaled.replica_hours,
            mean_replicas=fleets.autoscaled.mean_replicas,
            usd=fleets.autoscaled.usd,
            usd_per_day=fleets.autoscaled.usd_per_day,
            mean_utilization=fleets.autoscaled.mean_utilization,
            per_million_output_tokens_usd=fleets.autoscaled.per_million_output_tokens_usd,
            slo_risk=SloRiskRead(
                intervals=fleets.at_risk,
                requests=fleets.requests_at_risk,
                share_of_requests=fleets.requests_at_risk_share,
            ),
        ),
        cheaper=fleets.cheaper,
        saving_usd_per_day=fleets.saving_usd_per_day,
    )


def _explain_fleets(candidates: Sequence[Candidate]) -> str:
    """A sentence on the cheapest self-hosted candidate's two fleets over the log."""
    best = next((c for c in candidates if c.fleets is not None), None)
    if best is None or best.fleets is None:
        return ""
    f = best.fleets
    fixed, auto = f.fixed.usd_per_day, f.autoscaled.usd_per_day
    risk = f.autoscaled.slo_risk
    short = (
        f"it runs short of replicas in {len(risk.intervals)} of {len(f.intervals)} intervals "
        f"({risk.share_of_requests:.1%} of requests)"
        if risk.intervals
        else "no interval runs short of replicas"
    )
    lag = f"{f.lag_intervals} interval" + ("s" if f.lag_intervals != 1 else "")
    if f.cheaper == "autoscaled":
        verdict = (
            f"autoscaled is cheaper by USD {f.saving_usd_per_day:,.2f} a day "
            f"({f.saving_usd_per_day / fixed:.0%})"
            if fixed
            else "autoscaled is cheaper"
        )
    else:
        verdict = "fixed costs no more"
    return (
        f" Over the log, {best.deployment.name} costs USD {fixed:,.2f} a day as a fixed fleet "
        f"of {f.fixed.replicas} replica(s) and USD {auto:,.2f} autoscaled ({lag} behind "
        f"demand, mean {f.autoscaled.mean_replicas:.2f} replicas): {verdict}; {short}."
    )


def _not_sent_reason(served: Served, runs: Sequence[Run], jobs: Sequence[Job]) -> str:
    """Why an endpoint has no evidence for a model: no run sent it requests; and what they
    sent instead."""
    sent = sorted({name for run in runs for name in models_sent(run, served)})
    names = ", ".join(f"'{name}'" for name in sent) if sent else "nothing"
    return (
        f"no run of its {len(jobs)} latest job(s) sent requests to model '{served.model}' "
        f"(they sent {names}): submit a job whose workload.models names it"
    )


def _share_read(measured: Measured, replica_usd_per_hour: float | None) -> ServedModelRead | None:
    """What a candidate for one model of a mix rests on: the model, its token share at the
    capacity's basis level and the whole replica's price the share is taken of."""
    served = measured.pooled.served
    if served is None:
        return None
    basis = measured.pooled.figures[measured.pooled.basis[0]]
    return ServedModelRead(
        model=served.model,
        token_share=measured.token_share,
        whole_runs=basis.model is None,
        replica_usd_per_hour=replica_usd_per_hour,
        capacity_output_tokens_per_s=measured.capacity.output_tokens_per_s,
    )


def _evidence_notes(measured: Measured) -> list[str]:
    """Warnings on the evidence itself: throughput falling with load, older passes
    overruled by a newer failure."""
    notes = []
    pooled: PooledEvidence = measured.pooled
    by_id = {r.id: r for r in pooled.runs}
    if pooled.falls:
        falls = ", ".join(
            f"run {run_id} ({by_id[run_id].requests_per_s or 0:.3g} requests/s)"
            for run_id in pooled.falls
        )
        notes.append(
            "The curve is not monotone: at a higher load "
            f"{falls} served fewer requests/s than a lower load of its job (an overloaded "
            f"engine does this); the capacity is the best passing level, "
            f"{measured.capacity.requests_per_s_low or 0:.3g} requests/s, not a point "
            "interpolated below it."
        )
    if pooled.overruled:
        notes.append(
            f"{len(pooled.overruled)} passing level(s) of older jobs were overruled: a newer "
            "job failed the SLO at the same or a lower rate, so the deployment may have got "
            "slower since (see load_points)."
        )
    return notes


def _mismatch_reason(measured: Measured, traffic: Traffic) -> str:
    """Why evidence from another workload gives no figures, and the two ways on."""
    job = measured.job
    lengths = ""
    job_in, job_out = _stated_lengths(job)
    if job_in is not None and job_out is not None:
        lengths = (
            f" ({job_in:g} in / {job_out:g} out against this traffic's "
            f"{traffic.input_tokens:g} / {traffic.output_tokens:g})"
        )
    alike = (
        "unknown"
        if measured.similarity is None
        else f"{measured.similarity:.3g}, below {SIMILAR_WORKLOAD:g}"
    )
    return (
        f"measured on a different workload{lengths}: workload similarity {alike}, so its "
        "capacity says little about this traffic; benchmark this traffic's lengths, or set "
        "allow_mismatched_workload: true for a labelled extrapolation"
    )


def _no_evidence_reason(reason: str, unavailable: Sequence[Unavailable]) -> str:
    """The planner's reason, sharpened when every endpoint was measured on other lengths."""
    if unavailable and all(u.reason.startswith("measured on a different") for u in unavailable):
        return (
            "Every measured deployment of this model ran a different workload (see "
            "unavailable): benchmark this traffic's token lengths, or set "
            "allow_mismatched_workload: true for a labelled extrapolation."
        )
    return reason


def _evidence(items: Sequence[Evidence]) -> list[EvidenceRead]:
    return [EvidenceRead(uuid.UUID(e.run_id), e.measured_at) for e in items]


def _candidate(
    c: SelfHostedEstimate | HostedEstimate,
    similarities: Mapping[str, float | None],
    providers: Mapping[str, str | None],
    hosted_notes: Mapping[str, list[str]],
    skipped: Mapping[str, list[SkippedLevel]],
) -> Candidate:
    if isinstance(c, HostedEstimate):
        return Candidate(
            kind="hosted_api",
            deployment=DeploymentRead(
                endpoint_id=None,
                name=c.name,
                model=c.api.model or "",
                engine=None,
                hardware=None,
                gpu_count=None,
                provider=providers.get(c.name),
            ),
            replicas=None,
            gpus=None,
            utilization=None,
            mean_utilization=None,
            capacity_rps=None,
            headroom=None,
            headroom_rps=None,
            usd_per_hour=c.usd_per_hour,
            usd_per_month=c.usd_per_month,
            per_million_output_tokens_usd=c.per_million_output_tokens_usd,
            per_million_total_tokens_usd=c.per_million_total_tokens_usd,
            basis="measured" if c.evidence else "list_price",
            evidence=_evidence(c.evidence),
            warnings=[*c.warnings, *hosted_notes.get(c.name, [])],
            blended_usd_per_million_tokens=c.blended_usd_per_million_tokens,
        )
    d = c.deployment
    return Candidate(
        kind="self_hosted",
        deployment=DeploymentRead(
            endpoint_id=uuid.UUID(d.endpoint_id) if d.endpoint_id else None,
            name=d.name,
            model=d.model or "",
            engine=d.engine,
            hardware=d.hardware,
            gpu_count=d.gpu_count,
            provider=providers.get(d.name),
        ),
        replicas=c.replicas,
        gpus=c.gpus,
        utilization=c.utilization,
        mean_utilization=c.mean_utilization,
        capacity_rps=c.capacity_rps,
        headroom=c.headroom,
        headroom_rps=c.headroom_rps,
        usd_per_hour=c.usd_per_hour,
        usd_per_month=c.usd_per_month,
        per_million_output_tokens_usd=c.per_million_output_tokens_usd,
        per_million_total_tokens_usd=c.per_million_total_tokens_usd,
        basis=c.basis,
        evidence=_evidence(c.evidence),
        warnings=list(c.warnings),
        workload_similarity=similarities.get(d.name),
        break_even=None
        if c.break_even is None
        else BreakEvenRead(
            c.break_even.against, c.break_even.break_even_rps, c.break_even.always_cheaper_above_rps
        ),
        target_utilization=c.target_utilization,
        capacity_rps_low=c.capacity_rps_low,
        capacity_rps_high=c.capacity_rps_high,
        replicas_range=None if c.replicas_range is None else list(c.replicas_range),
        usd_per_hour_range=None if c.usd_per_hour_range is None else list(c.usd_per_hour_range),
        per_million_output_tokens_usd_range=None
        if c.per_million_output_tokens_usd_range is None
        else list(c.per_million_output_tokens_usd_range),
        skipped=skipped.get(d.name, []),
    )


def _explain(candidates: Sequence[Candidate]) -> str | None:
    """One sentence on why the first candidate wins."""
    if not candidates:
        return None
    best = candidates[0]
    if best.kind == "hosted_api":
        text = (
            f"{best.deployment.name} is cheapest: USD {best.usd_per_hour:.2f}/hour at this "
            f"traffic, USD {best.per_million_output_tokens_usd:.3f} per million output tokens"
        )
    else:
        span = best.replicas_range
        between = (
            f" ({span[0]} to {span[1]} over the capacity's interval)"
            if span and span[0] != span[1]
            else ""
        )
        text = (
            f"{best.deployment.name} is cheapest: {best.replicas} replica(s){between}, "
            f"{best.gpus} GPU(s) at {best.utilization or 0:.0%} utilisation for USD "
            f"{best.usd_per_hour:.2f}/hour, USD {best.per_million_output_tokens_usd:.3f} "
            "per million output tokens"
        )
        if best.basis == "extrapolation":
            text += " (an extrapolation from another workload's runs)"
        share = best.served_model
        if share is not None and share.replica_usd_per_hour is not None:
            text += (
                f" ({share.model}'s {share.token_share:.0%} share of {best.replicas} "
                f"replica(s) at USD {share.replica_usd_per_hour:.2f}/hour)"
            )
    if len(candidates) > 1:
        second = candidates[1]
        more = second.usd_per_hour / best.usd_per_hour - 1 if best.usd_per_hour > 0 else 0.0
        text += (
            f"; next is {second.deployment.name} at USD {second.usd_per_hour:.2f}/hour "
            f"({more:.0%} more)"
        )
    return text + "."
