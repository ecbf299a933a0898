"""Properties every distribution block holds, whatever the samples (needs hypothesis)."""

from __future__ import annotations

import itertools

import pytest

pytest.importorskip("hypothesis")

from hypothesis import given, settings
from hypothesis import strategies as st

from infercost.figures.metrics import distribution

samples = st.lists(
    st.floats(min_value=0.0, max_value=1e6, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=200,
)


@settings(max_examples=60, deadline=None)
@given(samples)
def test_percentiles_are_monotone(values: list[float]) -> None:
    d = distribution(values)
    order = [d[k] for k in ("min", "p50", "p90", "p95", "p99", "p999", "max")]
    assert all(isinstance(v, float) for v in order)
    # min <= p50 <= p90 <= p95 <= p99 <= p999 <= max, with a hair of tolerance for the
    # rounding of interpolation between two nearly equal order statistics
    for low, high in itertools.pairwise(order):
        assert low <= high + 1e-9 * max(1.0, abs(high))
    assert d["min"] == min(values)
    assert d["max"] == max(values)


@settings(max_examples=60, deadline=None)
@given(samples)
def test_mean_lies_between_min_and_max(values: list[float]) -> None:
    d = distribution(values)
    tol = 1e-9 * max(1.0, *values)
    assert d["min"] - tol <= d["mean"] <= d["max"] + tol
    assert d["count"] == len(values)
    assert d["std"] >= 0.0
