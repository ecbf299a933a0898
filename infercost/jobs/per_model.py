"""Figures of one model's requests in a run spread over several (workload.models), as SQL over
its `run_models` row, for reads that split runs by model (comparisons and history with
split=model). A run of one model has no such row and keeps its own figures."""

from __future__ import annotations

from typing import Any

from sqlalchemy import ColumnElement, case, func, literal
from sqlalchemy.orm import InstrumentedAttribute

from infercost.jobs.deployments import Deployment
from infercost.jobs.models import Run, RunModelFigures

_m = RunModelFigures
_total = _m.output_tokens_per_s + _m.input_tokens_per_s

#: A model's figures by the name of the run's (its run_models columns, and what follows from
#: them). Cost is the run's split by the tokens each model used (docs/figures.md, Per model),
#: so a model's cost per million total tokens is the run's, and per million output tokens
#: that x its (output + input) / output tokens. The GPUs' utilisation is the run's: they
#: served every model.
MODEL_FIGURES: dict[str, ColumnElement[Any] | InstrumentedAttribute[Any]] = {
    **{
        name: getattr(_m, name)
        for name in (
            "ttft_p50_ms",
            "ttft_p95_ms",
            "tpot_p50_ms",
            "tpot_p95_ms",
            "e2e_p50_ms",
            "e2e_p95_ms",
            "output_tokens_per_s",
            "input_tokens_per_s",
            "requests_per_s",
            "error_rate",
        )
    },
    "total_tokens_per_s": _total,
    "gpu_util_mean": Run.gpu_util_mean,
    "cost_per_million_total_tokens_usd": Run.cost_per_million_total_tokens_usd,
    "cost_per_million_output_tokens_usd": case(
        (
            _m.output_tokens_per_s > 0,
            Run.cost_per_million_total_tokens_usd * _total / _m.output_tokens_per_s,
        )
    ),
}


def of_model(
    name: str,
    run_value: ColumnElement[Any] | InstrumentedAttribute[Any],
    model_value: ColumnElement[Any] | InstrumentedAttribute[Any] | None = None,
) -> ColumnElement[Any]:
    """Figure `name` of the model a row reads (its run_models row, outer-joined), or
    `run_value` for a run of one model. `model_value` overrides MODEL_FIGURES; a figure not
    measured per model is null on a model's row."""
    if model_value is None:
        model_value = MODEL_FIGURES.get(name)
    return case(
        (_m.run_id.is_(None), run_value),
        else_=literal(None) if model_value is None else model_value,
    )


def served_model() -> ColumnElement[Any]:
    """The model a row's requests asked for: its run_models row's, or for a run of one model
    the deployment's (Deployment joined)."""
    return func.coalesce(_m.model, Deployment.model)
