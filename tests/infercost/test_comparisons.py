"""The median a comparison row shows: Postgres's percentile_cont(0.5), by hand."""

from __future__ import annotations

from infercost.comparisons.repository import median


def test_median_interpolates_between_the_middle_values() -> None:
    assert median([]) is None
    assert median([7.0]) == 7.0
    assert median([120.0, 100.0]) == 110.0
    assert median([3.0, 1.0, 2.0]) == 2.0
    assert median([1.0, 2.0, 4.0, 10.0]) == 3.0
