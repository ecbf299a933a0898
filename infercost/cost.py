"""Cost per token from price per hour and measured throughput (METRICS.md, Cost)."""

from __future__ import annotations

from dataclasses import dataclass, replace


def per_million(usd_per_hour: float | None, per_s: float | None) -> float | None:
    """USD per million units when `per_s` units are produced each second at `usd_per_hour`."""
    if usd_per_hour is None or not per_s or per_s <= 0:
        return None
    return usd_per_hour / (per_s * 3600.0) * 1e6


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
    """What a hosted API charges per hour at a token rate (METRICS.md: a request costs
    n_in x input price + n_out x output price), so that per-hour and per-token deployments
    divide the same way."""
    usd_per_s = (
        input_tokens_per_s * input_usd_per_million + output_tokens_per_s * output_usd_per_million
    ) / 1e6
    return usd_per_s * 3600.0


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


def run_cost(
    usd_per_hour: float | None,
    *,
    output_tokens_per_s: float | None,
    total_tokens_per_s: float | None,
    requests_per_s: float | None,
    goodput_output_tokens_per_s: float | None,
    reason: str | None = None,
    input_tokens_per_s: float | None = None,
) -> CostFigures:
    """Cost per million output, input and total tokens, per thousand requests, and at the
    SLO."""
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


#: A stored run's cost per million output tokens in SQL, priced with its own snapshot: the
#: same arithmetic, in the same order, as `run_cost` on its usd_per_hour, or
#: `hosted_run_cost` on its per-token prices (api/domain/jobs/services.py stored_price). It
#: is a generated column of `runs` so comparisons sort and aggregate it in the database;
#: tests/api/test_comparisons.py holds it equal to the run summary's figure.
RUN_PER_MILLION_OUTPUT_TOKENS_SQL = (
    "CASE WHEN output_tokens_per_s > 0 THEN"
    " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
    " CASE WHEN input_tokens_per_s IS NOT NULL THEN"
    " (input_tokens_per_s * usd_per_million_input_tokens"
    " + output_tokens_per_s * coalesce(usd_per_million_output_tokens, 0.0)) / 1e6 * 3600.0"
    " / (output_tokens_per_s * 3600.0) * 1e6 END"
    " ELSE usd_per_hour / (output_tokens_per_s * 3600.0) * 1e6 END END"
)

#: The same for the cost per million total (input + output) tokens: `run_cost`'s
#: per_million_total_tokens_usd, on the run's usd_per_hour or its hosted token prices.
RUN_PER_MILLION_TOTAL_TOKENS_SQL = (
    "CASE WHEN total_tokens_per_s > 0 THEN"
    " CASE WHEN usd_per_million_input_tokens IS NOT NULL THEN"
    " CASE WHEN input_tokens_per_s IS NOT NULL AND output_tokens_per_s IS NOT NULL THEN"
    " (input_tokens_per_s * usd_per_million_input_tokens"
    " + output_tokens_per_s * coalesce(usd_per_million_output_tokens, 0.0)) / 1e6 * 3600.0"
    " / (total_tokens_per_s * 3600.0) * 1e6 END"
    " ELSE usd_per_hour / (total_tokens_per_s * 3600.0) * 1e6 END END"
)
