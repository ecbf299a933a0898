"""Capacity at the SLO: the highest load one replica carries while its SLO still holds.

Input is one job's (or one deployment's) measured load levels; output is the load, in
requests/s and output tokens/s, at which the SLO is just met, interpolated between the
last passing and the first failing level when both are measured.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from infercost.figures.metrics import ADEQUATE_MIN_REQUESTS

LoadMode = Literal["concurrency", "rate"]


def inadequate_reasons(
    adequacy: Mapping[str, Any] | None, *, client_bound: bool | None, requests_succeeded: int | None
) -> list[dict[str, str]]:
    """Why a stored run cannot stand as evidence of capacity, the frontier or an estimate, as
    adequacy reasons ({"code", "detail"}); empty when it can. A run stored before adequacy
    verdicts (adequacy None) is judged on what it has: its client_bound flag and its count of
    successful requests (at least ADEQUATE_MIN_REQUESTS)."""
    if adequacy is not None:
        reasons = [] if adequacy.get("ok") else [dict(r) for r in adequacy.get("reasons") or ()]
    else:
        reasons = []
        if (requests_succeeded or 0) < ADEQUATE_MIN_REQUESTS:
            reasons.append(
                {
                    "code": "few_requests",
                    "detail": f"{requests_succeeded or 0} successful measured requests (stored "
                    f"before adequacy verdicts): fewer than {ADEQUATE_MIN_REQUESTS}",
                }
            )
    if client_bound and not any(r["code"] == "client_bound" for r in reasons):
        reasons.append(
            {
                "code": "client_bound",
                "detail": "the load generator, not the endpoint, set the pace of this level",
            }
        )
    return reasons


def slo_margin(
    stats_by_metric: Mapping[str, Mapping[str, float | int | None]],
    slo: Mapping[str, Mapping[str, float]],
) -> float | None:
    """How close a run came to its SLO: the largest observed / limit over the SLO's limits.

    stats_by_metric: a run's statistics, e.g. {"ttft_ms": {"p95": 412.0, ...}, ...};
    slo: {"ttft_ms": {"p95": 500}, ...}, limits in the same unit (ms). A margin of 1 or less
    passes (0.82: the tightest figure used 82% of its limit). None when the SLO is empty or
    any figure it limits was not measured.
    """
    ratios: list[float] = []
    for metric, limits in slo.items():
        for key, limit in limits.items():
            if not limit > 0:
                raise ValueError(f"SLO limit {metric}.{key} must be above 0")
            observed = stats_by_metric.get(metric, {}).get(key)
            if observed is None:
                return None
            ratios.append(float(observed) / float(limit))
    return max(ratios) if ratios else None


@dataclass(frozen=True, slots=True)
class LevelResult:
    """One measured load level of one replica.

    level: the load the job asked for, streams (concurrency) or requests/s (rate); for a
    sweep, whose levels mix both, every level is a rate at its measured requests/s;
    requests_per_s and output_tokens_per_s: what was measured; slo_passed: the run's
    verdict; slo_margin: see slo_margin() (None when unknown); client_bound: the load
    generator, not the server, set the pace.
    """

    level: float
    mode: LoadMode
    requests_per_s: float
    output_tokens_per_s: float
    slo_passed: bool
    slo_margin: float | None
    client_bound: bool = False


#: A level serving this much less (relative) than a lower level did counts as throughput
#: falling with load; smaller dips at saturation are noise.
FALL_TOLERANCE = 0.02


@dataclass(frozen=True, slots=True)
class Capacity:
    """The load one replica carries at the SLO.

    requests_per_s, output_tokens_per_s: the capacity; level: the matching load level
    (streams or requests/s, as `mode`); interpolated: the figures lie on the line between
    the best passing and the first failing level, `between` = (those two levels);
    basis_run_indices: positions in the input list of the levels the figures rest on;
    limited_by_measurements: every level passed, so this is a lower bound (the true
    capacity is at or above it); passed_after_failure: some level above the first failing
    one passed again (noisy measurements; the capacity stays below the first failure);
    client_bound: a basis level was client-bound, so the capacity may be understated.
    requests_per_s_low, requests_per_s_high: the interval the true capacity lies in, from the
    bracketing levels: the best passing level's requests/s and the first failing one's
    (high None when no level failed, or none that failed served more).
    monotone: False when a level at a higher load served fewer requests/s than a lower one
    (by more than FALL_TOLERANCE: an overloaded engine does this); `falls_with_load` are
    those levels' positions. The capacity is then the best passing level, never a point
    interpolated below it.
    """

    requests_per_s: float
    output_tokens_per_s: float
    level: float
    mode: LoadMode
    interpolated: bool
    between: tuple[float, float] | None
    basis_run_indices: tuple[int, ...]
    limited_by_measurements: bool = False
    passed_after_failure: bool = False
    client_bound: bool = False
    requests_per_s_low: float | None = None
    requests_per_s_high: float | None = None
    monotone: bool = True
    falls_with_load: tuple[int, ...] = ()


def falls_with_load(served: Sequence[float], order: Sequence[int]) -> tuple[int, ...]:
    """The positions of levels (taken in `order`, lowest load first) that served fewer
    requests/s (`served`) than some lower level, by more than FALL_TOLERANCE."""
    best = 0.0
    falls = []
    for i in order:
        rps = served[i]
        if rps < best * (1.0 - FALL_TOLERANCE):
            falls.append(i)
        best = max(best, rps)
    return tuple(falls)


def capacity_at_slo(levels: Sequence[LevelResult]) -> Capacity | None:
    """The best passing load below the first failing level, or None if the lowest level
    fails.

    Levels are ordered by `level`. The passing levels below the first failure are
    candidates: the last one is the capacity, unless a lower one served more than
    FALL_TOLERANCE more requests/s (throughput fell with load), and then the one that served
    the most. If it is the last passing level, a
    failing level follows that served more, and both margins bracket 1 (passing <= 1 <
    failing), the crossing margin = 1 is found by linear interpolation in the margin, and
    level, requests/s and output tokens/s are interpolated with the same weight, so each
    lies between the two measured values. If every level passes, the best one is the
    capacity, flagged limited_by_measurements.

    A level that passes again above a failure is not trusted: planning on it would put
    traffic through the failing load on the way up. It is reported as
    passed_after_failure.
    """
    if not levels:
        return None
    modes = {lv.mode for lv in levels}
    if len(modes) > 1:
        raise ValueError("levels mix concurrency and rate modes; give one sweep at a time")
    order = sorted(range(len(levels)), key=lambda i: (levels[i].level, i))
    falls = falls_with_load([lv.requests_per_s for lv in levels], order)
    first_fail = next((pos for pos, i in enumerate(order) if not levels[i].slo_passed), None)
    if first_fail == 0:
        return None
    passing = order if first_fail is None else order[:first_fail]
    # The last passing level, unless a lower one served more beyond noise: then the one
    # that served the most (among equals, the higher level).
    most = max(passing, key=lambda i: (levels[i].requests_per_s, levels[i].level, i))
    best_i = passing[-1]
    if levels[best_i].requests_per_s < levels[most].requests_per_s * (1.0 - FALL_TOLERANCE):
        best_i = most
    best = levels[best_i]

    if first_fail is None:
        return Capacity(
            requests_per_s=best.requests_per_s,
            output_tokens_per_s=best.output_tokens_per_s,
            level=best.level,
            mode=best.mode,
            interpolated=False,
            between=None,
            basis_run_indices=(best_i,),
            limited_by_measurements=True,
            client_bound=best.client_bound,
            requests_per_s_low=best.requests_per_s,
            monotone=not falls,
            falls_with_load=falls,
        )

    hi_i = order[first_fail]
    lo, hi = best, levels[hi_i]
    passed_after = any(levels[i].slo_passed for i in order[first_fail + 1 :])
    m_lo, m_hi = lo.slo_margin, hi.slo_margin
    served_more = hi.requests_per_s > lo.requests_per_s
    if (
        best_i != passing[-1]
        or not served_more
        or m_lo is None
        or m_hi is None
        or not m_lo <= 1.0 < m_hi
        or not hi.level > lo.level
    ):
        return Capacity(
            requests_per_s=lo.requests_per_s,
            output_tokens_per_s=lo.output_tokens_per_s,
            level=lo.level,
            mode=lo.mode,
            interpolated=False,
            between=None,
            basis_run_indices=(best_i,),
            passed_after_failure=passed_after,
            client_bound=lo.client_bound,
            requests_per_s_low=lo.requests_per_s,
            requests_per_s_high=hi.requests_per_s if served_more else None,
            monotone=not falls,
            falls_with_load=falls,
        )

    weight = (1.0 - m_lo) / (m_hi - m_lo)  # in [0, 1)

    def along(a: float, b: float) -> float:
        # Clamp so rounding never puts the result outside [min(a, b), max(a, b)].
        value = a + weight * (b - a)
        return min(max(value, min(a, b)), max(a, b))

    return Capacity(
        requests_per_s=along(lo.requests_per_s, hi.requests_per_s),
        output_tokens_per_s=along(lo.output_tokens_per_s, hi.output_tokens_per_s),
        level=along(lo.level, hi.level),
        mode=lo.mode,
        interpolated=True,
        between=(lo.level, hi.level),
        basis_run_indices=(best_i, hi_i),
        passed_after_failure=passed_after,
        client_bound=lo.client_bound or hi.client_bound,
        requests_per_s_low=lo.requests_per_s,
        requests_per_s_high=hi.requests_per_s,
        monotone=not falls,
        falls_with_load=falls,
    )


@dataclass(frozen=True, slots=True)
class LoadPoint:
    """One adequate level of one job of a deployment, as evidence of its capacity.

    job: the job's place by age, 0 for the newest job; level and mode: as the job ran it
    (the order of load within the job); the rest as LevelResult.
    """

    job: int
    level: float
    mode: str
    requests_per_s: float
    output_tokens_per_s: float
    slo_passed: bool
    slo_margin: float | None
    client_bound: bool = False


@dataclass(frozen=True, slots=True)
class PooledCapacity:
    """The capacity at the SLO from every job's load points (positions in the input list
    in `basis_run_indices`, `falls_with_load`), and the passing points a newer job's
    failure overruled (`overruled`)."""

    capacity: Capacity
    overruled: tuple[int, ...]


def pooled_capacity(points: Sequence[LoadPoint]) -> PooledCapacity | None:
    """The capacity at the SLO from load points of several jobs, each taken at the
    requests/s it served (docs/figures.md, "Capacity at the SLO").

    Newer evidence is preferred by one rule: a passing point is overruled when a newer job
    failed at the same or a lower requests/s (the deployment got slower since); older
    failures never overrule newer passes. The capacity is the best remaining passing point
    (most requests/s; among equals the newest job's). If a failing point served more
    requests/s, the nearest one above brackets it (requests_per_s_high), and when their
    SLO margins bracket 1 the capacity is interpolated between them as capacity_at_slo
    does. Without one, the capacity is a lower bound unless the best point's own job failed
    at a higher load (throughput fell). Within each job, levels that served fewer requests/s
    than a lower level are `falls_with_load` (the curve is not monotone). None when no
    point passes, or every passing one is overruled.
    """
    failing = [i for i, p in enumerate(points) if not p.slo_passed]
    overruled = tuple(
        i
        for i, p in enumerate(points)
        if p.slo_passed
        and any(
            points[q].job < p.job and points[q].requests_per_s <= p.requests_per_s for q in failing
        )
    )
    standing = [i for i, p in enumerate(points) if p.slo_passed and i not in overruled]
    if not standing:
        return None
    best_i = max(
        standing,
        key=lambda i: (points[i].requests_per_s, -points[i].job, points[i].level, -i),
    )
    best = points[best_i]
    served = [p.requests_per_s for p in points]
    falls: list[int] = []
    for job, mode in sorted({(p.job, p.mode) for p in points}):
        members = [i for i, p in enumerate(points) if (p.job, p.mode) == (job, mode)]
        members.sort(key=lambda i: (points[i].level, i))
        falls += falls_with_load(served, members)
    above = [q for q in failing if points[q].requests_per_s > best.requests_per_s]
    higher_failed = any(
        points[q].job == best.job and points[q].mode == best.mode and points[q].level > best.level
        for q in failing
    )
    hi_i = min(above, key=lambda q: (points[q].requests_per_s, points[q].job), default=None)

    def build(basis: tuple[int, ...], rps: float, tps: float, **more: Any) -> Capacity:
        return Capacity(
            requests_per_s=rps,
            output_tokens_per_s=tps,
            level=rps,
            mode="rate",
            interpolated=len(basis) == 2,
            between=None if len(basis) == 1 else (served[basis[0]], served[basis[1]]),
            basis_run_indices=basis,
            client_bound=any(points[i].client_bound for i in basis),
            requests_per_s_low=best.requests_per_s,
            monotone=not falls,
            falls_with_load=tuple(sorted(falls)),
            **more,
        )

    if hi_i is None:
        only = build(
            (best_i,),
            best.requests_per_s,
            best.output_tokens_per_s,
            limited_by_measurements=not higher_failed,
        )
        return PooledCapacity(only, overruled)
    hi = points[hi_i]
    m_lo, m_hi = best.slo_margin, hi.slo_margin
    if m_lo is None or m_hi is None or not m_lo <= 1.0 < m_hi:
        below = build(
            (best_i,),
            best.requests_per_s,
            best.output_tokens_per_s,
            requests_per_s_high=hi.requests_per_s,
        )
        return PooledCapacity(below, overruled)
    weight = (1.0 - m_lo) / (m_hi - m_lo)

    def along(a: float, b: float) -> float:
        value = a + weight * (b - a)
        return min(max(value, min(a, b)), max(a, b))

    capacity = build(
        (best_i, hi_i),
        along(best.requests_per_s, hi.requests_per_s),
        along(best.output_tokens_per_s, hi.output_tokens_per_s),
        requests_per_s_high=hi.requests_per_s,
    )
    return PooledCapacity(capacity, overruled)
