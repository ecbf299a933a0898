"""Properties of cost planning that hold for any traffic and capacity (needs hypothesis)."""

from __future__ import annotations

import pytest

pytest.importorskip("hypothesis")

from hypothesis import assume, given, settings
from hypothesis import strategies as st

from infercost.planning import (
    Deployment,
    Evidence,
    HostedApi,
    LevelResult,
    Traffic,
    break_even,
    capacity_at_slo,
    hosted_cost,
    self_hosted_cost,
)

rates = st.floats(min_value=1e-3, max_value=1e4, allow_nan=False, allow_infinity=False)
capacities = st.floats(min_value=1e-2, max_value=1e3, allow_nan=False, allow_infinity=False)
prices = st.floats(min_value=0.01, max_value=500.0, allow_nan=False, allow_infinity=False)
tokens = st.floats(min_value=1.0, max_value=32_000.0, allow_nan=False, allow_infinity=False)
RUN = (Evidence("run-1"),)


def replica(capacity_rps: float, usd_per_hour: float) -> Deployment:
    return Deployment("d", capacity_rps, usd_per_hour, gpu_count=1, evidence=RUN)


@settings(max_examples=200, deadline=None)
@given(rates, rates, capacities, prices, tokens)
def test_cost_per_hour_never_falls_as_traffic_rises(
    a: float, b: float, capacity: float, usd: float, out: float
) -> None:
    low, high = sorted((a, b))
    d = replica(capacity, usd)
    cost_low = self_hosted_cost(Traffic(low, 100, out), d).usd_per_hour
    cost_high = self_hosted_cost(Traffic(high, 100, out), d).usd_per_hour
    assert cost_low <= cost_high


@settings(max_examples=200, deadline=None)
@given(rates, capacities, prices, tokens, st.floats(min_value=1.0, max_value=10.0))
def test_cost_per_token_never_beats_full_utilisation(
    rps: float, capacity: float, usd: float, out: float, peak_to_mean: float
) -> None:
    traffic = Traffic(rps, 100, out, mean_requests_per_s=rps / peak_to_mean)
    est = self_hosted_cost(traffic, replica(capacity, usd))
    full = usd / (capacity * out * 3600) * 1e6
    assert est.per_million_output_tokens_usd >= full * (1 - 1e-12)


@settings(max_examples=200, deadline=None)
@given(rates, capacities, prices)
def test_utilisation_is_in_zero_one(rps: float, capacity: float, usd: float) -> None:
    est = self_hosted_cost(Traffic(rps, 100, 100), replica(capacity, usd))
    assert 0 < est.utilization <= 1
    assert est.replicas >= 1
    assert est.replicas * capacity >= rps
    # one replica fewer would not carry the traffic
    assert est.replicas == 1 or (est.replicas - 1) * capacity < rps * (1 + 1e-12)
    assert est.headroom == pytest.approx(1 - est.utilization)


@st.composite
def sweeps(draw: st.DrawFn) -> list[LevelResult]:
    n = draw(st.integers(min_value=1, max_value=8))
    levels = draw(
        st.lists(st.floats(0.5, 512.0, allow_nan=False), min_size=n, max_size=n, unique=True)
    )
    out = []
    for lv in levels:
        margin = draw(st.one_of(st.none(), st.floats(0.01, 5.0, allow_nan=False)))
        passed = margin <= 1.0 if margin is not None else draw(st.booleans())
        rps = draw(st.floats(0.01, 1e4, allow_nan=False))
        tps = draw(st.floats(0.01, 1e6, allow_nan=False))
        out.append(LevelResult(lv, "concurrency", rps, tps, passed, margin))
    return out


@settings(max_examples=300, deadline=None)
@given(sweeps())
def test_capacity_lies_between_the_bracketing_levels(levels: list[LevelResult]) -> None:
    cap = capacity_at_slo(levels)
    ordered = sorted(levels, key=lambda lv: lv.level)
    if not ordered[0].slo_passed:
        assert cap is None
        return
    assert cap is not None
    basis = [levels[i] for i in cap.basis_run_indices]
    assert all(lv.slo_passed for lv in basis[:1])
    first_fail = next((lv for lv in ordered if not lv.slo_passed), None)
    if first_fail is not None:
        assert cap.level <= first_fail.level
    if cap.interpolated:
        lo, hi = basis
        assert cap.between == (lo.level, hi.level)
        assert lo.level <= cap.level <= hi.level
        assert min(lo.requests_per_s, hi.requests_per_s) <= cap.requests_per_s
        assert cap.requests_per_s <= max(lo.requests_per_s, hi.requests_per_s)
        assert min(lo.output_tokens_per_s, hi.output_tokens_per_s) <= cap.output_tokens_per_s
        assert cap.output_tokens_per_s <= max(lo.output_tokens_per_s, hi.output_tokens_per_s)
        assert lo.slo_passed and not hi.slo_passed
    else:
        (only,) = basis
        assert (cap.level, cap.requests_per_s) == (only.level, only.requests_per_s)
        assert cap.limited_by_measurements == (first_fail is None)


@settings(max_examples=400, deadline=None)
@given(
    capacities,
    st.floats(0.01, 8.0),
    st.floats(0.05, 1.5),
    st.floats(0.01, 20.0),
    st.floats(0.01, 60.0),
    tokens,
    tokens,
)
def test_break_even_agrees_with_the_costs(
    capacity: float,
    load: float,
    replica_vs_hosted: float,
    p_in: float,
    p_out: float,
    n_in: float,
    n_out: float,
) -> None:
    # Draw the traffic relative to one replica's capacity, and the replica's price relative
    # to what the hosted API charges for that capacity, so every regime turns up: never
    # cheaper, cheaper at once, and cheaper only past several losing gaps.
    # a replica priced at a hair from the hosted cost of its capacity is a tie up to rounding
    assume(abs(replica_vs_hosted - 1) > 1e-6)
    rps = capacity * load
    traffic = Traffic(rps, n_in, n_out)
    api = HostedApi("h", p_in, p_out)
    hosted_full_replica = capacity * api.usd_per_hour_at(n_in, n_out)
    d = replica(capacity, replica_vs_hosted * hosted_full_replica)
    be = break_even(d, api, traffic)
    own = self_hosted_cost(traffic, d).usd_per_hour
    hosted = hosted_cost(traffic, api).usd_per_hour
    if be.break_even_rps is None:
        assert replica_vs_hosted >= 1 - 1e-9
        assert own >= hosted * (1 - 1e-9)
        return
    assert be.always_cheaper_above_rps is not None
    assert 0 <= be.break_even_rps < capacity
    assert be.break_even_rps <= be.always_cheaper_above_rps
    gaps = replica_vs_hosted / (1 - replica_vs_hosted)  # U / (c k - U), up to rounding
    if be.always_cheaper_above_rps > be.break_even_rps and abs(gaps - round(gaps)) > 1e-6:
        # the last losing gap ends exactly there: just below it, self-hosting still loses
        below = Traffic(be.always_cheaper_above_rps * (1 - 1e-9), n_in, n_out)
        assert self_hosted_cost(below, d).usd_per_hour >= hosted_cost(below, api).usd_per_hour * (
            1 - 1e-9
        )
    # stay clear of the boundaries, where both costs are equal up to rounding
    for edge in (be.break_even_rps, be.always_cheaper_above_rps):
        assume(abs(rps - edge) > 1e-6 * max(1.0, edge))
    assume(abs(load - round(load)) > 1e-6)
    if rps < be.break_even_rps:
        assert own > hosted
    if rps > be.always_cheaper_above_rps or be.break_even_rps < rps <= capacity:
        assert own < hosted
