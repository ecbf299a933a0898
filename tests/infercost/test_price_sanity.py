"""A mistyped price is told apart from the book by hand-picked figures, and no figure the API
accepts (zero, the smallest float) breaks the warning."""

from __future__ import annotations

from infercost.prices.sanity import price_warning


def test_far_prices_warn_and_near_ones_do_not() -> None:
    typo = price_warning(2200.0, "H100-SXM", (3.0, 1))
    assert typo is not None and "is 733x the USD 3.00" in typo and "its one entry" in typo
    low = price_warning(0.22, "H200-SXM", (7.75, 2))
    assert low is not None and "is 1/35 of the USD 7.75" in low
    assert "the median of its 2 entries" in low
    # Exactly 5x either way is still near; the first entry has nothing to compare with.
    assert price_warning(15.0, "H100-SXM", (3.0, 4)) is None
    assert price_warning(0.6, "H100-SXM", (3.0, 4)) is None
    assert price_warning(2200.0, "H100-SXM", None) is None


def test_zero_and_the_smallest_float_warn_without_breaking() -> None:
    for price in (0.0, 5e-324):
        warning = price_warning(price, "H200-SXM", (5.0, 3))
        assert warning is not None and "next to nothing against the USD 5.00" in warning
