"""Capacity at the SLO when throughput falls with load, and from several jobs' levels, by
hand: the best passing level, never a point interpolated below it; newer failures overrule
older passes, older failures never overrule newer passes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from infercost.planning.capacity import LevelResult, LoadPoint, capacity_at_slo, pooled_capacity


def level(lv: float, rps: float, margin: float) -> LevelResult:
    return LevelResult(lv, "concurrency", rps, rps * 100, margin <= 1.0, margin)


def test_throughput_falling_with_load_keeps_the_best_passing_level() -> None:
    # 4 users passed at 6.55 req/s (margin 0.8); 8 users failed serving only 5.0 (1.5).
    # Interpolating would give 6.55 + (0.2 / 0.7) x (5.0 - 6.55) = 6.11, below 6.55.
    cap = capacity_at_slo([level(1, 2.0, 0.4), level(4, 6.55, 0.8), level(8, 5.0, 1.5)])
    assert cap is not None
    assert cap.requests_per_s == 6.55 and not cap.interpolated
    assert cap.monotone is False and cap.falls_with_load == (2,)
    assert (cap.requests_per_s_low, cap.requests_per_s_high) == (6.55, None)
    # Throughput fell among passing levels: the best one stands, not the last.
    cap = capacity_at_slo([level(4, 8.0, 0.5), level(8, 7.0, 0.9), level(16, 9.0, 1.2)])
    assert cap is not None and cap.requests_per_s == 8.0 and cap.basis_run_indices == (0,)
    assert cap.falls_with_load == (1,)
    # A dip within 2% is noise: still monotone, interpolated as before.
    cap = capacity_at_slo([level(4, 10.0, 0.5), level(8, 9.9, 0.9), level(16, 12.0, 1.3)])
    assert cap is not None and cap.monotone and cap.interpolated


def point(job: int, lv: float, rps: float, margin: float) -> LoadPoint:
    return LoadPoint(job, lv, "concurrency", rps, rps * 100, margin <= 1.0, margin)


def test_pooled_levels_of_several_jobs() -> None:
    old = [point(1, 1, 2.0, 0.4), point(1, 4, 6.55, 0.8), point(1, 8, 7.0, 4.0)]
    new = [point(0, 1, 3.32, 0.5)]
    found = pooled_capacity(new + old)
    assert found is not None and found.overruled == ()
    cap = found.capacity
    assert cap.requests_per_s == pytest.approx(6.55 + 0.2 / 3.2 * 0.45)
    assert cap.basis_run_indices == (2, 3) and cap.between == (6.55, 7.0)
    # A newer failure at 5.0 overrules the older pass at 6.55, not the one at 2.0.
    newer = [point(0, 1, 2.5, 0.5), point(0, 4, 5.0, 3.0)]
    found = pooled_capacity(newer + old)
    assert found is not None and found.overruled == (3,)
    assert found.capacity.requests_per_s == pytest.approx(3.0)
    # An older failure below a newer pass does not overrule it.
    found = pooled_capacity([point(0, 4, 9.0, 0.7), point(1, 4, 5.0, 2.0)])
    assert found is not None and found.capacity.requests_per_s == 9.0
    assert found.capacity.limited_by_measurements
    # Nothing passes, or everything passing is overruled: no capacity.
    assert pooled_capacity([point(0, 1, 1.0, 2.0)]) is None
    assert pooled_capacity([point(0, 1, 1.0, 2.0), point(1, 1, 3.0, 0.5)]) is None


@settings(max_examples=300, deadline=None)
@given(
    st.lists(
        st.tuples(st.floats(0.5, 512.0), st.floats(0.01, 1e4), st.floats(0.01, 5.0)),
        min_size=1,
        max_size=8,
        unique_by=lambda t: t[0],
    )
)
def test_the_capacity_is_never_below_a_passing_level_beyond_noise(
    spec: list[tuple[float, float, float]],
) -> None:
    levels = [level(lv, rps, margin) for lv, rps, margin in spec]
    cap = capacity_at_slo(levels)
    ordered = sorted(levels, key=lambda x: x.level)
    before = []
    for lv in ordered:
        if not lv.slo_passed:
            break
        before.append(lv.requests_per_s)
    if not before:
        assert cap is None
        return
    assert cap is not None
    # Within a 2% dip the last passing level stands (noise at saturation).
    assert cap.requests_per_s >= max(before) * 0.98
