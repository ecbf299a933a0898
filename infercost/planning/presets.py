"""Workload presets: the workload shape, the SLO and the figure to optimise, by application.

A preset is what a job's `workload.preset` names and what `GET /v1/presets` lists. Token
lengths use the job workload's distribution style (`{"mean", "std", "min", "max"}`, in
tokens) and the SLO uses the job's style (`{"ttft_ms": {"p95": 500}}`, in milliseconds).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any, Literal

from infercost.errors import InvalidInput

#: What a preset says to optimise, and so which figure a report leads with.
#: cost_at_slo: USD per million output tokens at the highest load that meets the SLO;
#: ttft: time to first token; per_user_speed: tokens/s each user sees (1 / TPOT);
#: throughput: output tokens/s of the deployment; utilization: share of capacity in use.
Goal = Literal["cost_at_slo", "ttft", "per_user_speed", "throughput", "utilization"]
GOALS: tuple[Goal, ...] = ("cost_at_slo", "ttft", "per_user_speed", "throughput", "utilization")

#: Percentiles a preset SLO limits its figures (infercost.figures.metrics.SLO_METRICS) at.
SLO_PERCENTILES = ("p50", "p90", "p95", "p99", "p999")
_DISTRIBUTION_KEYS = ("mean", "std", "min", "max")


@dataclass(frozen=True, slots=True)
class WorkloadPreset:
    """One application's workload shape, default SLO and optimisation goal.

    input_tokens, output_tokens: token length distributions {"mean", "std", "min", "max"}
    (tokens per request); slo: {metric: {percentile: limit in ms}}; optimises: the primary
    goal; also_watch: goals a report shows next to it.
    """

    name: str
    description: str
    input_tokens: Mapping[str, int]
    output_tokens: Mapping[str, int]
    slo: Mapping[str, Mapping[str, float]]
    optimises: Goal
    also_watch: tuple[Goal, ...] = ()

    def workload(self) -> dict[str, Any]:
        """The preset as a job's `workload` block (fresh dicts, safe to change)."""
        return {
            "input_tokens": dict(self.input_tokens),
            "output_tokens": dict(self.output_tokens),
        }

    def default_slo(self) -> dict[str, dict[str, float]]:
        """The preset's SLO as a job's `slo` block (fresh dicts, safe to change)."""
        return {metric: dict(limits) for metric, limits in self.slo.items()}

    def as_dict(self) -> dict[str, Any]:
        """Everything about the preset as plain JSON-ready values."""
        return {
            "name": self.name,
            "description": self.description,
            **self.workload(),
            "slo": self.default_slo(),
            "optimises": self.optimises,
            "also_watch": list(self.also_watch),
        }


class UnknownPreset(InvalidInput):
    """A preset name that is not one of PRESETS."""

    def __init__(self, name: str) -> None:
        known = ", ".join(sorted(PRESETS))
        super().__init__("preset", f"unknown preset {name!r}: known presets are {known}")
        self.name = name


def _preset(
    name: str,
    description: str,
    *,
    input_tokens: tuple[int, int, int, int],
    output_tokens: tuple[int, int, int, int],
    slo: dict[str, dict[str, float]],
    optimises: Goal,
    also_watch: tuple[Goal, ...],
) -> WorkloadPreset:
    return WorkloadPreset(
        name=name,
        description=description,
        input_tokens=MappingProxyType(dict(zip(_DISTRIBUTION_KEYS, input_tokens, strict=True))),
        output_tokens=MappingProxyType(dict(zip(_DISTRIBUTION_KEYS, output_tokens, strict=True))),
        slo=MappingProxyType({m: MappingProxyType(limits) for m, limits in slo.items()}),
        optimises=optimises,
        also_watch=also_watch,
    )


_ALL = (
    _preset(
        "interactive-chatbot",
        "A chat assistant people read as it types: the first token must come quickly and "
        "the text must stream faster than people read. Optimises cost at that SLO.",
        input_tokens=(1000, 400, 50, 4000),
        output_tokens=(250, 100, 16, 1000),
        slo={"ttft_ms": {"p95": 500}, "tpot_ms": {"p95": 50}},
        optimises="cost_at_slo",
        also_watch=("ttft", "per_user_speed"),
    ),
    _preset(
        "coding-assistant",
        "Completions and edits inside an editor: long code context, short answers, and a "
        "latency that is low and steady (tight p99 limits), since a slow tail breaks flow.",
        input_tokens=(3000, 1200, 200, 12000),
        output_tokens=(120, 60, 8, 500),
        slo={"ttft_ms": {"p99": 400}, "tpot_ms": {"p99": 30}},
        optimises="ttft",
        also_watch=("per_user_speed", "cost_at_slo"),
    ),
    _preset(
        "batch-documents",
        "Offline processing of long documents (summaries, extraction): nobody waits on a "
        "single request, so throughput and cost per token matter; only the end-to-end time "
        "is limited, loosely.",
        input_tokens=(4000, 1500, 500, 16000),
        output_tokens=(500, 200, 50, 2000),
        slo={"e2e_ms": {"p95": 60000}},
        optimises="throughput",
        also_watch=("cost_at_slo", "utilization"),
    ),
    _preset(
        "high-volume-api",
        "A product API serving many concurrent callers: concurrency, throughput, latency "
        "and cost matter together, so it optimises cost at an SLO on TTFT and TPOT.",
        input_tokens=(600, 300, 16, 3000),
        output_tokens=(150, 75, 8, 600),
        slo={"ttft_ms": {"p95": 1000}, "tpot_ms": {"p95": 60}, "e2e_ms": {"p99": 20000}},
        optimises="cost_at_slo",
        also_watch=("throughput", "ttft", "per_user_speed"),
    ),
    _preset(
        "internal-tool",
        "An internal assistant with modest, uneven traffic: a modest SLO, and the question "
        "is how much of the paid capacity is actually used.",
        input_tokens=(800, 400, 16, 4000),
        output_tokens=(300, 150, 8, 1500),
        slo={"ttft_ms": {"p95": 2000}, "tpot_ms": {"p95": 100}},
        optimises="utilization",
        also_watch=("cost_at_slo",),
    ),
)

#: Every preset by name, in the order they are listed (read-only).
PRESETS: Mapping[str, WorkloadPreset] = MappingProxyType({p.name: p for p in _ALL})


def get_preset(name: str) -> WorkloadPreset:
    """The preset called `name`; UnknownPreset (422, listing the known names) otherwise."""
    try:
        return PRESETS[name]
    except KeyError:
        raise UnknownPreset(name) from None
