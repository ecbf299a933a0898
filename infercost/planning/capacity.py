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


@dataclass(frozen=True, slots=True)
class Capacity:
    """The load one replica carries at the SLO.

    requests_per_s, output_tokens_per_s: the capacity; level: the matching load level
    (streams or requests/s, as `mode`); interpolated: the figures lie on the line between
    the last passing and first failing level, `between` = (those two levels);
    basis_run_indices: positions in the input list of the levels the figures rest on;
    limited_by_measurements: every level passed, so this is a lower bound (the true
    capacity is at or above it); passed_after_failure: some level above the first failing
    one passed again (noisy measurements; the capacity stays below the first failure);
    client_bound: a basis level was client-bound, so the capacity may be understated.
    requests_per_s_low, requests_per_s_high: the interval the true capacity lies in, from the
    bracketing levels: the last passing level's requests/s and the first failing one's
    (high None when no level failed: the capacity is at least `low`).
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


def capacity_at_slo(levels: Sequence[LevelResult]) -> Capacity | None:
    """The highest load below the first failing level, or None if the lowest level fails.

    Levels are ordered by `level`. If a failing level follows the last passing one and
    both margins bracket 1 (passing <= 1 < failing), the crossing margin = 1 is found by
    linear interpolation in the margin, and level, requests/s and output tokens/s are
    interpolated with the same weight, so each lies between the two measured values.
    Without usable margins the last passing level is the capacity. If every level passes,
    the highest one is the capacity, flagged limited_by_measurements.

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
    first_fail = next((pos for pos, i in enumerate(order) if not levels[i].slo_passed), None)

    if first_fail is None:
        top_i = order[-1]
        top = levels[top_i]
        return Capacity(
            requests_per_s=top.requests_per_s,
            output_tokens_per_s=top.output_tokens_per_s,
            level=top.level,
            mode=top.mode,
            interpolated=False,
            between=None,
            basis_run_indices=(top_i,),
            limited_by_measurements=True,
            client_bound=top.client_bound,
            requests_per_s_low=top.requests_per_s,
        )
    if first_fail == 0:
        return None

    lo_i, hi_i = order[first_fail - 1], order[first_fail]
    lo, hi = levels[lo_i], levels[hi_i]
    passed_after = any(levels[i].slo_passed for i in order[first_fail + 1 :])
    m_lo, m_hi = lo.slo_margin, hi.slo_margin
    if m_lo is None or m_hi is None or not m_lo <= 1.0 < m_hi or not hi.level > lo.level:
        return Capacity(
            requests_per_s=lo.requests_per_s,
            output_tokens_per_s=lo.output_tokens_per_s,
            level=lo.level,
            mode=lo.mode,
            interpolated=False,
            between=None,
            basis_run_indices=(lo_i,),
            passed_after_failure=passed_after,
            client_bound=lo.client_bound,
            requests_per_s_low=lo.requests_per_s,
            requests_per_s_high=max(lo.requests_per_s, hi.requests_per_s),
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
        basis_run_indices=(lo_i, hi_i),
        passed_after_failure=passed_after,
        client_bound=lo.client_bound or hi.client_bound,
        requests_per_s_low=min(lo.requests_per_s, hi.requests_per_s),
        requests_per_s_high=max(lo.requests_per_s, hi.requests_per_s),
    )
