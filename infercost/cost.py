"""Cost per token from price per hour and measured throughput (METRICS.md, Cost)."""

from __future__ import annotations

from dataclasses import dataclass


def per_million(usd_per_hour: float | None, per_s: float | None) -> float | None:
    """USD per million units when `per_s` units are produced each second at `usd_per_hour`."""
    if usd_per_hour is None or not per_s or per_s <= 0:
        return None
    return usd_per_hour / (per_s * 3600.0) * 1e6


@dataclass(frozen=True, slots=True)
class CostFigures:
    """The cost block of a run summary; `reason` says why figures are missing."""

    usd_per_hour: float | None
    per_million_output_tokens_usd: float | None
    per_million_total_tokens_usd: float | None
    per_thousand_requests_usd: float | None
    at_slo_per_million_output_tokens_usd: float | None
    reason: str | None = None


def run_cost(
    usd_per_hour: float | None,
    *,
    output_tokens_per_s: float | None,
    total_tokens_per_s: float | None,
    requests_per_s: float | None,
    goodput_output_tokens_per_s: float | None,
    reason: str | None = None,
) -> CostFigures:
    """Cost per million output and total tokens, per thousand requests, and at the SLO."""
    per_request = per_million(usd_per_hour, requests_per_s)
    if usd_per_hour is None and reason is None:
        reason = (
            "no price: set usd_per_hour on the endpoint, or provider and hardware with a "
            "price in /v1/prices"
        )
    elif usd_per_hour is not None and not output_tokens_per_s:
        reason = "no output tokens were measured, so there is nothing to divide the price by"
    return CostFigures(
        usd_per_hour=usd_per_hour,
        per_million_output_tokens_usd=per_million(usd_per_hour, output_tokens_per_s),
        per_million_total_tokens_usd=per_million(usd_per_hour, total_tokens_per_s),
        per_thousand_requests_usd=None if per_request is None else per_request / 1000.0,
        at_slo_per_million_output_tokens_usd=per_million(usd_per_hour, goodput_output_tokens_per_s),
        reason=reason,
    )
