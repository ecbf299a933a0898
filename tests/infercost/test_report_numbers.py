"""How figures and load levels are written in reports, charts and the CLI: rounded as a
person says them, checked against hand-written expectations."""

from __future__ import annotations

import pytest

from infercost.reports.data import level_label
from infercost.reports.numbers import distinct, fixed, number, rounded


@pytest.mark.parametrize(
    ("level", "mode", "text"),
    [
        (12.9427, "rate", "12.9 req/s"),
        (29.0435, "rate", "29.0 req/s"),
        (2.5, "rate", "2.5 req/s"),
        (0.25, "rate", "0.25 req/s"),
        (1234.5, "rate", "1,234 req/s"),
        (1.0, "concurrency", "1 user"),
        (8.0, "concurrency", "8 users"),
        (1024.0, "concurrency", "1,024 users"),
    ],
)
def test_levels_read_rounded_to_three_figures(level: float, mode: str, text: str) -> None:
    assert level_label(level, mode) == text


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12.9427, "12.9"),
        (0.051234, "0.0512"),
        (9.9996, "10.0"),
        (1175.44, "1,175"),
        (None, "\u2013"),
    ],
)
def test_table_figures_have_three_significant_figures(value: float | None, text: str) -> None:
    assert number(value) == text


def test_fixed_decimals_never_hide_a_small_figure() -> None:
    """Two decimals for USD, but a rate of 0.0123 requests/s keeps three figures."""
    assert fixed(1175.44, 1) == "1,175.4"
    assert fixed(3.5, 2) == "3.50"
    assert fixed(0.0123, 2) == "0.0123"
    assert fixed(0.0, 2) == "0.00"


def test_ticks_gain_figures_only_where_neighbours_would_read_the_same() -> None:
    assert rounded(21.0904) == "21.1"
    assert distinct([12.941, 12.944, 20.82, 148.0]) == {
        12.941: "12.941",
        12.944: "12.944",
        20.82: "20.8",
        148.0: "148",
    }
