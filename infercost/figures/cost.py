"""Cost per token from price per hour and measured throughput (docs/figures.md, Cost)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

#: The constants of every cost figure, and how they are written in SQL.
HOUR_S = 3600.0
MILLION = 1e6
_SQL_LITERALS = {HOUR_S: "3600.0", MILLION: "1e6", 0.0: "0.0"}


@dataclass(frozen=True, slots=True)
class SqlExpr:
    """An SQL arithmetic expression as text, built by the same Python operators that compute
    a figure from numbers, so one function is the definition of both (`per_million_of`).
    `rank` is the precedence of its outermost operator: 0 a name or call, 1 a product or
    quotient, 2 a sum; operands are parenthesised exactly where Python's grouping needs it,
    so the database evaluates the operations in the same order (float arithmetic is not
    associative)."""

    text: str
    rank: int = 0

    def _op(self, op: str, other: SqlExpr | float, rank: int) -> SqlExpr:
        o = other if isinstance(other, SqlExpr) else SqlExpr(_SQL_LITERALS.get(other, repr(other)))
        left = self.text if self.rank <= rank else f"({self.text})"
        right = o.text if o.rank == 0 or o.rank < rank else f"({o.text})"
        return SqlExpr(f"{left} {op} {right}", rank)

    def __add__(self, other: SqlExpr | float) -> SqlExpr:
        return self._op("+", other, 2)

    def __mul__(self, other: SqlExpr | float) -> SqlExpr:
        return self._op("*", other, 1)

    def __truediv__(self, other: SqlExpr | float) -> SqlExpr:
        return self._op("/", other, 1)


N = TypeVar("N", float, SqlExpr)


def per_million_of(usd_per_hour: N, per_s: N) -> N:
    """The cost arithmetic (docs/figures.md, Cost), on numbers or on SQL columns alike: USD per
    million units produced at `per_s` a second for `usd_per_hour`."""
    return usd_per_hour / (per_s * HOUR_S) * MILLION


def hosted_per_hour_of(input_per_s: N, output_per_s: N, input_price: N, output_price: N) -> N:
    """What a hosted API charges per hour at these token rates and per-million prices, on
    numbers or on SQL columns alike."""
    return (input_per_s * input_price + output_per_s * output_price) / MILLION * HOUR_S


def per_million(usd_per_hour: float | None, per_s: float | None) -> float | None:
    """USD per million units when `per_s` units are produced each second at `usd_per_hour`."""
    if usd_per_hour is None or not per_s or per_s <= 0:
        return None
    return per_million_of(usd_per_hour, per_s)


def blended_per_million(input_usd: float, output_usd: float) -> float:
    """A hosted API's blended USD per million tokens: 3 input tokens to 1 output token."""
    return (3.0 * input_usd + output_usd) / 4.0


def hosted_usd_per_hour(
    input_usd_per_million: float,
    output_usd_per_million: float,
    *,
    input_tokens_per_s: float,
    output_tokens_per_s: float,
) -> float:
    """What a hosted API charges per hour at a token rate (docs/figures.md: a request costs
    n_in x input price + n_out x output price), so that per-hour and per-token deployments
    divide the same way."""
    return hosted_per_hour_of(
        input_tokens_per_s, output_tokens_per_s, input_usd_per_million, output_usd_per_million
    )


@dataclass(frozen=True, slots=True)
class CostFigures:
    """The cost block of a run summary; `reason` says why figures are missing.

    A hosted API (`pricing` "per_token") carries its token prices and blended price, and its
    `usd_per_hour` is what it charged per hour at the run's measured token rates.
    """

    usd_per_hour: float | None
    per_million_output_tokens_usd: float | None
    per_million_total_tokens_usd: float | None
    per_thousand_requests_usd: float | None
    at_slo_per_million_output_tokens_usd: float | None
    reason: str | None = None
    pricing: str = "per_hour"
    input_usd_per_million_tokens: float | None = None
    output_usd_per_million_tokens: float | None = None
    blended_usd_per_million_tokens: float | None = None
    per_million_input_tokens_usd: float | None = None
    per_million_answer_tokens_usd: float | None = None


def run_cost(
    usd_per_hour: float | None,
    *,
    output_tokens_per_s: float | None,
    total_tokens_per_s: float | None,
    requests_per_s: float | None,
    goodput_output_tokens_per_s: float | None,
    reason: str | None = None,
    input_tokens_per_s: float | None = None,
    answer_tokens_per_s: float | None = None,
) -> CostFigures:
    """Cost per million output, input and total tokens, per thousand requests, and at the
    SLO; for a reasoning model also per million answer tokens (what a user reads: reasoning
    tokens are paid for but not shown)."""
    per_request = per_million(usd_per_hour, requests_per_s)
    if usd_per_hour is None and reason is None:
        reason = (
            "no price: set usd_per_hour on the endpoint, or provider and hardware with a "
            "price in /v1/prices"
        )
    elif usd_per_hour is not None and not output_tokens_per_s and input_tokens_per_s:
        # An embeddings run: its tokens are all prompt tokens.
        reason = "no output tokens (an embeddings run): per_million_input_tokens_usd applies"
    elif usd_per_hour is not None and not output_tokens_per_s:
        reason = "no output tokens were measured, so there is nothing to divide the price by"
    return CostFigures(
        usd_per_hour=usd_per_hour,
        per_million_output_tokens_usd=per_million(usd_per_hour, output_tokens_per_s),
        per_million_total_tokens_usd=per_million(usd_per_hour, total_tokens_per_s),
        per_thousand_requests_usd=None if per_request is None else per_request / 1000.0,
        at_slo_per_million_output_tokens_usd=per_million(usd_per_hour, goodput_output_tokens_per_s),
        reason=reason,
        per_million_input_tokens_usd=per_million(usd_per_hour, input_tokens_per_s),
        per_million_answer_tokens_usd=per_million(usd_per_hour, answer_tokens_per_s),
    )


def hosted_run_cost(
    input_usd_per_million: float,
    output_usd_per_million: float,
    *,
    input_tokens_per_s: float | None,
    output_tokens_per_s: float | None,
    total_tokens_per_s: float | None,
    requests_per_s: float | None,
    goodput_output_tokens_per_s: float | None,
    answer_tokens_per_s: float | None = None,
) -> CostFigures:
    """The cost block of a run against a hosted API priced per token."""
    usd_per_hour = None
    if input_tokens_per_s is not None:
        # An embeddings run has no output tokens (null): it pays for its prompt tokens only.
        usd_per_hour = hosted_usd_per_hour(
            input_usd_per_million,
            output_usd_per_million,
            input_tokens_per_s=input_tokens_per_s,
            output_tokens_per_s=output_tokens_per_s or 0.0,
        )
    figures = run_cost(
        usd_per_hour,
        output_tokens_per_s=output_tokens_per_s,
        total_tokens_per_s=total_tokens_per_s,
        requests_per_s=requests_per_s,
        goodput_output_tokens_per_s=goodput_output_tokens_per_s,
        reason=None if usd_per_hour is not None else "no tokens were measured",
        input_tokens_per_s=input_tokens_per_s,
        answer_tokens_per_s=answer_tokens_per_s,
    )
    return replace(
        figures,
        pricing="per_token",
        input_usd_per_million_tokens=input_usd_per_million,
        output_usd_per_million_tokens=output_usd_per_million,
        blended_usd_per_million_tokens=blended_per_million(
            input_usd_per_million, output_usd_per_million
        ),
    )


def _stored_run_cost_sql(per_s: str, output_per_s: str) -> str:
    """A stored run's cost per million `per_s` units in SQL, priced with its own snapshot:
    `per_million_of` on its usd_per_hour, or on what `hosted_per_hour_of` charges at its
    token prices (api/domain/jobs/services.py stored_price), under the guards `per_million`
    and `hosted_run_cost` apply (no rate, no figure; hosted prices need an input rate, and
    take no output tokens (an embeddings run) as none: `output_per_s`)."""
    rate = SqlExpr(per_s)
    hosted = per_million_of(
        hosted_per_hour_of(
            SqlExpr("input_tokens_per_s"),
            SqlExpr(output_per_s),
            SqlExpr("usd_per_million_input_tokens"),
            SqlExpr("coalesce(usd_per_million_output_tokens, 0.0)"),
        ),
        rate,
    )
    hourly = per_million_of(SqlExpr("usd_per_hour"), rate)
    return (
        f"CASE WHEN {per_s} > 0 THEN"
        " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
        f" CASE WHEN input_tokens_per_s IS NOT NULL THEN {hosted.text} END"
        f" ELSE {hourly.text} END END"
    )


#: A stored run's cost per million output tokens, as the generated column of `runs` that
#: comparisons sort and aggregate in the database: generated from the definition above,
#: and equal, text for text, to the expression the migrations gave the column
#: (tests/infercost/test_cost.py), so the database computes exactly this.
RUN_PER_MILLION_OUTPUT_TOKENS_SQL = _stored_run_cost_sql(
    "output_tokens_per_s", "output_tokens_per_s"
)

#: The same for the cost per million total (input + output) tokens; a hosted embeddings
#: run (no output tokens) pays for its prompt tokens, as its run summary says.
RUN_PER_MILLION_TOTAL_TOKENS_SQL = _stored_run_cost_sql(
    "total_tokens_per_s", "coalesce(output_tokens_per_s, 0.0)"
)
