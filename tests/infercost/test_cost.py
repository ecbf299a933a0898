"""Cost figures of docs/figures.md: price per hour over measured throughput."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

import pytest

from infercost.figures.cost import (
    RUN_PER_MILLION_OUTPUT_TOKENS_SQL,
    RUN_PER_MILLION_TOTAL_TOKENS_SQL,
    SqlExpr,
    blended_per_million,
    hosted_per_hour_of,
    hosted_run_cost,
    per_million,
    per_million_of,
    run_cost,
)


def test_worked_example_h200() -> None:
    # docs/figures.md: H200 at USD 3.50/GPU-hour, 1,200,000 output tokens in 300 s
    # -> 4,000 tokens/s -> 3.50 / (4,000 x 3,600) x 1e6 = USD 0.2431 per million output tokens
    output_tokens_per_s = 1_200_000 / 300
    assert output_tokens_per_s == 4000
    cost = run_cost(
        3.50,
        output_tokens_per_s=output_tokens_per_s,
        total_tokens_per_s=None,
        requests_per_s=None,
        goodput_output_tokens_per_s=None,
    )
    assert cost.per_million_output_tokens_usd is not None
    assert round(cost.per_million_output_tokens_usd, 3) == 0.243
    assert cost.usd_per_hour == 3.50
    assert cost.reason is None


def test_per_million_total_tokens_per_thousand_requests_and_at_slo() -> None:
    cost = run_cost(
        3.60,
        output_tokens_per_s=1000.0,
        total_tokens_per_s=5000.0,
        requests_per_s=2.0,
        goodput_output_tokens_per_s=500.0,
    )
    # output: 3.60 / (1,000 x 3,600) x 1e6 = 1.00 USD per million
    assert cost.per_million_output_tokens_usd == pytest.approx(1.00)
    # total: 3.60 / (5,000 x 3,600) x 1e6 = 0.20
    assert cost.per_million_total_tokens_usd == pytest.approx(0.20)
    # requests: 3.60 / (2 x 3,600) x 1e3 = 0.50 USD per thousand requests
    assert cost.per_thousand_requests_usd == pytest.approx(0.50)
    # at SLO only the goodput counts: 3.60 / (500 x 3,600) x 1e6 = 2.00, twice the plain figure
    assert cost.at_slo_per_million_output_tokens_usd == pytest.approx(2.00)


def test_no_price_gives_no_figures_and_a_reason() -> None:
    cost = run_cost(
        None,
        output_tokens_per_s=4000.0,
        total_tokens_per_s=8000.0,
        requests_per_s=10.0,
        goodput_output_tokens_per_s=4000.0,
    )
    assert cost.per_million_output_tokens_usd is None
    assert cost.per_million_total_tokens_usd is None
    assert cost.per_thousand_requests_usd is None
    assert cost.at_slo_per_million_output_tokens_usd is None
    assert cost.reason is not None
    assert "price" in cost.reason


def test_no_price_keeps_the_callers_reason() -> None:
    note = "endpoint 'x' has no price: set usd_per_hour on it"
    cost = run_cost(
        None,
        output_tokens_per_s=4000.0,
        total_tokens_per_s=None,
        requests_per_s=None,
        goodput_output_tokens_per_s=None,
        reason=note,
    )
    assert cost.reason == note


@pytest.mark.parametrize("throughput", [0.0, None])
def test_no_tokens_gives_none_never_zero_or_infinity(throughput: float | None) -> None:
    cost = run_cost(
        3.50,
        output_tokens_per_s=throughput,
        total_tokens_per_s=throughput,
        requests_per_s=throughput,
        goodput_output_tokens_per_s=throughput,
    )
    assert cost.per_million_output_tokens_usd is None
    assert cost.per_million_total_tokens_usd is None
    assert cost.per_thousand_requests_usd is None
    assert cost.at_slo_per_million_output_tokens_usd is None
    assert cost.reason is not None
    assert "output tokens" in cost.reason


def test_no_request_met_the_slo() -> None:
    # Tokens were produced but none within the SLO: the plain figure exists, the at-SLO one
    # has nothing to divide by.
    cost = run_cost(
        3.50,
        output_tokens_per_s=4000.0,
        total_tokens_per_s=None,
        requests_per_s=None,
        goodput_output_tokens_per_s=0.0,
    )
    assert cost.per_million_output_tokens_usd == pytest.approx(0.2430555)
    assert cost.at_slo_per_million_output_tokens_usd is None


@pytest.mark.parametrize(("per_s", "expected"), [(0.0, None), (-5.0, None), (None, None)])
def test_per_million_without_throughput(per_s: float | None, expected: None) -> None:
    assert per_million(3.5, per_s) is expected


def test_per_million_scales_inversely_with_throughput() -> None:
    # 7.20 / (2,000 x 3,600) x 1e6 = 1.00; twice the throughput halves the cost
    assert per_million(7.20, 2000.0) == pytest.approx(1.00)
    assert per_million(7.20, 4000.0) == pytest.approx(0.50)
    assert per_million(None, 4000.0) is None


def test_blended_price_is_three_input_to_one_output() -> None:
    # (3 x 0.15 + 0.60) / 4 = 0.2625 USD per million tokens
    assert blended_per_million(0.15, 0.60) == pytest.approx(0.2625)


def test_hosted_run_costs_its_tokens() -> None:
    # 3,000 input and 1,000 output tokens/s at 0.50 / 2.00 per million:
    # (3,000 x 0.50 + 1,000 x 2.00) / 1e6 = 0.0035 USD/s = 12.60 USD/hour,
    # per million output tokens: 12.60 / (1,000 x 3,600) x 1e6 = 3.50.
    cost = hosted_run_cost(
        0.50,
        2.00,
        input_tokens_per_s=3000.0,
        output_tokens_per_s=1000.0,
        total_tokens_per_s=4000.0,
        requests_per_s=10.0,
        goodput_output_tokens_per_s=500.0,
    )
    assert cost.pricing == "per_token"
    assert cost.usd_per_hour == pytest.approx(12.60)
    assert cost.per_million_output_tokens_usd == pytest.approx(3.50)
    assert cost.per_million_total_tokens_usd == pytest.approx(0.875)
    # At the SLO only half the output counted as useful, so each useful token costs twice.
    assert cost.at_slo_per_million_output_tokens_usd == pytest.approx(7.00)
    # Blended: (3 x 0.50 + 2.00) / 4 = 0.875.
    assert cost.blended_usd_per_million_tokens == pytest.approx(0.875)


def _migration(name: str) -> ModuleType:
    path = next((Path(__file__).parents[2] / "migrations" / "versions").glob(f"*_{name}.py"))
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_generated_cost_columns_are_the_python_definition() -> None:
    """The SQL of the runs table's cost columns is generated from per_million_of and
    hosted_per_hour_of, and is, text for text, what the migrations gave the columns: the
    database computes the one definition (no second copy to hold equal)."""
    output = _migration("comparisons").PER_MILLION_OUTPUT_TOKENS
    total = _migration("total_cost_embeddings").TOTAL
    assert output == RUN_PER_MILLION_OUTPUT_TOKENS_SQL
    assert total == RUN_PER_MILLION_TOTAL_TOKENS_SQL


def test_sql_expressions_keep_pythons_grouping() -> None:
    """Operands are parenthesised where Python grouped them, so the database evaluates in
    the same order: written out by hand."""
    a, b, c = SqlExpr("a"), SqlExpr("b"), SqlExpr("c")
    assert per_million_of(a, b).text == "a / (b * 3600.0) * 1e6"
    assert (a * (b + c)).text == "a * (b + c)"
    assert (a + b + c).text == "a + b + c"
    assert (a + (b + c)).text == "a + (b + c)"
    assert (a / (b / c)).text == "a / (b / c)"
    assert (a / b / c).text == "a / b / c"
    assert hosted_per_hour_of(a, b, c, a).text == "(a * c + b * a) / 1e6 * 3600.0"


def test_hosted_per_hour_of_numbers() -> None:
    """2,000 input tokens/s at USD 3 and 500 output tokens/s at USD 15 per million:
    (6,000 + 7,500) / 1e6 USD a second, x 3,600 = USD 48.6 an hour."""
    assert hosted_per_hour_of(2000.0, 500.0, 3.0, 15.0) == pytest.approx(48.6)
    assert per_million_of(48.6, 500.0) == pytest.approx(27.0)
