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
from typing import Any

import msgspec
from sqlalchemy.ext.asyncio import AsyncSession

from api.domain.estimates.evidence import (
    CapacityEvidence,
    capacity_of,
    mean_context,
    model_facts,
    replica_hardware,
)
from api.domain.estimates.schemas import (
    BreakEvenRead,
    Candidate,
    DeploymentRead,
    EstimateCreate,
    EstimateRead,
    EvidenceRead,
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
from infercost.jobs.plan import read_load, read_plan
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
from infercost.planning.presets import WorkloadPreset, get_preset
from infercost.planning.repository import EvidenceRepository
from infercost.planning.roofline import ModelFacts, roofline_bounds

#: Token lengths within this ratio of the traffic's count as the same workload.
SIMILAR_WORKLOAD = 0.8


def _stated_lengths(job: Job) -> tuple[float | None, float | None]:
    """The typical prompt and output length a job's workload states (infercost.jobs.plan:
    the mean, or a uniform distribution's midpoint); None where it states none."""
    plan = read_plan(job.workload, job.load, job.slo)
    if plan is None:
        return None, None
    given, out = plan.workload.input_tokens, plan.workload.output_tokens
    return (None if given is None else given.central), (None if out is None else out.central)


def _measured_lengths(runs: Sequence[Run]) -> tuple[float | None, float | None]:
    """Mean prompt and output tokens per successful request over a job's runs, from their
    token rates (for workloads that state no lengths: datasets, sessions)."""
    rps = sum(r.requests_per_s or 0.0 for r in runs if r.input_tokens_per_s is not None)
    if not rps:
        return None, None
    tokens_in = sum(r.input_tokens_per_s or 0.0 for r in runs if r.requests_per_s)
    tokens_out = sum(r.output_tokens_per_s or 0.0 for r in runs if r.requests_per_s)
    return tokens_in / rps, tokens_out / rps


def similarity(job: Job, traffic: Traffic, runs: Sequence[Run] = ()) -> float | None:
    """How alike a job's token lengths and the traffic's are: the smaller of the two
    ratios (shorter over longer) of mean prompt and mean output length, 1 = the same. The
    job's stated lengths, else what its runs measured; None when neither is known."""
    job_in, job_out = _stated_lengths(job)
    if job_in is None or job_out is None:
        job_in, job_out = _measured_lengths(runs)
    if job_in is None or job_out is None:
        return None

    def ratio(a: float, b: float) -> float:
        return min(a, b) / max(a, b) if max(a, b) > 0 else 1.0

    return min(ratio(job_in, traffic.input_tokens), ratio(job_out, traffic.output_tokens))


@dataclass(frozen=True, slots=True)
class Measured:
    """One endpoint's best evidence: the job, its runs, its capacity at the SLO."""

    job: Job
    runs: list[Run]
    capacity: Capacity
    run_ids: list[uuid.UUID]
    similarity: float | None
    skipped: list[SkippedLevel]

    def evidence(self) -> tuple[Evidence, ...]:
        by_id = {r.id: r for r in self.runs}
        return tuple(Evidence(str(run_id), by_id[run_id].finished_at) for run_id in self.run_ids)

    @property
    def similar(self) -> bool:
        """Token lengths close enough to the traffic's to count as the same workload."""
        return self.similarity is not None and self.similarity >= SIMILAR_WORKLOAD

    @property
    def measured_at(self) -> datetime | None:
        return max((r.finished_at for r in self.runs if r.finished_at), default=None)


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


class EstimateService:
    """Plans one team's traffic on the deployments it has measured."""

    def __init__(self, session: AsyncSession, team_id: uuid.UUID) -> None:
        self.session = session
        self.team_id = team_id
        self.evidence = EvidenceRepository(session)
        self.hardware = HardwareRepository(session)

    async def _best_measurement(
        self, endpoint: Endpoint, slo: Mapping[str, Mapping[str, float]], traffic: Traffic
    ) -> Measured | Unmeasured:
        """The endpoint's job most like the traffic whose levels give a capacity at the SLO
        (ties: not client-bound, then newest), or why there is none."""
        jobs = await self.evidence.finished_jobs(self.team_id, endpoint.id)
        if not jobs:
            return Unmeasured("never measured: submit a job with several load levels")
        runs = await JobRepository(self.session).runs_of_jobs(self.team_id, [j.id for j in jobs])
        by_job: dict[uuid.UUID, list[Run]] = {}
        for run in runs:
            by_job.setdefault(run.job_id, []).append(run)
        found: list[Measured] = []
        skipped: list[SkippedLevel] = []
        for job in jobs:
            load = read_load(job.load)
            sweep = load is not None and load.mode == "sweep"
            runs_of_job = by_job.get(job.id, [])
            evidence: CapacityEvidence = capacity_of(runs_of_job, slo, sweep=sweep)
            skipped += evidence.skipped
            if evidence.capacity is not None:
                found.append(
                    Measured(
                        job,
                        runs_of_job,
                        evidence.capacity,
                        evidence.run_ids,
                        similarity(job, traffic, runs_of_job),
                        evidence.skipped,
                    )
                )
        if not found:
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
        # Newest first already; a stable sort keeps that order among equals.
        found.sort(key=lambda m: (not m.similar, m.capacity.client_bound))
        return found[0]

    @staticmethod
    def _deployment(
        endpoint: Endpoint,
        hardware: HardwareRow | None,
        measured: Measured,
        *,
        usd_per_hour: float,
        stale_before: datetime,
    ) -> Deployment:
        """A measured endpoint as the planner's input (one replica's capacity and price)."""
        levels_rps = [r.requests_per_s for r in measured.runs if r.requests_per_s]
        measured_at = measured.measured_at
        return Deployment(
            name=endpoint.name,
            capacity_rps=measured.capacity.requests_per_s,
            usd_per_hour=usd_per_hour,
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
    ) -> list[tuple[Deployment, str, Measured]]:
        """Hardware with a price in the book but no measurement of this model, projected
        from the best-measured source by the ratio of roofline bounds (the smaller of the
        decode and the peak-throughput ratios, so the projection errs low)."""
        if not sources:
            return []
        endpoint, source_hw, measured, facts = max(
            sources, key=lambda s: s[2].capacity.requests_per_s / max(s[0].gpu_count, 1)
        )
        context = mean_context(measured.runs[0]) if measured.runs else None
        source_bounds = roofline_bounds(
            facts, replica_hardware(source_hw, endpoint.precision, endpoint.gpu_count), context
        )
        out: list[tuple[Deployment, str, Measured]] = []
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
            out.append(
                (
                    Deployment(
                        name=name,
                        capacity_rps=projected.requests_per_s,
                        usd_per_hour=price.usd_per_gpu_hour * endpoint.gpu_count,
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
    ) -> None:
        """Add one endpoint to the candidates (or to `unavailable`, saying why): evidence from
        another workload only when `allow_mismatched`, as an extrapolation."""
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
        best = await self._best_measurement(endpoint, slo, traffic)
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
        found.skipped[endpoint.name] = best.skipped
        facts = model_facts(endpoint)
        if facts is not None and hardware is not None:
            found.sources.append((endpoint, hardware, best, facts))

    async def estimate(self, data: EstimateCreate) -> EstimateRead:
        """Rank every way the team could serve the traffic, cheapest first."""
        preset = get_preset(data.preset) if data.preset is not None else None
        slo = _resolve_slo(data, preset)
        traffic, assumptions = _resolve_traffic(data, preset)
        target = data.target_utilization
        assumptions.append(
            f"each replica is sized to carry at most {target:.0%} of its capacity at the SLO "
            f"(target_utilization {target:g}"
            + (", the default" if target == DEFAULT_TARGET_UTILIZATION else "")
            + "): the rest is headroom for bursts and for the capacity's own uncertainty"
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
            )
        if data.include_projections:
            for deployment, provider, source in await self._projections(
                found.sources, found.measured_hardware, allowed, now
            ):
                found.deployments.append(deployment)
                found.providers[deployment.name] = provider
                found.similarities[deployment.name] = source.similarity
                found.skipped[deployment.name] = source.skipped

        planned = plan(traffic, found.deployments, found.hosted, target)
        traffic_read = TrafficRead(
            requests_per_s=traffic.requests_per_s,
            mean_requests_per_s=traffic.average_requests_per_s,
            peak_to_mean=traffic.peak_to_mean,
            input_tokens=traffic.input_tokens,
            output_tokens=traffic.output_tokens,
        )
        if isinstance(planned, NoEvidence):
            return EstimateRead(
                model=data.model,
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
        candidates = [
            _candidate(c, found.similarities, found.providers, found.hosted_notes, found.skipped)
            for c in planned.candidates
        ]
        return EstimateRead(
            model=data.model,
            traffic=traffic_read,
            slo=slo,
            preset=data.preset,
            candidates=candidates,
            explanation=_explain(candidates),
            unavailable=found.unavailable,
            target_utilization=target,
            assumptions=assumptions,
        )


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
    if len(candidates) > 1:
        second = candidates[1]
        more = second.usd_per_hour / best.usd_per_hour - 1 if best.usd_per_hour > 0 else 0.0
        text += (
            f"; next is {second.deployment.name} at USD {second.usd_per_hour:.2f}/hour "
            f"({more:.0%} more)"
        )
    return text + "."
