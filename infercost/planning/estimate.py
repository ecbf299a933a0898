"""Cost at your traffic: replicas, utilisation, cost and break-even (docs/figures.md, Cost).

For a traffic profile and per-replica capacities measured at an SLO, each self-hosted
deployment is sized to whole replicas and priced; hosted APIs are priced per token; the
result is ranked cheapest first. Pure arithmetic on frozen dataclasses: the API turns
rows into these inputs and the outputs into its response.

Units: rates in requests/s, token counts in tokens per request, money in USD, prices per
hour of a whole replica or per million tokens, a month is 730 hours.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime
from fractions import Fraction
from typing import Any, Literal

from infercost.errors import InvalidInput
from infercost.figures.cost import blended_per_million, hosted_usd_per_hour, per_million

HOURS_PER_MONTH = 730.0
SECONDS_PER_DAY = 86_400.0
#: Below this utilisation (at the sizing rate) a warning says what idle capacity costs.
LOW_UTILIZATION = 0.5
#: Below this share of spare capacity a warning says a burst would break the SLO.
LOW_HEADROOM = 0.1
#: The share of capacity at the SLO a replica is planned to run at when the caller does not
#: say (the API's default): 20% headroom for bursts and for the capacity's own uncertainty.
DEFAULT_TARGET_UTILIZATION = 0.8
#: Peak over daily average assumed for traffic given per day without peak_to_mean; the
#: estimate says it used it (assumptions), since sizing for the mean would undersize.
DEFAULT_PEAK_TO_MEAN = 2.0

#: measured: capacity measured on this deployment with this workload; projection: carried
#: over from other hardware; extrapolation: measured on another workload (token lengths),
#: used only when the caller allows it.
Basis = Literal["measured", "projection", "extrapolation"]


@dataclass(frozen=True, slots=True)
class Traffic:
    """The traffic to plan for.

    requests_per_s: the rate to size for (the peak), requests/s; input_tokens and
    output_tokens: mean prompt and completion tokens per request; mean_requests_per_s:
    the average rate over time, requests/s, which is what the tokens produced and the
    hosted bills follow (None: flat traffic, the same as requests_per_s).
    """

    requests_per_s: float
    input_tokens: float
    output_tokens: float
    mean_requests_per_s: float | None = None

    def __post_init__(self) -> None:
        if not self.requests_per_s > 0:
            raise InvalidInput("traffic.requests_per_s", "must be above 0")
        if not self.input_tokens >= 0:
            raise InvalidInput("traffic.input_tokens", "must be 0 or more")
        if not self.output_tokens > 0:
            raise InvalidInput("traffic.output_tokens", "must be above 0")
        mean = self.mean_requests_per_s
        if mean is not None and not 0 < mean <= self.requests_per_s:
            raise InvalidInput(
                "traffic.mean_requests_per_s", "must be above 0 and at most requests_per_s"
            )

    @classmethod
    def from_requests_per_day(
        cls,
        requests_per_day: float,
        input_tokens: float,
        output_tokens: float,
        peak_to_mean: float = 1.0,
    ) -> Traffic:
        """Traffic sized for its peak: requests_per_s = requests_per_day / 86,400 x
        peak_to_mean, with the daily average kept as mean_requests_per_s."""
        if not requests_per_day > 0:
            raise InvalidInput("traffic.requests_per_day", "must be above 0")
        if not peak_to_mean >= 1:
            raise InvalidInput("traffic.peak_to_mean", "must be 1 or more (peak over average)")
        mean = requests_per_day / SECONDS_PER_DAY
        return cls(
            requests_per_s=mean * peak_to_mean,
            input_tokens=input_tokens,
            output_tokens=output_tokens,
            mean_requests_per_s=mean,
        )

    @property
    def average_requests_per_s(self) -> float:
        """The average rate, requests/s (requests_per_s for flat traffic)."""
        return self.requests_per_s if self.mean_requests_per_s is None else self.mean_requests_per_s

    @property
    def peak_to_mean(self) -> float:
        """requests_per_s / average_requests_per_s (1 for flat traffic)."""
        return self.requests_per_s / self.average_requests_per_s

    @property
    def input_tokens_per_s(self) -> float:
        """Input tokens per second on average."""
        return self.average_requests_per_s * self.input_tokens

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens produced per second on average."""
        return self.average_requests_per_s * self.output_tokens

    @property
    def total_tokens_per_s(self) -> float:
        """Input plus output tokens per second on average."""
        return self.average_requests_per_s * (self.input_tokens + self.output_tokens)


@dataclass(frozen=True, slots=True)
class Evidence:
    """A run a figure rests on."""

    run_id: str
    measured_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class Deployment:
    """A self-hosted candidate: one replica's capacity at the SLO and its price.

    capacity_rps: requests/s one replica carries while meeting the SLO; usd_per_hour: USD
    per hour of one replica (price per GPU-hour x gpu_count); gpu_count: GPUs per replica;
    evidence: the runs behind capacity_rps (at least one). measured_range_rps: the lowest
    and highest requests/s measured, if known. Flags, each turned into a warning:
    capacity_is_lower_bound (every measured level met the SLO), client_bound, stale,
    workload_mismatch (measured with other token lengths than the traffic's; basis
    "extrapolation"), extrapolated (capacity beyond the measured levels), projection
    (capacity projected from other hardware, see project_capacity). capacity_rps_low and
    capacity_rps_high: the interval the capacity lies in, from the bracketing levels
    (high None when every level passed, low None when unknown).
    """

    name: str
    capacity_rps: float
    usd_per_hour: float
    gpu_count: int
    evidence: tuple[Evidence, ...]
    endpoint_id: str | None = None
    model: str | None = None
    engine: str | None = None
    hardware: str | None = None
    measured_range_rps: tuple[float, float] | None = None
    capacity_is_lower_bound: bool = False
    client_bound: bool = False
    stale: bool = False
    workload_mismatch: bool = False
    extrapolated: bool = False
    projection: bool = False
    capacity_rps_low: float | None = None
    capacity_rps_high: float | None = None

    def __post_init__(self) -> None:
        if not self.capacity_rps > 0:
            raise ValueError(f"{self.name}: capacity_rps must be above 0")
        if not self.usd_per_hour >= 0:
            raise ValueError(f"{self.name}: usd_per_hour must be 0 or more")
        if self.gpu_count < 1:
            raise ValueError(f"{self.name}: gpu_count must be 1 or more")
        if not self.evidence:
            raise ValueError(f"{self.name}: a capacity needs at least one run as evidence")

    @property
    def basis(self) -> Basis:
        """projection when projected from other hardware, extrapolation when measured on
        another workload, else measured."""
        if self.projection:
            return "projection"
        return "extrapolation" if self.workload_mismatch else "measured"


@dataclass(frozen=True, slots=True)
class HostedApi:
    """A hosted API candidate, priced in USD per million input and output tokens."""

    name: str
    usd_per_million_input_tokens: float
    usd_per_million_output_tokens: float
    model: str | None = None
    evidence: tuple[Evidence, ...] = ()

    def __post_init__(self) -> None:
        if self.usd_per_million_input_tokens < 0 or self.usd_per_million_output_tokens < 0:
            raise ValueError(f"{self.name}: prices must be 0 or more")

    def usd_per_hour_at(self, input_tokens_per_s: float, output_tokens_per_s: float) -> float:
        """What the API charges per hour at these token rates."""
        return hosted_usd_per_hour(
            self.usd_per_million_input_tokens,
            self.usd_per_million_output_tokens,
            input_tokens_per_s=input_tokens_per_s,
            output_tokens_per_s=output_tokens_per_s,
        )


def replicas_for(
    requests_per_s: float, capacity_rps: float, target_utilization: float = 1.0
) -> int:
    """Whole replicas to carry `requests_per_s` with each at most `target_utilization` of its
    capacity: ceil(traffic / (target x capacity)), at least 1 (8 req/s on 10 req/s replicas
    at 0.8: 8 / 8 = 1 replica; 9 req/s: 2)."""
    if not 0 < target_utilization <= 1:
        raise InvalidInput("target_utilization", "must be above 0 and at most 1")
    # Exact rationals: 8 / (0.8 x 10) in floats is 1.0000000000000002, one replica too many.
    usable = Fraction(capacity_rps) * Fraction(str(target_utilization))
    replicas = max(1, math.ceil(Fraction(requests_per_s) / usable))
    # What a reader multiplies out in floats must hold too.
    while replicas * float(usable) < requests_per_s:
        replicas += 1
    return replicas


@dataclass(frozen=True, slots=True)
class BreakEven:
    """Where a self-hosted deployment starts to cost less than a hosted API, in requests/s
    of the sizing rate (at the traffic's token lengths and peak-to-mean ratio).

    break_even_rps: the first crossing; costs are equal there and self-hosting is cheaper
    from just above it until the first replica is full. always_cheaper_above_rps: above it
    self-hosting is cheaper at every rate; between the two, adding a replica makes it lose
    again just above some multiples of the capacity. Both None: never cheaper (a full
    replica costs as much as, or more than, the hosted API for the same traffic).
    """

    against: str
    break_even_rps: float | None
    always_cheaper_above_rps: float | None


def break_even(deployment: Deployment, api: HostedApi, traffic: Traffic) -> BreakEven:
    """Traffic above which self-hosting costs less per token than `api`.

    With per-replica cost U (USD/h), capacity c (requests/s) and the hosted cost k (USD per
    hour per request/s of sizing rate), self-hosting costs ceil(T/c) x U per hour and the
    hosted API k x T. If U >= c x k a full replica already costs more: never cheaper.
    Otherwise, for T in (m c, (m+1) c] self-hosting costs (m+1) U and wins iff
    T > (m+1) U / k. m = 0 gives the first crossing U / k (< c). Step m has a losing gap
    (m c, (m+1) U / k] iff (m+1) U / k > m c, i.e. m < U / (c k - U). The last gap ends at
    m* U / k with m* = ceil(U / (c k - U)), above which self-hosting always wins.
    """
    # one request/s at the traffic's lengths; hosted bills follow the average rate:
    # average = sizing rate / peak_to_mean
    k = api.usd_per_hour_at(traffic.input_tokens, traffic.output_tokens) / traffic.peak_to_mean
    u, c = deployment.usd_per_hour, deployment.capacity_rps
    if u >= c * k:
        return BreakEven(api.name, None, None)
    # exact rationals: a float quotient a hair above a whole number would add a phantom gap
    fu, fc, fk = Fraction(u), Fraction(c), Fraction(k)
    last_step = math.ceil(fu / (fc * fk - fu))
    return BreakEven(api.name, u / k, float(last_step * fu / fk))


@dataclass(frozen=True, slots=True)
class SelfHostedEstimate:
    """A self-hosted deployment sized for the traffic.

    replicas: ceil(requests_per_s / capacity_rps), at least 1; gpus: replicas x gpu_count;
    capacity_rps: per replica, requests/s at the SLO; utilization: requests_per_s /
    (replicas x capacity_rps), in (0, 1]; mean_utilization: the same at the average rate;
    headroom: 1 - utilization; headroom_rps: spare requests/s at the sizing rate;
    usd_per_hour: replicas x per-replica USD/h; usd_per_month: x 730; per million output
    (total) tokens, USD: usd_per_hour over the output (total) tokens produced per hour at
    the average rate, x 1e6; break_even: against the cheapest hosted API, if any.
    target_utilization: the most of each replica's capacity the sizing lets traffic use.
    The *_range figures are (fewest, most) replicas and their costs over the capacity's
    interval (capacity_rps_high, capacity_rps_low); None when the interval has no top.
    """

    name: str
    deployment: Deployment
    replicas: int
    gpus: int
    capacity_rps: float
    utilization: float
    mean_utilization: float
    headroom: float
    headroom_rps: float
    usd_per_hour: float
    usd_per_month: float
    per_million_output_tokens_usd: float
    per_million_total_tokens_usd: float
    basis: Basis
    evidence: tuple[Evidence, ...]
    warnings: tuple[str, ...]
    break_even: BreakEven | None = None
    target_utilization: float = 1.0
    capacity_rps_low: float | None = None
    capacity_rps_high: float | None = None
    replicas_range: tuple[int, int] | None = None
    usd_per_hour_range: tuple[float, float] | None = None
    per_million_output_tokens_usd_range: tuple[float, float] | None = None
    kind: Literal["self_hosted"] = "self_hosted"


@dataclass(frozen=True, slots=True)
class HostedEstimate:
    """A hosted API at the traffic.

    usd_per_hour: average requests/s x 3600 x (n_in x input price + n_out x output
    price) / 1e6; usd_per_month: x 730; per million output (total) tokens, USD: as for
    self-hosting; blended_usd_per_million_tokens: (3 x input + output price) / 4.
    """

    name: str
    api: HostedApi
    usd_per_hour: float
    usd_per_month: float
    per_million_output_tokens_usd: float
    per_million_total_tokens_usd: float
    blended_usd_per_million_tokens: float
    evidence: tuple[Evidence, ...]
    warnings: tuple[str, ...]
    kind: Literal["hosted"] = "hosted"


Candidate = SelfHostedEstimate | HostedEstimate


def _per_million(usd_per_hour: float, per_s: float) -> float:
    """cost.per_million for a rate Traffic keeps above 0."""
    figure = per_million(usd_per_hour, per_s)
    assert figure is not None
    return figure


def _deployment_warnings(d: Deployment, utilization: float, headroom_rps: float) -> list[str]:
    out: list[str] = []
    if d.projection:
        out.append(
            "Capacity is projected from measurements on other hardware by the ratio of "
            "their physical limits, not measured here; benchmark this deployment to confirm."
        )
    if d.capacity_is_lower_bound:
        out.append(
            "Every load level that stands as evidence met the SLO, so the true capacity is at "
            f"least {d.capacity_rps:.3g} requests/s per replica; fewer replicas may do. Measure "
            "higher levels to find it."
        )
    over_range = d.measured_range_rps is not None and d.capacity_rps > d.measured_range_rps[1]
    if d.extrapolated or over_range:
        out.append(
            "Capacity lies beyond the highest measured load level; measure up to it before "
            "relying on it."
        )
    if d.client_bound:
        out.append(
            "Some runs behind this capacity were client-bound (the load generator, not the "
            "server, set the pace), so the capacity may be understated."
        )
    if d.stale:
        out.append("The runs behind this capacity are stale; re-run the benchmark.")
    if d.workload_mismatch:
        out.append(
            "Extrapolation: the runs used token lengths unlike this traffic's, so capacity "
            "at this traffic may differ widely; benchmark with this traffic's lengths."
        )
    if utilization < LOW_UTILIZATION:
        out.append(
            f"Only {utilization:.0%} of the paid capacity is used at the sizing rate; the "
            "rest is idle but billed."
        )
    if 1.0 - utilization < LOW_HEADROOM:
        out.append(
            f"Less than {LOW_HEADROOM:.0%} headroom ({headroom_rps:.3g} requests/s): a burst "
            "above the sizing rate would break the SLO."
        )
    return out


def self_hosted_cost(
    traffic: Traffic, deployment: Deployment, target_utilization: float = 1.0
) -> SelfHostedEstimate:
    """Size `deployment` for `traffic` with each replica at most `target_utilization` of its
    capacity, and price it (docs/figures.md, cost at your traffic); with the capacity's interval,
    the replicas and costs it allows."""
    replicas = replicas_for(traffic.requests_per_s, deployment.capacity_rps, target_utilization)
    total_capacity = replicas * deployment.capacity_rps
    utilization = min(1.0, traffic.requests_per_s / total_capacity)
    headroom_rps = max(0.0, total_capacity - traffic.requests_per_s)
    usd_per_hour = replicas * deployment.usd_per_hour
    return SelfHostedEstimate(
        name=deployment.name,
        deployment=deployment,
        replicas=replicas,
        gpus=replicas * deployment.gpu_count,
        capacity_rps=deployment.capacity_rps,
        utilization=utilization,
        mean_utilization=traffic.average_requests_per_s / total_capacity,
        headroom=1.0 - utilization,
        headroom_rps=headroom_rps,
        usd_per_hour=usd_per_hour,
        usd_per_month=usd_per_hour * HOURS_PER_MONTH,
        per_million_output_tokens_usd=_per_million(usd_per_hour, traffic.output_tokens_per_s),
        per_million_total_tokens_usd=_per_million(usd_per_hour, traffic.total_tokens_per_s),
        basis=deployment.basis,
        evidence=deployment.evidence,
        warnings=tuple(_deployment_warnings(deployment, utilization, headroom_rps)),
        target_utilization=target_utilization,
        capacity_rps_low=deployment.capacity_rps_low,
        capacity_rps_high=deployment.capacity_rps_high,
        **_ranges(traffic, deployment, target_utilization),
    )


def _ranges(traffic: Traffic, deployment: Deployment, target_utilization: float) -> dict[str, Any]:
    """Replicas and costs at both ends of the capacity's interval (fewest first); nothing
    when the interval has no top (every level passed) or no bottom."""
    low, high = deployment.capacity_rps_low, deployment.capacity_rps_high
    if low is None or high is None or not 0 < low <= high:
        return {}
    fewest = replicas_for(traffic.requests_per_s, high, target_utilization)
    most = replicas_for(traffic.requests_per_s, low, target_utilization)
    cost = (fewest * deployment.usd_per_hour, most * deployment.usd_per_hour)
    return {
        "replicas_range": (fewest, most),
        "usd_per_hour_range": cost,
        "per_million_output_tokens_usd_range": (
            _per_million(cost[0], traffic.output_tokens_per_s),
            _per_million(cost[1], traffic.output_tokens_per_s),
        ),
    }


def hosted_cost(traffic: Traffic, api: HostedApi) -> HostedEstimate:
    """Price `traffic` on a hosted API (docs/figures.md, hosted APIs)."""
    usd_per_hour = api.usd_per_hour_at(traffic.input_tokens_per_s, traffic.output_tokens_per_s)
    warnings: tuple[str, ...] = ()
    if not api.evidence:
        warnings = (
            "Priced from the list price only: this API's latency against the SLO and its "
            "rate limits were not measured.",
        )
    return HostedEstimate(
        name=api.name,
        api=api,
        usd_per_hour=usd_per_hour,
        usd_per_month=usd_per_hour * HOURS_PER_MONTH,
        per_million_output_tokens_usd=_per_million(usd_per_hour, traffic.output_tokens_per_s),
        per_million_total_tokens_usd=_per_million(usd_per_hour, traffic.total_tokens_per_s),
        blended_usd_per_million_tokens=blended_per_million(
            api.usd_per_million_input_tokens, api.usd_per_million_output_tokens
        ),
        evidence=api.evidence,
        warnings=warnings,
    )


@dataclass(frozen=True, slots=True)
class Estimate:
    """Every candidate at the traffic, cheapest usd_per_hour first (ties: self-hosted with
    more headroom_rps first, then hosted, then by name); cheapest_hosted: the hosted API
    the break-even figures compare with."""

    traffic: Traffic
    candidates: tuple[Candidate, ...]
    cheapest_hosted: str | None


@dataclass(frozen=True, slots=True)
class NoEvidence:
    """No candidate has evidence, so there are no figures to give; `reason` says what to do."""

    reason: str


def _rank(c: Candidate) -> tuple[float, int, float, str]:
    if isinstance(c, SelfHostedEstimate):
        return (c.usd_per_hour, 0, -c.headroom_rps, c.name)
    return (c.usd_per_hour, 1, 0.0, c.name)


def plan(
    traffic: Traffic,
    deployments: Sequence[Deployment] = (),
    hosted: Sequence[HostedApi] = (),
    target_utilization: float = 1.0,
) -> Estimate | NoEvidence:
    """Size and price every candidate for `traffic` (self-hosted replicas at most
    `target_utilization` of their capacity), ranked cheapest first, each self-hosted one with
    its break-even against the hosted API that is cheapest at this traffic."""
    if not deployments and not hosted:
        return NoEvidence(
            "No deployment has a measured capacity at this SLO and no hosted API price was "
            "given: run a benchmark job that sweeps load levels with this SLO, then ask again."
        )
    hosted_estimates = [hosted_cost(traffic, api) for api in hosted]
    cheapest = min(hosted_estimates, key=lambda h: (h.usd_per_hour, h.name), default=None)
    self_estimates = []
    for d in deployments:
        est = self_hosted_cost(traffic, d, target_utilization)
        if cheapest is not None:
            # A replica is planned to carry target x its capacity, so it breaks even there.
            planned = replace(d, capacity_rps=d.capacity_rps * target_utilization)
            est = replace(est, break_even=break_even(planned, cheapest.api, traffic))
        self_estimates.append(est)
    candidates: list[Candidate] = [*self_estimates, *hosted_estimates]
    candidates.sort(key=_rank)
    return Estimate(
        traffic=traffic,
        candidates=tuple(candidates),
        cheapest_hosted=None if cheapest is None else cheapest.name,
    )


@dataclass(frozen=True, slots=True)
class ProjectedCapacity:
    """A capacity carried over to other hardware: requests_per_s (requests/s at the SLO,
    per replica), ratio = target bound / measured bound, basis "projection"."""

    requests_per_s: float
    ratio: float
    basis: Literal["projection"] = "projection"


def project_capacity(
    measured_capacity_rps: float, measured_bound: float, target_bound: float
) -> ProjectedCapacity:
    """Capacity on hardware Y from a measurement on X: capacity_X x bound_Y / bound_X.

    The bounds are the same roofline figure on each (tokens/s; e.g. the peak throughput
    bound for a throughput-limited SLO, the decode bound for a TPOT-limited one). It
    assumes the deployment reaches the same share of its limit on both, so it is an
    estimate to confirm by measuring, and a Deployment built from it sets projection=True.
    """
    if not measured_capacity_rps > 0 or not measured_bound > 0 or not target_bound > 0:
        raise ValueError("capacity and both bounds must be above 0")
    ratio = target_bound / measured_bound
    return ProjectedCapacity(requests_per_s=measured_capacity_rps * ratio, ratio=ratio)
