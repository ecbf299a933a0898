"""Fleets from a request log (docs/figures.md, "Plans from traffic"): the demand of each
interval, the replicas it needs, a fixed fleet sized for the peak interval and an autoscaled
one that follows demand a stated lag behind, each with its cost per day and per million
output tokens, its mean utilisation, and the autoscaled fleet's SLO risk.

Pure arithmetic on a log's minute counts (minutes aligned to its first request, t_0) and
one replica's capacity at the SLO and price: the API turns rows into these inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from fractions import Fraction
from functools import partial
from typing import Literal

from infercost.errors import InvalidInput

SECONDS_PER_DAY = 86_400.0
#: Defaults a plan states when the caller does not say: 5-minute intervals, a 5-minute lag
#: before the autoscaler's count follows demand, at least one replica.
DEFAULT_INTERVAL_S = 300
DEFAULT_LAG_S = 300
DEFAULT_MIN_REPLICAS = 1


def replicas_needed(
    demand_rps: float, capacity_rps: float, target_utilization: float, min_replicas: int
) -> int:
    """max(min_replicas, ceil(demand / (target x capacity))), in exact rationals (8 / (0.8 x
    10) is 1.0000000000000002 in floats: one replica too many)."""
    usable = Fraction(capacity_rps) * Fraction(str(target_utilization))
    return max(min_replicas, math.ceil(Fraction(demand_rps) / usable))


def lag_intervals(lag_s: float, interval_s: int) -> int:
    """k = max(1, round(lag / interval)), halves rounded up: intervals the autoscaled fleet
    runs behind demand."""
    return max(1, math.floor(Fraction(str(lag_s)) / interval_s + Fraction(1, 2)))


@dataclass(frozen=True, slots=True)
class IntervalPlan:
    """One interval of the log from `start_s` (offsets from t_0) for `length_s` seconds
    (the last one ends with the log): its requests, its demand (the busiest minute's
    requests / 60), the replicas it needs and those the autoscaled fleet runs."""

    index: int
    start_s: float
    length_s: float
    requests: int
    demand_rps: float
    needed: int
    autoscaled: int

    @property
    def at_risk(self) -> bool:
        """Fewer replicas ran than were needed."""
        return self.needed > self.autoscaled


@dataclass(frozen=True, slots=True)
class FleetCost:
    """A fleet over the whole log: replica-hours, USD over the log and per day (x 86,400 /
    the log's duration), its time-weighted mean replicas, mean utilisation (the log's mean
    requests/s / (mean replicas x capacity)) and USD per million output tokens (None for a
    log without output tokens)."""

    replica_hours: float
    usd: float
    usd_per_day: float
    mean_replicas: float
    mean_utilization: float
    per_million_output_tokens_usd: float | None


@dataclass(frozen=True, slots=True)
class Fleets:
    """The plan of one deployment for one log.

    `fixed_replicas` run in every interval (the most any interval needs); the autoscaled
    fleet runs needed_(i-k) in interval i (needed_0 before k): `lag_intervals` = k.
    `at_risk`: the intervals whose autoscaled count fell short of what they needed, and
    `requests_at_risk_share` the log's requests in them. `cheaper` names the cheaper fleet
    ("fixed" on a tie) and `saving_usd_per_day` what it saves a day against the other."""

    interval_s: int
    lag_s: float
    lag_intervals: int
    min_replicas: int
    capacity_rps: float
    target_utilization: float
    usd_per_replica_hour: float
    intervals: list[IntervalPlan]
    fixed_replicas: int
    fixed: FleetCost
    autoscaled: FleetCost
    at_risk: list[int]
    requests_at_risk: int
    requests_at_risk_share: float
    cheaper: Literal["fixed", "autoscaled"]
    saving_usd_per_day: float


def _cost(
    replica_seconds: float,
    *,
    duration_s: float,
    requests: int,
    output_tokens: int,
    capacity_rps: float,
    usd_per_hour: float,
) -> FleetCost:
    hours = replica_seconds / 3600.0
    usd = hours * usd_per_hour
    mean_replicas = replica_seconds / duration_s
    mean_rps = requests / duration_s
    return FleetCost(
        replica_hours=hours,
        usd=usd,
        usd_per_day=usd * SECONDS_PER_DAY / duration_s,
        mean_replicas=mean_replicas,
        mean_utilization=mean_rps / (mean_replicas * capacity_rps) if mean_replicas else 0.0,
        per_million_output_tokens_usd=usd / output_tokens * 1e6 if output_tokens else None,
    )


def plan_fleets(
    minute_counts: Sequence[int],
    *,
    duration_s: float,
    output_tokens: int,
    capacity_rps: float,
    usd_per_hour: float,
    target_utilization: float,
    interval_s: int = DEFAULT_INTERVAL_S,
    lag_s: float = DEFAULT_LAG_S,
    min_replicas: int = DEFAULT_MIN_REPLICAS,
) -> Fleets:
    """The fixed and autoscaled fleets of one deployment (one replica: `capacity_rps` at
    the SLO, `usd_per_hour`) for a log of `duration_s` seconds whose minute m held
    `minute_counts[m]` requests and which produced `output_tokens` in all."""
    if interval_s < 60 or interval_s % 60:
        raise InvalidInput("interval_s", "must be a whole number of minutes (60, 120, 300, ...)")
    if not duration_s > 0:
        raise InvalidInput("traffic_id", "the log spans no time (one instant): nothing to plan")
    if not capacity_rps > 0 or not 0 < target_utilization <= 1:
        raise ValueError("capacity must be above 0 and target utilisation in (0, 1]")
    if min_replicas < 0 or lag_s < 0:
        raise ValueError("min_replicas and lag_s must be 0 or more")
    per = interval_s // 60
    count = int(duration_s // interval_s) + 1
    k = lag_intervals(lag_s, interval_s)
    needed: list[int] = []
    demand: list[float] = []
    requests: list[int] = []
    for i in range(count):
        minutes = list(minute_counts[i * per : (i + 1) * per]) or [0]
        demand.append(max(minutes) / 60.0)
        requests.append(sum(minutes))
        needed.append(replicas_needed(demand[-1], capacity_rps, target_utilization, min_replicas))
    auto = [needed[i - k] if i >= k else needed[0] for i in range(count)]
    lengths = [min(float(interval_s), duration_s - i * interval_s) for i in range(count)]
    intervals = [
        IntervalPlan(
            i, float(i * interval_s), lengths[i], requests[i], demand[i], needed[i], auto[i]
        )
        for i in range(count)
    ]
    total = sum(requests)
    fixed_replicas = max(needed)
    cost = partial(
        _cost,
        duration_s=duration_s,
        requests=total,
        output_tokens=output_tokens,
        capacity_rps=capacity_rps,
        usd_per_hour=usd_per_hour,
    )
    fixed = cost(fixed_replicas * duration_s)
    autoscaled = cost(sum(n * length for n, length in zip(auto, lengths, strict=True)))
    at_risk = [p.index for p in intervals if p.at_risk]
    risky = sum(requests[i] for i in at_risk)
    cheaper: Literal["fixed", "autoscaled"] = (
        "autoscaled" if autoscaled.usd_per_day < fixed.usd_per_day else "fixed"
    )
    return Fleets(
        interval_s=interval_s,
        lag_s=lag_s,
        lag_intervals=k,
        min_replicas=min_replicas,
        capacity_rps=capacity_rps,
        target_utilization=target_utilization,
        usd_per_replica_hour=usd_per_hour,
        intervals=intervals,
        fixed_replicas=fixed_replicas,
        fixed=fixed,
        autoscaled=autoscaled,
        at_risk=at_risk,
        requests_at_risk=risky,
        requests_at_risk_share=risky / total if total else 0.0,
        cheaper=cheaper,
        saving_usd_per_day=abs(fixed.usd_per_day - autoscaled.usd_per_day),
    )
